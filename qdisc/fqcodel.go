package qdisc

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Defaults and bounds of Config.
const (
	// DefaultFlows is RFC 8290 §5.1's 1024 flow queues (per tin here).
	DefaultFlows = 1024
	// DefaultHosts host buckets per tin: as many as flows, so a LAN of a few
	// hundred hosts rarely shares a bucket.
	DefaultHosts = 1024
	// DefaultLimit packets in all queues together. RFC 8290 §5.1 suggests
	// 10240 for Linux; a home router's uplink drains 4096 full frames in
	// 49 ms at 1 Gbit/s and 2.5 s at 20 Mbit/s, far beyond what CoDel lets
	// stand, while the pool stays at 6.25 MiB (4096 x 1600 bytes).
	DefaultLimit = 4096
	// DefaultFrameSize is the slot size of the packet pool: a 1500-byte
	// packet with Ethernet, two VLAN tags and PPPoE (14+8+8 = 1530) fits.
	// Bigger frames are counted in Stats.OversizeDrops.
	DefaultFrameSize = 1600
	// DefaultQuantum is the DRR quantum, one Ethernet MTU frame (RFC 8290 §5.1).
	DefaultQuantum = 1514
	// overlimitBatch bounds how many packets one overlimit event drops from
	// the fattest flow: dropping half its backlog at once spares a table
	// scan per packet in a flood, and the bound keeps the pause short.
	overlimitBatch = 64
	// overlimitMinFree is the fewest slots one overlimit event frees.
	overlimitMinFree = 32
	// delayShift is the EWMA weight 1/8 of TinStats.Delay.
	delayShift = 3

	none     = int32(-1)
	listNone = uint8(0)
	listNew  = uint8(1)
	listOld  = uint8(2)
)

// Config configures an FQCoDel. The zero value of each field picks its default.
type Config struct {
	// Flows is the number of flow queues per tin, e.g. 1024.
	Flows int
	// Hosts is the number of host buckets per tin, e.g. 1024.
	Hosts int
	// Limit is the number of packets all queues may hold together, e.g.
	// 4096: the packet pool has exactly Limit slots, so memory is fixed at
	// New (Stats.MemoryBytes) whatever the traffic.
	Limit int
	// FrameSize is the largest frame stored, e.g. 1600.
	FrameSize int
	// Quantum is the DRR quantum in bytes for flows and hosts, e.g. 1514.
	Quantum int
	// CoDel are the per-flow AQM parameters; zero Target/Interval/MaxPacket
	// take RFC 8289's defaults, zero MarkLimit Interval. ECN as given
	// (true marks ECT packets).
	CoDel CoDelParams
	// Diffserv selects the tins: Besteffort (one tin) or Diffserv3.
	Diffserv Diffserv
	// Rate is the link rate in bit/s the tin thresholds are shares of, e.g.
	// 20_000_000; 0 leaves the tins in strict priority (voice, best effort, bulk).
	Rate uint64
	// Classify returns a frame's class; nil uses ClassifyFrame with HostSrc.
	// It is called once per enqueued frame and must not keep the frame.
	Classify func(frame []byte) Class
	// Seed perturbs the flow and host hashes; 0 picks a random one.
	Seed uint64
}

// Validate reports every configuration problem at once.
func (c *Config) Validate() error {
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v != 0 && (v < lo || v > hi) {
			errs = append(errs, fmt.Errorf("qdisc: %s %d out of range %d..%d", name, v, lo, hi))
		}
	}
	check("flows", c.Flows, 1, 65536)
	check("hosts", c.Hosts, 1, 65536)
	check("limit", c.Limit, 16, 1<<20)
	check("frame size", c.FrameSize, 64, 65535)
	check("quantum", c.Quantum, 64, 65535)
	if c.CoDel.Target < 0 || c.CoDel.Interval < 0 || c.CoDel.MaxPacket < 0 || c.CoDel.MarkLimit < 0 {
		errs = append(errs, errors.New("qdisc: negative codel parameter"))
	}
	if c.Diffserv > Diffserv3 {
		errs = append(errs, fmt.Errorf("qdisc: unknown diffserv mode %d", c.Diffserv))
	}
	return errors.Join(errs...)
}

// list is a FIFO of flow or host indexes linked through their next fields.
type list struct{ head, tail int32 }

// flow is one flow queue (RFC 8290 §4): a FIFO of packet slots with its DRR
// deficit and CoDel state.
type flow struct {
	head, tail int32 // packet slots
	next       int32 // next flow in its host's new or old list
	host       int32 // host index while the flow is in a list
	deficit    int32
	bytes      int32 // backlog
	list       uint8
	codel      CoDel
}

// host is one host bucket: its own new and old flow lists (DRR between the
// flows of one host) and its place in the tin's host lists (DRR between hosts).
type host struct {
	newFlows, oldFlows list
	next               int32
	deficit            int32
	pkts               int32 // packets queued in the host's flows
	list               uint8
}

// tin is one DSCP class: host lists, threshold clock and counters.
type tin struct {
	newHosts, oldHosts list
	// vnext is the virtual time at which the tin is back under its
	// bandwidth threshold (cake's per-tin shaper), ns.
	vnext int64
	// share is the threshold as a fraction of Config.Rate: rate>>shift.
	shift uint8
	stats TinStats
}

// FQCoDel is a flow-queueing CoDel scheduler (RFC 8290) with per-host
// fairness and optional DSCP tins. Frames are copied into a pool allocated by
// New, so Enqueue and Dequeue allocate nothing.
//
// FQCoDel is not safe for concurrent use: one goroutine (the interface's
// transmit loop) owns it. Stats is the exception: it may be called from any
// goroutine and returns the counters as of the end of the last batch.
type FQCoDel struct {
	quantum  int32
	nflows   int
	nhosts   int
	params   CoDelParams
	classify func([]byte) Class
	seed     uint64
	rate     uint64
	tins     []tin
	tinOf    *[64]uint8 // DSCP -> tin index
	flows    []flow     // tin t owns flows[t*nflows : (t+1)*nflows]
	hosts    []host     // tin t owns hosts[t*nhosts : (t+1)*nhosts]

	// The packet pool: slot i is buf[i*frameSize:][:slotLen[i]].
	frameSize int
	buf       []byte
	slotLen   []uint16
	slotL3    []uint16
	slotVer   []uint8
	slotTin   []uint8
	slotTime  []int64
	slotNext  []int32
	free      []int32 // stack of free slots
	lent      []int32 // slots returned by the last Dequeue, freed on the next call

	// dropBytes and dropPkts sum the IP lengths of packets CoDel dropped
	// since the shaper last looked (cake's ingress mode counts them as sent).
	dropBytes, dropPkts int64
	// chargeDrops: an ingress Shaper counts CoDel's drops as sent, so
	// they also use their flow's and host's DRR deficit (set by NewShaper).
	chargeDrops bool

	oversize uint64

	mu  sync.Mutex // mu protects pub
	pub Stats
}

// New returns an FQCoDel with its packet pool allocated.
func New(cfg Config) (*FQCoDel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	or := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	q := &FQCoDel{
		quantum:   int32(or(cfg.Quantum, DefaultQuantum)),
		nflows:    or(cfg.Flows, DefaultFlows),
		nhosts:    or(cfg.Hosts, DefaultHosts),
		params:    cfg.CoDel,
		classify:  cfg.Classify,
		seed:      cfg.Seed,
		rate:      cfg.Rate,
		frameSize: or(cfg.FrameSize, DefaultFrameSize),
	}
	if q.params.Target == 0 {
		q.params.Target = DefaultTarget
	}
	if q.params.Interval == 0 {
		q.params.Interval = DefaultInterval
	}
	if q.params.MaxPacket == 0 {
		q.params.MaxPacket = DefaultMaxPacket
	}
	if q.params.MarkLimit == 0 {
		q.params.MarkLimit = q.params.Interval
	}
	if q.classify == nil {
		q.classify = func(f []byte) Class { return ClassifyFrame(f, HostSrc) }
	}
	if q.seed == 0 {
		var b [8]byte
		rand.Read(b[:])
		q.seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	q.tinOf = diffservTable(cfg.Diffserv)
	q.tins = make([]tin, cfg.Diffserv.tins())
	for i := range q.tins {
		q.tins[i] = tin{newHosts: list{none, none}, oldHosts: list{none, none}, shift: tinShift(cfg.Diffserv, i)}
	}
	q.flows = make([]flow, len(q.tins)*q.nflows)
	for i := range q.flows {
		q.flows[i] = flow{head: none, tail: none, next: none, host: none}
	}
	q.hosts = make([]host, len(q.tins)*q.nhosts)
	for i := range q.hosts {
		q.hosts[i] = host{newFlows: list{none, none}, oldFlows: list{none, none}, next: none}
	}
	limit := or(cfg.Limit, DefaultLimit)
	q.buf = make([]byte, limit*q.frameSize)
	q.slotLen = make([]uint16, limit)
	q.slotL3 = make([]uint16, limit)
	q.slotVer = make([]uint8, limit)
	q.slotTin = make([]uint8, limit)
	q.slotTime = make([]int64, limit)
	q.slotNext = make([]int32, limit)
	q.free = make([]int32, limit)
	for i := range q.free {
		q.free[i] = int32(limit - 1 - i)
	}
	q.lent = make([]int32, 0, limit)
	q.pub.NumTins = len(q.tins)
	q.pub.Limit = limit
	q.pub.MemoryBytes = len(q.buf) + limit*(2+2+1+1+8+4+4+4) + len(q.flows)*48 + len(q.hosts)*32
	return q, nil
}

// frame returns the bytes of a slot.
func (q *FQCoDel) frame(s int32) []byte {
	off := int(s) * q.frameSize
	return q.buf[off : off+int(q.slotLen[s]) : off+q.frameSize]
}

// reclaim frees the slots the last Dequeue lent out.
func (q *FQCoDel) reclaim() {
	q.free = append(q.free, q.lent...)
	q.lent = q.lent[:0]
}

// ipLen is the length the shaper charges for a slot: from the IP header on,
// as cake does, so overhead values of tc-cake(8) apply; non-IP frames are
// charged without their 14-byte Ethernet header.
func (q *FQCoDel) ipLen(s int32) int {
	n := int(q.slotLen[s])
	if q.slotVer[s] != 0 {
		return n - int(q.slotL3[s])
	}
	if n > 14 {
		return n - 14
	}
	return n
}

// Enqueue copies frames into the queues, stamped with now (monotonic ns).
// The caller keeps ownership of frames. Frames lent by the previous Dequeue
// become invalid.
func (q *FQCoDel) Enqueue(now int64, frames [][]byte) {
	q.reclaim()
	for _, f := range frames {
		if len(f) > q.frameSize {
			q.oversize++
			continue
		}
		if len(q.free) == 0 {
			q.dropFattest()
			if len(q.free) == 0 {
				// Unreachable while every slot is in a flow; never panic.
				q.oversize++
				continue
			}
		}
		c := q.classify(f)
		if c.IPVersion != 0 && int(c.L3)+20 > len(f) {
			c.IPVersion, c.L3 = 0, 0 // a classifier's bad offset: treat as non-IP
		}
		ti := int(q.tinOf[c.DSCP&63])
		if ti >= len(q.tins) {
			ti = len(q.tins) - 1
		}
		t := &q.tins[ti]
		s := q.free[len(q.free)-1]
		q.free = q.free[:len(q.free)-1]
		copy(q.buf[int(s)*q.frameSize:], f)
		q.slotLen[s] = uint16(len(f))
		q.slotL3[s] = c.L3
		q.slotVer[s] = c.IPVersion
		q.slotTin[s] = uint8(ti)
		q.slotTime[s] = now
		q.slotNext[s] = none

		fi := int32(ti*q.nflows) + int32(finish(c.Flow^q.seed)%uint64(q.nflows))
		fl := &q.flows[fi]
		if fl.tail == none {
			fl.head = s
		} else {
			q.slotNext[fl.tail] = s
		}
		fl.tail = s
		fl.bytes += int32(len(f))
		t.stats.BacklogPackets++
		t.stats.BacklogBytes += uint64(len(f))
		if fl.list != listNone {
			q.hosts[fl.host].pkts++
			continue
		}
		// A new flow (RFC 8290 §4.1): tail of its host's new list with
		// a full quantum; the host joins its tin the same way.
		hi := int32(ti*q.nhosts) + int32(finish(c.Host^q.seed^0x4057)%uint64(q.nhosts))
		h := &q.hosts[hi]
		h.pkts++
		fl.host = hi
		fl.deficit = q.quantum
		fl.list = listNew
		q.pushFlow(&h.newFlows, fi)
		if h.list == listNone {
			h.deficit = q.quantum
			h.list = listNew
			q.pushHost(&t.newHosts, hi)
		}
	}
	q.publish()
}

func (q *FQCoDel) pushFlow(l *list, fi int32) {
	q.flows[fi].next = none
	if l.tail == none {
		l.head = fi
	} else {
		q.flows[l.tail].next = fi
	}
	l.tail = fi
}

func (q *FQCoDel) popFlow(l *list) {
	fi := l.head
	l.head = q.flows[fi].next
	if l.head == none {
		l.tail = none
	}
	q.flows[fi].next = none
}

func (q *FQCoDel) pushHost(l *list, hi int32) {
	q.hosts[hi].next = none
	if l.tail == none {
		l.head = hi
	} else {
		q.hosts[l.tail].next = hi
	}
	l.tail = hi
}

func (q *FQCoDel) popHost(l *list) {
	hi := l.head
	l.head = q.hosts[hi].next
	if l.head == none {
		l.tail = none
	}
	q.hosts[hi].next = none
}

// popSlot removes the head packet of a flow and updates the backlogs.
func (q *FQCoDel) popSlot(fl *flow) int32 {
	s := fl.head
	fl.head = q.slotNext[s]
	if fl.head == none {
		fl.tail = none
	}
	n := int32(q.slotLen[s])
	fl.bytes -= n
	q.hosts[fl.host].pkts--
	st := &q.tins[q.slotTin[s]].stats
	st.BacklogPackets--
	st.BacklogBytes -= uint64(n)
	return s
}

// dropSlot frees a dropped packet; CoDel's drops are also charged to an
// ingress shaper.
func (q *FQCoDel) dropSlot(s int32, aqm bool) {
	if aqm {
		q.dropBytes += int64(q.ipLen(s))
		q.dropPkts++
	}
	q.free = append(q.free, s)
}

// dropFattest frees room when the pool is full. Within the host holding
// the most packets (pool slots) it drops from the head of the flow with the
// largest byte backlog (RFC 8290 §4.1, which has no hosts), half of that
// backlog at most overlimitBatch packets. Choosing the host first keeps a
// flood of tiny packets spread over many flows from making another host's
// one flow of full-size packets the "fattest". When that frees fewer than
// overlimitMinFree slots (a flood spread thin over many flows), it also
// drops the head packet of each of the host's flows at least half as fat,
// so one scan of the tables pays for many arrivals.
func (q *FQCoDel) dropFattest() {
	bestHost, most := none, int32(0)
	for i := range q.hosts {
		if q.hosts[i].pkts > most {
			bestHost, most = int32(i), q.hosts[i].pkts
		}
	}
	if bestHost == none {
		return
	}
	h := &q.hosts[bestHost]
	best, bestBytes := none, int32(0)
	for _, l := range [2]list{h.newFlows, h.oldFlows} {
		for fi := l.head; fi != none; fi = q.flows[fi].next {
			if q.flows[fi].bytes > bestBytes {
				best, bestBytes = fi, q.flows[fi].bytes
			}
		}
	}
	if best == none {
		return
	}
	freed := 0
	fl := &q.flows[best]
	for freed < overlimitBatch && fl.head != none {
		q.dropHead(fl)
		freed++
		if fl.bytes <= bestBytes/2 {
			break
		}
	}
	for _, l := range [2]list{h.newFlows, h.oldFlows} {
		for fi := l.head; fi != none && freed < overlimitMinFree; fi = q.flows[fi].next {
			if f := &q.flows[fi]; f.head != none && f.bytes >= bestBytes/2 {
				q.dropHead(f)
				freed++
			}
		}
	}
}

// dropHead drops the head packet of a flow for lack of room.
func (q *FQCoDel) dropHead(fl *flow) {
	s := q.popSlot(fl)
	q.tins[q.slotTin[s]].stats.OverlimitDrops++
	q.dropSlot(s, false)
}

// Dequeue fills out with up to len(out) frames in schedule order, without
// shaping, and returns how many. The frames point into the pool and stay
// valid until the next call of Enqueue or Dequeue.
func (q *FQCoDel) Dequeue(now int64, out [][]byte) int {
	q.reclaim()
	n := 0
	for n < len(out) {
		s := q.dequeueOne(now)
		if s == none {
			break
		}
		q.lent = append(q.lent, s)
		out[n] = q.frame(s)
		n++
	}
	q.publish()
	return n
}

// Backlog returns the packets queued in all tins.
func (q *FQCoDel) Backlog() int {
	n := 0
	for i := range q.tins {
		n += int(q.tins[i].stats.BacklogPackets)
	}
	return n
}

// backlogBytes returns the bytes queued in all tins.
func (q *FQCoDel) backlogBytes() int {
	n := uint64(0)
	for i := range q.tins {
		n += q.tins[i].stats.BacklogBytes
	}
	return int(n)
}

// dequeueOne picks a tin and returns the next slot from it, or none.
func (q *FQCoDel) dequeueOne(now int64) int32 {
	for range len(q.tins) {
		ti := q.pickTin(now)
		if ti < 0 {
			return none
		}
		t := &q.tins[ti]
		s := q.dequeueTin(t, now)
		if s == none {
			continue // CoDel dropped all it held; another tin may have some
		}
		n := uint64(q.slotLen[s])
		t.stats.SentPackets++
		t.stats.SentBytes += n
		if share := q.rate >> t.shift; t.shift != 0 && share != 0 {
			if t.vnext < now {
				t.vnext = now
			}
			t.vnext += int64(uint64(q.ipLen(s)) * 8e9 / share)
		}
		return s
	}
	return none
}

// dequeueTin is RFC 8290 §4.2's scheduler run on hosts: the new list first,
// a host out of deficit gets a quantum and goes to the tail of the old list,
// a host with nothing to send leaves (from the new list: to the old list).
func (q *FQCoDel) dequeueTin(t *tin, now int64) int32 {
	for {
		l := &t.newHosts
		if l.head == none {
			l = &t.oldHosts
			if l.head == none {
				return none
			}
		}
		hi := l.head
		h := &q.hosts[hi]
		if h.deficit <= 0 {
			h.deficit += q.quantum
			q.popHost(l)
			h.list = listOld
			q.pushHost(&t.oldHosts, hi)
			continue
		}
		s := q.dequeueHost(h, t, now)
		// (CoDel drops an ingress shaper charges came off h.deficit already.)
		if s == none {
			q.popHost(l)
			if l == &t.newHosts {
				h.list = listOld
				q.pushHost(&t.oldHosts, hi)
			} else {
				h.list = listNone
			}
			continue
		}
		h.deficit -= int32(q.slotLen[s])
		return s
	}
}

// dequeueHost is RFC 8290 §4.2 on the flows of one host, with CoDel on each flow.
func (q *FQCoDel) dequeueHost(h *host, t *tin, now int64) int32 {
	for {
		l := &h.newFlows
		if l.head == none {
			l = &h.oldFlows
			if l.head == none {
				return none
			}
		}
		fi := l.head
		fl := &q.flows[fi]
		if fl.deficit <= 0 {
			fl.deficit += q.quantum
			q.popFlow(l)
			fl.list = listOld
			q.pushFlow(&h.oldFlows, fi)
			continue
		}
		s := q.codelDequeue(fl, h, t, now)
		if s == none {
			// RFC 8290 §4.2: an empty new flow moves to the old list
			// so it cannot stay "new" by emptying; an empty old flow leaves.
			q.popFlow(l)
			if l == &h.newFlows {
				fl.list = listOld
				q.pushFlow(&h.oldFlows, fi)
			} else {
				fl.list = listNone
				fl.host = none
			}
			continue
		}
		fl.deficit -= int32(q.slotLen[s])
		return s
	}
}

// codelDequeue is CoDel's dequeue on one flow (the loop documented on CoDel).
//
// The backlog CoDel judges by is the whole queue's, all tins, as Linux's
// fq_codel passes the qdisc's: the RFC 8289 guard "no drop with at most
// one MTU queued" keeps the link from idling, and a flow holding one
// packet behind its head does not idle a link other flows keep busy.
// Judged by the flow's own bytes, N flows at a small share of the rate
// stand at three packets each, N x 3 frame times (15 ms at 8 flows x 19
// Mbit/s), without CoDel ever acting.
func (q *FQCoDel) codelDequeue(fl *flow, h *host, t *tin, now int64) int32 {
	for {
		if fl.head == none {
			fl.codel.Empty()
			return none
		}
		s := q.popSlot(fl)
		sojourn := now - q.slotTime[s]
		f := q.frame(s)
		ect := ecn(f, int(q.slotL3[s]), q.slotVer[s]) != ecnNotECT
		switch fl.codel.Judge(&q.params, now, sojourn, q.backlogBytes(), ect) {
		case Drop:
			if ect && q.params.ECN {
				// Judge marks an ECT packet it means to signal
				// with: this one waited past MarkLimit, its
				// sender ignoring the marks. Like a full pool's
				// drops it absorbs arrivals above the rate, so an
				// ingress shaper is not charged: charging would
				// age the queue further and drop everything.
				t.stats.ECNOverloadDrops++
				q.dropSlot(s, false)
				continue
			}
			t.stats.CoDelDrops++
			if q.chargeDrops {
				// The drop used the link as a sent packet would (cake
				// charges its flow too): without this an unresponsive
				// flood's drops take the link beside its DRR share.
				n := int32(q.slotLen[s])
				fl.deficit -= n
				h.deficit -= n
			}
			q.dropSlot(s, true)
			continue
		case Mark:
			SetCE(f, int(q.slotL3[s]), q.slotVer[s])
			t.stats.ECNMarks++
		}
		if sojourn > t.stats.PeakDelay {
			t.stats.PeakDelay = sojourn
		}
		t.stats.Delay += (sojourn - t.stats.Delay) >> delayShift
		return s
	}
}

// publish copies the counters for Stats, once per batch.
func (q *FQCoDel) publish() {
	q.mu.Lock()
	for i := range q.tins {
		q.pub.Tins[i] = q.tins[i].stats
	}
	q.pub.OversizeDrops = q.oversize
	q.mu.Unlock()
}

// Stats returns the counters as of the end of the last Enqueue or Dequeue.
// It is safe for concurrent use.
func (q *FQCoDel) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pub
}

// SetRate changes Config.Rate, the rate the tin thresholds are shares of
// (a reload changed the shaper's rate); queued packets stay.
func (q *FQCoDel) SetRate(rate uint64) { q.rate = rate }
