package status

import (
	"net/netip"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gvrouter/gvrouter/wireguard"
)

// WireGuard is one WireGuard interface (config wireguard:): package
// wireguard's Status (public key, listen port, per peer its endpoint,
// allowed IPs, last handshake and bytes, the counters by group) with
// the interface's name.
type WireGuard struct {
	Name string `json:"name"`
	wireguard.Status
}

// Events returns the counters as "group/name" → count, for the page.
func (w WireGuard) Events() map[string]uint64 {
	out := map[string]uint64{}
	for g, m := range w.Counters {
		for n, v := range m {
			out[g+"/"+n] = v
		}
	}
	return out
}

const wireGuardHTML = `{{define "wireguard" -}}
{{- range .WireGuard}}
<h2>WireGuard {{.Name}}</h2>
<div class="wrap"><table class="narrow" data-wg="{{.Name}}">
<thead><tr><th>Peer</th><th>Endpoint</th><th>Allowed IPs</th><th>Last handshake</th><th class="num">Received</th><th class="num">Sent</th></tr></thead>
<tbody>
<tr><td>this router</td><td class="mono">port {{.ListenPort}}</td><td class="mono">{{.PublicKey}}</td><td></td><td></td><td></td></tr>
{{- range .Peers}}
<tr><td>{{.Name}}</td><td class="mono">{{or .Endpoint "none"}}</td><td class="mono">{{wgPrefixes .AllowedIPs}}</td><td>{{if lt .HandshakeAge 0.0}}never{{else}}{{secs .HandshakeAge}} ago{{end}}</td><td class="num">{{bytes .RxBytes}}</td><td class="num">{{bytes .TxBytes}}</td></tr>
{{- end}}
</tbody>
</table></div>
<div class="wrap"><table class="narrow"><thead><tr><th>Scope</th><th>Counters</th></tr></thead>
<tbody><tr><td>{{.Name}}</td><td class="drops-cell">{{template "counts" .Events}}</td></tr></tbody>
</table></div>
{{- end}}
{{- end}}`

func init() {
	t := pageTemplate.Funcs(map[string]any{"wgPrefixes": func(ps []netip.Prefix) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.String()
		}
		return strings.Join(s, ", ")
	}})
	if _, err := t.Parse(wireGuardHTML); err != nil {
		panic(err)
	}
}

// wireGuardCollector exports each interface's peers and counters.
type wireGuardCollector struct {
	s                            *Server
	rx, tx, handshake, events, n *prometheus.Desc
}

func newWireGuardCollector(s *Server) *wireGuardCollector {
	peer := []string{"interface", "peer", "public_key"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("gvrouter_wireguard_"+name, help, labels, nil)
	}
	return &wireGuardCollector{
		s:         s,
		rx:        d("peer_receive_bytes_total", "Encrypted bytes received from the peer (wg show's transfer).", peer),
		tx:        d("peer_transmit_bytes_total", "Encrypted bytes sent to the peer.", peer),
		handshake: d("peer_last_handshake_seconds", "Unix time of the peer's last completed handshake; 0 = never.", peer),
		events:    d("events_total", "The interface's datagrams, drops and handshake failures by group and name (udp, inside, handshake, drops, errors).", []string{"interface", "group", "name"}),
		n:         d("peers", "Configured peers.", []string{"interface"}),
	}
}

// Describe implements prometheus.Collector.
func (c *wireGuardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rx, c.tx, c.handshake, c.events, c.n} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *wireGuardCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.s.current().WireGuard {
		ch <- prometheus.MustNewConstMetric(c.n, prometheus.GaugeValue, float64(len(w.Peers)), w.Name)
		for _, p := range w.Peers {
			lv := []string{w.Name, p.Name, p.PublicKey}
			ch <- prometheus.MustNewConstMetric(c.rx, prometheus.CounterValue, float64(p.RxBytes), lv...)
			ch <- prometheus.MustNewConstMetric(c.tx, prometheus.CounterValue, float64(p.TxBytes), lv...)
			var t float64
			if !p.LastHandshake.IsZero() {
				t = float64(p.LastHandshake.UnixNano()) / 1e9
			}
			ch <- prometheus.MustNewConstMetric(c.handshake, prometheus.GaugeValue, t, lv...)
		}
		for g, m := range w.Counters {
			for n, v := range m {
				ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(v), w.Name, g, n)
			}
		}
	}
}
