package stack

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gvrouter/gvrouter/hw"
)

// MACsec interfaces.
//
// A SecY (package macsec) sits on an interface, the lower one, and is an
// interface of its own, the upper one (Linux: `ip link add link eth0.2 ms1
// type macsec`). A MACsecLink joins the three:
//
//   - receive: the lower endpoint's trunk run (Trunk.HandleBatch) hands
//     frames with EtherType 0x88E5 to SecY.Verify; the frames it delivers
//     (SecTAG and ICV removed) go to the upper endpoint's validation and
//     delivery, as if they had come from a port. Frames without a SecTAG
//     stay with the lower interface (Linux's uncontrolled port); the SecY
//     sees them too, to count them and, unless validate is strict, to
//     deliver them on its own interface as well, as Linux does.
//   - transmit: the upper endpoint's FrameWriter is the MACsecLink. The
//     endpoint builds its frames with room for the SecTAG before them and
//     the ICV after them (FrameRoom), and WriteFramesInPlace has the SecY
//     protect them where they are (SecY.ProtectInPlace); a batch with a
//     frame sent from ring memory goes through WriteFrames and
//     SecY.Protect instead. The protected frames come back through
//     Transmit, which pushes the lower interface's VLAN tags after the MAC
//     addresses and hands them to the lower interface's FrameWriter.
//
// Verify and Protect return only when their frames were delivered, so the
// receive path keeps the txBatcher bracket of the port batch around the
// upper endpoint's deliveries, and frames forwarded out of ms1 leave in
// one Protect call per batch.

// etherTypeMACsec is the MACsec EtherType (IEEE 802.1AE clause 9.2).
const etherTypeMACsec = 0x88e5

// SecY is the part of a macsec.SecY a MACsecLink uses. Both methods are
// synchronous: they return once every frame was handed to the SecY's
// handlers or dropped, and they do not keep the frames.
type SecY interface {
	// Protect protects frames and hands them to the TX handler
	// (MACsecLink.Transmit) in order.
	Protect(frames [][]byte)
	// ProtectInPlace is Protect on frames built with room around them:
	// each element holds macsecHeadroom octets of scratch, then the
	// frame, with macsecTailroom octets of capacity after it. The
	// protected frame is built in that buffer, with no copy.
	ProtectInPlace(bufs [][]byte)
	// Verify verifies frames in place and hands the accepted ones, SecTAG
	// and ICV removed, to the RX handler (MACsecLink.Receive). Frames
	// without a SecTAG are counted and, unless validateFrames is strict,
	// handed to the RX handler unchanged; Verify must not modify them.
	Verify(frames [][]byte)
}

// MACsecLink joins a SecY to the interface below it and to its own
// interface. Build it with NewMACsecLink, give its Transmit and Receive to
// the SecY as handlers, set the SecY with SetSecY, use the link as the
// upper interface's InterfaceConfig.Writer and join it to both
// interfaces with Netstack.BindMACsec. MACsecLink is safe for concurrent
// use.
type MACsecLink struct {
	secy  atomic.Pointer[secyBox]
	lower atomic.Pointer[Endpoint]
	upper atomic.Pointer[Endpoint]

	// scratch holds *macsecScratch for the receive path.
	scratch sync.Pool

	// txMu protects txBufs and txFrames, the tag-pushing scratch of
	// Transmit.
	txMu     sync.Mutex
	txBufs   [][]byte
	txFrames [][]byte

	// noLower counts frames that found no lower interface (transmit) or
	// no upper one (receive).
	noLower, noUpper atomic.Uint64
}

var _ hw.FrameWriter = (*MACsecLink)(nil)

type secyBox struct{ SecY }

// macsecScratch is the per-call scratch of the receive path.
type macsecScratch struct {
	frames [][]byte
	hw     []hw.Frame
}

// NewMACsecLink returns a link with no SecY and no interfaces.
func NewMACsecLink() *MACsecLink {
	l := &MACsecLink{}
	l.scratch.New = func() any {
		return &macsecScratch{frames: make([][]byte, 0, hw.TxBatchSize), hw: make([]hw.Frame, 0, hw.TxBatchSize)}
	}
	return l
}

// SetSecY makes s the link's SecY; nil detaches it (frames are then
// dropped and counted).
func (l *MACsecLink) SetSecY(s SecY) {
	if s == nil {
		l.secy.Store(nil)
		return
	}
	l.secy.Store(&secyBox{s})
}

// FrameRoom implements inPlaceWriter: the upper endpoint builds its
// frames with room for the SecTAG before them and the ICV after them, so
// that the SecY protects them where they are instead of copying each one
// into a frame of its own (integrity-only frames were otherwise copied
// once more than encrypted ones).
func (l *MACsecLink) FrameRoom() (head, tail int) { return macsecHeadroom, macsecTailroom }

// WriteFramesInPlace implements inPlaceWriter: it protects bufs in place
// (SecY.ProtectInPlace), which hands them to Transmit. It does not keep
// them.
func (l *MACsecLink) WriteFramesInPlace(bufs [][]byte) (int, error) {
	b := l.secy.Load()
	if b == nil {
		return 0, errNoSecY
	}
	b.ProtectInPlace(bufs)
	return len(bufs), nil
}

// errNoSecY is returned by WriteFrames and WriteFramesInPlace while the
// link has no SecY.
var errNoSecY = errors.New("stack: macsec link has no SecY")

// WriteFrames implements hw.FrameWriter for the upper interface: it
// protects frames with the SecY, which hands them to Transmit. It does not
// keep frames.
func (l *MACsecLink) WriteFrames(frames [][]byte) (int, error) {
	b := l.secy.Load()
	if b == nil {
		return 0, errNoSecY
	}
	b.Protect(frames)
	return len(frames), nil
}

// Transmit is the SecY's TX handler: it sends protected frames on the
// lower interface, with the lower interface's VLAN tags pushed after the
// MAC addresses (IEEE 802.1AE clause 11: the SecY sits above the VLAN
// tagging of its interface). It counts them in the lower interface's
// transmit counters; frames the lower port refuses are counted there as
// tx_error.
func (l *MACsecLink) Transmit(frames [][]byte) {
	lower := l.lower.Load()
	if lower == nil {
		l.noLower.Add(uint64(len(frames)))
		return
	}
	w := lower.writer.Load()
	if w == nil || !lower.up.Load() {
		lower.stats.drops[dropLinkDown].Add(uint64(len(frames)))
		return
	}
	v := lower.vlan.Load()
	if v.n == 0 {
		lower.countTx(w, frames)
		return
	}
	l.txMu.Lock()
	defer l.txMu.Unlock()
	out := l.txFrames[:0]
	for i, f := range frames {
		if len(f) < 12 {
			lower.stats.drop(dropTruncated)
			continue
		}
		if x := w.extendFrame(f, v.n); x != nil {
			// Sealed in a receive buffer the lower port sends from:
			// the tags go in front, in place (inplace.go).
			pushTagsInPlace(x, v, -1)
			out = append(out, x)
			continue
		}
		if i >= len(l.txBufs) {
			l.txBufs = append(l.txBufs, nil)
		}
		n := len(f) + v.n
		if cap(l.txBufs[i]) < n {
			l.txBufs[i] = make([]byte, max(n, defaultMTU+maxHeaderLength+macsecOverhead))
		}
		b := l.txBufs[i][:n]
		copy(b, f[:12])
		copy(b[12:], v.tags[:v.n])
		copy(b[12+v.n:], f[12:])
		out = append(out, b)
	}
	lower.countTx(w, out)
	clear(out)
	l.txFrames = out[:0]
}

// macsecHeadroom and macsecTailroom are the room SecY.ProtectInPlace
// needs around a frame (macsec.Headroom, macsec.Tailroom): the SecTAG
// with SCI before the Secure Data, the ICV after it.
const (
	macsecHeadroom = 16
	macsecTailroom = 16
)

// macsecOverhead is the most a SecY adds to a frame: a SecTAG with SCI
// (16 octets, EtherType included) and a 16-octet ICV (IEEE 802.1AE
// clause 9; Linux's macsec MTU is the lower MTU minus this).
const macsecOverhead = 32

// MACsecOverhead is how much smaller a SecY's MTU is than its lower
// interface's by default, as with Linux's macsec devices.
const MACsecOverhead = macsecOverhead

// countTx writes frames to w and counts them in e's transmit counters.
func (e *Endpoint) countTx(w *frameWriter, frames [][]byte) {
	if len(frames) == 0 {
		return
	}
	e.captureTx(frames, e.vlan.Load().n)
	n, _ := w.WriteFrames(frames)
	var bytes uint64
	for _, f := range frames[:n] {
		bytes += uint64(len(f))
	}
	e.stats.txPackets.Add(uint64(n))
	e.stats.txBytes.Add(bytes)
	if failed := len(frames) - n; failed > 0 {
		e.stats.drops[dropTxError].Add(uint64(failed))
	}
}

// Receive is the SecY's RX handler: it hands verified frames (SecTAG and
// ICV removed) to the upper interface's validation and delivery. Calls
// for different receive SCs may run concurrently.
func (l *MACsecLink) Receive(frames [][]byte) {
	upper := l.upper.Load()
	if upper == nil {
		l.noUpper.Add(uint64(len(frames)))
		return
	}
	sc := l.scratch.Get().(*macsecScratch)
	for _, f := range frames {
		sc.hw = append(sc.hw, hw.Frame{Data: f, WireLen: len(f)})
	}
	upper.captureRx(sc.hw)
	upper.handleFrames(sc.hw)
	clear(sc.hw)
	sc.hw = sc.hw[:0]
	l.scratch.Put(sc)
}

// divert hands frames (tags already removed by the trunk) to the SecY
// and returns those the lower interface keeps, in order, in frames' own
// memory: MACsec frames (EtherType 0x88E5) go to the SecY only; frames
// without a SecTAG go to both, as with Linux, where the SecY counts them
// (InPktsNoTag with validate strict) or also delivers them to its own
// interface (InPktsUntagged) and the lower device gets them through the
// uncontrolled port. Frames tagged in their metadata, truncated or
// shorter than an Ethernet header are left for the lower endpoint to
// count.
func (l *MACsecLink) divert(e *Endpoint, frames []hw.Frame) []hw.Frame {
	sc := l.scratch.Get().(*macsecScratch)
	k := 0
	var n, bytes uint64
	for i := range frames {
		f := &frames[i]
		d := f.Data
		if f.VLANValid || f.WireLen > len(d) || len(d) <= 14 {
			frames[k] = *f
			k++
			continue
		}
		sc.frames = append(sc.frames, d)
		if d[12] == etherTypeMACsec>>8 && d[13] == etherTypeMACsec&0xff {
			n++
			bytes += uint64(len(d))
			continue
		}
		frames[k] = *f
		k++
	}
	if n > 0 {
		// The lower interface counts what it received, as Linux's lower
		// device does; handleFrames counts the frames that stay.
		e.stats.rxPackets.Add(n)
		e.stats.rxBytes.Add(bytes)
	}
	if len(sc.frames) > 0 {
		if b := l.secy.Load(); b != nil {
			b.Verify(sc.frames)
		} else {
			l.noUpper.Add(n)
		}
	}
	clear(sc.frames)
	sc.frames = sc.frames[:0]
	l.scratch.Put(sc)
	return frames[:k]
}

// Dropped returns the frames the link dropped because an interface or
// the SecY was missing (during a reload).
func (l *MACsecLink) Dropped() uint64 { return l.noLower.Load() + l.noUpper.Load() }

// receive is what a trunk calls for a run of frames of e: MACsec frames
// go to e's SecY, if one sits on e, the rest to e's own delivery.
func (e *Endpoint) receive(frames []hw.Frame, ss *sendSet) {
	e.captureRx(frames)
	if l := e.macsec.Load(); l != nil {
		if frames = l.divert(e, frames); len(frames) == 0 {
			return
		}
	}
	if sh := e.shapeIn.Load(); sh != nil {
		// Download shaping (sqm): the frames come back through
		// DeliverShaped when the shaper lets them go.
		if frames = sh.shapeFrames(frames, int(e.mtu.Load())); len(frames) == 0 {
			return
		}
	}
	e.handleFramesInto(frames, ss)
}

// BindMACsec joins l to the interfaces lower (where the SecY sits) and
// upper (the SecY's own interface, whose Writer is l). Call it again
// after Apply: an interface Apply recreated is a new endpoint.
func (r *Netstack) BindMACsec(l *MACsecLink, lower, upper string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	lo, up := r.ifaces[lower], r.ifaces[upper]
	if lo == nil || up == nil {
		return fmt.Errorf("stack: macsec %s on %s: no such interface", upper, lower)
	}
	l.lower.Store(lo.ep)
	l.upper.Store(up.ep)
	lo.ep.macsec.Store(l)
	return nil
}

// UnbindMACsec removes the SecY from interface lower, if any: MACsec
// frames then reach lower, which drops them as an unknown EtherType.
func (r *Netstack) UnbindMACsec(lower string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lo := r.ifaces[lower]; lo != nil {
		lo.ep.macsec.Store(nil)
	}
}
