package status

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry returns a private registry with the status collector and the
// Go runtime and process collectors (both read in-process counters only).
func newRegistry(s *Server) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newCollector(s),
		newFragCollector(s),
		newServicesCollector(s),
		newPPPoECollector(s),
		newIPv6Collector(s),
		newNeighborCollector(s),
		newSQMCollector(s),
		newPortMapCollector(s),
		newWireGuardCollector(s),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// counterDescs are the descriptors of the per-entry counters and rates of
// interfaces or ports, labelled by the entry's name.
type counterDescs struct {
	rxPackets, rxBytes, txPackets, txBytes *prometheus.Desc
	drops, up                              *prometheus.Desc
	rxBits, txBits, rxPPS, txPPS           *prometheus.Desc
}

func newCounterDescs(kind string) counterDescs {
	name := func(n string) string { return "gvrouter_" + kind + "_" + n }
	l := []string{kind}
	return counterDescs{
		rxPackets: prometheus.NewDesc(name("rx_packets_total"), "Packets received by the "+kind+".", l, nil),
		rxBytes:   prometheus.NewDesc(name("rx_bytes_total"), "Bytes received by the "+kind+".", l, nil),
		txPackets: prometheus.NewDesc(name("tx_packets_total"), "Packets sent by the "+kind+".", l, nil),
		txBytes:   prometheus.NewDesc(name("tx_bytes_total"), "Bytes sent by the "+kind+".", l, nil),
		drops:     prometheus.NewDesc(name("drops_total"), "Packets dropped by the "+kind+", by reason.", []string{kind, "reason"}, nil),
		up:        prometheus.NewDesc(name("up"), "1 if the "+kind+" is up, else 0.", l, nil),
		rxBits:    prometheus.NewDesc(name("rx_bits_per_second"), "Receive rate of the "+kind+" over the last sample interval.", l, nil),
		txBits:    prometheus.NewDesc(name("tx_bits_per_second"), "Transmit rate of the "+kind+" over the last sample interval.", l, nil),
		rxPPS:     prometheus.NewDesc(name("rx_packets_per_second"), "Receive packet rate of the "+kind+" over the last sample interval.", l, nil),
		txPPS:     prometheus.NewDesc(name("tx_packets_per_second"), "Transmit packet rate of the "+kind+" over the last sample interval.", l, nil),
	}
}

func (d *counterDescs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{
		d.rxPackets, d.rxBytes, d.txPackets, d.txBytes, d.drops, d.up,
		d.rxBits, d.txBits, d.rxPPS, d.txPPS,
	} {
		ch <- desc
	}
}

// entry is what collect needs from an Interface or a Port.
type entry struct {
	name, state                            string
	rxPackets, rxBytes, txPackets, txBytes uint64
	drops                                  map[string]uint64
	rates                                  Rates
}

func (d *counterDescs) collect(ch chan<- prometheus.Metric, e entry) {
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, e.name)
	}
	counter(d.rxPackets, e.rxPackets, e.name)
	counter(d.rxBytes, e.rxBytes, e.name)
	counter(d.txPackets, e.txPackets, e.name)
	counter(d.txBytes, e.txBytes, e.name)
	for reason, n := range e.drops {
		counter(d.drops, n, e.name, reason)
	}
	up := 0.0
	if e.state == "up" {
		up = 1
	}
	gauge(d.up, up)
	gauge(d.rxBits, e.rates.RxBitsPerSecond)
	gauge(d.txBits, e.rates.TxBitsPerSecond)
	gauge(d.rxPPS, e.rates.RxPacketsPerSecond)
	gauge(d.txPPS, e.rates.TxPacketsPerSecond)
}

// collector is a prometheus.Collector that reads the Server's latest sample
// at scrape time.
type collector struct {
	s         *Server
	iface     counterDescs
	port      counterDescs
	uptime    *prometheus.Desc
	buildInfo *prometheus.Desc
	// httpOpen and httpRefused are the status server's own connections,
	// read live rather than from the sample.
	httpOpen, httpRefused *prometheus.Desc
	// httpForbidden counts the requests guard refused, by reason.
	httpForbidden *prometheus.Desc
	// gro is the interfaces' GRO counters, labelled by event.
	gro *prometheus.Desc
	// gso counts the interface's superframes by event.
	gso *prometheus.Desc
	// nextHop counts packets forwarded without netstack before their
	// flow reached the fast path, per ingress interface.
	nextHop *prometheus.Desc
	// tapped counts frames a service's raw-frame tap consumed.
	tapped *prometheus.Desc
	// portDriver is an info metric: each port's backend and mode.
	portDriver *prometheus.Desc
	// umem is the af_xdp ports' UMEM sharing and transmits (umem.go).
	umem umemCollector
	// aqm is the ports' receive queues (aqm.go).
	aqm aqmCollector
	// macsec is the SecYs' 802.1AE counters (macsec_metrics.go).
	macsec macsecDescs
	ct     conntrackDescs
}

// conntrackDescs describe the Conntrack section.
type conntrackDescs struct {
	flows, max, assured, offloaded, hits, slow, drops, events, natPorts, natFlows *prometheus.Desc
	routerFlows, routerReserve                                                    *prometheus.Desc
}

func newConntrackDescs() conntrackDescs {
	return conntrackDescs{
		flows:         prometheus.NewDesc("gvrouter_conntrack_flows", "Tracked flows by protocol and state (TCP: conntrack state names; UDP: UNREPLIED or REPLIED; ICMP, other: ACTIVE).", []string{"proto", "state"}, nil),
		max:           prometheus.NewDesc("gvrouter_conntrack_max", "Conntrack table limit.", nil, nil),
		assured:       prometheus.NewDesc("gvrouter_conntrack_assured_flows", "Flows that saw traffic both ways (not early-droppable).", nil, nil),
		offloaded:     prometheus.NewDesc("gvrouter_conntrack_offloaded_flows", "Flows with at least one direction on the fast path.", nil, nil),
		hits:          prometheus.NewDesc("gvrouter_fastpath_hits_total", "Packets forwarded by the fast path.", nil, nil),
		slow:          prometheus.NewDesc("gvrouter_fastpath_slow_total", "Packets the fast path handed to the slow path, by reason.", []string{"reason"}, nil),
		drops:         prometheus.NewDesc("gvrouter_nat_drops_total", "Packets dropped by conntrack/NAT/firewall, by reason.", []string{"reason"}, nil),
		events:        prometheus.NewDesc("gvrouter_conntrack_events_total", "Conntrack events: created, early_dropped, expired, offloaded, icmp_translated, frags_held, mss_clamped, untracked.", []string{"event"}, nil),
		natPorts:      prometheus.NewDesc("gvrouter_nat_ports", "External ports (NAT mappings) in use, by external address and protocol.", []string{"address", "proto"}, nil),
		natFlows:      prometheus.NewDesc("gvrouter_nat_port_flows", "Flows using the NAT mappings of an external address and protocol.", []string{"address", "proto"}, nil),
		routerFlows:   prometheus.NewDesc("gvrouter_conntrack_router_flows", "Tracked flows the router itself opened.", nil, nil),
		routerReserve: prometheus.NewDesc("gvrouter_conntrack_router_reserve", "Table slots only the router's own flows may take.", nil, nil),
	}
}

func (d *conntrackDescs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{d.flows, d.max, d.assured, d.offloaded, d.hits, d.slow, d.drops, d.events, d.natPorts, d.natFlows, d.routerFlows, d.routerReserve} {
		ch <- desc
	}
}

func (d *conntrackDescs) collect(ch chan<- prometheus.Metric, c *Conntrack) {
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	seen := make(map[[2]string]bool)
	for _, fc := range c.States {
		if k := [2]string{fc.Proto, fc.State}; !seen[k] {
			seen[k] = true
			gauge(d.flows, float64(fc.Flows), fc.Proto, fc.State)
		}
	}
	gauge(d.max, float64(c.Max))
	gauge(d.routerFlows, float64(c.RouterFlows))
	gauge(d.routerReserve, float64(c.RouterReserve))
	gauge(d.assured, float64(c.Assured))
	gauge(d.offloaded, float64(c.Offloaded))
	counter(d.hits, c.FastPathHits)
	for r, n := range c.SlowPath {
		counter(d.slow, n, r)
	}
	for r, n := range c.Drops {
		counter(d.drops, n, r)
	}
	for e, n := range c.Events {
		counter(d.events, n, e)
	}
	clear(seen)
	for _, p := range c.NATPorts {
		if k := [2]string{p.Address, p.Proto}; !seen[k] {
			seen[k] = true
			gauge(d.natPorts, float64(p.Ports), p.Address, p.Proto)
			gauge(d.natFlows, float64(p.Flows), p.Address, p.Proto)
		}
	}
}

var _ prometheus.Collector = (*collector)(nil)

func newCollector(s *Server) *collector {
	return &collector{
		s:      s,
		iface:  newCounterDescs("interface"),
		port:   newCounterDescs("port"),
		uptime: prometheus.NewDesc("gvrouter_uptime_seconds", "Seconds since the router started.", nil, nil),
		gro: prometheus.NewDesc("gvrouter_interface_gro_total",
			"Receive coalescing events of the interface: coalesced, flushed, bypassed_forward, segmented, checksum_verified, checksum_bad.",
			[]string{"interface", "event"}, nil),
		gso: prometheus.NewDesc("gvrouter_interface_gso_total",
			"Superframes (local senders' TSO/GSO frames) of the interface: received, sent_whole, segmented (cut into wire frames in software).",
			[]string{"interface", "event"}, nil),
		nextHop: prometheus.NewDesc("gvrouter_interface_next_hop_forwarded_total",
			"Packets received on the interface and forwarded without netstack before their flow reached the NAT fast path (the next hop of their destination was known).",
			[]string{"interface"}, nil),
		tapped: prometheus.NewDesc("gvrouter_interface_tapped_total",
			"Frames received on the interface and consumed by a service's raw-frame tap (DHCP) before netstack and NAT.",
			[]string{"interface"}, nil),
		macsec: newMACsecDescs(),
		umem:   newUMEMCollector(),
		aqm:    newAQMCollector(),
		portDriver: prometheus.NewDesc("gvrouter_port_driver_info",
			"Always 1; labels give the port's backend (af_xdp, af_packet, tap) and its mode (af_xdp: copy or zero-copy, native or generic XDP).",
			[]string{"port", "driver", "mode"}, nil),
		buildInfo: prometheus.NewDesc("gvrouter_build_info", "Always 1; labels give the running version and build.",
			[]string{"version", "build"}, nil),
		ct: newConntrackDescs(),
		httpOpen: prometheus.NewDesc("gvrouter_status_connections",
			fmt.Sprintf("Connections open to the status server (at most %d).", MaxConns), nil, nil),
		httpRefused: prometheus.NewDesc("gvrouter_status_refused_connections_total",
			fmt.Sprintf("Connections to the status server answered 503 and closed because %d were open.", MaxConns), nil, nil),
		httpForbidden: prometheus.NewDesc("gvrouter_status_forbidden_requests_total",
			"Requests to the status server answered 403, by reason: host (the Host header names no address or name of the router: DNS rebinding), origin (a read of /api/... or /metrics from another origin).",
			[]string{"reason"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.iface.describe(ch)
	c.port.describe(ch)
	ch <- c.uptime
	ch <- c.buildInfo
	ch <- c.httpOpen
	ch <- c.httpRefused
	ch <- c.httpForbidden
	ch <- c.gro
	ch <- c.gso
	ch <- c.nextHop
	ch <- c.tapped
	ch <- c.portDriver
	c.umem.describe(ch)
	c.aqm.describe(ch)
	c.macsec.describe(ch)
	c.ct.describe(ch)
}

// Collect implements prometheus.Collector. An entry whose name repeats an
// earlier one is skipped: the registry would reject the whole scrape.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.current()
	ch <- prometheus.MustNewConstMetric(c.uptime, prometheus.GaugeValue, snap.UptimeSeconds)
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, snap.Version, snap.Build)
	ch <- prometheus.MustNewConstMetric(c.httpOpen, prometheus.GaugeValue, float64(c.s.lim.open.Load()))
	ch <- prometheus.MustNewConstMetric(c.httpRefused, prometheus.CounterValue, float64(c.s.lim.refused.Load()))
	ch <- prometheus.MustNewConstMetric(c.httpForbidden, prometheus.CounterValue, float64(c.s.forbiddenHost.Load()), "host")
	ch <- prometheus.MustNewConstMetric(c.httpForbidden, prometheus.CounterValue, float64(c.s.forbiddenOrigin.Load()), "origin")
	seen := make(map[string]bool)
	for _, i := range snap.Interfaces {
		if seen[i.Name] {
			continue
		}
		seen[i.Name] = true
		c.iface.collect(ch, entry{i.Name, i.State, i.RxPackets, i.RxBytes, i.TxPackets, i.TxBytes, i.Drops, i.Rates})
		ch <- prometheus.MustNewConstMetric(c.nextHop, prometheus.CounterValue, float64(i.NextHopForwarded), i.Name)
		ch <- prometheus.MustNewConstMetric(c.tapped, prometheus.CounterValue, float64(i.Tapped), i.Name)
		for _, ev := range []struct {
			name string
			v    uint64
		}{{"received", i.GSO.Received}, {"sent_whole", i.GSO.SentWhole}, {"segmented", i.GSO.Segmented}} {
			ch <- prometheus.MustNewConstMetric(c.gso, prometheus.CounterValue, float64(ev.v), i.Name, ev.name)
		}
		if g := i.GRO; g != nil {
			for _, ev := range []struct {
				name string
				v    uint64
			}{
				{"coalesced", g.Coalesced}, {"flushed", g.Flushed}, {"bypassed_forward", g.BypassedForward},
				{"segmented", g.Segmented}, {"checksum_verified", g.ChecksumVerified}, {"checksum_bad", g.ChecksumBad},
			} {
				ch <- prometheus.MustNewConstMetric(c.gro, prometheus.CounterValue, float64(ev.v), i.Name, ev.name)
			}
		}
	}
	clear(seen)
	for _, p := range snap.Ports {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		c.port.collect(ch, entry{p.Name, p.State, p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes, p.Drops, p.Rates})
		if p.Driver != "" {
			ch <- prometheus.MustNewConstMetric(c.portDriver, prometheus.GaugeValue, 1, p.Name, p.Driver, p.Mode)
		}
		c.umem.collect(ch, &p)
		c.aqm.collect(ch, &p)
	}
	if snap.Conntrack != nil {
		c.ct.collect(ch, snap.Conntrack)
	}
	c.macsec.collect(ch, snap.MACsec)
}

// promLogger adapts a *slog.Logger to promhttp.Logger.
type promLogger struct{ log *slog.Logger }

// Println implements promhttp.Logger.
func (l promLogger) Println(v ...any) {
	l.log.Warn("status: metrics", "err", fmt.Sprint(v...))
}
