package status

import "github.com/prometheus/client_golang/prometheus"

// PortAQM is a port's receive queue (stack.RxQueue: flow-fair, CoDel
// with ECN marking): how much went through it and what it did. Its drops
// are also in the port's Drops, as "aqm" (CoDel) and "aqm_overlimit"
// (queue full).
type PortAQM struct {
	// On reports that the queue is on (ports[].aqm).
	On bool `json:"on"`
	// Passed counts frames that went straight through an empty queue;
	// Queued frames that waited in it.
	Passed uint64 `json:"passed"`
	Queued uint64 `json:"queued"`
	// Dropped counts frames CoDel dropped; Marked ECN-capable packets it
	// marked CE instead; Overlimit frames dropped because the queue was
	// full.
	Dropped   uint64 `json:"dropped"`
	Marked    uint64 `json:"ecn_marked"`
	Overlimit uint64 `json:"overlimit"`
	// Copied counts queued frames copied out of the port's receive
	// ring (the frames of an af_packet V3 block stay where they lie
	// unless the block had to go back first; others are all copied).
	Copied uint64 `json:"copied"`
	// Backlog and BacklogBytes are what waits now, e.g. 12 frames.
	Backlog      int `json:"backlog"`
	BacklogBytes int `json:"backlog_bytes"`
	// MaxSojournMs is the longest a frame waited (since the kernel
	// received it) in the last one to two seconds, e.g. 4.2.
	MaxSojournMs float64 `json:"max_sojourn_ms"`
}

// aqmCollector describes the ports' receive queue metrics.
type aqmCollector struct {
	frames, backlog, backlogBytes, sojourn *prometheus.Desc
}

func newAQMCollector() aqmCollector {
	return aqmCollector{
		frames: prometheus.NewDesc("gvrouter_port_aqm_frames_total",
			"Frames of a port's receive queue by event: passed (straight through an empty queue), queued, dropped (CoDel), ecn_marked (CE instead of a drop), overlimit (dropped, queue full); copied counts queued frames copied out of the receive ring.",
			[]string{"port", "event"}, nil),
		backlog: prometheus.NewDesc("gvrouter_port_aqm_backlog_frames",
			"Frames waiting in a port's receive queue.", []string{"port"}, nil),
		backlogBytes: prometheus.NewDesc("gvrouter_port_aqm_backlog_bytes",
			"Bytes waiting in a port's receive queue.", []string{"port"}, nil),
		sojourn: prometheus.NewDesc("gvrouter_port_aqm_max_sojourn_seconds",
			"The longest a frame waited in a port's receive queue (since the kernel received it) in the last one to two seconds.", []string{"port"}, nil),
	}
}

func (c aqmCollector) describe(ch chan<- *prometheus.Desc) {
	ch <- c.frames
	ch <- c.backlog
	ch <- c.backlogBytes
	ch <- c.sojourn
}

func (c aqmCollector) collect(ch chan<- prometheus.Metric, p *Port) {
	a := p.AQM
	if a == nil {
		return
	}
	collectLabelled(ch, c.frames, prometheus.CounterValue, p.Name,
		labelled{"passed", float64(a.Passed)}, labelled{"queued", float64(a.Queued)}, labelled{"dropped", float64(a.Dropped)},
		labelled{"ecn_marked", float64(a.Marked)}, labelled{"overlimit", float64(a.Overlimit)},
		labelled{"copied", float64(a.Copied)})
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(a.Backlog), p.Name)
	ch <- prometheus.MustNewConstMetric(c.backlogBytes, prometheus.GaugeValue, float64(a.BacklogBytes), p.Name)
	ch <- prometheus.MustNewConstMetric(c.sojourn, prometheus.GaugeValue, a.MaxSojournMs/1e3, p.Name)
}
