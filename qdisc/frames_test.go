package qdisc

import (
	"encoding/binary"
	"net/netip"
)

// Frame builders for the tests: Ethernet II with IPv4 or IPv6 and a
// transport header, padded with zeros to size bytes.

func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// frame4 builds an IPv4 frame; proto 6/17 get ports, 1 an echo request with id sport.
func frame4(src, dst string, proto uint8, sport, dport uint16, size int, tos uint8) []byte {
	if size < 14+20+8 {
		size = 14 + 20 + 8
	}
	f := make([]byte, size)
	copy(f[0:6], []byte{2, 0, 0, 0, 0, 1})
	copy(f[6:12], []byte{2, 0, 0, 0, 0, 2})
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv4)
	ip := f[14:]
	ip[0] = 0x45
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64
	ip[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip[:20]))
	l4 := ip[20:]
	switch proto {
	case protoICMP:
		l4[0] = 8
		binary.BigEndian.PutUint16(l4[4:], sport)
	default:
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
	}
	return f
}

func udp4(src, dst string, sport, dport uint16, size int) []byte {
	return frame4(src, dst, protoUDP, sport, dport, size, 0)
}

// frame6 builds an IPv6 frame with the given traffic class.
func frame6(src, dst string, proto uint8, sport, dport uint16, size int, tc uint8) []byte {
	if size < 14+40+8 {
		size = 14 + 40 + 8
	}
	f := make([]byte, size)
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv6)
	ip := f[14:]
	ip[0] = 0x60 | tc>>4
	ip[1] = tc << 4
	binary.BigEndian.PutUint16(ip[4:], uint16(size-54))
	ip[6] = proto
	ip[7] = 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	l4 := ip[40:]
	switch proto {
	case protoICMPv6:
		l4[0] = 128
		binary.BigEndian.PutUint16(l4[4:], sport)
	default:
		binary.BigEndian.PutUint16(l4[0:], sport)
		binary.BigEndian.PutUint16(l4[2:], dport)
	}
	return f
}

// srcPort reads the UDP/TCP source port (or echo id) of a test frame built above.
func srcPort(f []byte) uint16 {
	switch binary.BigEndian.Uint16(f[12:]) {
	case etherTypeIPv4:
		l4 := f[14+20:]
		if f[14+9] == protoICMP {
			return binary.BigEndian.Uint16(l4[4:])
		}
		return binary.BigEndian.Uint16(l4)
	case etherTypeIPv6:
		return binary.BigEndian.Uint16(f[14+40:])
	}
	return 0
}

// srcAddr4 reads the IPv4 source of a test frame.
func srcAddr4(f []byte) netip.Addr {
	return netip.AddrFrom4([4]byte(f[14+12 : 14+16]))
}
