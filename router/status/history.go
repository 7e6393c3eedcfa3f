package status

import (
	"strconv"
	"sync"
	"time"
)

const (
	// HistoryLen is how many samples the Server keeps for the page's
	// graphs: 15 minutes at SampleInterval, enough to see a download
	// start and end, or a link flap, on a page opened afterwards.
	HistoryLen = 900

	// maxHistorySeries bounds the interfaces and ports that get a
	// history: each costs HistoryLen points of 16 bytes (14.4 kB), so
	// 128 cost at most 1.8 MiB however many VLANs a config declares.
	// Past it an entry has current rates but no graph.
	maxHistorySeries = 128
)

// ratePoint is one sample's rates. float32 halves the ring's memory; its
// 24-bit mantissa is far finer than a graph's pixel.
type ratePoint struct{ rxBits, txBits, rxPkts, txPkts float32 }

// rateSeries is one interface's or port's rates, a fixed ring indexed by
// seq % HistoryLen, allocated once when the entry first appears.
type rateSeries struct {
	// first is the seq of its oldest sample: it may have appeared after
	// the history's first sample.
	first uint64
	// last is the seq of its newest sample; a series missing from a
	// sample (its interface was removed) is deleted.
	last uint64
	pts  [HistoryLen]ratePoint
}

// history is the last HistoryLen samples' rates, in memory only. It is
// safe for concurrent use.
type history struct {
	// mu protects every field below.
	mu sync.Mutex
	// first and seq are the oldest and newest sample kept; seq is 0
	// until the first record.
	first, seq uint64
	// times and cpu are each sample's time (Unix milliseconds) and the
	// process CPU percent, by seq % HistoryLen.
	times [HistoryLen]int64
	cpu   [HistoryLen]float32
	// ifs and ports are the series by interface and port name.
	ifs, ports map[string]*rateSeries
}

func newHistory() *history {
	return &history{ifs: make(map[string]*rateSeries), ports: make(map[string]*rateSeries)}
}

// record adds snap, whose Seq and Rates are set, as the newest sample.
// Samples must come with increasing Seq.
func (h *history) record(snap *Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := snap.Seq
	if h.seq == 0 || seq != h.seq+1 {
		// The first sample, or a gap: start again rather than show
		// stale points as recent.
		h.first = seq
		clear(h.ifs)
		clear(h.ports)
	}
	h.seq = seq
	if seq-h.first >= HistoryLen {
		h.first = seq - HistoryLen + 1
	}
	k := seq % HistoryLen
	h.times[k] = snap.Time.UnixMilli()
	h.cpu[k] = 0
	if snap.Process != nil {
		h.cpu[k] = float32(snap.Process.CPUPercent)
	}
	for _, i := range snap.Interfaces {
		h.putLocked(h.ifs, i.Name, seq, i.Rates)
	}
	for _, p := range snap.Ports {
		h.putLocked(h.ports, p.Name, seq, p.Rates)
	}
	for _, m := range []map[string]*rateSeries{h.ifs, h.ports} {
		for name, s := range m {
			if s.last != seq {
				delete(m, name)
			}
		}
	}
}

// putLocked stores r as the rates of name at seq in m.
func (h *history) putLocked(m map[string]*rateSeries, name string, seq uint64, r Rates) {
	s := m[name]
	if s == nil {
		if len(h.ifs)+len(h.ports) >= maxHistorySeries {
			return
		}
		s = &rateSeries{first: seq}
		m[name] = s
	}
	if s.first < h.first {
		s.first = h.first
	}
	s.last = seq
	s.pts[seq%HistoryLen] = ratePoint{
		rxBits: float32(r.RxBitsPerSecond), txBits: float32(r.TxBitsPerSecond),
		rxPkts: float32(r.RxPacketsPerSecond), txPkts: float32(r.TxPacketsPerSecond),
	}
}

// History is the recent past of the rates, oldest first, as /api/history
// serves it: the samples after the one a client already has, or all of
// the last HistoryLen. Point k of every array belongs to sample
// FirstSeq+k, taken at TimesUnixMS[k].
type History struct {
	// Seq is the newest sample's Seq, e.g. 5120; 0 before the first.
	Seq uint64 `json:"seq"`
	// FirstSeq is the Seq of the first point below; Seq+1 when there is
	// none (nothing newer than asked for).
	FirstSeq uint64 `json:"first_seq"`
	// IntervalSeconds is the sampling period, e.g. 1.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Len is how many samples the Server keeps, HistoryLen.
	Len int `json:"len"`
	// TimesUnixMS are the samples' times in Unix milliseconds.
	TimesUnixMS []int64 `json:"times_unix_ms"`
	// CPUPercent is the process's CPU use per sample (Process.CPUPercent).
	CPUPercent []float32 `json:"cpu_percent"`
	// Interfaces and Ports are the rates by interface and port name.
	Interfaces map[string]*RateHistory `json:"interfaces"`
	Ports      map[string]*RateHistory `json:"ports"`
}

// RateHistory is one interface's or port's rates per sample, the values
// of Rates.
type RateHistory struct {
	// FirstSeq is the Seq of its first point: later than
	// History.FirstSeq for an entry that appeared since.
	FirstSeq           uint64    `json:"first_seq"`
	RxBitsPerSecond    []float32 `json:"rx_bits_per_second"`
	TxBitsPerSecond    []float32 `json:"tx_bits_per_second"`
	RxPacketsPerSecond []float32 `json:"rx_packets_per_second"`
	TxPacketsPerSecond []float32 `json:"tx_packets_per_second"`
}

// since returns the samples with a Seq greater than after (all kept
// samples for 0).
func (h *history) since(after uint64, interval time.Duration) *History {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := &History{
		Seq: h.seq, IntervalSeconds: interval.Seconds(), Len: HistoryLen,
		TimesUnixMS: []int64{}, CPUPercent: []float32{},
		Interfaces: map[string]*RateHistory{}, Ports: map[string]*RateHistory{},
	}
	from := max(h.first, after+1)
	out.FirstSeq = from
	if h.seq == 0 || from > h.seq {
		out.FirstSeq = h.seq + 1
		return out
	}
	for q := from; q <= h.seq; q++ {
		out.TimesUnixMS = append(out.TimesUnixMS, h.times[q%HistoryLen])
		out.CPUPercent = append(out.CPUPercent, h.cpu[q%HistoryLen])
	}
	conv := func(dst map[string]*RateHistory, src map[string]*rateSeries) {
		for name, s := range src {
			f := max(from, s.first)
			n := int(h.seq - f + 1)
			r := &RateHistory{
				FirstSeq:           f,
				RxBitsPerSecond:    make([]float32, 0, n),
				TxBitsPerSecond:    make([]float32, 0, n),
				RxPacketsPerSecond: make([]float32, 0, n),
				TxPacketsPerSecond: make([]float32, 0, n),
			}
			for q := f; q <= h.seq; q++ {
				p := s.pts[q%HistoryLen]
				r.RxBitsPerSecond = append(r.RxBitsPerSecond, p.rxBits)
				r.TxBitsPerSecond = append(r.TxBitsPerSecond, p.txBits)
				r.RxPacketsPerSecond = append(r.RxPacketsPerSecond, p.rxPkts)
				r.TxPacketsPerSecond = append(r.TxPacketsPerSecond, p.txPkts)
			}
			dst[name] = r
		}
	}
	conv(out.Interfaces, h.ifs)
	conv(out.Ports, h.ports)
	return out
}

// parseSince parses /api/history's since parameter: a Seq, or "" for 0.
func parseSince(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	return strconv.ParseUint(v, 10, 64)
}
