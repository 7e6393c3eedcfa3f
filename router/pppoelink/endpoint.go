package pppoelink

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/pppoe"
)

// Endpoint is the PPP link as a netstack NIC: the slow path. It is point
// to point (no link address, no ARP or NDP): netstack's packets get the
// session's Link.Encap headers and leave by the link's interface; the
// session's IP packets (Config.Deliver = Endpoint.Deliver) go up to
// netstack. Its MTU follows the session (Follow). Packets written while
// the session is not up are dropped and counted (TxNotUp).
type Endpoint struct {
	link atomic.Pointer[Link]
	mtu  atomic.Uint32

	// TxNotUp counts packets netstack wrote while the session was down;
	// TxTooBig those that did not fit a frame.
	TxNotUp, TxTooBig atomic.Uint64

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	onClose    func()

	// txMu guards tx, the buffer frames are built in (WriteFrame copies).
	txMu sync.Mutex
	tx   [maxFrame]byte
}

var _ stack.LinkEndpoint = (*Endpoint)(nil)

// NewEndpoint returns an Endpoint with the default PPPoE MTU (1492)
// until Follow says otherwise. Bind ties it to a Link.
func NewEndpoint() *Endpoint {
	e := &Endpoint{}
	e.mtu.Store(pppoe.DefaultMRU)
	return e
}

// Bind makes e send through l's session and interface.
func (e *Endpoint) Bind(l *Link) { e.link.Store(l) }

// Follow takes the session's negotiated MTU from st (Config.OnChange).
func (e *Endpoint) Follow(st pppoe.Status) {
	if st.MTU > 0 {
		e.mtu.Store(uint32(st.MTU))
	}
}

// Deliver hands one received IP packet (proto pppoe.ProtoIPv4 or
// ProtoIPv6) to netstack; it copies packet. It is Config.Deliver.
func (e *Endpoint) Deliver(proto uint16, packet []byte) {
	var np tcpip.NetworkProtocolNumber
	switch proto {
	case pppoe.ProtoIPv4:
		np = header.IPv4ProtocolNumber
	case pppoe.ProtoIPv6:
		np = header.IPv6ProtocolNumber
	default:
		return
	}
	e.mu.RLock()
	d := e.dispatcher
	e.mu.RUnlock()
	if d == nil {
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(packet)})
	d.DeliverNetworkPacket(np, pkt)
	pkt.DecRef()
}

// WritePackets implements stack.LinkWriter: each packet gets the PPPoE
// and Ethernet headers in front and goes out by the link's interface.
func (e *Endpoint) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	l := e.link.Load()
	n := 0
	for _, pkt := range pkts.AsSlice() {
		n++
		if l == nil {
			e.TxNotUp.Add(1)
			continue
		}
		lnk, up := l.s.Link()
		if !up {
			e.TxNotUp.Add(1)
			continue
		}
		proto := uint16(pppoe.ProtoIPv4)
		if pkt.NetworkProtocolNumber == header.IPv6ProtocolNumber {
			proto = pppoe.ProtoIPv6
		}
		hl := lnk.HeaderLen()
		e.txMu.Lock()
		if hl+pkt.Size() > len(e.tx) {
			e.txMu.Unlock()
			e.TxTooBig.Add(1)
			continue
		}
		off := hl
		for _, s := range pkt.AsSlices() {
			off += copy(e.tx[off:], s)
		}
		if frame, ok := lnk.Encap(e.tx[:off], hl, proto); ok {
			sender{l}.SendFrame(frame)
		} else {
			e.TxTooBig.Add(1)
		}
		e.txMu.Unlock()
	}
	return n, nil
}

// MTU implements stack.LinkEndpoint.
func (e *Endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint.
func (e *Endpoint) SetMTU(mtu uint32) { e.mtu.Store(mtu) }

// MaxHeaderLength implements stack.LinkEndpoint: Ethernet, a VLAN tag,
// PPPoE and PPP.
func (*Endpoint) MaxHeaderLength() uint16 { return 14 + 4 + pppoe.SessionHeaderLen }

// LinkAddress implements stack.LinkEndpoint: a PPP link has none.
func (*Endpoint) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements stack.LinkEndpoint.
func (*Endpoint) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements stack.LinkEndpoint: no address resolution.
func (*Endpoint) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// Attach implements stack.LinkEndpoint.
func (e *Endpoint) Attach(d stack.NetworkDispatcher) {
	e.mu.Lock()
	e.dispatcher = d
	e.mu.Unlock()
}

// IsAttached implements stack.LinkEndpoint.
func (e *Endpoint) IsAttached() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher != nil
}

// Wait implements stack.LinkEndpoint: the endpoint owns no goroutine.
func (*Endpoint) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint.
func (*Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements stack.LinkEndpoint: WritePackets adds the headers.
func (*Endpoint) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint: Deliver passes bare IP.
func (*Endpoint) ParseHeader(*stack.PacketBuffer) bool { return true }

// Close implements stack.LinkEndpoint.
func (e *Endpoint) Close() {
	e.mu.Lock()
	f := e.onClose
	e.dispatcher, e.onClose = nil, nil
	e.mu.Unlock()
	if f != nil {
		f()
	}
}

// SetOnCloseAction implements stack.LinkEndpoint.
func (e *Endpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	e.onClose = f
	e.mu.Unlock()
}
