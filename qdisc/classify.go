package qdisc

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// Class is what the scheduler needs to know about a frame: which flow queue,
// which host, which tin, and where the IP header is so CoDel can read and set
// its ECN field.
type Class struct {
	// Flow identifies the flow: a hash of the 5-tuple, or of the addresses
	// alone for fragments and unknown transports, e.g. 0x9c3e...
	Flow uint64
	// Host identifies the host whose flows share one host's fair share
	// (cake's dual-srchost/dual-dsthost), e.g. HashAddr(inside address before
	// NAT). 0 is a valid key: all frames with Host 0 share one host.
	Host uint64
	// L3 is the offset of the IP header in the frame; valid iff IPVersion != 0.
	L3 uint16
	// IPVersion is 4 or 6, or 0 when the frame carries no IP packet we parsed.
	IPVersion uint8
	// DSCP is the IP header's DSCP (RFC 2474), 0 for non-IP.
	DSCP uint8
}

// HostMode says which address is the host key of ClassifyFrame.
type HostMode uint8

const (
	// HostNone puts every frame in one host: plain per-flow fairness (RFC 8290).
	HostNone HostMode = iota
	// HostSrc keys hosts by source address: upload (LAN to WAN), cake's dual-srchost.
	HostSrc
	// HostDst keys hosts by destination address: download (WAN to LAN), cake's dual-dsthost.
	HostDst
)

// EtherTypes and protocol numbers the parser knows (IEEE 802.1Q, RFC 2516, IANA).
const (
	etherTypeIPv4      = 0x0800
	etherTypeIPv6      = 0x86dd
	etherTypeVLAN      = 0x8100
	etherTypeQinQ      = 0x88a8
	etherTypePPPoESess = 0x8864
	pppIPv4            = 0x0021 // RFC 1332
	pppIPv6            = 0x0057 // RFC 5072

	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	protoDCCP    = 33
	protoICMPv6  = 58
	protoSCTP    = 132
	protoUDPLite = 136

	ip6HopByHop = 0
	ip6Routing  = 43
	ip6Fragment = 44
	ip6AH       = 51
	ip6DstOpts  = 60

	// maxVLANTags: a QinQ frame has two; a third is refused as unknown.
	maxVLANTags = 2
	// maxIPv6ExtHeaders bounds the extension header walk (RFC 8200 §4.1 lists
	// the usual order with at most one of each, two Destination Options).
	maxIPv6ExtHeaders = 8
)

// Hashing: a multiply-rotate mix per word and a final avalanche, so similar
// tuples spread over the flow table. Not cryptographic: the scheduler mixes
// a per-instance seed in before it picks a bucket.
const (
	mixMul1 = 0x9e3779b97f4a7c15
	mixMul2 = 0xc2b2ae3d27d4eb4f
)

func mix(h, v uint64) uint64 {
	h ^= v * mixMul1
	h = bits.RotateLeft64(h, 29)
	return h * mixMul2
}

func finish(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// HashAddr is the host key of an address, as ClassifyFrame computes it: pass
// it in Class.Host to key hosts by an address the frame no longer shows (the
// inside address before NAT).
func HashAddr(a netip.Addr) uint64 {
	b := a.As16()
	return hashAddrBytes(b[:])
}

// hashAddrBytes hashes a 4- or 16-byte address the way HashAddr does (IPv4
// as its IPv4-mapped IPv6 form).
func hashAddrBytes(b []byte) uint64 {
	var hi, lo uint64
	if len(b) == 4 {
		hi = 0
		lo = 0xffff<<32 | uint64(binary.BigEndian.Uint32(b))
	} else {
		hi = binary.BigEndian.Uint64(b[:8])
		lo = binary.BigEndian.Uint64(b[8:16])
	}
	return finish(mix(mix(0x5ca1ab1e, hi), lo))
}

// ClassifyFrame parses an Ethernet frame (up to two VLAN tags, PPPoE session
// frames) with IPv4 or IPv6 inside and returns its class: the flow is the
// 5-tuple for TCP, UDP, UDP-Lite, SCTP and DCCP, addresses plus the echo
// identifier for ICMP echo, and addresses plus protocol for fragments and
// other protocols. A frame that is not IP (ARP, truncated) gets a class built
// from its EtherType alone and IPVersion 0. It never panics and does not
// allocate.
func ClassifyFrame(frame []byte, hosts HostMode) Class {
	var c Class
	if len(frame) < 14 {
		c.Flow = finish(mix(1, uint64(len(frame))))
		return c
	}
	off := 12
	et := binary.BigEndian.Uint16(frame[off:])
	for i := 0; i < maxVLANTags && (et == etherTypeVLAN || et == etherTypeQinQ); i++ {
		off += 4
		if len(frame) < off+2 {
			c.Flow = finish(mix(2, uint64(et)))
			return c
		}
		et = binary.BigEndian.Uint16(frame[off:])
	}
	off += 2
	if et == etherTypePPPoESess {
		// RFC 2516 §4: 6-byte PPPoE header, then the 2-byte PPP protocol.
		if len(frame) < off+8 {
			c.Flow = finish(mix(3, uint64(et)))
			return c
		}
		switch binary.BigEndian.Uint16(frame[off+6:]) {
		case pppIPv4:
			et = etherTypeIPv4
		case pppIPv6:
			et = etherTypeIPv6
		}
		off += 8
	}
	switch et {
	case etherTypeIPv4:
		if classifyIPv4(frame, off, hosts, &c) {
			return c
		}
	case etherTypeIPv6:
		if classifyIPv6(frame, off, hosts, &c) {
			return c
		}
	}
	c = Class{Flow: finish(mix(4, uint64(et)))}
	return c
}

func hostKey(src, dst []byte, hosts HostMode) uint64 {
	switch hosts {
	case HostSrc:
		return hashAddrBytes(src)
	case HostDst:
		return hashAddrBytes(dst)
	}
	return 0
}

// ports returns the 32 bits that identify a flow within its addresses: the
// port pair, or the ICMP echo identifier, or 0.
func ports(l4 []byte, proto uint8) uint64 {
	switch proto {
	case protoTCP, protoUDP, protoUDPLite, protoSCTP, protoDCCP:
		if len(l4) >= 4 {
			return uint64(binary.BigEndian.Uint32(l4))
		}
	case protoICMP:
		// RFC 792 echo (8) and echo reply (0): identifier at bytes 4-5.
		if len(l4) >= 6 && (l4[0] == 8 || l4[0] == 0) {
			return uint64(binary.BigEndian.Uint16(l4[4:]))
		}
	case protoICMPv6:
		// RFC 4443 §4: echo request 128, reply 129.
		if len(l4) >= 6 && (l4[0] == 128 || l4[0] == 129) {
			return uint64(binary.BigEndian.Uint16(l4[4:]))
		}
	}
	return 0
}

// classifyIPv4 fills c from the IPv4 header at off (RFC 791).
func classifyIPv4(frame []byte, off int, hosts HostMode, c *Class) bool {
	if len(frame) < off+20 || frame[off]>>4 != 4 {
		return false
	}
	ihl := int(frame[off]&0x0f) * 4
	if ihl < 20 || len(frame) < off+ihl {
		return false
	}
	ip := frame[off:]
	proto := ip[9]
	src, dst := ip[12:16], ip[16:20]
	h := mix(mix(4, uint64(binary.BigEndian.Uint32(src))<<32|uint64(binary.BigEndian.Uint32(dst))), uint64(proto))
	fragment := binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 // MF or offset
	if !fragment {
		h = mix(h, ports(ip[ihl:], proto))
	}
	c.Flow = finish(h)
	c.Host = hostKey(src, dst, hosts)
	c.L3 = uint16(off)
	c.IPVersion = 4
	c.DSCP = ip[1] >> 2
	return true
}

// classifyIPv6 fills c from the IPv6 header at off (RFC 8200), walking the
// extension headers to the transport.
func classifyIPv6(frame []byte, off int, hosts HostMode, c *Class) bool {
	if len(frame) < off+40 || frame[off]>>4 != 6 {
		return false
	}
	ip := frame[off:]
	src, dst := ip[8:24], ip[24:40]
	h := mix(6, binary.BigEndian.Uint64(src))
	h = mix(h, binary.BigEndian.Uint64(src[8:]))
	h = mix(h, binary.BigEndian.Uint64(dst))
	h = mix(h, binary.BigEndian.Uint64(dst[8:]))
	next := ip[6]
	l4 := ip[40:]
	known := true
	for i := 0; i < maxIPv6ExtHeaders; i++ {
		switch next {
		case ip6HopByHop, ip6Routing, ip6DstOpts:
			if len(l4) < 2 || len(l4) < (int(l4[1])+1)*8 {
				known = false
				break
			}
			next, l4 = l4[0], l4[(int(l4[1])+1)*8:]
			continue
		case ip6AH:
			if len(l4) < 2 || len(l4) < (int(l4[1])+2)*4 {
				known = false
				break
			}
			next, l4 = l4[0], l4[(int(l4[1])+2)*4:]
			continue
		case ip6Fragment:
			// RFC 8200 §4.5: any fragment hides (or splits) the
			// transport header, so the flow is the addresses.
			known = false
		}
		break
	}
	if known {
		h = mix(mix(h, uint64(next)), ports(l4, next))
	}
	c.Flow = finish(h)
	c.Host = hostKey(src, dst, hosts)
	c.L3 = uint16(off)
	c.IPVersion = 6
	c.DSCP = (ip[0]&0x0f)<<2 | ip[1]>>6
	return true
}

// ecn returns the ECN field (RFC 3168 §5) of the IP header at off.
func ecn(frame []byte, off int, version uint8) uint8 {
	switch version {
	case 4:
		if len(frame) >= off+20 {
			return frame[off+1] & 3
		}
	case 6:
		if len(frame) >= off+40 {
			return frame[off+1] >> 4 & 3
		}
	}
	return 0
}

// ECN codepoints (RFC 3168 §5).
const (
	ecnNotECT = 0
	ecnCE     = 3
)

// SetCE sets ECN Congestion Experienced in the IP header at off and reports
// whether the packet was ECN-capable (ECT(0), ECT(1) or already CE); a Not-ECT
// packet is left unchanged. The IPv4 header checksum is patched incrementally
// (RFC 1624 eqn. 3); IPv6 has none.
func SetCE(frame []byte, off int, version uint8) bool {
	e := ecn(frame, off, version)
	if e == ecnNotECT {
		return false
	}
	if e == ecnCE {
		return true
	}
	switch version {
	case 4:
		old := binary.BigEndian.Uint16(frame[off:])
		frame[off+1] |= ecnCE
		updateChecksum(frame[off+10:off+12], old, binary.BigEndian.Uint16(frame[off:]))
	case 6:
		frame[off+1] |= ecnCE << 4
	}
	return true
}

// updateChecksum rewrites the one's complement checksum at sum after a 16-bit
// word changed from old to new: HC' = ~(~HC + ~m + m') (RFC 1624 §3).
func updateChecksum(sum []byte, old, new uint16) {
	x := uint32(^binary.BigEndian.Uint16(sum)) + uint32(^old) + uint32(new)
	x = (x & 0xffff) + x>>16
	x = (x & 0xffff) + x>>16
	binary.BigEndian.PutUint16(sum, ^uint16(x))
}
