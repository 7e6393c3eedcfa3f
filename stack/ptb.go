package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// fillOriginated completes a frame netstack originated: the L4 checksum
// (fillL4Checksum) and the MTU of an ICMPv6 Packet Too Big.
func (e *Endpoint) fillOriginated(frame []byte) {
	fillL4Checksum(frame)
	e.fixPacketTooBig(frame)
}

// fixPacketTooBig fills in the MTU field of an ICMPv6 Packet Too Big
// (RFC 4443 section 3.2) that netstack sent with MTU 0: the pinned
// gVisor's ipv6 returnError passes 0 as the type-specific word for
// icmpReasonPacketTooBig, and a host that gets MTU 0 never lowers its path
// MTU (Linux: "Packet too big: mtu=0"), so TCP over IPv6 stalls behind any
// smaller link, such as a SecY's (lower MTU - 32). The egress MTU is not
// known here; the largest interface MTU below the quoted packet's length
// is: the packet was too big for its egress interface, and every other
// interface whose MTU is below its length would be too. At least 1280
// (RFC 8200 section 5). The checksum is patched incrementally (RFC 1624).
func (e *Endpoint) fixPacketTooBig(frame []byte) {
	off := 12
	for len(frame) >= off+2+vlanTagLength && isTPID(binary.BigEndian.Uint16(frame[off:])) {
		off += vlanTagLength
	}
	if len(frame) < off+2 || binary.BigEndian.Uint16(frame[off:]) != uint16(header.IPv6ProtocolNumber) {
		return
	}
	ip := frame[off+2:]
	const icmpOff = header.IPv6MinimumSize
	if len(ip) < icmpOff+header.ICMPv6PacketTooBigMinimumSize+header.IPv6MinimumSize ||
		ip[6] != uint8(header.ICMPv6ProtocolNumber) || ip[icmpOff] != uint8(header.ICMPv6PacketTooBig) ||
		binary.BigEndian.Uint32(ip[icmpOff+4:]) != 0 {
		return
	}
	quoted := ip[icmpOff+header.ICMPv6PacketTooBigMinimumSize:]
	size := uint32(header.IPv6MinimumSize) + uint32(binary.BigEndian.Uint16(quoted[4:]))
	mtu := uint32(header.IPv6MinimumMTU)
	if e.tx != nil {
		if eps := e.tx.eps.Load(); eps != nil {
			for _, x := range *eps {
				if m := x.MTU(); m < size && m > mtu {
					mtu = m
				}
			}
		}
	}
	binary.BigEndian.PutUint32(ip[icmpOff+4:], mtu)
	// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'); the old words were 0.
	c := ^uint32(binary.BigEndian.Uint16(ip[icmpOff+2:])) & 0xffff
	c += mtu>>16 + mtu&0xffff
	for c > 0xffff {
		c = c&0xffff + c>>16
	}
	binary.BigEndian.PutUint16(ip[icmpOff+2:], ^uint16(c))
}
