package stack

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/natengine"
)

// Next-hop cache: the first packets of a flow without netstack.
//
// The fast path takes a flow's packets once it is assured; until then
// (a TCP handshake, the first datagram of a UDP flow, every SYN of a
// flood) each packet was a full netstack forward: a route lookup, address
// checks, a PacketBuffer deep copy and several allocations, some 5 µs, plus
// the garbage it leaves. Yet netstack's decision depends only on the
// destination address: when it forwards a packet, the egress side records
// destination -> (egress NIC, neighbour MAC, own MAC). Later packets to the
// same destination that the NAT engine has already accepted (Prerouting)
// and that need nothing netstack alone does (TTL <= 1 -> Time Exceeded,
// IP options, fragments, packets over the egress MTU -> frag-needed, an
// unusual source address) are forwarded here: TTL decremented with an
// RFC 1624 checksum update, Postrouting and Offload as on netstack's
// egress, MAC addresses written, and the frame queued on the receive
// run's fast-path batch, so it keeps its place among the run's frames.
//
// Entries carry the NAT engine's fast-path generation: a route, address,
// link or neighbour change (which invalidates the fast path) invalidates
// them too, and netstack decides again. They also expire after
// nextHopTTL: netstack learns the generation only when it writes a packet,
// possibly after a change (a packet that waited for ARP), and only
// netstack's own sends make it check that a neighbour is still reachable;
// one netstack forward per destination per second keeps both honest.
// IPv4 only: IPv6 first packets (no NAT) still go through netstack.

// nextHopSlots is the size of the direct-mapped cache: destinations
// whose slots collide replace each other, costing a netstack forward.
const nextHopSlots = 1024

// nextHopTTL is how long a decision is used after netstack last took it;
// nextHopRefresh is how old it must be before netstack's next forward to
// the destination replaces it (so learning allocates at most about once
// per destination per refresh, not per packet).
const (
	nextHopTTL     = int64(time.Second)
	nextHopRefresh = nextHopTTL / 2
)

// nextHop is one destination's forwarding decision. Immutable once
// published.
type nextHop struct {
	dst     [4]byte
	out     natengine.Iface
	gen     uint64
	learned int64    // NAT engine time of netstack's forward
	eth     [12]byte // destination MAC, source MAC
}

// nextHopCache maps IPv4 destinations to the decision netstack made for
// them. Lock-free: readers load a slot, writers replace it.
type nextHopCache struct {
	slots [nextHopSlots]atomic.Pointer[nextHop]
}

func nextHopSlot(dst []byte) uint32 {
	v := binary.BigEndian.Uint32(dst)
	v ^= v >> 16
	v *= 0x45d9f3b
	v ^= v >> 16
	return v & (nextHopSlots - 1)
}

// learn records that netstack sent a packet for dst out of out in a frame
// whose first 12 octets are eth, at generation gen and engine time now.
// It allocates only when the decision differs from the slot's or is due
// for a refresh.
func (c *nextHopCache) learn(dst []byte, out natengine.Iface, eth []byte, gen uint64, now int64) {
	s := &c.slots[nextHopSlot(dst)]
	if h := s.Load(); h != nil && h.gen == gen && h.out == out && string(h.dst[:]) == string(dst) &&
		string(h.eth[:]) == string(eth[:12]) && now-h.learned < nextHopRefresh {
		return
	}
	h := &nextHop{dst: [4]byte(dst), out: out, gen: gen, learned: now}
	copy(h.eth[:], eth)
	s.Store(h)
}

// lookup returns dst's decision if it is from generation gen and not
// older than nextHopTTL at engine time now.
func (c *nextHopCache) lookup(dst []byte, gen uint64, now int64) *nextHop {
	h := c.slots[nextHopSlot(dst)].Load()
	if h == nil || h.gen != gen || string(h.dst[:]) != string(dst) || now-h.learned > nextHopTTL || now < h.learned {
		return nil
	}
	return h
}

// plainUnicast4 reports whether a is an address netstack forwards from or
// to without a second look: not 0/8, loopback, link-local, multicast or
// broadcast (class E included).
func plainUnicast4(a []byte) bool {
	switch {
	case a[0] == 0, a[0] == 127, a[0] >= 224:
		return false
	case a[0] == 169 && a[1] == 254:
		return false
	}
	return true
}

// forwardNew forwards frame (untagged Ethernet, IPv4, accepted by the NAT
// engine's Prerouting and not for the router) without netstack if its
// destination's next hop is cached and nothing about it needs netstack.
// local is the router's address set (which holds the directed broadcasts
// too: netstack drops packets from those). It reports whether the frame
// was taken: queued on run, or dropped and counted.
func (e *Endpoint) forwardNew(frame []byte, pcp int, nat *natengine.Engine, local *localSet, run *fastRun) bool {
	if e.hops == nil || binary.BigEndian.Uint16(frame[12:]) != uint16(header.IPv4ProtocolNumber) {
		return false
	}
	ip := frame[header.EthernetMinimumSize:]
	if len(ip) < header.IPv4MinimumSize || ip[0] != 0x45 { // version 4, no options
		return false
	}
	total := int(binary.BigEndian.Uint16(ip[2:]))
	flags := binary.BigEndian.Uint16(ip[6:])
	if total < header.IPv4MinimumSize || total > len(ip) || flags&0x3fff != 0 || ip[8] <= 1 || // fragment, TTL
		!plainUnicast4(ip[12:16]) || !plainUnicast4(ip[16:20]) || (local != nil && local.has4(ip[12:16])) {
		return false
	}
	h := e.hops.lookup(ip[16:20], nat.FastPathGeneration(), run.now)
	if h == nil {
		return false
	}
	tab := e.egress.Load()
	if tab == nil {
		return false
	}
	oe := tab.get(h.out)
	if oe == nil || !oe.up.Load() || total > int(oe.mtu.Load()) {
		return false // gone or down, or netstack owes the sender a frag-needed
	}
	decrementTTL4(ip)
	frame = frame[:header.EthernetMinimumSize+total]
	copy(frame[:12], h.eth[:])
	if !oe.natTransmitAt(nat, frame, header.EthernetMinimumSize, true, h) {
		return true // dropped and counted by natTransmitAt
	}
	run.nextHop++
	run.add(oe, frame, pcp)
	return true
}

// decrementTTL4 lowers an IPv4 header's TTL by one and updates its
// checksum incrementally (RFC 1624: HC' = ~(~HC + ~m + m'), TTL is the
// high octet of the 16-bit word at offset 8).
func decrementTTL4(ip []byte) {
	old := binary.BigEndian.Uint16(ip[8:])
	ip[8]--
	sum := uint32(^binary.BigEndian.Uint16(ip[10:])) + uint32(^old) + uint32(binary.BigEndian.Uint16(ip[8:]))
	sum = sum&0xffff + sum>>16
	sum = sum&0xffff + sum>>16
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
}
