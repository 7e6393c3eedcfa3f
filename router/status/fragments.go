package status

import "github.com/prometheus/client_golang/prometheus"

// Fragments is the fragment guard's router-wide state (package
// fragguard). Its refusals are the interfaces' drops by reason
// (tiny_first_fragment, tcp_offset_8, overlap, after_overlap,
// incomplete_chain, malformed_fragment, too_many_holes).
type Fragments struct {
	// Tracked is the number of datagrams whose fragment ranges are
	// remembered now, e.g. 3.
	Tracked int `json:"tracked"`
	// Evicted counts datagrams forgotten early because the guard's table
	// was full, e.g. 0.
	Evicted uint64 `json:"evicted"`
}

// fragCollector exports Snapshot.Fragments.
type fragCollector struct {
	s                *Server
	tracked, evicted *prometheus.Desc
}

func newFragCollector(s *Server) *fragCollector {
	return &fragCollector{
		s:       s,
		tracked: prometheus.NewDesc("gvrouter_fragment_datagrams_tracked", "Datagrams whose fragment ranges the fragment guard remembers (RFC 5722 overlap detection).", nil, nil),
		evicted: prometheus.NewDesc("gvrouter_fragment_evictions_total", "Datagrams the fragment guard forgot before their timeout because its table was full.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *fragCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tracked
	ch <- c.evicted
}

// Collect implements prometheus.Collector.
func (c *fragCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.s.current().Fragments
	if f == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.tracked, prometheus.GaugeValue, float64(f.Tracked))
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(f.Evicted))
}
