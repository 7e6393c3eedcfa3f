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
	// gro is the interfaces' GRO counters, labelled by event.
	gro *prometheus.Desc
	// macsec is the SecYs' 802.1AE counters (macsec_metrics.go).
	macsec macsecDescs
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
		macsec: newMACsecDescs(),
		buildInfo: prometheus.NewDesc("gvrouter_build_info", "Always 1; labels give the running version and build.",
			[]string{"version", "build"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.iface.describe(ch)
	c.port.describe(ch)
	ch <- c.uptime
	ch <- c.buildInfo
	ch <- c.gro
	c.macsec.describe(ch)
}

// Collect implements prometheus.Collector. An entry whose name repeats an
// earlier one is skipped: the registry would reject the whole scrape.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.current()
	ch <- prometheus.MustNewConstMetric(c.uptime, prometheus.GaugeValue, snap.UptimeSeconds)
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, snap.Version, snap.Build)
	seen := make(map[string]bool)
	for _, i := range snap.Interfaces {
		if seen[i.Name] {
			continue
		}
		seen[i.Name] = true
		c.iface.collect(ch, entry{i.Name, i.State, i.RxPackets, i.RxBytes, i.TxPackets, i.TxBytes, i.Drops, i.Rates})
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
	}
	c.macsec.collect(ch, snap.MACsec)
}

// promLogger adapts a *slog.Logger to promhttp.Logger.
type promLogger struct{ log *slog.Logger }

// Println implements promhttp.Logger.
func (l promLogger) Println(v ...any) {
	l.log.Warn("status: metrics", "err", fmt.Sprint(v...))
}
