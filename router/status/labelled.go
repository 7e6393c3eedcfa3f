package status

import "github.com/prometheus/client_golang/prometheus"

// labelled is one value of a metric whose last label says what it counts
// (an event, a place), e.g. {"dropped", 3}.
type labelled struct {
	label string
	v     float64
}

// collectLabelled sends one metric of d for each row, its labels port
// and the row's label.
func collectLabelled(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, port string, rows ...labelled) {
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(d, t, r.v, port, r.label)
	}
}
