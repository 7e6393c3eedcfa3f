package status

import "time"

// counters are the four counters rates are computed from.
type counters struct {
	rxPackets, rxBytes, txPackets, txBytes uint64
}

// computeRates returns the rates between prev and cur, dt apart.
func computeRates(prev, cur counters, dt time.Duration) Rates {
	if dt <= 0 {
		return Rates{}
	}
	sec := dt.Seconds()
	return Rates{
		RxBitsPerSecond:    float64(delta(prev.rxBytes, cur.rxBytes)) * 8 / sec,
		TxBitsPerSecond:    float64(delta(prev.txBytes, cur.txBytes)) * 8 / sec,
		RxPacketsPerSecond: float64(delta(prev.rxPackets, cur.rxPackets)) / sec,
		TxPacketsPerSecond: float64(delta(prev.txPackets, cur.txPackets)) / sec,
	}
}

// delta returns cur-prev, or 0 if the counter went backwards (it was reset
// because its interface was re-created on reload).
func delta(prev, cur uint64) uint64 {
	if cur < prev {
		return 0
	}
	return cur - prev
}

// fillRates sets the Rates of every interface and port in cur from the
// counters in prev, taken dt earlier. It matches entries by name.
func fillRates(prev, cur *Snapshot, dt time.Duration) {
	ifs := make(map[string]counters, len(prev.Interfaces))
	for _, i := range prev.Interfaces {
		ifs[i.Name] = counters{i.RxPackets, i.RxBytes, i.TxPackets, i.TxBytes}
	}
	for k := range cur.Interfaces {
		i := &cur.Interfaces[k]
		if c, ok := ifs[i.Name]; ok {
			i.Rates = computeRates(c, counters{i.RxPackets, i.RxBytes, i.TxPackets, i.TxBytes}, dt)
		}
	}
	ports := make(map[string]counters, len(prev.Ports))
	for _, p := range prev.Ports {
		ports[p.Name] = counters{p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes}
	}
	for k := range cur.Ports {
		p := &cur.Ports[k]
		if c, ok := ports[p.Name]; ok {
			p.Rates = computeRates(c, counters{p.RxPackets, p.RxBytes, p.TxPackets, p.TxBytes}, dt)
		}
	}
}
