package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// Superframes.
//
// A local sender with TSO or GSO on (a veth peer, a tap, a virtio NIC)
// hands a port with vnet headers frames of up to 64 KiB that stand for
// many wire frames: hw.Frame.GSO says how to cut them (TCP over IPv4 or
// IPv6 at an MSS, or UDP datagrams of a size) and that their checksum is
// partial (the pseudo-header sum only). They flow like this:
//
//   - receive: handleSuperframe checks the frame's headers against its
//     GSO metadata (a mismatch, IPv4 options or IPv6 extension headers are
//     "gso_malformed" drops), then offers it to the fast path whole
//     (natengine.FastPathMetaAt: one rewrite for the whole superframe, the
//     egress MTU checked per segment, the partial checksum patched for
//     the new addresses only). Anything else, a flow not offloaded yet or
//     traffic for the router, is cut into wire frames first (segmenter,
//     complete checksums) and each goes the way of any frame: netstack
//     never sees a superframe.
//   - transmit (appendSuperLocked): an egress whose writer takes
//     superframes whole (a port with vnet headers: hw.GSOWriter) gets it
//     whole, with a fresh virtio-net header (the checksum offsets moved
//     by the egress tags); the kernel or the NIC cuts it, or a veth hands
//     it to its peer as it is, and nothing on the way computes a checksum
//     over the payload. Any other egress (MACsec, a port without vnet
//     headers, an AF_XDP port, the TX ring), and every UDP superframe
//     (kernels before 6.2 refuse USO on a packet socket), gets it cut in
//     software into frames of its MTU with complete checksums.

// superframe is what checkSuperframe found: the IP and L4 header lengths
// and whether it is UDP.
type superframe struct {
	ipLen, l4Len int
	udp          bool
}

// checkSuperframe checks an untagged superframe's headers against its
// GSO metadata: the family and protocol its type names (IPv4 without
// options or fragmentation, IPv6 without extension headers), whole L3 and
// L4 headers inside the frame, and a partial checksum exactly at the L4
// checksum.
func checkSuperframe(f *hw.Frame) (s superframe, ok bool) {
	d := f.Data
	g := &f.GSO
	if len(d) < header.EthernetMinimumSize {
		return s, false
	}
	ip := d[header.EthernetMinimumSize:]
	var proto uint8
	var end int
	switch binary.BigEndian.Uint16(d[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		if g.Type == hw.GSOTCPv6 || len(ip) < header.IPv4MinimumSize || ip[0] != 0x45 ||
			binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return s, false
		}
		s.ipLen, proto, end = header.IPv4MinimumSize, ip[9], int(binary.BigEndian.Uint16(ip[2:]))
	case uint16(header.IPv6ProtocolNumber):
		if g.Type == hw.GSOTCPv4 || len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
			return s, false
		}
		s.ipLen, proto = header.IPv6MinimumSize, ip[6]
		end = header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
	default:
		return s, false
	}
	if end > len(ip) {
		return s, false
	}
	csumOff := header.TCPChecksumOffset
	switch {
	case proto == protoTCP && g.Type != hw.GSOUDPL4:
		if end < s.ipLen+header.TCPMinimumSize {
			return s, false
		}
		s.l4Len = int(ip[s.ipLen+12]>>4) * 4
		if s.l4Len < header.TCPMinimumSize {
			return s, false
		}
	case proto == protoUDP && g.Type == hw.GSOUDPL4:
		s.udp, s.l4Len, csumOff = true, header.UDPMinimumSize, udpChecksumOffset
	default:
		return s, false
	}
	if s.ipLen+s.l4Len > end {
		return s, false
	}
	if g.NeedsCsum && (int(g.CsumStart) != header.EthernetMinimumSize+s.ipLen || int(g.CsumOffset) != csumOff) {
		return s, false
	}
	return s, true
}

// handleSuperframe takes a superframe through the fast path whole or, on
// a miss, cuts it into wire frames for handleFrame.
func (e *Endpoint) handleSuperframe(f *hw.Frame, r *rxRun) {
	e.stats.gsoReceived.Add(1)
	if _, ok := checkSuperframe(f); !ok {
		e.stats.drop(dropGSOMalformed)
		return
	}
	if r.nat != nil && fastCandidate(f, r.mac) && e.fastForwardSuper(f, r) {
		return
	}
	r.run.beforeSlow()
	seg, ok := newSegmenter(f.Data, header.EthernetMinimumSize, int(f.GSO.Size), r.mtu)
	if !ok {
		// A UDP datagram larger than the interface's MTU allows.
		e.stats.drop(dropGSOMalformed)
		return
	}
	e.stats.gsoSegmented.Add(1)
	buf := e.getBuf(seg.hdrLen() + seg.mss)
	// The segments take turns in buf: the run copies the ones it queues
	// for an egress (copying) and sends them on before the next.
	r.run.copying = true
	for i := range seg.count() {
		n := seg.segment(i, *buf)
		sf := hw.Frame{
			Data:       (*buf)[:n],
			WireLen:    n,
			CsumValid:  true, // computed just now, over data a local sender gave
			VLANTCI:    f.VLANTCI,
			VLANTPID:   f.VLANTPID,
			Backlogged: f.Backlogged,
		}
		e.handleFrame(&sf, r)
		if r.run.n > 0 {
			r.run.flush()
		}
	}
	r.run.copying = false
	e.putBuf(buf)
}

// fastForwardSuper is fastForward for a superframe that checkSuperframe
// accepted.
func (e *Endpoint) fastForwardSuper(f *hw.Frame, r *rxRun) bool {
	m := natengine.FrameMeta{SegmentSize: int(f.GSO.Size), PartialCsum: f.GSO.NeedsCsum}
	out, ok := r.nat.FastPathMetaAt(f.Data, r.in, r.run.now, m)
	if !ok {
		return false
	}
	r.run.hits++
	tab := e.egress.Load()
	var oe *Endpoint
	if tab != nil {
		oe = tab.get(out)
	}
	if oe == nil {
		if lw := e.fastLink(out); lw != nil {
			e.superToLink(f, lw)
			return true
		}
		e.stats.drop(dropNoEgress)
		return true
	}
	r.run.addSuper(oe, f.Data[:header.EthernetMinimumSize+ipLength(f.Data)], ingressPCP(f), &f.GSO)
	return true
}

// appendSuperLocked adds a superframe the fast path rewrote (untagged,
// its checks passed on receive; g is its GSO metadata from the port) to
// e's transmit batch: whole, with a virtio-net header, if e's writer takes
// it, else cut into frames of e's MTU. Tags and priority as
// appendFastLocked. e.txMu must be held; w is e's writer.
func (e *Endpoint) appendSuperLocked(w *frameWriter, frame []byte, pcp int, g *hw.GSO, copied bool) {
	if w == nil || !e.up.Load() {
		e.stats.drop(dropLinkDown)
		return
	}
	v := e.vlan.Load()
	b := &e.pending
	fr := hw.Frame{Data: frame, GSO: *g}
	s, ok := checkSuperframe(&fr)
	if !ok {
		e.stats.drop(dropGSOMalformed)
		return
	}
	ps, pad := e.pppoeOut()
	if pad > 0 && ps == nil {
		e.stats.drop(dropPPPoEDown)
		return
	}
	// A PPPoE session's superframe is cut here: no kernel segments PPPoE.
	if w.gso != nil && !s.udp && len(frame)+v.n <= w.gsoMax && pad == 0 {
		var (
			buf *[]byte
			out []byte
		)
		if e.tx != nil && e.tx.deferring() && !copied {
			// From the receive ring, as appendFastLocked: untagged as
			// it is, tagged in place where the writer lends the room.
			if v.n == 0 {
				out = frame
			} else if x := w.extendFrame(frame, v.n); x != nil {
				pushTagsInPlace(x, v, pcp)
				out = x
			}
		}
		if out == nil {
			buf = e.getBigBuf(len(frame) + v.n)
			out = (*buf)[:len(frame)+v.n]
			copy(out, frame[:12])
			putTags(out[12:12+v.n], v, pcp)
			copy(out[12+v.n:], frame[12:])
		}
		l3 := header.EthernetMinimumSize + v.n
		tg := hw.GSO{
			Type: g.Type, ECN: g.ECN, Size: g.Size,
			HdrLen:     uint16(l3 + s.ipLen + s.l4Len),
			NeedsCsum:  true,
			CsumStart:  uint16(l3 + s.ipLen),
			CsumOffset: header.TCPChecksumOffset,
		}
		if !g.NeedsCsum {
			// A superframe with a complete checksum: the segmenting
			// kernel wants the pseudo-header sum there.
			setPseudoSum(out[l3:], s.ipLen)
		}
		b.addGSO(out, buf, &tg)
		e.stats.gsoSent.Add(1)
		if len(b.frames) >= hw.TxBatchSize {
			e.sendPendingLocked(w)
		}
		return
	}
	mtu := int(e.mtu.Load())
	seg, ok := newSegmenter(frame, header.EthernetMinimumSize, int(g.Size), mtu)
	if !ok {
		e.stats.drop(dropGSOMalformed)
		return
	}
	e.stats.gsoSegmented.Add(1)
	size := mtu + maxHeaderLength
	for i := range seg.count() {
		buf := e.getBuf(w.head + pad + size + w.tail)
		d := (*buf)[w.head:]
		n := seg.segment(i, d[pad+v.n:]) + v.n
		if v.n > 0 {
			pushTagsInPlace(d[pad:pad+n], v, pcp)
		}
		if pad > 0 && !e.encapPPPoE(d[:pad+n], ps) {
			e.putBuf(buf)
			continue
		}
		b.add(d[:pad+n], buf)
		if len(b.frames) >= hw.TxBatchSize {
			e.sendPendingLocked(w)
		}
	}
}

// setPseudoSum stores in the TCP checksum field of ip (TCP after ipLen
// bytes of IP header) the sum of its pseudo-header: the partial checksum
// a CHECKSUM_PARTIAL sender leaves there.
func setPseudoSum(ip []byte, ipLen int) {
	var src, dst []byte
	var l4 int
	if ipLen == header.IPv6MinimumSize {
		src, dst, l4 = ip[8:24], ip[24:40], int(binary.BigEndian.Uint16(ip[4:]))
	} else {
		src, dst, l4 = ip[12:16], ip[16:20], int(binary.BigEndian.Uint16(ip[2:]))-ipLen
	}
	binary.BigEndian.PutUint16(ip[ipLen+header.TCPChecksumOffset:], pseudoHeaderSum(src, dst, protoTCP, l4))
}

// bigBufSize is the capacity of a buffer for a superframe sent whole with
// tags inserted.
const bigBufSize = hw.MaxGSOFrameLen + maxHeaderLength

// getBigBuf returns a pooled superframe buffer with room for size bytes.
func (e *Endpoint) getBigBuf(size int) *[]byte {
	if p, ok := e.bigPool.Get().(*[]byte); ok && cap(*p) >= size {
		*p = (*p)[:size]
		return p
	}
	b := make([]byte, size, max(size, bigBufSize))
	return &b
}

// putBuf returns a frame buffer to its pool: a superframe's to bigPool.
func (e *Endpoint) putBuf(b *[]byte) {
	if cap(*b) >= bigBufSize {
		e.bigPool.Put(b)
		return
	}
	e.bufPool.Put(b)
}
