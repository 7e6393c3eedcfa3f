package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// Transport protocol numbers as they appear in the IPv4 protocol and IPv6
// next-header fields (IANA).
const (
	protoTCP = uint8(header.TCPProtocolNumber)
	protoUDP = uint8(header.UDPProtocolNumber)

	// udpChecksumOffset is where the checksum sits in a UDP header
	// (RFC 768).
	udpChecksumOffset = 6
)

// checksumOffset returns where the checksum field sits in an L4 header of
// protocol proto (RFC 9293 section 3.1, RFC 768), and the header's minimum
// length. ok is false for protocols whose checksum netstack checks itself
// (ICMP, ICMPv6) or that we do not know.
func checksumOffset(proto uint8) (off, min int, ok bool) {
	switch proto {
	case protoTCP:
		return header.TCPChecksumOffset, header.TCPMinimumSize, true
	case protoUDP:
		return udpChecksumOffset, header.UDPMinimumSize, true
	}
	return 0, 0, false
}

// pseudoHeaderSum is the one's complement sum of the IPv4 (RFC 793) or
// IPv6 (RFC 8200 section 8.1) pseudo-header, not folded or inverted.
func pseudoHeaderSum(src, dst []byte, proto uint8, length int) uint16 {
	s := checksum.Checksum(src, 0)
	s = checksum.Checksum(dst, s)
	s = checksum.Combine(s, uint16(proto))
	return checksum.Combine(s, uint16(length))
}

// l4ChecksumValid reports whether the TCP or UDP segment l4 has a correct
// checksum. Protocols it does not know, and segments too short to hold a
// header (netstack counts those as malformed), count as valid.
func l4ChecksumValid(v6 bool, src, dst []byte, proto uint8, l4 []byte) bool {
	off, min, ok := checksumOffset(proto)
	if !ok || len(l4) < min {
		return true
	}
	if proto == protoUDP && !v6 && l4[off] == 0 && l4[off+1] == 0 {
		return true // RFC 768: no checksum.
	}
	return checksum.Checksum(l4, pseudoHeaderSum(src, dst, proto, len(l4))) == 0xffff
}

// setL4Checksum computes and stores the full checksum of segment l4.
func setL4Checksum(src, dst []byte, proto uint8, l4 []byte) {
	off, min, ok := checksumOffset(proto)
	if !ok || len(l4) < min {
		return
	}
	l4[off], l4[off+1] = 0, 0
	c := ^checksum.Checksum(l4, pseudoHeaderSum(src, dst, proto, len(l4)))
	if proto == protoUDP && c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones.
	}
	binary.BigEndian.PutUint16(l4[off:], c)
}

// completePartialChecksum finishes a CHECKSUM_PARTIAL segment: its checksum
// field already holds the folded pseudo-header sum (Linux
// skb_checksum_help), so the full checksum is the complement of the sum
// over the segment as it is.
func completePartialChecksum(proto uint8, l4 []byte) {
	off, min, ok := checksumOffset(proto)
	if !ok || len(l4) < min {
		return
	}
	c := ^checksum.Checksum(l4, 0)
	if proto == protoUDP && c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[off:], c)
}

// fillL4Checksum fills in the TCP or UDP checksum of an Ethernet frame that
// netstack originated (it left the checksum to us, since we claim TX
// offload). IPv4 fragments are left alone: the checksum of a fragmented
// datagram covers all fragments.
func fillL4Checksum(frame []byte) {
	off := 12
	for len(frame) >= off+2+vlanTagLength && isTPID(binary.BigEndian.Uint16(frame[off:])) {
		off += vlanTagLength
	}
	if len(frame) < off+2 {
		return
	}
	ip := frame[off+2:]
	switch binary.BigEndian.Uint16(frame[off:]) {
	case uint16(header.IPv4ProtocolNumber):
		h, l4, ok := ipv4Parts(ip)
		if !ok || h.More() || h.FragmentOffset() != 0 {
			return
		}
		setL4Checksum(ip[12:16], ip[16:20], h.Protocol(), l4)
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize {
			return
		}
		end := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
		if end > len(ip) {
			return
		}
		// Netstack's own TCP and UDP never add extension headers.
		setL4Checksum(ip[8:24], ip[24:40], ip[6], ip[header.IPv6MinimumSize:end])
	}
}

// ipv4Parts splits a validated-length IPv4 packet into header and payload
// (trimmed to the header's total length).
func ipv4Parts(ip []byte) (header.IPv4, []byte, bool) {
	if len(ip) < header.IPv4MinimumSize {
		return nil, nil, false
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ihl < header.IPv4MinimumSize || total < ihl || total > len(ip) {
		return nil, nil, false
	}
	return header.IPv4(ip), ip[ihl:total], true
}
