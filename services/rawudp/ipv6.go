package rawudp

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// IPv6 header facts (RFC 8200 §3, RFC 2464 §3).
const (
	etherTypeIPv6 = 0x86dd
	ipv6HeaderLen = 40
	protoUDP      = 17
	// hopLimitLinkMulticast is the Hop Limit of datagrams to a link- or
	// interface-scoped multicast group (ff01::/16, ff02::/16), such as
	// All_DHCP_Relay_Agents_and_Servers (ff02::1:2, RFC 8415 §7.1): the
	// socket API's default for multicast (RFC 3493 §5.2,
	// IPV6_MULTICAST_HOPS), which is what a DHCPv6 client on a kernel
	// socket sends. RFC 8415 sets no Hop Limit; the group's scope keeps
	// the datagram on the link whatever the value.
	hopLimitLinkMulticast = 1
	// hopLimitDefault is the Hop Limit of every other datagram: the
	// Internet default, as hosts' CurHopLimit (RFC 4861 §6.3.2, IANA's
	// default IP TTL of 64).
	hopLimitDefault = 64
)

// New6 returns a Conn for IPv6 UDP port (e.g. 546, the DHCPv6 client;
// 547, the server) on link that queues at most queue received datagrams
// (e.g. 64; at least 1).
//
// Its Match takes only frames of EtherType 0x86dd whose fixed header's
// Next Header is UDP (17): no extension header is walked, so a datagram
// behind a Hop-by-Hop, Routing, Fragment or Destination Options header
// is not matched and is left to the caller (DHCPv6 never needs them; a
// fragmented datagram is not reassembled). Deliver checks the Payload
// Length, the UDP length (at least 8, at most the payload; octets past
// it are ignored, as for IPv4) and the UDP checksum over the IPv6
// pseudo-header, which is mandatory: a zero checksum is malformed (RFC
// 8200 §8.1). Frames that fail are counted in Stats.Malformed.
//
// Send builds a frame with Hop Limit 1 to a link- or interface-scoped
// multicast group and 64 otherwise (see Build6); a nil DstMAC is the
// multicast MAC of a multicast destination (RFC 2464 §7) and
// ErrNoDstMAC for a unicast one.
func New6(link Link, port uint16, queue int) *Conn {
	c := New(link, port, queue)
	c.v6 = true
	return c
}

// match6 reports whether frame is an IPv6 UDP datagram to port, its UDP
// header straight after the fixed header.
func match6(frame []byte, port uint16) bool {
	if len(frame) < 14+ipv6HeaderLen+8 || binary.BigEndian.Uint16(frame[12:]) != etherTypeIPv6 {
		return false
	}
	ip := frame[14:]
	if ip[0]>>4 != 6 || ip[6] != protoUDP {
		return false
	}
	return binary.BigEndian.Uint16(ip[ipv6HeaderLen+2:]) == port
}

// parse6 validates the IPv6 and UDP headers of a frame match6 accepted
// and copies the datagram out.
func parse6(frame []byte) (Packet, bool) {
	ip := frame[14:]
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if plen < 8 || ipv6HeaderLen+plen > len(ip) {
		return Packet{}, false // a Jumbo Payload (length 0) needs a Hop-by-Hop header, so is malformed here
	}
	u := ip[ipv6HeaderLen : ipv6HeaderLen+plen]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen < 8 || ulen > len(u) {
		return Packet{}, false
	}
	u = u[:ulen]
	if binary.BigEndian.Uint16(u[6:]) == 0 || fold(sum(u, pseudo6(ip[8:40], ulen))) != 0xffff {
		return Packet{}, false
	}
	src := netip.AddrFrom16([16]byte(ip[8:24]))
	dst := netip.AddrFrom16([16]byte(ip[24:40]))
	return Packet{
		Payload: append([]byte(nil), u[8:]...),
		Src:     netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:])),
		Dst:     netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:])),
		SrcMAC:  append(net.HardwareAddr(nil), frame[6:12]...),
		DstMAC:  append(net.HardwareAddr(nil), frame[0:6]...),
	}, true
}

// pseudo6 is the one's complement sum of the IPv6 pseudo-header of a UDP
// datagram of ulen octets between the addresses in addrs (source then
// destination, 32 octets) (RFC 8200 §8.1: addresses, upper-layer packet
// length, Next Header).
func pseudo6(addrs []byte, ulen int) uint32 {
	return sum(addrs, 0) + uint32(ulen>>16) + uint32(ulen&0xffff) + protoUDP
}

// send6 is Send on an IPv6 Conn.
func (c *Conn) send6(p Packet) error {
	src, dst := p.Src.Addr(), p.Dst.Addr()
	if !src.Is6() || src.Is4In6() || !dst.Is6() || dst.Is4In6() {
		return ErrAddress
	}
	if ipv6HeaderLen+8+len(p.Payload) > MTU {
		return ErrTooBig
	}
	mac := p.DstMAC
	if mac == nil {
		if !dst.IsMulticast() {
			return ErrNoDstMAC
		}
		mac = MulticastMAC(dst)
	}
	frame := Build6(mac, c.link.HardwareAddr(), p.Src, p.Dst, p.Payload)
	if err := c.link.WriteFrame(frame); err != nil {
		return err
	}
	c.stats.Sent.Add(1)
	return nil
}

// MulticastMAC is the Ethernet address an IPv6 multicast address a is
// sent to: 33:33 and a's last four octets (RFC 2464 §7), e.g.
// 33:33:00:01:00:02 for ff02::1:2.
func MulticastMAC(a netip.Addr) net.HardwareAddr {
	b := a.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// Build6 returns an Ethernet frame carrying payload in an IPv6 UDP
// datagram from src to dst (zones ignored) with the UDP checksum set
// (RFC 8200 §8.1, a computed zero sent as all ones), Traffic Class and
// Flow Label zero, and Hop Limit 1 to a link- or interface-scoped
// multicast group, 64 to anything else. payload must fit in 65527
// octets.
func Build6(dstMAC, srcMAC net.HardwareAddr, src, dst netip.AddrPort, payload []byte) []byte {
	ulen := 8 + len(payload)
	f := make([]byte, 14+ipv6HeaderLen+ulen)
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv6)
	ip := f[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(ulen))
	ip[6] = protoUDP
	d := dst.Addr()
	ip[7] = hopLimitDefault
	if d.IsInterfaceLocalMulticast() || d.IsLinkLocalMulticast() {
		ip[7] = hopLimitLinkMulticast
	}
	s16, d16 := src.Addr().As16(), d.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	u := ip[ipv6HeaderLen:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(ulen))
	copy(u[8:], payload)
	cs := ^fold(sum(u, pseudo6(ip[8:40], ulen)))
	if cs == 0 {
		cs = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], cs)
	return f
}
