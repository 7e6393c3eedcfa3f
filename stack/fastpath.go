package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// The fast path, stack half (natengine.FastPathAt is the engine half): a
// frame of a flow the engine has offloaded is rewritten in place and goes
// straight to its egress endpoint's transmit batch, never touching
// netstack. In the order a frame meets it:
//
//   - fastCandidate: a whole untagged frame to the interface's MAC;
//     completePartialInPlace completes a CHECKSUM_PARTIAL checksum first
//     (the engine patches checksums incrementally).
//   - fastForward: the engine's lookup and rewrite; a hit is added to the
//     receive run's fastRun (forwardNew in nexthop.go adds a new flow's
//     packets the same way).
//   - fastRun.beforeSlow: before a frame goes to the slow path, the run's
//     frames go into their egress batches first (flush, appendFastLocked),
//     so a flow that leaves the fast path keeps its order.
//   - at the end of the run (or of the trunk's port batch): sendWaiting
//     or sendSet.send sends each egress batch (Endpoint.flushTx in
//     endpoint.go), before the ring block goes back to the kernel.

// fastCandidate reports whether f may take the fast path: a whole,
// untagged frame to e's own MAC.
func fastCandidate(f *hw.Frame, mac tcpip.LinkAddress) bool {
	return !f.VLANValid && f.WireLen <= len(f.Data) && len(f.Data) >= header.EthernetMinimumSize &&
		string(f.Data[:header.EthernetAddressSize]) == string(mac)
}

// completePartialInPlace completes the L4 checksum of a CHECKSUM_PARTIAL
// IPv4/IPv6 TCP or UDP frame (untagged) in place and reports whether the
// frame now carries a full checksum. Anything it cannot parse is left to
// classify, which drops or passes it as before.
func completePartialInPlace(frame []byte) bool {
	if len(frame) < header.EthernetMinimumSize {
		return false
	}
	ip := frame[header.EthernetMinimumSize:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) < header.IPv4MinimumSize || ip[0]>>4 != 4 {
			return false
		}
		h, l4, ok := ipv4Parts(ip)
		if !ok || h.More() || h.FragmentOffset() != 0 {
			return false
		}
		completePartialChecksum(h.Protocol(), l4)
		return true
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
			return false
		}
		end := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
		if end > len(ip) {
			return false
		}
		proto, off, ok := ipv6Transport(ip[:end])
		if !ok {
			return false
		}
		completePartialChecksum(proto, ip[off:end])
		return true
	}
	return false
}

// isTCPFrame reports whether an untagged frame carries IPv4 or IPv6 TCP
// (IPv6 only without extension headers).
func isTCPFrame(frame []byte) bool {
	ip := frame[header.EthernetMinimumSize:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		return len(ip) > 9 && ip[9] == protoTCP
	case uint16(header.IPv6ProtocolNumber):
		return len(ip) > 6 && ip[6] == protoTCP
	}
	return false
}

// fastForward tries the fast path on frame, received on e with priority
// pcp (-1: untagged), at engine time run.now. It reports whether the frame
// was taken: added to run for its egress endpoint (run.hits counts it), or
// dropped and counted.
func (e *Endpoint) fastForward(frame []byte, pcp int, nat *natengine.Engine, run *fastRun) bool {
	out, ok := nat.FastPathAt(frame, natIface(e.nicID), run.now)
	if !ok {
		return false
	}
	run.hits++
	tab := e.egress.Load()
	var oe *Endpoint
	if tab != nil {
		oe = tab.get(out)
	}
	if oe == nil {
		if lw := e.fastLink(out); lw != nil {
			// Into a link (linkfast.go): written now, so it stays in
			// order with the slow path's packets after it.
			lw.WriteFast(frame[header.EthernetMinimumSize : header.EthernetMinimumSize+ipLength(frame)])
			return true
		}
		// The egress NIC went away after the flow was offloaded (Apply
		// invalidates the fast path; this is the race in between).
		e.stats.drop(dropNoEgress)
		return true
	}
	run.add(oe, frame[:header.EthernetMinimumSize+ipLength(frame)], pcp)
	return true
}

// ipLength is the IP packet length of an untagged Ethernet frame that the
// fast path accepted (so the header is sane): it trims link padding.
func ipLength(frame []byte) int {
	ip := frame[header.EthernetMinimumSize:]
	if ip[0]>>4 == 4 {
		return int(binary.BigEndian.Uint16(ip[2:]))
	}
	return header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
}

// fastRunLen is how many fast-path frames a receive run collects before
// handing them to their egress endpoints.
const fastRunLen = 32

// fastRun collects the fast path's frames of one receive run, so that each
// egress endpoint's transmit lock is taken once per run rather than once
// per frame (two receive queues feeding one egress contend on it). It
// lives on the receive goroutine's stack.
type fastRun struct {
	// now is the engine's clock, read once per run; hits counts the
	// run's fast-path packets, added to the engine's counter once.
	now  int64
	hits uint64

	n      int
	eps    [fastRunLen]*Endpoint
	frames [fastRunLen][]byte
	pcps   [fastRunLen]int8
	// supers holds the GSO metadata of the run's superframes, by index;
	// valid iff isSuper (superframe.go).
	supers  [fastRunLen]hw.GSO
	isSuper [fastRunLen]bool
	// copying makes add mark its frames for copying (copied), so that
	// they never stay views of the caller's memory: the segments of a
	// superframe live in a buffer the next segment reuses
	// (handleSuperframe flushes the run after each).
	copying bool
	copied  [fastRunLen]bool

	// waiting holds the endpoints with this run's frames unsent in their
	// pending batch, which the run sends itself; slow counts the
	// slow-path frames handled since the oldest of them.
	waiting sendSet
	slow    int

	// nextHop counts the run's frames forwarded by the next-hop cache,
	// added to the ingress endpoint's counter once per run.
	nextHop uint64
}

// fastLatencySlowFrames is how many slow-path frames (each a netstack
// forward of some microseconds: a SYN flood's new flows) a receive run
// handles before the fast-path frames queued ahead of them are sent.
// Sending before every slow-path frame cuts the established flows'
// batches into pieces of a few frames (one sendmmsg each, and a receiver
// that can no longer coalesce); never sending before the batch's end
// would make them wait behind hundreds of new flows.
const fastLatencySlowFrames = 16

func (r *fastRun) add(e *Endpoint, frame []byte, pcp int) {
	if r.n == fastRunLen {
		r.flush()
	}
	r.eps[r.n], r.frames[r.n], r.pcps[r.n] = e, frame, int8(pcp)
	r.isSuper[r.n], r.copied[r.n] = false, r.copying
	r.n++
}

// addSuper is add for a superframe with its GSO metadata from the port.
func (r *fastRun) addSuper(e *Endpoint, frame []byte, pcp int, g *hw.GSO) {
	if r.n == fastRunLen {
		r.flush()
	}
	r.eps[r.n], r.frames[r.n], r.pcps[r.n] = e, frame, int8(pcp)
	r.isSuper[r.n], r.supers[r.n], r.copied[r.n] = true, *g, r.copying
	r.n++
}

// beforeSlow runs before a frame of the run goes to the slow path. The
// run's frames move into their egress batches first, so a flow that
// leaves the fast path (FIN, a stale offload) keeps its order: netstack's
// forward of this frame is appended after them. Every
// fastLatencySlowFrames slow-path frames, the frames waiting in those
// batches are sent, so established flows do not wait behind the slow
// path's work on the rest of a batch (a SYN flood puts hundreds of new
// flows in one).
func (r *fastRun) beforeSlow() {
	if r.n > 0 {
		r.flush()
	}
	if r.waiting.n == 0 {
		return
	}
	r.slow++
	if r.slow >= fastLatencySlowFrames {
		r.sendWaiting()
	}
}

// flush hands the collected frames to their endpoints, in order per
// endpoint: into their pending batch, which the run sends later
// (sendWaiting), or at once outside a receive batch or when the run
// tracks too many endpoints.
func (r *fastRun) flush() {
	for i := 0; i < r.n; i++ {
		e := r.eps[i]
		if e == nil {
			continue
		}
		e.txMu.Lock()
		w := e.writer.Load()
		for j := i; j < r.n; j++ {
			if r.eps[j] == e {
				if r.isSuper[j] {
					e.appendSuperLocked(w, r.frames[j], int(r.pcps[j]), &r.supers[j], r.copied[j])
				} else {
					e.appendFastLocked(w, r.frames[j], int(r.pcps[j]), r.copied[j])
				}
				r.eps[j], r.frames[j] = nil, nil
			}
		}
		if len(e.pending.frames) > 0 {
			send := e.tx == nil || !e.tx.deferring()
			if send || !r.waiting.add(e) {
				e.sendPendingLocked(w)
			}
		}
		e.txMu.Unlock()
	}
	r.n = 0
}

// appendFastLocked adds a rewritten untagged frame to e's transmit batch,
// with e's VLAN tags after the MAC addresses. A forwarded frame keeps the
// priority it arrived with (pcp, 0..7) in every tag; pcp -1 (it came
// untagged) takes e's own. copied makes it copy the frame even where it
// could be sent from where it is. A full batch is sent at once. e.txMu
// must be held; w is e's writer.
func (e *Endpoint) appendFastLocked(w *frameWriter, frame []byte, pcp int, copied bool) {
	if w == nil || !e.up.Load() {
		e.stats.drop(dropLinkDown)
		return
	}
	v := e.vlan.Load()
	ps, pad := e.pppoeOut()
	if pad > 0 && ps == nil {
		e.stats.drop(dropPPPoEDown)
		return
	}
	size := int(e.mtu.Load()) + maxHeaderLength + pad
	n := len(frame) + v.n + pad
	if n > size {
		e.stats.drop(dropTxOversize)
		return
	}
	var (
		buf *[]byte
		out []byte
	)
	if e.tx != nil && e.tx.deferring() && !copied {
		// Inside a receive batch: send the frame from the receive ring
		// itself, as hw.Bridge does. The batch's end (txBatcher.end,
		// before the ring block goes back to the kernel) or an earlier
		// flush sends it; nothing keeps it afterwards. Untagged it goes
		// as it is; tags are pushed in place where the writer lends the
		// room before the frame (inplace.go). Without room around it an
		// in-place writer (MACsec) gets this batch through WriteFrames
		// and builds each protected frame in its own storage, which
		// costs no more than copying the frame into a buffer with room
		// first.
		if v.n+pad == 0 {
			out = frame
		} else if x := w.extendFrame(frame, v.n+pad); x != nil {
			pushTagsInPlace(x[pad:], v, pcp)
			out = x
		}
	}
	if out == nil {
		buf = e.getBuf(w.head + size + w.tail)
		out = (*buf)[w.head : w.head+n]
		copy(out[pad:], frame[:12])
		putTags(out[pad+12:pad+12+v.n], v, pcp)
		copy(out[pad+12+v.n:], frame[12:])
	}
	if pad > 0 && !e.encapPPPoE(out, ps) {
		if buf != nil {
			e.putBuf(buf)
		}
		return
	}
	b := &e.pending
	b.add(out, buf)
	// No txDirty: the receive run that queued the frame sends it itself
	// (fastRun.flush sends at once or records e for sendWaiting), so
	// another goroutine's batch end does not take the send over while
	// this run keeps queueing behind e's lock.
	if len(b.frames) >= hw.TxBatchSize {
		e.sendPendingLocked(w)
	}
}

// sendSet is a small set of endpoints whose pending batches hold unsent
// fast-path frames: a run's, or a trunk's over a port batch (sent once at
// the batch's end).
type sendSet struct {
	eps [8]*Endpoint
	n   int
}

// add records e; false if the set is full (the caller then sends e's
// batch at once).
func (s *sendSet) add(e *Endpoint) bool {
	for _, have := range s.eps[:s.n] {
		if have == e {
			return true
		}
	}
	if s.n == len(s.eps) {
		return false
	}
	s.eps[s.n] = e
	s.n++
	return true
}

// take moves run's endpoints into s, sending those that do not fit.
func (s *sendSet) take(run *fastRun) {
	for _, e := range run.waiting.eps[:run.waiting.n] {
		if !s.add(e) {
			e.flushTx()
		}
	}
	run.waiting = sendSet{}
	run.slow = 0
}

// send sends every endpoint's batch and empties s.
func (s *sendSet) send() {
	for _, e := range s.eps[:s.n] {
		e.flushTx()
	}
	*s = sendSet{}
}

// sendWaiting sends the batches holding the run's unsent frames. The
// receive path calls it at the end of every run (before the ring block
// goes back to the kernel: the frames may be views of it).
func (r *fastRun) sendWaiting() {
	r.waiting.send()
	r.slow = 0
}

// queueFastFrame is one frame's fastRun: add and flush.
func (e *Endpoint) queueFastFrame(frame []byte, pcp int) {
	var r fastRun
	r.add(e, frame, pcp)
	r.flush()
	r.sendWaiting()
}
