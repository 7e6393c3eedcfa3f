package status

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gvrouter/gvrouter/portmap"
)

// PortMapping is port mapping for LAN applications (config port_mapping:):
// the table's status (external address, epoch, mappings with their
// owner, protocol and expiry, the table's counters by name) and each
// server's counters.
type PortMapping struct {
	Protocols []string `json:"protocols"` // those on: "natpmp", "pcp", "upnp"
	WAN       string   `json:"wan"`       // the interface mappings are made on, e.g. "wan"
	// Listen is every socket the servers hold, e.g. "udp 192.168.1.1:5351"
	// and "udp 0.0.0.0:1900 on lan (239.255.255.250)": LAN-side only.
	Listen []string `json:"listen"`
	portmap.Status
	// Servers are the protocol servers' counters, in a fixed order
	// (natpmp, pcp, upnp, then the 5351 listener).
	Servers []PortMapServer `json:"servers"`
}

// PortMapServer is one protocol server's counters by "group/name", e.g.
// "results/not_authorized" (PCP's are its result codes, RFC 6887 section
// 7.4, lower case).
type PortMapServer struct {
	Name     string            `json:"name"` // "natpmp", "pcp", "upnp", "listener"
	Counters map[string]uint64 `json:"counters"`
}

// TableCounters merges the table's counter groups for the page.
func (p *PortMapping) TableCounters() map[string]uint64 {
	out := map[string]uint64{}
	for g, m := range map[string]map[string]uint64{"events": p.Events, "refused": p.Refused, "errors": p.Errors} {
		for k, v := range m {
			out[g+"/"+k] = v
		}
	}
	return out
}

const portMapHTML = `{{define "portmap" -}}
{{- with .PortMapping}}
<h2>Port mapping</h2>
<p class="sub">{{join .Protocols ", "}} on {{join .Listen ", "}}; mappings on <span class="mono">{{.WAN}}</span> {{if .External}}<span class="mono">{{.External}}</span>{{else}}(no address yet){{end}}, epoch {{secs (epochSecs .Epoch)}}</p>
<div class="wrap"><table id="portmap" class="narrow">
<thead><tr><th>Owner</th><th>Protocol</th><th class="num">External port</th><th>Internal</th><th>Client</th><th>Description</th><th class="num">Expires in</th></tr></thead>
<tbody>
{{- range .Mappings}}
<tr><td>{{.Owner}}</td><td class="mono">{{.Protocol}}</td><td class="num">{{.External}}</td><td class="mono">{{.Internal}}{{range .Peers}}<br><span class="sub">peer {{.}}</span>{{end}}</td><td class="mono">{{.Client}}</td><td>{{if .Description}}{{.Description}}{{else}}<span class="none">none</span>{{end}}</td><td class="num">{{secs (epochSecs .Remaining)}}</td></tr>
{{- else}}
<tr><td colspan="7" class="empty">no mappings</td></tr>
{{- end}}
</tbody>
</table></div>
<div class="wrap"><table class="narrow"><thead><tr><th>Counters</th><th></th></tr></thead><tbody>
<tr><td>table</td><td class="drops-cell">{{template "counts" .TableCounters}}</td></tr>
{{- range .Servers}}
<tr><td>{{.Name}}</td><td class="drops-cell">{{template "counts" .Counters}}</td></tr>
{{- end}}
</tbody></table></div>
{{- end}}
{{- end}}`

func init() {
	t := pageTemplate.Funcs(map[string]any{
		"join":      strings.Join,
		"epochSecs": func(n any) float64 { return toFloat(n) },
	})
	if _, err := t.Parse(portMapHTML); err != nil {
		panic(err)
	}
}

func toFloat(n any) float64 {
	switch v := n.(type) {
	case uint32:
		return float64(v)
	case int64:
		return float64(v)
	}
	return 0
}

// portMapCollector exports the port mapping table and servers.
type portMapCollector struct {
	s                                   *Server
	mappings, events, refused, errors   *prometheus.Desc
	requests, drops, results, srvEvents *prometheus.Desc
	srvErrors                           *prometheus.Desc
}

func newPortMapCollector(s *Server) *portMapCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("gvrouter_portmap_"+name, help, labels, nil)
	}
	return &portMapCollector{
		s:         s,
		mappings:  d("mappings", "Port mappings in the table, by the protocol that made them and IP protocol.", "owner", "protocol"),
		events:    d("events_total", "Mappings created, renewed, deleted, expired, restored from the state file.", "event"),
		refused:   d("refused_total", "Mapping requests the table refused, by reason (secure_mode, permission, host_limit, ...).", "reason"),
		errors:    d("errors_total", "Table errors (the state file could not be saved).", "error"),
		requests:  d("requests_total", "Requests a protocol server answered, by server and kind.", "server", "request"),
		drops:     d("drops_total", "Requests a protocol server dropped or refused before the table, by server and reason.", "server", "reason"),
		results:   d("results_total", "Answers by result code, by server (PCP: RFC 6887 section 7.4 names in lower case, e.g. not_authorized; NAT-PMP: RFC 6886 section 3.5).", "server", "result"),
		srvEvents: d("server_events_total", "Server events (restart announcements sent).", "server", "event"),
		srvErrors: d("server_errors_total", "Server errors (answers that could not be sent).", "server", "error"),
	}
}

// Describe implements prometheus.Collector.
func (c *portMapCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.mappings, c.events, c.refused, c.errors, c.requests, c.drops, c.results, c.srvEvents, c.srvErrors} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *portMapCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.s.current().PortMapping
	if p == nil {
		return
	}
	n := map[[2]string]int{}
	for _, m := range p.Mappings {
		n[[2]string{string(m.Owner), m.Protocol}]++
	}
	for _, o := range []portmap.Owner{portmap.NATPMP, portmap.PCP, portmap.UPnP} {
		for _, proto := range []string{"tcp", "udp"} {
			ch <- prometheus.MustNewConstMetric(c.mappings, prometheus.GaugeValue, float64(n[[2]string{string(o), proto}]), string(o), proto)
		}
	}
	for desc, m := range map[*prometheus.Desc]map[string]uint64{c.events: p.Events, c.refused: p.Refused, c.errors: p.Errors} {
		for k, v := range m {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), k)
		}
	}
	groups := map[string]*prometheus.Desc{"requests": c.requests, "drops": c.drops, "results": c.results, "events": c.srvEvents, "errors": c.srvErrors}
	for _, srv := range p.Servers {
		for k, v := range srv.Counters {
			g, name, _ := strings.Cut(k, "/")
			if desc := groups[g]; desc != nil {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), srv.Name, name)
			}
		}
	}
}
