package stack

import (
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// forwardPins works around a use-after-free in gVisor's IPv4 forwarding
// (network/ipv4/ipv4.go forwardPacketWithRoute, pinned version): it takes
// the header slice h, then DeepCopyForForwarding clones the packet's
// buffer, which makes the packet's next PullUp move to a fresh chunk and
// drop its reference to the old one; releasing the clone then returns the
// old chunk to the pool, and only after that is h.TTL() read. Another
// receive goroutine can meanwhile take the chunk from the pool and write a
// new frame into it, so the forwarded TTL is read from someone else's
// packet (the race detector reports it in the TCP forwarding test).
// IPv6 reads the hop limit before the copy and is not affected.
//
// The fix holds one extra reference to the packet's chunks from
// CheckForward (called after h is taken, before the copy) until the
// endpoint's DeliverNetworkPacket call returns, on the same goroutine. It
// adds no copy: the copy it provokes happened anyway. The map has a
// packet only while it is being forwarded, so it stays as small as the
// number of receive goroutines and does not allocate once warm.
//
// forwardPins is the stack's NFTablesInterface; CheckForward also guards
// the forward path (fwdguard.go), CheckPostrouting tags GRO merges (see
// its doc), CheckOutput reroutes answers (crossnic.go); every other hook
// accepts.
// It is safe for concurrent use.
type forwardPins struct {
	// n is len(pins), so that release costs one atomic load when nothing
	// is pinned (every packet for the router).
	n atomic.Int32

	mu   sync.Mutex // protects pins
	pins map[*stack.PacketBuffer]buffer.Buffer

	// egress is the router's NIC ID → endpoint table, for the forward
	// guard (fwdguard.go); set once by New before any NIC exists.
	egress *atomic.Pointer[egressTable]

	unassignedGuard // unassigned6.go

	reroute rerouter // crossnic.go
}

var _ stack.NFTablesInterface = (*forwardPins)(nil)

func newForwardPins() *forwardPins {
	return &forwardPins{pins: make(map[*stack.PacketBuffer]buffer.Buffer)}
}

// CheckForward implements stack.NFTablesInterface. It refuses what the
// forward path would panic on (fwdguard.go) and pins an IPv4 packet's
// chunks.
func (p *forwardPins) CheckForward(pkt *stack.PacketBuffer, route *stack.Route, af stack.AddressFamily) bool {
	if p.refuseForward(pkt, route, af) {
		return false
	}
	if af != stack.IP {
		return true
	}
	b := pkt.ToBuffer()
	p.mu.Lock()
	old, ok := p.pins[pkt]
	p.pins[pkt] = b
	p.n.Store(int32(len(p.pins)))
	p.mu.Unlock()
	if ok {
		old.Release()
	}
	return true
}

// release drops the pin on pkt, if any. The receive path calls it for
// every IPv4 packet after DeliverNetworkPacket returns.
func (p *forwardPins) release(pkt *stack.PacketBuffer) {
	if p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	b, ok := p.pins[pkt]
	if ok {
		delete(p.pins, pkt)
		p.n.Store(int32(len(p.pins)))
	}
	p.mu.Unlock()
	if ok {
		b.Release()
	}
}

// releaseAll drops every pin; Netstack.Close calls it after netstack has
// stopped, as a safety net.
func (p *forwardPins) releaseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pkt, b := range p.pins {
		b.Release()
		delete(p.pins, pkt)
	}
	p.n.Store(0)
}

// CheckPrerouting implements stack.NFTablesInterface.
func (p *forwardPins) CheckPrerouting(*stack.PacketBuffer, *stack.Route, stack.AddressFamily) bool {
	return true
}

// CheckInput implements stack.NFTablesInterface.
func (p *forwardPins) CheckInput(*stack.PacketBuffer, *stack.Route, stack.AddressFamily) bool {
	return true
}

// CheckOutput implements stack.NFTablesInterface. It sends the router's
// answers by their destination's route (crossnic.go).
func (p *forwardPins) CheckOutput(pkt *stack.PacketBuffer, r *stack.Route, _ stack.AddressFamily) bool {
	return p.reroute.check(pkt, r)
}

// CheckPostrouting implements stack.NFTablesInterface. It also turns the
// GRO tag in a forwarded packet's Mark (see gro.go) into GSOOptions, so
// netstack's MTU check, which runs next, lets the merged packet through to
// Endpoint.WritePackets, which segments it.
func (p *forwardPins) CheckPostrouting(pkt *stack.PacketBuffer, _ *stack.Route, af stack.AddressFamily) bool {
	if pkt.Mark&groMarkFlag != 0 && pkt.NetworkPacketInfo.IsForwardedPacket {
		typ := stack.GSOTCPv4
		if af == stack.IP6 {
			typ = stack.GSOTCPv6
		}
		pkt.GSOOptions = stack.GSO{
			Type:      typ,
			NeedsCsum: true,
			MSS:       uint16(pkt.Mark),
			L3HdrLen:  uint16(len(pkt.NetworkHeader().Slice())),
		}
		pkt.Mark = 0
	}
	return true
}

// CheckIngress implements stack.NFTablesInterface.
func (p *forwardPins) CheckIngress(*stack.PacketBuffer, *stack.Route, stack.AddressFamily) bool {
	return true
}

// CheckEgress implements stack.NFTablesInterface.
func (p *forwardPins) CheckEgress(*stack.PacketBuffer, *stack.Route, stack.AddressFamily) bool {
	return true
}
