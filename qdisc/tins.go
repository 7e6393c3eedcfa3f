package qdisc

// Diffserv selects how DSCPs map to tins.
type Diffserv uint8

const (
	// Besteffort puts every packet in one tin.
	Besteffort Diffserv = iota
	// Diffserv3 has three tins, as cake's diffserv3:
	//
	//	tin 0 Bulk:        CS1 (8), LE (1, RFC 8622); guaranteed >= 1/16 (6.25 %) of Rate
	//	tin 1 Best effort: every other DSCP
	//	tin 2 Voice:       CS4 (32), CS5 (40), VA (44, RFC 5865), EF (46), CS6 (48), CS7 (56);
	//	                   priority up to 1/4 (25 %) of Rate
	//
	// Dequeue picks, in order: Voice if it is under its threshold; Bulk if it
	// is under its threshold; Best effort; otherwise the backlogged tin that
	// comes back under its threshold first (so the link never idles while a
	// tin has packets). A tin's threshold is a virtual clock advanced by each
	// of its packets at its share of Rate, like a shaper per tin. With Rate 0
	// the order is strict: Voice, Best effort, Bulk.
	Diffserv3
)

// MaxTins is the largest number of tins of any Diffserv mode.
const MaxTins = 3

// Tin indexes of Diffserv3.
const (
	TinBulk       = 0
	TinBestEffort = 1
	TinVoice      = 2
)

// String returns the mode's config name.
func (d Diffserv) String() string {
	switch d {
	case Besteffort:
		return "besteffort"
	case Diffserv3:
		return "diffserv3"
	}
	return "invalid"
}

// TinName returns the name of tin i of mode d, for status pages.
func (d Diffserv) TinName(i int) string {
	if d == Besteffort {
		return "besteffort"
	}
	switch i {
	case TinBulk:
		return "bulk"
	case TinBestEffort:
		return "besteffort"
	case TinVoice:
		return "voice"
	}
	return "invalid"
}

func (d Diffserv) tins() int {
	if d == Diffserv3 {
		return 3
	}
	return 1
}

// tinShift is a tin's threshold as a right shift of Rate (0: no threshold).
func tinShift(d Diffserv, i int) uint8 {
	if d != Diffserv3 {
		return 0
	}
	switch i {
	case TinBulk:
		return 4 // 1/16
	case TinVoice:
		return 2 // 1/4
	}
	return 0
}

var (
	besteffortTable = [64]uint8{}
	diffserv3Table  = func() *[64]uint8 {
		var t [64]uint8
		for i := range t {
			t[i] = TinBestEffort
		}
		for _, d := range []int{8, 1} {
			t[d] = TinBulk
		}
		for _, d := range []int{32, 40, 44, 46, 48, 56} {
			t[d] = TinVoice
		}
		return &t
	}()
)

func diffservTable(d Diffserv) *[64]uint8 {
	if d == Diffserv3 {
		return diffserv3Table
	}
	return &besteffortTable
}

// pickTin returns the tin to serve next (see Diffserv3), or -1 if all are empty.
func (q *FQCoDel) pickTin(now int64) int {
	if len(q.tins) == 1 {
		if q.tins[0].stats.BacklogPackets == 0 {
			return -1
		}
		return 0
	}
	busy := func(i int) bool { return q.tins[i].stats.BacklogPackets != 0 }
	under := func(i int) bool { return q.rate == 0 || q.tins[i].vnext <= now }
	switch {
	case busy(TinVoice) && under(TinVoice):
		return TinVoice
	case q.rate != 0 && busy(TinBulk) && under(TinBulk):
		return TinBulk
	case busy(TinBestEffort):
		return TinBestEffort
	}
	best := -1
	for _, i := range [...]int{TinVoice, TinBulk} {
		if busy(i) && (best < 0 || q.tins[i].vnext < q.tins[best].vnext) {
			best = i
		}
	}
	return best
}

// TinStats are the counters of one tin, JSON-tagged for the status page.
type TinStats struct {
	// SentPackets and SentBytes count frames handed to the caller.
	SentPackets uint64 `json:"sent_packets"`
	SentBytes   uint64 `json:"sent_bytes"`
	// CoDelDrops counts packets CoDel dropped (sojourn above target for an interval).
	CoDelDrops uint64 `json:"codel_drops"`
	// ECNMarks counts packets CoDel marked CE instead of dropping.
	ECNMarks uint64 `json:"ecn_marks"`
	// ECNOverloadDrops counts ECN-capable packets dropped instead of
	// marked because they waited CoDelParams.MarkLimit while marks were
	// being sent (a sender that ignores them); not in CoDelDrops, and,
	// like OverlimitDrops, not charged to an ingress shaper.
	ECNOverloadDrops uint64 `json:"ecn_overload_drops"`
	// OverlimitDrops counts packets dropped from the fattest flow because the pool was full.
	OverlimitDrops uint64 `json:"overlimit_drops"`
	// BacklogPackets and BacklogBytes are what the tin holds now.
	BacklogPackets uint64 `json:"backlog_packets"`
	BacklogBytes   uint64 `json:"backlog_bytes"`
	// Delay is a moving average (1/8 weight) of the queueing delay of sent packets, ns.
	Delay int64 `json:"delay_ns"`
	// PeakDelay is the largest queueing delay of a sent packet, ns.
	PeakDelay int64 `json:"peak_delay_ns"`
}

// Stats are an FQCoDel's counters, JSON-tagged for the status page.
type Stats struct {
	// Tins holds NumTins tins, indexed as Diffserv's tins (TinBulk, ...).
	Tins    [MaxTins]TinStats `json:"tins"`
	NumTins int               `json:"num_tins"`
	// OversizeDrops counts frames longer than Config.FrameSize, dropped at Enqueue.
	OversizeDrops uint64 `json:"oversize_drops"`
	// Limit is the packet limit (pool slots) of all queues together.
	Limit int `json:"limit_packets"`
	// MemoryBytes is the memory allocated by New: the bound under any traffic.
	MemoryBytes int `json:"memory_bytes"`
}
