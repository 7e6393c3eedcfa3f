package stack

import (
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// FuzzLinkTCPJoin feeds the superframe join's parsers (linkTCP,
// tcpContinues, linkTCPChecksumValid) two arbitrary frames of at least
// an Ethernet and an IPv6 header, as the fast path hands them over
// (decrypted segments a peer chose): no panic, and the header lengths
// linkTCP returns lie inside the frame.
func FuzzLinkTCPJoin(f *testing.F) {
	seg := func(seq uint32, flags uint8, payload int) []byte {
		fr := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+header.TCPMinimumSize+payload)
		ip := fr[header.EthernetMinimumSize:]
		ip[0], ip[9] = 0x45, protoTCP
		tcp := ip[header.IPv4MinimumSize:]
		tcp[4], tcp[5], tcp[6], tcp[7] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
		tcp[12], tcp[13] = 5<<4, flags
		return fr
	}
	f.Add(seg(1, uint8(header.TCPFlagAck), 100), seg(101, uint8(header.TCPFlagAck|header.TCPFlagPsh), 100))
	f.Add(seg(1, uint8(header.TCPFlagAck), 100), seg(1, uint8(header.TCPFlagSyn), 0))
	v6 := make([]byte, header.EthernetMinimumSize+header.IPv6MinimumSize+header.TCPMinimumSize+8)
	v6[header.EthernetMinimumSize] = 0x60
	v6[header.EthernetMinimumSize+6] = protoTCP
	v6[header.EthernetMinimumSize+header.IPv6MinimumSize+12] = 0xf0 // data offset 60, past the end
	v6[header.EthernetMinimumSize+header.IPv6MinimumSize+13] = uint8(header.TCPFlagAck)
	f.Add(v6, v6)
	f.Fuzz(func(t *testing.T, s, fr []byte) {
		const least = header.EthernetMinimumSize + header.IPv6MinimumSize
		if len(s) < least || len(fr) < least {
			return
		}
		ipLen, l4Len := linkTCP(s)
		if ipLen == 0 {
			return
		}
		if header.EthernetMinimumSize+ipLen+l4Len >= len(s) {
			t.Fatalf("linkTCP = %d, %d for a %d-byte frame: headers past its end", ipLen, l4Len, len(s))
		}
		linkTCPChecksumValid(s, ipLen)
		if i2, l2 := linkTCP(fr); i2 == ipLen && l2 == l4Len {
			tcpContinues(s, fr, ipLen, l4Len, 0)
			linkTCPChecksumValid(fr, ipLen)
		}
	})
}
