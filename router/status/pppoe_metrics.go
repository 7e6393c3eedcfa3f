package status

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// pppoeCollector exports the PPPoE sessions of the latest sample, by
// interface. The reason a session ended is free text from the AC (an
// authentication message), so it is on the page and in JSON, not a
// label.
type pppoeCollector struct {
	s *Server

	state, up, info, ipv6cp, uptime, reconnects, echoRTT, mtu, counter *prometheus.Desc
}

func newPPPoECollector(s *Server) *pppoeCollector {
	d := prometheus.NewDesc
	ifl := []string{"interface"}
	return &pppoeCollector{
		s: s,
		state: d("gvrouter_pppoe_state",
			"1 for the PPPoE session's phase (idle, discovery, request, establish, auth, network, up, backoff, stopped), 0 for the others.",
			[]string{"interface", "state"}, nil),
		up: d("gvrouter_pppoe_up", "1 while the PPPoE session is up (IPCP or IPv6CP opened).", ifl, nil),
		info: d("gvrouter_pppoe_session_info",
			"1 while a PPPoE session exists; labels give its session id, access concentrator and IPCP address.",
			[]string{"interface", "session_id", "ac_name", "ac_mac", "address"}, nil),
		ipv6cp: d("gvrouter_pppoe_ipv6cp_info",
			"1 while the PPPoE session's IPv6CP is open; labels give the link-local addresses of both ends, fe80:: and each interface identifier (RFC 5072).",
			[]string{"interface", "local", "peer"}, nil),
		uptime:     d("gvrouter_pppoe_uptime_seconds", "How long the PPPoE session has been up.", ifl, nil),
		reconnects: d("gvrouter_pppoe_reconnects_total", "PPPoE sessions that ended and were started again.", ifl, nil),
		echoRTT:    d("gvrouter_pppoe_lcp_echo_rtt_seconds", "The last LCP echo round trip to the access concentrator.", ifl, nil),
		mtu:        d("gvrouter_pppoe_mtu", "The PPP link's negotiated MTU (1492, or up to 1500 with RFC 4638).", ifl, nil),
		counter: d("gvrouter_pppoe_counter_total",
			"PPPoE session counters: discovery and PPP packets by type, every drop of bad input by reason, the link's queue drops.",
			[]string{"interface", "counter"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *pppoeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.up, c.info, c.ipv6cp, c.uptime, c.reconnects, c.echoRTT, c.mtu, c.counter} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A session whose interface
// repeats an earlier one is skipped: the registry would reject the
// whole scrape.
func (c *pppoeCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.current()
	send := func(desc *prometheus.Desc, typ prometheus.ValueType, v float64, labels ...string) {
		m, err := prometheus.NewConstMetric(desc, typ, v, labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(desc, err)
		}
		ch <- m
	}
	seen := make(map[string]bool)
	for i := range snap.PPPoE {
		p := &snap.PPPoE[i]
		if seen[p.Interface] {
			continue
		}
		seen[p.Interface] = true
		for _, st := range PPPoEStates {
			send(c.state, prometheus.GaugeValue, b01(st == p.State), p.Interface, st)
		}
		if p.State != "" && !slices.Contains(PPPoEStates, p.State) {
			send(c.state, prometheus.GaugeValue, 1, p.Interface, p.State)
		}
		send(c.up, prometheus.GaugeValue, b01(p.State == "up"), p.Interface)
		if p.SessionID != 0 {
			addr := ""
			if p.IPv4 != nil && p.IPv4.Local.IsValid() {
				addr = p.IPv4.Local.String()
			}
			send(c.info, prometheus.GaugeValue, 1, p.Interface, strconv.Itoa(int(p.SessionID)), p.ACName, p.ACMAC, addr)
		}
		if v6 := p.IPv6; v6 != nil && v6.Local.IsValid() {
			peer := ""
			if v6.Peer.IsValid() {
				peer = v6.Peer.String()
			}
			send(c.ipv6cp, prometheus.GaugeValue, 1, p.Interface, v6.Local.String(), peer)
		}
		send(c.uptime, prometheus.GaugeValue, p.UptimeSeconds, p.Interface)
		send(c.reconnects, prometheus.CounterValue, float64(p.Reconnects), p.Interface)
		send(c.echoRTT, prometheus.GaugeValue, p.EchoRTTMillis/1e3, p.Interface)
		if p.MTU != 0 {
			send(c.mtu, prometheus.GaugeValue, float64(p.MTU), p.Interface)
		}
		for k, v := range p.Counters {
			send(c.counter, prometheus.CounterValue, float64(v), p.Interface, k)
		}
	}
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
