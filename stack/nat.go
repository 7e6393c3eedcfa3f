package stack

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/natengine"
)

// The glue between the endpoints and the NAT engine (natengine), in the
// order a packet meets it:
//
//   - receive: a CHECKSUM_PARTIAL frame gets its L4 checksum completed in
//     place first (the engine patches checksums incrementally, which needs
//     a complete one); then FastPath; a hit is rewritten in place and goes
//     straight to the egress endpoint's transmit batch, never touching
//     netstack (fastpath.go). A miss is validated by classify, which runs Prerouting
//     after the IP header checks and before the "is it for us?" decision,
//     so GRO and the TTL rule see the translated destination.
//   - transmit (WritePackets): Postrouting on every forwarded IP packet,
//     then Offload, with the frame's MAC addresses; PostroutingLocal on
//     the packets netstack originates, which tracks the router's own
//     flows so that their replies pass the WAN input policy.
//   - after each receive run: DrainHeld delivers out-of-order fragments the
//     engine held until their first fragment came.
//
// The engine's Iface numbers are the NIC IDs.

// natIface is the engine's number for a NIC.
func natIface(id tcpip.NICID) natengine.Iface { return natengine.Iface(id) }

// egressTable maps NIC IDs to endpoints for the fast path; immutable once
// stored.
type egressTable []*Endpoint

func (t egressTable) get(out natengine.Iface) *Endpoint {
	if out <= 0 || int(out) >= len(t) {
		return nil
	}
	return t[out]
}

// natTransmit runs Postrouting on frame, which netstack is sending on e,
// and hands forwarded packets' flows to the fast path and their
// destination's next hop to the next-hop cache. ipOff is the offset of
// the IP header. It reports false when the engine dropped the packet.
func (e *Endpoint) natTransmit(nat *natengine.Engine, frame []byte, ipOff int, forwarded bool) bool {
	return e.natTransmitAt(nat, frame, ipOff, forwarded, nil)
}

// natTransmitAt is natTransmit; with hop set the frame follows that
// cached decision instead of netstack's: the flow is offloaded at the
// decision's generation and nothing is learned from it (learning would
// re-date a decision the fast path may have invalidated meanwhile).
func (e *Endpoint) natTransmitAt(nat *natengine.Engine, frame []byte, ipOff int, forwarded bool, hop *nextHop) bool {
	et := binary.BigEndian.Uint16(frame[ipOff-2:])
	if et != uint16(header.IPv4ProtocolNumber) && et != uint16(header.IPv6ProtocolNumber) {
		return true
	}
	out := natIface(e.nicID)
	var v natengine.Verdict
	if forwarded {
		v = nat.Postrouting(frame[ipOff:], out)
	} else {
		v = nat.PostroutingLocal(frame[ipOff:], out) // the router's own packet: track its flow
	}
	if v != natengine.Accept {
		e.stats.drop(dropNAT)
		if v == natengine.Reject {
			// Answered off the transmit path (netstack is sending this
			// frame; the answer goes out through netstack again), from
			// a copy. The engine limits rejects to firewall.RejectRate
			// a second, so at most that many of these goroutines start;
			// each ends when its packet is written.
			ip := append([]byte(nil), frame[ipOff:]...)
			go e.sendReject(ip, false)
		}
		return false
	}
	switch {
	case !forwarded:
	case hop != nil:
		nat.OffloadAt(frame[ipOff:], out, [6]byte(frame[:6]), [6]byte(frame[6:12]), hop.gen)
	default:
		gen := nat.FastPathGeneration()
		nat.OffloadAt(frame[ipOff:], out, [6]byte(frame[:6]), [6]byte(frame[6:12]), gen)
		if e.hops != nil && et == uint16(header.IPv4ProtocolNumber) && len(frame) >= ipOff+header.IPv4MinimumSize {
			e.hops.learn(frame[ipOff+16:ipOff+20], out, frame[:12], gen, nat.Now())
		}
	}
	return true
}

// deliverHeld hands a fragment the engine held (already translated) to the
// NIC it arrived on. pkt starts at the IP header.
func deliverHeld(tab egressTable, pkt []byte, in natengine.Iface) {
	e := tab.get(in)
	if e == nil || len(pkt) == 0 {
		return
	}
	e.mu.RLock()
	d := e.dispatcher
	e.mu.RUnlock()
	if d == nil || !e.up.Load() {
		e.stats.drop(dropNotAttached)
		return
	}
	proto := header.IPv4ProtocolNumber
	if pkt[0]>>4 == 6 {
		proto = header.IPv6ProtocolNumber
	}
	if proto == header.IPv4ProtocolNumber && len(pkt) >= header.IPv4MinimumSize && pkt[8] <= 1 && !e.local.Load().has4(pkt[16:20]) {
		// classify4's TTL rule, which a held fragment skipped (it was
		// held in Prerouting, before the rule): gVisor would forward it
		// with TTL 0. No Time Exceeded: a held fragment is never the
		// first, and only first fragments get ICMP errors (RFC 1812
		// 4.3.2.7, as Linux's icmp_send).
		e.stats.drop(dropTTLExceeded)
		return
	}
	p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(pkt)})
	p.NetworkProtocolNumber = proto
	p.PktType = tcpip.PacketHost
	d.DeliverNetworkPacket(proto, p)
	if proto == header.IPv4ProtocolNumber && e.pins != nil {
		e.pins.release(p)
	}
	p.DecRef()
}

// neighborWatch is the stack's NUDDispatcher: a neighbour whose link
// address changed, that became unreachable or that was removed sends
// every flow back to the slow path (natengine.InvalidateFastPath), which
// offloads them again with the new MAC. Plain state changes (reachable ↔
// stale) keep the fast path.
type neighborWatch struct {
	nat *natengine.Engine

	mu   sync.Mutex
	macs map[neighborKey]tcpip.LinkAddress
	// invalidations counts the times a neighbour event invalidated the
	// fast path.
	invalidations atomic.Uint64
}

type neighborKey struct {
	nic  tcpip.NICID
	addr tcpip.Address
}

var _ stack.NUDDispatcher = (*neighborWatch)(nil)

func newNeighborWatch(nat *natengine.Engine) *neighborWatch {
	return &neighborWatch{nat: nat, macs: make(map[neighborKey]tcpip.LinkAddress)}
}

func (w *neighborWatch) invalidate() {
	w.invalidations.Add(1)
	w.nat.InvalidateFastPath()
}

// OnNeighborAdded implements stack.NUDDispatcher.
func (w *neighborWatch) OnNeighborAdded(nic tcpip.NICID, n stack.NeighborEntry) {
	w.OnNeighborChanged(nic, n)
}

// OnNeighborChanged implements stack.NUDDispatcher.
func (w *neighborWatch) OnNeighborChanged(nic tcpip.NICID, n stack.NeighborEntry) {
	k := neighborKey{nic, n.Addr}
	w.mu.Lock()
	old, known := w.macs[k]
	changed := known && old != "" && old != n.LinkAddr
	if n.State == stack.Unreachable {
		changed = known
		delete(w.macs, k)
	} else if n.LinkAddr != "" {
		w.macs[k] = n.LinkAddr
	}
	w.mu.Unlock()
	if changed {
		w.invalidate()
	}
}

// OnNeighborRemoved implements stack.NUDDispatcher.
func (w *neighborWatch) OnNeighborRemoved(nic tcpip.NICID, n stack.NeighborEntry) {
	k := neighborKey{nic, n.Addr}
	w.mu.Lock()
	_, known := w.macs[k]
	delete(w.macs, k)
	w.mu.Unlock()
	if known {
		w.invalidate()
	}
}
