package vswitch

import (
	"encoding/binary"
	"math/bits"

	"github.com/gvrouter/gvrouter/hw"
)

// Per-queue buffer sizes.
const (
	// outBatch is how many frames a queue collects for one egress port
	// before it writes them: hw.TxBatchSize, one sendmmsg.
	outBatch = hw.TxBatchSize
	// scratchSize is a queue's room for frames whose tag changes: a ring
	// block's data (hw.RingBlockSize) plus one tag for each of its frames,
	// like hw.Bridge, so that a block tagged towards one port fits. A
	// queue that runs out writes what it holds and starts again.
	scratchSize = hw.RingBlockSize + hw.RingBlockSize/(hw.EthernetHeaderLen+48)*hw.VLANTagLen
)

// forwarder is the switch's data path: the VLAN table, the learning table
// and one writer per port. Its handle method is safe for concurrent use
// with distinct queues.
type forwarder struct {
	t       *table
	fdb     *fdb
	writers []hw.FrameWriter // by port
	now     func() int64     // the switch clock in nanoseconds; called once per batch
	ports   []counters       // by port
	vlans   []counters       // by index in t.vlans
}

func newForwarder(t *table, writers []hw.FrameWriter, now func() int64) *forwarder {
	return &forwarder{
		t:       t,
		fdb:     newFDB(int64(AgingTime), FDBSize),
		writers: writers,
		now:     now,
		ports:   make([]counters, len(writers)),
		vlans:   make([]counters, len(t.vlans)),
	}
}

// queue is the forwarding state of one receive queue: frames waiting for
// each egress port, scratch space for re-tagged frames and the batch's
// counts. Only that queue's goroutine uses it.
type queue struct {
	out     [][][]byte // by egress port
	scratch []byte
	ports   []tally // by port
	vlans   []tally // by VLAN index
}

func (fw *forwarder) newQueue() *queue {
	q := &queue{
		out:     make([][][]byte, len(fw.writers)),
		scratch: make([]byte, 0, scratchSize),
		ports:   make([]tally, len(fw.writers)),
		vlans:   make([]tally, len(fw.t.vlans)),
	}
	for i := range q.out {
		q.out[i] = make([][]byte, 0, outBatch)
	}
	return q
}

// decision is what the switch does with one received frame.
type decision struct {
	in     ingress
	egress uint64 // bit i: send on port i
	flood  bool
	reason dropReason // dropNone, or why the frame is dropped
}

// decide classifies a frame received on port, learns its source address
// and chooses its egress ports (IEEE 802.1Q-2018 6.9, 8.6.2, 8.6.3, 8.7).
func (fw *forwarder) decide(port int, f *hw.Frame, now int64) decision {
	var d decision
	d.in, d.reason = fw.t.classify(port, f)
	if d.reason != dropNone {
		return d
	}
	data := f.Data
	members := fw.t.vlans[d.in.vlan].members
	self := uint64(1) << port
	if data[6]&1 == 0 {
		// A group source address is never learned (8.7).
		fw.fdb.learn(d.in.vid, data[6:12], port, now)
	}
	switch {
	case data[0]&1 != 0:
		if isReservedGroup(data) {
			d.reason = dropReservedGroup
			return d
		}
		d.flood, d.egress = true, members&^self
	default:
		if p, ok := fw.fdb.lookup(d.in.vid, data[0:6], now); ok {
			d.egress = uint64(1) << p & members &^ self
		} else {
			d.flood, d.egress = true, members&^self
		}
	}
	if d.egress == 0 {
		d.reason = dropFiltered
	}
	return d
}

// handle forwards one batch received on port, queue q. Frames go out per
// egress port in arrival order, when the batch ends or a port's list is
// full.
func (fw *forwarder) handle(port int, q *queue, frames []hw.Frame) {
	now := fw.now()
	pt := &q.ports[port]
	pt.rx += uint64(len(frames))
	for i := range frames {
		f := &frames[i]
		d := fw.decide(port, f, now)
		var vt *tally
		if d.in.vlan >= 0 {
			vt = &q.vlans[d.in.vlan]
		}
		if d.reason != dropNone {
			pt.drops[d.reason]++
			if vt != nil && d.reason != dropUntaggedNoPVID && d.reason != dropTagMalformed {
				vt.drops[d.reason]++
			}
			continue
		}
		if d.flood {
			pt.flooded++
			vt.flooded++
		} else {
			pt.forwarded++
			vt.forwarded++
		}
		fw.emit(q, f, &d)
	}
	fw.flush(q)
	fw.addTallies(q) // what flush sent
}

// emit queues frame f for each egress port of d, tagged or not as the
// port carries the VLAN. Each variant is built at most once.
func (fw *forwarder) emit(q *queue, f *hw.Frame, d *decision) {
	untaggedPorts := fw.t.vlans[d.in.vlan].untagged
	var plain, tagged []byte
	for m := d.egress; m != 0; m &= m - 1 {
		p := bits.TrailingZeros64(m)
		untag := untaggedPorts&(1<<p) != 0
		var b []byte
		for try := 0; b == nil; try++ {
			switch {
			case untag && plain != nil:
				b = plain
			case untag:
				plain = q.build(f, &d.in, false)
				b = plain
			case tagged != nil:
				b = tagged
			default:
				tagged = q.build(f, &d.in, true)
				b = tagged
			}
			if b != nil {
				break
			}
			if try == 1 {
				// Larger than the scratch space: cannot happen with
				// frames from a ring.
				q.ports[p].drops[dropTx]++
				break
			}
			// Scratch is full: send what refers to it and start again.
			fw.flush(q)
			plain, tagged = nil, nil
		}
		if b == nil {
			continue
		}
		q.out[p] = append(q.out[p], b)
		if len(q.out[p]) == cap(q.out[p]) {
			fw.addTallies(q)
			fw.write(q, p)
		}
	}
}

// build returns f as it leaves a port: untagged, or with a C-tag of the
// frame's VID and priority. A frame that leaves as it came is returned as
// is; otherwise it is built in q's scratch space. build returns nil when
// the scratch space is full.
func (q *queue) build(f *hw.Frame, in *ingress, tag bool) []byte {
	d := f.Data
	if !tag && !in.hasOuter && in.restOff == 12 {
		return d
	}
	rest := d[in.restOff:]
	n := 12 + len(rest)
	if tag {
		n += hw.VLANTagLen
	}
	if in.hasOuter {
		n += hw.VLANTagLen
	}
	s := q.scratch
	if cap(s)-len(s) < n {
		return nil
	}
	b := s[len(s) : len(s)+n : len(s)+n]
	o := copy(b, d[:12])
	if tag {
		binary.BigEndian.PutUint16(b[o:], TPIDCTag)
		binary.BigEndian.PutUint16(b[o+2:], in.prio|in.vid)
		o += hw.VLANTagLen
	}
	if in.hasOuter {
		binary.BigEndian.PutUint32(b[o:], in.outer)
		o += hw.VLANTagLen
	}
	copy(b[o:], rest)
	q.scratch = s[:len(s)+n]
	return b
}

// write sends the frames queued for port p.
func (fw *forwarder) write(q *queue, p int) {
	out := q.out[p]
	if len(out) == 0 {
		return
	}
	n, _ := fw.writers[p].WriteFrames(out)
	// WriteFrames counts its own errors; the data path only counts.
	q.ports[p].tx += uint64(n)
	if n < len(out) {
		q.ports[p].drops[dropTx] += uint64(len(out) - n)
	}
	clear(out)
	q.out[p] = out[:0]
}

// flush sends everything queued and frees the scratch space. Like every
// write, it first adds the queue's counts to the counters, so that a frame
// a receiver saw is already counted (TxFrames excepted: it is known only
// after the write).
func (fw *forwarder) flush(q *queue) {
	fw.addTallies(q)
	for p := range q.out {
		fw.write(q, p)
	}
	q.scratch = q.scratch[:0]
}

func (fw *forwarder) addTallies(q *queue) {
	for i := range q.ports {
		fw.ports[i].add(&q.ports[i])
	}
	for i := range q.vlans {
		fw.vlans[i].add(&q.vlans[i])
	}
}

// stats returns a snapshot of the counters; names are the ports' names.
func (fw *forwarder) stats(names []string) Stats {
	st := Stats{
		Ports:      make([]PortStats, len(fw.ports)),
		VLANs:      make([]VLANStats, len(fw.vlans)),
		FDBEntries: fw.fdb.len(),
	}
	for i := range fw.ports {
		c := &fw.ports[i]
		st.Ports[i] = PortStats{
			Name:      names[i],
			RxFrames:  c.rx.Load(),
			TxFrames:  c.tx.Load(),
			Forwarded: c.forwarded.Load(),
			Flooded:   c.flooded.Load(),
			Drops:     c.dropMap(),
		}
	}
	for i := range fw.vlans {
		c := &fw.vlans[i]
		st.VLANs[i] = VLANStats{
			VID:       fw.t.vlans[i].vid,
			Forwarded: c.forwarded.Load(),
			Flooded:   c.flooded.Load(),
			Drops:     c.dropMap(),
		}
	}
	return st
}
