package stack

import "encoding/binary"

// Forwarding in the receive buffer.
//
// The fast path and the next-hop cache rewrite a forwarded frame where it
// was received and, while the port's receive batch runs, hand that view
// to the egress writer (appendFastLocked). An untagged frame goes as it
// is. A frame that needs bytes in front of it (the egress interface's
// VLAN tags, a PPPoE session header, a SecTAG) used to be copied into a
// buffer with room first; a writer that can send from the memory the
// frame arrived in instead lends the bytes before the frame
// (ExtendFrame), so the headers are pushed in place and the frame leaves
// from its receive buffer: an af_xdp port on a UMEM it shares with the
// ingress port (hw/xdpport) without any copy, an AF_PACKET port over any
// port's receive ring (hw.Port, whose rings keep hw.RingHeadroom before
// each frame) with sendmmsg's copy into the skb as the only one. A
// writer that cannot (another UMEM, memory outside the rings) returns
// nil, and the frame is copied as before.

// frameExtender is a FrameWriter that sends frames from the memory they
// were received in (hw.Port, hw/xdpport.Port, and what wraps one:
// capture.Writer, MACsecLink). The endpoint finds it by type assertion.
type frameExtender interface {
	// ExtendFrame returns frame grown by head octets at its front, in
	// the same memory (frame's first octet at index head, capacity to
	// the end of its buffer), if frame lies in memory the writer sends
	// from without a copy and has that much room before it; nil
	// otherwise. Valid while the frame's receive batch runs.
	ExtendFrame(frame []byte, head int) []byte
}

// extendFrame is w's ExtendFrame, nil for a writer that has none.
func (w *frameWriter) extendFrame(frame []byte, head int) []byte {
	if w.ext == nil {
		return nil
	}
	return w.ext.ExtendFrame(frame, head)
}

// pushTagsInPlace makes an untagged frame lying at x[v.n:] a tagged one
// starting at x[0]: the MAC addresses move v.n octets forward (copy is a
// memmove), the tags go between them and the EtherType. pcp is as for
// appendFastLocked.
func pushTagsInPlace(x []byte, v *egressVLAN, pcp int) {
	copy(x[:12], x[v.n:v.n+12])
	putTags(x[12:], v, pcp)
}

// putTags writes v's tags at out, with priority pcp (0..7) in every tag
// unless pcp is -1 or v's own.
func putTags(out []byte, v *egressVLAN, pcp int) {
	copy(out, v.tags[:v.n])
	if pcp >= 0 && int(v.pcp) != pcp {
		for off := 2; off < v.n; off += vlanTagLength {
			tci := binary.BigEndian.Uint16(out[off:])
			binary.BigEndian.PutUint16(out[off:], tci&^pcpMask|uint16(pcp)<<13)
		}
	}
}

// ExtendFrame implements frameExtender for the upper interface: the room
// before a frame is the lower interface's writer's to give, since the
// SecY seals frames for it (WriteFramesInPlace on a frame from a receive
// buffer).
func (l *MACsecLink) ExtendFrame(frame []byte, head int) []byte {
	lower := l.lower.Load()
	if lower == nil {
		return nil
	}
	w := lower.writer.Load()
	if w == nil {
		return nil
	}
	return w.extendFrame(frame, head)
}

var _ frameExtender = (*MACsecLink)(nil)
