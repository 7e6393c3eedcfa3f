package stack

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

func TestFixPacketTooBig(t *testing.T) {
	src, dst := netip.MustParseAddr("fd00:1::1"), netip.MustParseAddr("fd00:1::2")
	orig := ipv6Packet(dst, netip.MustParseAddr("fd00:2::2"), 64, header.UDPProtocolNumber, udpDatagram(1, 2, make([]byte, 1452)))
	body := make([]byte, header.ICMPv6PacketTooBigMinimumSize+len(orig[:1232]))
	body[0] = byte(header.ICMPv6PacketTooBig)
	copy(body[8:], orig)
	pkt := ipv6Packet(src, dst, 64, header.ICMPv6ProtocolNumber, body)
	frame := ethFrame(hostMAC, routerMAC, header.IPv6ProtocolNumber, pkt)

	e := testEndpoint(nil)
	e.tx = &txBatcher{}
	for _, mtu := range []uint32{1500, 1468, 9000} {
		x := testEndpoint(nil)
		x.SetMTU(mtu)
		e.tx.add(x)
	}
	e.fixPacketTooBig(frame)
	icmp := header.ICMPv6(frame[header.EthernetMinimumSize+header.IPv6MinimumSize:])
	if got := binary.BigEndian.Uint32(icmp[4:]); got != 1468 {
		t.Errorf("Packet Too Big MTU = %d, want 1468", got)
	}
	want := icmp.Checksum()
	icmp.SetChecksum(0)
	if c := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: icmp, Src: tcpip.AddrFrom16(src.As16()), Dst: tcpip.AddrFrom16(dst.As16())}); c != want {
		t.Errorf("checksum after the fix = %#04x, want %#04x", want, c)
	}
}
