package stack

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// Endpoint is the gVisor link endpoint of one interface. Frames come in
// through HandleBatch (a [hw.BatchHandler]) and leave through the
// interface's [hw.FrameWriter].
//
// Endpoint claims TX and RX checksum offload: netstack neither checks nor
// computes L4 checksums. Endpoint checks them itself for packets the router
// terminates and fills them in for packets netstack originates; forwarded
// packets keep the checksums they arrived with.
//
// Endpoint is safe for concurrent use.
type Endpoint struct {
	mtu    atomic.Uint32
	up     atomic.Bool
	writer atomic.Pointer[frameWriter]
	// vlan is the interface's VLAN tags and PCP; never nil.
	vlan atomic.Pointer[egressVLAN]
	// local is the router-wide set of local addresses, shared by all
	// endpoints of one Netstack.
	local *atomic.Pointer[localSet]

	// stack and nicID are set once before the NIC is created; they are
	// used to send ICMP Time Exceeded. stack may be nil (benchmarks).
	stack *stack.Stack
	nicID tcpip.NICID
	// pins is the router's forwardPins; nil in benchmarks.
	pins *forwardPins
	// nat is the router's NAT engine, nil without one; egress maps its
	// interface numbers (NIC IDs) to endpoints. Both set before the NIC
	// exists.
	nat    *natengine.Engine
	egress *atomic.Pointer[egressTable]
	// linkOut maps NIC IDs to the links the fast path writes into.
	linkOut *atomic.Pointer[linkTable]
	// hops is the router's next-hop cache (nexthop.go), nil without NAT.
	hops *nextHopCache
	// frags is the router's fragment guard (fragguard.go); nil in
	// benchmarks. Set before the NIC exists.
	frags *fragFilter

	stats counters

	// gro is the interface's GROMode.
	gro atomic.Uint32
	// inputDrop is InterfaceConfig.DropNewInput.
	inputDrop atomic.Bool
	// admitUDP is InterfaceConfig.AdmitUDP, nil when empty.
	admitUDP atomic.Pointer[[]uint16]
	// ingress is the interface's source filter, nil without
	// InterfaceConfig.IngressFilter; egressFilter is the inside set of
	// an EgressFilter interface, nil otherwise (srcfilter.go).
	ingress      atomic.Pointer[sourceFilter]
	egressFilter atomic.Pointer[egressFilter]
	// groPool holds *groState, one per receive run in progress.
	groPool sync.Pool

	// bufPool holds *[]byte frame buffers of at least MTU+maxHeaderLength;
	// bigPool those of superframes sent whole with tags inserted
	// (superframe.go), which putBuf tells apart by their size.
	bufPool sync.Pool
	bigPool sync.Pool

	// tx defers writes while receive batches run; nil sends at once.
	tx *txBatcher
	// txMu protects pending and serialises WriteFrames calls, which keeps
	// frames in the order netstack wrote them.
	txMu    sync.Mutex
	pending txBatch
	// gsoBuf is where WritePackets flattens a packet it segments;
	// protected by txMu.
	gsoBuf []byte
	// txDirty is set when pending may hold frames netstack wrote (see
	// txBatcher); fast-path frames are sent by the receive run that
	// queued them (fastRun.sendWaiting).
	txDirty atomic.Bool

	// mu protects dispatcher, mac and onClose.
	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	mac        tcpip.LinkAddress
	onClose    func()

	// macsec is the SecY sitting on this interface, if any (macsec.go).
	macsec atomic.Pointer[MACsecLink]
	// shapeIn is the interface's download shaper, nil without one
	// (shapein.go).
	shapeIn atomic.Pointer[ingressShaper]

	// taps is the interface's raw-frame taps (frametap.go), nil when
	// there is none; replaced under tapMu.
	taps  atomic.Pointer[tapSet]
	tapMu sync.Mutex

	// capture is the interface's live-capture sink (capture.go), nil
	// when no capture runs.
	capture atomic.Pointer[captureRef]

	// pppoeMode is InterfaceConfig.PPPoE, set before the NIC exists and
	// never changed; pppoe is the session while it is up, else nil
	// (pppoe.go).
	pppoeMode bool
	pppoe     atomic.Pointer[pppoeSession]
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// frameWriter boxes a hw.FrameWriter so it can sit in an atomic.Pointer.
// If the writer is an inPlaceWriter, the endpoint builds every frame with
// head octets of room before it and tail after it and hands them over
// with that room (sendPendingLocked).
type frameWriter struct {
	hw.FrameWriter
	inPlace    inPlaceWriter
	head, tail int
	// ext is the writer as a frameExtender, nil if it is none
	// (inplace.go).
	ext frameExtender
	// gso is the writer as a hw.GSOWriter if it takes superframes whole
	// (a port with vnet headers), with gsoMax its longest; else nil.
	gso    hw.GSOWriter
	gsoMax int
	// udpGSO: gso takes UDP superframes too (udpgso.go).
	udpGSO bool
}

// udpGSOWriter is a hw.GSOWriter that may take UDP superframes
// (hw.GSOUDPL4) whole: hw.Port on a kernel that lets it.
type udpGSOWriter interface {
	UDPGSO() bool
}

// inPlaceWriter is a FrameWriter that rather takes frames with room
// around them, which it uses to rewrite them in place (MACsecLink: the
// SecY's SecTAG and ICV).
type inPlaceWriter interface {
	hw.FrameWriter
	// FrameRoom returns how many octets each frame needs before it (head)
	// and after it, within its buffer's capacity (tail).
	FrameRoom() (head, tail int)
	// WriteFramesInPlace is WriteFrames on buffers that each hold head
	// octets of scratch and then the frame, with tail octets of capacity
	// after it. The buffers are the caller's again when it returns.
	WriteFramesInPlace(bufs [][]byte) (int, error)
}

// txBatch is the frames waiting in one endpoint. With an in-place writer
// every frame in a buffer starts head octets into it, and views holds
// the buffers cut to head + frame for the writer.
type txBatch struct {
	frames [][]byte
	bufs   []*[]byte // nil for a frame sent from ring memory
	views  [][]byte
	// gso is the frames' offload metadata once the batch has a
	// superframe (hasGSO), one per frame; empty before.
	gso    []hw.GSO
	hasGSO bool
	// udp is the last frame as a UDP datagram or superframe that the
	// next datagram of its flow may join (udpgso.go).
	udp udpRun
}

// udpRun describes the last pending frame as a UDP superframe in the
// making: open while the next datagram of its flow may join it, with
// segs datagrams of size payload bytes (the last may be shorter, and
// closes it) after an IP header of ipLen bytes.
type udpRun struct {
	open       bool
	segs, size int
	ipLen      int
}

// add appends a plain frame and its buffer.
func (b *txBatch) add(frame []byte, buf *[]byte) {
	b.udp.open = false
	b.frames = append(b.frames, frame)
	b.bufs = append(b.bufs, buf)
	if b.hasGSO {
		b.gso = append(b.gso, hw.GSO{})
	}
}

// addGSO appends a frame with its offload metadata for a hw.GSOWriter.
func (b *txBatch) addGSO(frame []byte, buf *[]byte, g *hw.GSO) {
	b.udp.open = false
	b.markGSO()
	b.frames = append(b.frames, frame)
	b.bufs = append(b.bufs, buf)
	b.gso = append(b.gso, *g)
}

// markGSO gives the batch its offload metadata, one plain entry per
// frame so far, unless it has it.
func (b *txBatch) markGSO() {
	if !b.hasGSO {
		for range b.frames {
			b.gso = append(b.gso, hw.GSO{})
		}
		b.hasGSO = true
	}
}

// newEndpoint returns an endpoint that is up and not attached.
func newEndpoint(mac net.HardwareAddr, mtu uint32, w hw.FrameWriter, local *atomic.Pointer[localSet]) *Endpoint {
	e := &Endpoint{
		local: local,
		mac:   tcpip.LinkAddress(mac),
	}
	e.mtu.Store(mtu)
	e.up.Store(true)
	e.setWriter(w)
	e.vlan.Store(&egressVLAN{})
	return e
}

func (e *Endpoint) setWriter(w hw.FrameWriter) {
	if w == nil {
		e.writer.Store(nil)
		return
	}
	fw := &frameWriter{FrameWriter: w}
	fw.ext, _ = w.(frameExtender)
	if ip, ok := w.(inPlaceWriter); ok {
		fw.inPlace = ip
		fw.head, fw.tail = ip.FrameRoom()
	} else if g, ok := w.(hw.GSOWriter); ok && g.GSOMaxSize() > 0 {
		fw.gso, fw.gsoMax = g, g.GSOMaxSize()
		if u, ok := w.(udpGSOWriter); ok {
			fw.udpGSO = u.UDPGSO()
		}
	}
	e.writer.Store(fw)
}

// MTU implements stack.LinkEndpoint. It is the L3 MTU.
func (e *Endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.
func (e *Endpoint) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// MaxHeaderLength implements stack.LinkEndpoint. It leaves room for two
// VLAN tags (QinQ) after the MAC addresses.
func (e *Endpoint) MaxHeaderLength() uint16 { return maxHeaderLength }

// LinkAddress implements stack.LinkEndpoint.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.mac
}

// SetLinkAddress implements stack.LinkEndpoint.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mac = addr
}

// Capabilities implements stack.LinkEndpoint.
// A PPPoE interface is point to point: it resolves no addresses.
func (e *Endpoint) Capabilities() stack.LinkEndpointCapabilities {
	if e.pppoeMode {
		return stack.CapabilityTXChecksumOffload | stack.CapabilityRXChecksumOffload
	}
	return stack.CapabilityResolutionRequired | stack.CapabilityTXChecksumOffload | stack.CapabilityRXChecksumOffload
}

// Attach implements stack.LinkEndpoint. A nil dispatcher detaches the
// endpoint (the NIC was removed); frames received then are counted drops.
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dispatcher = d
}

// IsAttached implements stack.LinkEndpoint.
func (e *Endpoint) IsAttached() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher != nil
}

// Wait implements stack.LinkEndpoint. The endpoint owns no goroutines.
func (e *Endpoint) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint.
func (e *Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint. It pushes the whole link
// header in one Push: the MAC addresses from pkt.EgressRoute, the
// interface's VLAN tags if any (IEEE 802.1Q clause 9), and the Ethertype
// (RFC 894).
func (e *Endpoint) AddHeader(pkt *stack.PacketBuffer) {
	src := pkt.EgressRoute.LocalLinkAddress
	if src == "" {
		src = e.LinkAddress()
	}
	v := e.vlan.Load()
	h := pkt.LinkHeader().Push(header.EthernetMinimumSize + v.n)
	copy(h[:header.EthernetAddressSize], pkt.EgressRoute.RemoteLinkAddress)
	if s := e.pppoe.Load(); s != nil {
		// Point to point: the AC is every packet's next hop, and the
		// fast path learns its MAC from here (natTransmit).
		copy(h[:header.EthernetAddressSize], s.link.Peer[:])
	}
	copy(h[header.EthernetAddressSize:12], src)
	copy(h[12:], v.tags[:v.n])
	binary.BigEndian.PutUint16(h[12+v.n:], uint16(pkt.NetworkProtocolNumber))
}

// ParseHeader implements stack.LinkEndpoint.
func (e *Endpoint) ParseHeader(pkt *stack.PacketBuffer) bool {
	_, ok := pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	return ok
}

// Close implements stack.LinkEndpoint.
func (e *Endpoint) Close() {
	e.mu.Lock()
	f := e.onClose
	e.onClose = nil
	e.mu.Unlock()
	if f != nil {
		f()
	}
}

// SetOnCloseAction implements stack.LinkEndpoint.
func (e *Endpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onClose = f
}

// WritePackets implements stack.LinkWriter. It copies each packet into a
// pooled frame buffer and fills in the L4 checksum of packets netstack
// originated. While a receive batch is being handled the frames wait, so
// the batch's forwarded packets leave together (txBatcher); otherwise, or
// once TxBatchSize frames wait, they go to the FrameWriter at once. The
// caller keeps its references to pkts. Frames the writer refuses later are
// counted as drops.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	w := e.writer.Load()
	if w == nil || !e.up.Load() {
		e.stats.drops[dropLinkDown].Add(uint64(pkts.Len()))
		return 0, &tcpip.ErrClosedForSend{}
	}
	size := int(e.mtu.Load()) + maxHeaderLength
	egf := e.egressFilter.Load()
	// pad is the room before each frame for its PPPoE header.
	var ps *pppoeSession
	pad := 0
	if e.pppoeMode {
		ps, pad = e.pppoe.Load(), pppoeOverhead
	}
	e.txMu.Lock()
	b := &e.pending
	for _, pkt := range pkts.AsSlice() {
		n := pkt.Size()
		if e.pppoeMode && ps == nil {
			e.stats.drop(dropPPPoEDown)
			continue
		}
		if pkt.GSOOptions.Type != stack.GSONone && pkt.NetworkPacketInfo.IsForwardedPacket {
			e.segmentLocked(w, pkt, size)
			continue
		}
		if n > size {
			e.stats.drop(dropTxOversize)
			continue
		}
		buf := e.getBuf(w.head + pad + size + w.tail)
		frame := (*buf)[w.head+pad : w.head+pad+n]
		copyPacket(frame, pkt)
		if !pkt.NetworkPacketInfo.IsForwardedPacket {
			if egf != nil && egf.insideSource(frame, len(pkt.LinkHeader().Slice())) {
				e.stats.drop(dropInsideSourceOut)
				e.putBuf(buf)
				continue
			}
			e.fillOriginated(frame)
		}
		if e.nat != nil && !e.natTransmit(e.nat, frame, len(pkt.LinkHeader().Slice()), pkt.NetworkPacketInfo.IsForwardedPacket) {
			e.putBuf(buf)
			continue
		}
		if pad > 0 {
			frame = (*buf)[w.head : w.head+pad+n]
			if !e.encapPPPoE(frame, ps) {
				e.putBuf(buf)
				continue
			}
		}
		if w.udpGSO && pad == 0 && !pkt.NetworkPacketInfo.IsForwardedPacket &&
			len(pkt.LinkHeader().Slice()) == header.EthernetMinimumSize && e.addOwnUDPLocked(w, frame, buf) {
			continue
		}
		b.add(frame, buf)
	}
	e.txDirty.Store(true)
	var err error
	if e.tx == nil || !e.tx.deferring() || len(b.frames) >= hw.TxBatchSize {
		err = e.sendPendingLocked(w)
	}
	e.txMu.Unlock()
	// Only ErrClosedForSend is safe: netstack's forwarding path panics on
	// most other tcpip.Errors from a link endpoint (ipv4/ipv6
	// handleForwardingError).
	if err != nil {
		return 0, &tcpip.ErrClosedForSend{}
	}
	return pkts.Len(), nil
}

// segmentLocked splits a forwarded merged packet (GROOn, see gro.go) into
// frames that fit the MTU and appends them to pending, built for writer
// w. e.txMu must be held.
func (e *Endpoint) segmentLocked(w *frameWriter, pkt *stack.PacketBuffer, size int) {
	n := pkt.Size()
	if cap(e.gsoBuf) < n {
		e.gsoBuf = make([]byte, max(n, gsoBufSize))
	}
	frame := e.gsoBuf[:n]
	copyPacket(frame, pkt)
	if e.nat != nil && !e.natTransmit(e.nat, frame, len(pkt.LinkHeader().Slice()), false) {
		return
	}
	seg, ok := newSegmenter(frame, len(pkt.LinkHeader().Slice()), int(pkt.GSOOptions.MSS), int(e.mtu.Load()))
	if !ok || seg.hdrLen()+seg.mss > size {
		e.stats.drop(dropTxOversize)
		return
	}
	e.stats.groSegmented.Add(1)
	b := &e.pending
	ps, pad := e.pppoeOut()
	for i := range seg.count() {
		buf := e.getBuf(w.head + pad + size + w.tail)
		m := seg.segment(i, (*buf)[w.head+pad:])
		frame := (*buf)[w.head : w.head+pad+m]
		if pad > 0 && !e.encapPPPoE(frame, ps) {
			e.putBuf(buf)
			continue
		}
		b.add(frame, buf)
	}
}

// flushTx sends whatever WritePackets deferred.
func (e *Endpoint) flushTx() {
	e.txMu.Lock()
	defer e.txMu.Unlock()
	w := e.writer.Load()
	if w == nil {
		e.stats.drops[dropLinkDown].Add(uint64(len(e.pending.frames)))
		e.releasePendingLocked()
		return
	}
	e.sendPendingLocked(w)
}

// sendPendingLocked writes the pending frames in one call and returns
// their buffers to the pool. e.txMu must be held.
func (e *Endpoint) sendPendingLocked(w *frameWriter) error {
	b := &e.pending
	var (
		n   int
		err error
	)
	if len(b.frames) > 0 {
		// Before the writer: an in-place writer (MACsec) rewrites them.
		e.captureTx(b.frames, e.vlan.Load().n)
	}
	switch {
	case len(b.frames) == 0:
	case w.inPlace != nil && b.cutViews(w, w.head, w.tail):
		n, err = w.inPlace.WriteFramesInPlace(b.views)
	case b.hasGSO && w.gso != nil:
		n, err = w.gso.WriteFramesGSO(b.frames, b.gso)
	default:
		n, err = w.WriteFrames(b.frames)
	}
	var bytes uint64
	for _, f := range b.frames[:n] {
		bytes += uint64(len(f))
	}
	e.stats.txPackets.Add(uint64(n))
	e.stats.txBytes.Add(bytes)
	if failed := len(b.frames) - n; failed > 0 {
		e.stats.drops[dropTxError].Add(uint64(failed))
	}
	e.releasePendingLocked()
	return err
}

// cutViews sets views to the pending frames with the head octets of
// room in front of each and reports whether every frame has that room
// and tail octets of capacity after it. A frame sent from ring memory
// (appendFastLocked) has it where w lends the bytes around it
// (frameExtender: a UMEM frame); one from a ring without, or one built
// before the writer changed, has not, and the batch goes through
// WriteFrames.
func (b *txBatch) cutViews(w *frameWriter, head, tail int) bool {
	v := b.views[:0]
	for i, f := range b.frames {
		var view []byte
		if buf := b.bufs[i]; buf == nil {
			if x := w.extendFrame(f, head); x != nil && cap(x) >= head+len(f)+tail {
				view = x[:head+len(f)]
			}
		} else if len(f) > 0 && cap(*buf) >= head+len(f)+tail && &(*buf)[:cap(*buf)][head] == &f[0] {
			view = (*buf)[:head+len(f)]
		}
		if view == nil || len(f) == 0 {
			clear(v)
			b.views = v[:0]
			return false
		}
		v = append(v, view)
	}
	b.views = v
	return true
}

// releasePendingLocked returns the pending buffers to the pool.
func (e *Endpoint) releasePendingLocked() {
	b := &e.pending
	for i, buf := range b.bufs {
		if buf != nil { // nil: a fast-path frame sent from ring memory
			e.putBuf(buf)
		}
		b.bufs[i] = nil
		b.frames[i] = nil
	}
	clear(b.views)
	b.frames = b.frames[:0]
	b.bufs = b.bufs[:0]
	b.views = b.views[:0]
	b.gso = b.gso[:0]
	b.hasGSO = false
	b.udp = udpRun{}
	e.txDirty.Store(false)
}

// getBuf returns a pooled frame buffer with room for size bytes.
func (e *Endpoint) getBuf(size int) *[]byte {
	if p, ok := e.bufPool.Get().(*[]byte); ok && cap(*p) >= size {
		*p = (*p)[:size]
		return p
	}
	b := make([]byte, size)
	return &b
}

// copyPacket copies pkt's headers and data into frame, which must be
// exactly pkt.Size() bytes. It does not allocate.
func copyPacket(frame []byte, pkt *stack.PacketBuffer) {
	views, off := pkt.AsViewList()
	n := 0
	for v := views.Front(); v != nil && n < len(frame); v = v.Next() {
		s := v.AsSlice()
		if off >= len(s) {
			off -= len(s)
			continue
		}
		n += copy(frame[n:], s[off:])
		off = 0
	}
}
