package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/natengine"
)

// ECN field values (RFC 3168 §5): the two low bits of the IPv4 TOS octet
// and of the IPv6 Traffic Class.
const (
	ecnMask  = 0x3
	ecnNotCT = 0x0 // Not-ECT: the sender does not do ECN
	ecnCE    = 0x3 // Congestion Experienced
)

// markCE sets Congestion Experienced on the IP packet in an Ethernet frame
// (in-band tags skipped) if it is ECN-capable (ECT(0) or ECT(1), or
// already CE), patching the IPv4 header checksum (RFC 1624), and reports
// whether it did: a packet that is not ECN-capable must be dropped
// instead (RFC 3168 §5). The transport checksums do not cover these bits.
func markCE(frame []byte) bool {
	off := 12
	for range maxTags {
		if len(frame) < off+2+vlanTagLength || !isTPID(binary.BigEndian.Uint16(frame[off:])) {
			break
		}
		off += vlanTagLength
	}
	if len(frame) < off+2 {
		return false
	}
	ip := frame[off+2:]
	switch binary.BigEndian.Uint16(frame[off:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) < header.IPv4MinimumSize || ip[0]>>4 != 4 {
			return false
		}
		tos := ip[1]
		if tos&ecnMask == ecnNotCT {
			return false
		}
		if tos&ecnMask == ecnCE {
			return true
		}
		old := binary.BigEndian.Uint16(ip[0:])
		ip[1] = tos | ecnCE
		sum := binary.BigEndian.Uint16(ip[10:])
		binary.BigEndian.PutUint16(ip[10:], natengine.UpdateChecksum16(sum, old, binary.BigEndian.Uint16(ip[0:])))
		return true
	case uint16(header.IPv6ProtocolNumber):
		// Traffic Class is bits 4..11 of the first word: its ECN bits
		// are bits 4 and 5 of the second octet.
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
			return false
		}
		ecn := ip[1] >> 4 & ecnMask
		if ecn == ecnNotCT {
			return false
		}
		ip[1] |= ecnCE << 4
		return true
	}
	return false
}
