package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// tcpSegmenter splits one oversized TCP frame (a GROOn merge being
// forwarded) into frames of at most mss payload bytes, as Linux software
// GSO does (net/ipv4/tcp_offload.c tcp_gso_segment, inet_gso_segment):
// every segment gets the link, IP and TCP headers of the original; the
// sequence number advances by the payload before it; CWR stays on the
// first segment only and PSH/FIN on the last only; the IPv4 ID increments
// per segment; lengths and both checksums are recomputed in full.
//
// It works on the flattened frame; it does not allocate.
type tcpSegmenter struct {
	frame []byte
	// l2 is the link header length, ipLen the IP header's, tcpLen the
	// TCP header's (options included); payload is the TCP payload size.
	l2, ipLen, tcpLen, payload, mss int
	v6                              bool
}

// newTCPSegmenter checks frame: l2 bytes of link header ending in the
// Ethertype, then IPv4 without options or IPv6 without extension headers,
// then TCP. mtu is the egress L3 MTU; segments carry at most
// min(mss, what fits the MTU) payload bytes. ok is false if frame is not
// such a TCP packet, or mss leaves no room.
func newTCPSegmenter(frame []byte, l2, mss, mtu int) (s tcpSegmenter, ok bool) {
	if l2 < 2 || len(frame) < l2 {
		return s, false
	}
	ip := frame[l2:]
	var end int
	switch binary.BigEndian.Uint16(frame[l2-2:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) < header.IPv4MinimumSize || ip[0] != 0x45 || ip[9] != protoTCP {
			return s, false
		}
		s.ipLen, end = header.IPv4MinimumSize, int(binary.BigEndian.Uint16(ip[2:]))
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 { // MF or a fragment offset
			return s, false
		}
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 || ip[6] != protoTCP {
			return s, false
		}
		s.ipLen, s.v6 = header.IPv6MinimumSize, true
		end = header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
	default:
		return s, false
	}
	if end > len(ip) || end < s.ipLen+header.TCPMinimumSize {
		return s, false
	}
	s.tcpLen = int(ip[s.ipLen+12]>>4) * 4
	if s.tcpLen < header.TCPMinimumSize || s.ipLen+s.tcpLen > end {
		return s, false
	}
	s.mss = min(mss, mtu-s.ipLen-s.tcpLen)
	if s.mss <= 0 {
		return s, false
	}
	s.frame, s.l2 = frame[:l2+end], l2
	s.payload = end - s.ipLen - s.tcpLen
	return s, true
}

// count is the number of segments.
func (s *tcpSegmenter) count() int {
	if s.payload == 0 {
		return 1
	}
	return (s.payload + s.mss - 1) / s.mss
}

// hdrLen is the length of all headers of a segment.
func (s *tcpSegmenter) hdrLen() int { return s.l2 + s.ipLen + s.tcpLen }

// segment writes segment i into dst, which must hold hdrLen()+mss bytes,
// and returns its length.
func (s *tcpSegmenter) segment(i int, dst []byte) int {
	h := s.hdrLen()
	start := i * s.mss
	n := min(s.mss, s.payload-start)
	copy(dst, s.frame[:h])
	copy(dst[h:], s.frame[h+start:h+start+n])
	seg := dst[:h+n]
	ip := seg[s.l2:]
	tcp := ip[s.ipLen:]
	last := i == s.count()-1

	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(tcp[4:])+uint32(start))
	flags := tcp[13]
	if i > 0 {
		flags &^= uint8(header.TCPFlagCwr)
	}
	if !last {
		flags &^= uint8(header.TCPFlagFin | header.TCPFlagPsh)
	}
	tcp[13] = flags

	l4 := s.tcpLen + n
	var src, dstAddr []byte
	if s.v6 {
		binary.BigEndian.PutUint16(ip[4:], uint16(l4))
		src, dstAddr = ip[8:24], ip[24:40]
	} else {
		binary.BigEndian.PutUint16(ip[2:], uint16(s.ipLen+l4))
		binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+uint16(i))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:s.ipLen], 0))
		src, dstAddr = ip[12:16], ip[16:20]
	}
	setL4Checksum(src, dstAddr, protoTCP, tcp[:l4])
	return h + n
}
