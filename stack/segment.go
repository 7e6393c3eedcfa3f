package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// segmenter splits one oversized TCP or UDP frame into frames of wire
// size, as Linux software GSO does: a GROOn merge being forwarded
// (net/ipv4/tcp_offload.c tcp_gso_segment, inet_gso_segment), or a local
// sender's superframe (hw.Frame.GSO: TSO, or UDP segmentation,
// net/ipv4/udp_offload.c __udp_gso_segment) that the egress cannot take
// whole or that goes to netstack. Every segment gets the link and IP
// headers of the original and its own L4 header; the IPv4 ID increments
// per segment; lengths and checksums are recomputed in full, so a
// segment never carries a partial checksum.
//
//   - TCP: segments of at most mss payload bytes; the sequence number
//     advances by the payload before it; CWR stays on the first segment
//     only and PSH/FIN on the last only.
//   - UDP: datagrams of exactly mss payload bytes (the last one shorter),
//     each a message of the sender's: they are never cut smaller to fit
//     an MTU (newSegmenter refuses the frame instead).
//
// It works on the flattened frame; it does not allocate.
type segmenter struct {
	frame []byte
	// l2 is the link header length, ipLen the IP header's, l4Len the L4
	// header's (TCP options included; 8 for UDP); payload is the L4
	// payload size.
	l2, ipLen, l4Len, payload, mss int
	v6, udp                        bool
}

// newSegmenter checks frame: l2 bytes of link header ending in the
// Ethertype, then IPv4 without options or fragmentation or IPv6 without
// extension headers, then TCP or UDP. mtu is the L3 MTU the segments must
// fit: a TCP segment carries at most min(mss, what fits the MTU) payload
// bytes, a UDP datagram mss bytes. ok is false if frame is not such a
// packet, or mss leaves no room (a UDP datagram of mss bytes does not fit
// the MTU).
func newSegmenter(frame []byte, l2, mss, mtu int) (s segmenter, ok bool) {
	if l2 < 2 || len(frame) < l2 {
		return s, false
	}
	ip := frame[l2:]
	var end int
	var proto uint8
	switch binary.BigEndian.Uint16(frame[l2-2:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) < header.IPv4MinimumSize || ip[0] != 0x45 {
			return s, false
		}
		s.ipLen, end, proto = header.IPv4MinimumSize, int(binary.BigEndian.Uint16(ip[2:])), ip[9]
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 { // MF or a fragment offset
			return s, false
		}
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
			return s, false
		}
		s.ipLen, s.v6, proto = header.IPv6MinimumSize, true, ip[6]
		end = header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
	default:
		return s, false
	}
	switch proto {
	case protoTCP:
		if end > len(ip) || end < s.ipLen+header.TCPMinimumSize {
			return s, false
		}
		s.l4Len = int(ip[s.ipLen+12]>>4) * 4
		if s.l4Len < header.TCPMinimumSize || s.ipLen+s.l4Len > end {
			return s, false
		}
		s.mss = min(mss, mtu-s.ipLen-s.l4Len)
	case protoUDP:
		if end > len(ip) || end < s.ipLen+header.UDPMinimumSize {
			return s, false
		}
		s.udp, s.l4Len, s.mss = true, header.UDPMinimumSize, mss
		if s.ipLen+s.l4Len+mss > mtu {
			return s, false
		}
	default:
		return s, false
	}
	if s.mss <= 0 {
		return s, false
	}
	s.frame, s.l2 = frame[:l2+end], l2
	s.payload = end - s.ipLen - s.l4Len
	return s, true
}

// count is the number of segments.
func (s *segmenter) count() int {
	if s.payload == 0 {
		return 1
	}
	return (s.payload + s.mss - 1) / s.mss
}

// hdrLen is the length of all headers of a segment.
func (s *segmenter) hdrLen() int { return s.l2 + s.ipLen + s.l4Len }

// segment writes segment i into dst, which must hold hdrLen()+mss bytes,
// and returns its length.
func (s *segmenter) segment(i int, dst []byte) int {
	h := s.hdrLen()
	start := i * s.mss
	n := min(s.mss, s.payload-start)
	copy(dst, s.frame[:h])
	copy(dst[h:], s.frame[h+start:h+start+n])
	seg := dst[:h+n]
	ip := seg[s.l2:]
	l4 := ip[s.ipLen:]
	proto := protoTCP
	if s.udp {
		proto = protoUDP
		binary.BigEndian.PutUint16(l4[4:], uint16(s.l4Len+n))
	} else {
		last := i == s.count()-1
		binary.BigEndian.PutUint32(l4[4:], binary.BigEndian.Uint32(l4[4:])+uint32(start))
		flags := l4[13]
		if i > 0 {
			flags &^= uint8(header.TCPFlagCwr)
		}
		if !last {
			flags &^= uint8(header.TCPFlagFin | header.TCPFlagPsh)
		}
		l4[13] = flags
	}

	n4 := s.l4Len + n
	var src, dstAddr []byte
	if s.v6 {
		binary.BigEndian.PutUint16(ip[4:], uint16(n4))
		src, dstAddr = ip[8:24], ip[24:40]
	} else {
		binary.BigEndian.PutUint16(ip[2:], uint16(s.ipLen+n4))
		binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+uint16(i))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:s.ipLen], 0))
		src, dstAddr = ip[12:16], ip[16:20]
	}
	setL4Checksum(src, dstAddr, proto, l4[:n4])
	return h + n
}
