package stack

import (
	"sort"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Answers from one interface's address to a host behind another.
//
// An inside host may address the router by its wan address (a ping, the
// status page by the address it learnt from a DNS name). gVisor delivers
// such a packet (forwardUnicastPacket hands it to the NIC that holds the
// address), but routes the answer as a strong host: FindRoute, given
// that NIC or that source address, prefers a route through the NIC that
// holds the address, so with a default route on the wan the answer went
// to the wan gateway and the inside host got nothing. Linux routes an
// answer by its destination alone (the weak host model, RFC 1122
// section 3.3.4.2), and fw4's input chain by the zone the packet arrived
// from decides whether there is an answer at all (natengine toRouter).
//
// CheckOutput therefore compares the route netstack chose for each
// packet the router originates with the route its destination alone
// selects (the longest prefix, as netstack's sorted table gives it to
// forwarded traffic); when they leave by different NICs, the packet is
// refused there and sent again, unchanged (its source address too), by
// the destination's route, from a goroutine of its own: the hook runs
// inside netstack's write path, which must not be entered again from
// it. Only unicast destinations beyond link-local scope are rerouted:
// link-local and multicast ones are sent on the interface asked for.
// A reroute that finds its queue full or no route is a counted drop
// ("answer_reroute") on the interface it was meant for.

// rerouteQueue bounds the answers waiting to be sent again.
const rerouteQueue = 256

type rerouted struct {
	nic   tcpip.NICID
	proto tcpip.NetworkProtocolNumber
	dst   tcpip.Address
	ip    *buffer.View // the whole packet from its IP header on
}

// rerouter resends the answers CheckOutput refused; it is part of the
// stack's forwardPins.
type rerouter struct {
	s      *stack.Stack
	pins   *forwardPins
	routes atomic.Pointer[[]tcpip.Route] // sorted as netstack sorts them
	q      chan rerouted
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
}

func (rr *rerouter) start(s *stack.Stack, pins *forwardPins) {
	rr.s, rr.pins, rr.q, rr.done = s, pins, make(chan rerouted, rerouteQueue), make(chan struct{})
	rr.wg.Add(1)
	go rr.run()
}

// stop ends the goroutine and drops what is still queued.
func (rr *rerouter) stop() {
	if rr.q == nil {
		return
	}
	rr.once.Do(func() { close(rr.done) })
	rr.wg.Wait()
	for {
		select {
		case r := <-rr.q:
			r.ip.Release()
		default:
			return
		}
	}
}

// setRoutes records the route table given to netstack, sorted as
// netstack's addRouteLocked sorts it (longest prefix first, stable).
func (rr *rerouter) setRoutes(table []tcpip.Route) {
	t := append([]tcpip.Route(nil), table...)
	sort.SliceStable(t, func(i, j int) bool { return t[i].Destination.Prefix() > t[j].Destination.Prefix() })
	rr.routes.Store(&t)
}

// nicFor returns the NIC that the route table alone selects for dst, or
// 0 for none or a destination that is not rerouted.
func (rr *rerouter) nicFor(dst tcpip.Address) tcpip.NICID {
	switch {
	case dst.Unspecified(), dst == header.IPv4Broadcast, header.IsV4MulticastAddress(dst),
		header.IsV6MulticastAddress(dst), header.IsV6LinkLocalUnicastAddress(dst),
		header.IsV4LoopbackAddress(dst), header.IsV6LoopbackAddress(dst):
		return 0
	}
	t := rr.routes.Load()
	if t == nil {
		return 0
	}
	for i := range *t {
		if (*t)[i].Destination.Contains(dst) {
			return (*t)[i].NIC
		}
	}
	return 0
}

// check reports whether pkt, which netstack sends by r, may go; if not,
// it has queued it for the NIC its destination's route names.
func (rr *rerouter) check(pkt *stack.PacketBuffer, r *stack.Route) bool {
	if r == nil || rr.q == nil || header.IsV6LinkLocalUnicastAddress(r.LocalAddress()) {
		return true
	}
	dst := r.RemoteAddress()
	nic := rr.nicFor(dst)
	if nic == 0 || nic == r.NICID() {
		return true
	}
	item := rerouted{nic: nic, proto: r.NetProto(), dst: dst, ip: stack.PayloadSince(pkt.NetworkHeader())}
	select {
	case rr.q <- item:
	default:
		item.ip.Release()
		rr.dropped(nic)
	}
	return false
}

func (rr *rerouter) run() {
	defer rr.wg.Done()
	for {
		select {
		case <-rr.done:
			return
		case item := <-rr.q:
			rr.send(item)
		}
	}
}

// send writes item's packet by its destination's route on item.nic.
func (rr *rerouter) send(item rerouted) {
	r, err := rr.s.FindRoute(item.nic, tcpip.Address{}, item.dst, item.proto, false /* multicastLoop */)
	if err != nil {
		item.ip.Release()
		rr.dropped(item.nic)
		return
	}
	defer r.Release()
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: int(r.MaxHeaderLength()), Payload: buffer.MakeWithView(item.ip)})
	defer pkt.DecRef()
	if err := r.WriteHeaderIncludedPacket(pkt); err != nil {
		rr.dropped(item.nic)
	}
}

func (rr *rerouter) dropped(nic tcpip.NICID) {
	if e := rr.pins.endpoint(nic); e != nil {
		e.stats.drop(dropAnswerReroute)
	}
}
