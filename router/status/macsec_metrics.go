package status

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// counterList is dropList with zero counters too: a MACsec counter at 0
// says something (InPktsLate = 0), a drop reason at 0 does not.
func counterList(m map[string]uint64) []drop {
	l := make([]drop, 0, len(m))
	for r, n := range m {
		l = append(l, drop{r, n})
	}
	slices.SortFunc(l, func(a, b drop) int { return strings.Compare(a.Reason, b.Reason) })
	return l
}

// macsecDescs are the MACsec metrics: every 802.1AE MIB counter by scope
// (secy, tx_sc, tx_sa, rx_sc, rx_sa), labelled with the counter's MIB
// name, and the SAs' next PN. No label or value is ever a key.
type macsecDescs struct {
	counter, nextPN, worker *prometheus.Desc
}

func newMACsecDescs() macsecDescs {
	return macsecDescs{
		counter: prometheus.NewDesc("gvrouter_macsec_counter_total",
			"IEEE 802.1AE MIB counters of a SecY, by scope (secy, tx_sc, tx_sa, rx_sc, rx_sa), SCI, AN and MIB name.",
			[]string{"secy", "scope", "sci", "an", "counter"}, nil),
		nextPN: prometheus.NewDesc("gvrouter_macsec_next_pn",
			"Next PN of an SA: the next one sent (tx) or the lowest accepted (rx).",
			[]string{"secy", "dir", "sci", "an", "key_id"}, nil),
		worker: prometheus.NewDesc("gvrouter_macsec_worker_frames_total",
			"Frames each crypto worker of a SecY sealed or opened (the last worker is the callers).",
			[]string{"secy", "worker"}, nil),
	}
}

func (d *macsecDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- d.counter
	ch <- d.nextPN
	ch <- d.worker
}

func (d *macsecDescs) collect(ch chan<- prometheus.Metric, ms []MACsec) {
	counters := func(secy, scope, sci, an string, m map[string]uint64) {
		for name, v := range m {
			ch <- prometheus.MustNewConstMetric(d.counter, prometheus.CounterValue, float64(v), secy, scope, sci, an, name)
		}
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m.Name] {
			continue
		}
		seen[m.Name] = true
		counters(m.Name, "secy", m.SCI, "", m.Counters)
		counters(m.Name, "tx_sc", m.SCI, "", m.TXSC)
		for _, sa := range m.TXSA {
			an := strconv.Itoa(sa.AN)
			counters(m.Name, "tx_sa", m.SCI, an, sa.Counters)
			ch <- prometheus.MustNewConstMetric(d.nextPN, prometheus.GaugeValue, float64(sa.NextPN), m.Name, "tx", m.SCI, an, sa.KeyID)
		}
		for _, sc := range m.RXSC {
			counters(m.Name, "rx_sc", sc.SCI, "", sc.Counters)
			for _, sa := range sc.SA {
				an := strconv.Itoa(sa.AN)
				counters(m.Name, "rx_sa", sc.SCI, an, sa.Counters)
				ch <- prometheus.MustNewConstMetric(d.nextPN, prometheus.GaugeValue, float64(sa.NextPN), m.Name, "rx", sc.SCI, an, sa.KeyID)
			}
		}
		for i, n := range m.WorkerFrames {
			ch <- prometheus.MustNewConstMetric(d.worker, prometheus.CounterValue, float64(n), m.Name, strconv.Itoa(i))
		}
	}
}
