package stack

import (
	"encoding/binary"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Test frames are built from gVisor's header codecs.

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ethFrame(dst, src net.HardwareAddr, et tcpip.NetworkProtocolNumber, payload []byte) []byte {
	f := make([]byte, header.EthernetMinimumSize+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{
		DstAddr: tcpip.LinkAddress(dst), SrcAddr: tcpip.LinkAddress(src), Type: et,
	})
	copy(f[header.EthernetMinimumSize:], payload)
	return f
}

// ipv4Packet builds an IPv4 packet with a correct header checksum and, for
// TCP/UDP, a correct L4 checksum.
func ipv4Packet(src, dst netip.Addr, ttl uint8, proto tcpip.TransportProtocolNumber, l4 []byte) []byte {
	p := make([]byte, header.IPv4MinimumSize+len(l4))
	ip := header.IPv4(p)
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(p)),
		ID:          0x1234,
		TTL:         ttl,
		Protocol:    uint8(proto),
		SrcAddr:     tcpip.AddrFrom4(src.As4()),
		DstAddr:     tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(p[header.IPv4MinimumSize:], l4)
	setL4Checksum(p[12:16], p[16:20], uint8(proto), p[header.IPv4MinimumSize:])
	return p
}

func ipv6Packet(src, dst netip.Addr, hop uint8, proto tcpip.TransportProtocolNumber, l4 []byte) []byte {
	p := make([]byte, header.IPv6MinimumSize+len(l4))
	header.IPv6(p).Encode(&header.IPv6Fields{
		PayloadLength:     uint16(len(l4)),
		TransportProtocol: proto,
		HopLimit:          hop,
		SrcAddr:           tcpip.AddrFrom16(src.As16()),
		DstAddr:           tcpip.AddrFrom16(dst.As16()),
	})
	copy(p[header.IPv6MinimumSize:], l4)
	if proto == header.ICMPv6ProtocolNumber {
		icmp := header.ICMPv6(p[header.IPv6MinimumSize:])
		icmp.SetChecksum(0)
		icmp.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{
			Header: icmp, Src: tcpip.AddrFrom16(src.As16()), Dst: tcpip.AddrFrom16(dst.As16()),
		}))
	} else {
		setL4Checksum(p[8:24], p[24:40], uint8(proto), p[header.IPv6MinimumSize:])
	}
	return p
}

// icmpEcho is an ICMPv4 echo request with a correct checksum.
func icmpEcho(id, seq uint16, payload []byte) []byte {
	m := make([]byte, header.ICMPv4MinimumSize+len(payload))
	icmp := header.ICMPv4(m)
	icmp.SetType(header.ICMPv4Echo)
	icmp.SetIdent(id)
	icmp.SetSequence(seq)
	copy(m[header.ICMPv4MinimumSize:], payload)
	icmp.SetChecksum(^checksum.Checksum(m, 0))
	return m
}

func icmpv6Echo(id, seq uint16) []byte {
	m := make([]byte, header.ICMPv6EchoMinimumSize+8)
	icmp := header.ICMPv6(m)
	icmp.SetType(header.ICMPv6EchoRequest)
	icmp.SetIdent(id)
	icmp.SetSequence(seq)
	return m
}

func udpDatagram(srcPort, dstPort uint16, payload []byte) []byte {
	u := make([]byte, header.UDPMinimumSize+len(payload))
	header.UDP(u).Encode(&header.UDPFields{SrcPort: srcPort, DstPort: dstPort, Length: uint16(len(u))})
	copy(u[header.UDPMinimumSize:], payload)
	return u
}

// corrupt flips a bit at offset off of b and returns b.
func corrupt(b []byte, off int) []byte {
	b[off] ^= 0x40
	return b
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
