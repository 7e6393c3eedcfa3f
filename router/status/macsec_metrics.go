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
	// MKA: the participant's counters, role, peers, latest key number and
	// last roll.
	mkaCounter, mkaKeyServer, mkaPeers, mkaKN, mkaLastRoll *prometheus.Desc
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
		mkaCounter: prometheus.NewDesc("gvrouter_mka_counter_total",
			"MKA participant counters of a SecY (MKPDUs sent, received, invalid ICV, replayed, SAK rolls, peer timeouts, ...).",
			[]string{"secy", "counter"}, nil),
		mkaKeyServer: prometheus.NewDesc("gvrouter_mka_key_server",
			"1 if this SecY's MKA participant is the elected key server.",
			[]string{"secy"}, nil),
		mkaPeers: prometheus.NewDesc("gvrouter_mka_peers",
			"MKA peers of a SecY by list (live, potential).",
			[]string{"secy", "list"}, nil),
		mkaKN: prometheus.NewDesc("gvrouter_mka_latest_key_number",
			"Key number of the latest SAK (0: none) and the AN it uses.",
			[]string{"secy", "an"}, nil),
		mkaLastRoll: prometheus.NewDesc("gvrouter_mka_last_roll_timestamp_seconds",
			"When transmission last moved to a new SAK (0: never).",
			[]string{"secy"}, nil),
	}
}

func (d *macsecDescs) describe(ch chan<- *prometheus.Desc) {
	ch <- d.counter
	ch <- d.nextPN
	ch <- d.worker
	ch <- d.mkaCounter
	ch <- d.mkaKeyServer
	ch <- d.mkaPeers
	ch <- d.mkaKN
	ch <- d.mkaLastRoll
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
		if k := m.MKA; k != nil {
			d.collectMKA(ch, m.Name, k)
		}
	}
}

func (d *macsecDescs) collectMKA(ch chan<- prometheus.Metric, secy string, k *MACsecMKA) {
	for name, v := range k.Counters {
		ch <- prometheus.MustNewConstMetric(d.mkaCounter, prometheus.CounterValue, float64(v), secy, name)
	}
	ks := 0.0
	if k.KeyServer {
		ks = 1
	}
	ch <- prometheus.MustNewConstMetric(d.mkaKeyServer, prometheus.GaugeValue, ks, secy)
	ch <- prometheus.MustNewConstMetric(d.mkaPeers, prometheus.GaugeValue, float64(len(k.Live)), secy, "live")
	ch <- prometheus.MustNewConstMetric(d.mkaPeers, prometheus.GaugeValue, float64(len(k.Potential)), secy, "potential")
	kn, an := 0.0, ""
	if k.Latest != nil {
		kn, an = float64(k.Latest.KN), strconv.Itoa(k.Latest.AN)
	}
	ch <- prometheus.MustNewConstMetric(d.mkaKN, prometheus.GaugeValue, kn, secy, an)
	roll := 0.0
	if !k.LastRoll.IsZero() {
		roll = float64(k.LastRoll.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(d.mkaLastRoll, prometheus.GaugeValue, roll, secy)
}
