package stack

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/gvrouter/gvrouter/hw"
)

// TestInputPolicyAdmitsOwnFlows: with DropNewInput on the WAN interface,
// the answer to a UDP query from the router's own socket passes (the
// engine tracked the router's outbound flow), while UDP from the same
// server to another of the router's ports is a new flow and dropped.
func TestInputPolicyAdmitsOwnFlows(t *testing.T) {
	l, _ := newNATLab(t, nil)
	cfg := l.config()
	cfg.Interfaces[1].DropNewInput = true
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	srv, err := gonet.DialUDP(l.b.Stack, &tcpip.FullAddress{Addr: tcpip.AddrFromSlice(bIP4.AsSlice()), Port: 53}, nil, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			srv.WriteTo(buf[:n], from)
		}
	}()
	q, err := gonet.DialUDP(l.r.Stack(), nil, &tcpip.FullAddress{Addr: tcpip.AddrFromSlice(bIP4.AsSlice()), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := q.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	if n, err := q.Read(buf); err != nil || string(buf[:n]) != "query" {
		t.Fatalf("answer to the router's own query: %q, %v", buf[:n], err)
	}
	drops := l.r.Interface("wan").Stats().Drops["firewall_input"]
	// The same server, from another port, to the router's port: new.
	port := uint16(q.LocalAddr().(*net.UDPAddr).Port)
	other, err := gonet.DialUDP(l.b.Stack, nil, &tcpip.FullAddress{Addr: tcpip.AddrFromSlice(wanIP4.AsSlice()), Port: port}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Write([]byte("unsolicited")); err != nil {
		t.Fatal(err)
	}
	q.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := q.Read(buf); err == nil {
		t.Fatalf("the router's socket received unsolicited %q", buf[:n])
	}
	if got := l.r.Interface("wan").Stats().Drops["firewall_input"]; got != drops+1 {
		t.Fatalf("firewall_input drops %d -> %d, want one more", drops, got)
	}
}

// TestInputPolicyEveryProtocol: from the WAN to the router, a packet of
// any protocol but TCP, UDP, ICMP and IGMP is a new flow, dropped as
// firewall_input, in both families, and so is the first fragment of a
// UDP datagram; echo requests and IGMP pass.
func TestInputPolicyEveryProtocol(t *testing.T) {
	l, _ := newNATLab(t, nil)
	wan := l.r.Interface("wan").ep
	wan6 := netip.MustParseAddr("fd00:2::1")
	classifyWAN := func(frame []byte) verdict {
		f := hw.Frame{Data: frame, WireLen: len(frame), CsumValid: true}
		return classify(&f, &rxRun{mac: wan.mac, mtu: 1500, local: wan.local.Load(), nat: wan.nat, in: natIface(wan.nicID), inputDrop: true})
	}
	payload := []byte("gvrouter generic payload")
	for _, proto := range []tcpip.TransportProtocolNumber{41, 47, 50, 132, 253, 59} {
		for _, frame := range [][]byte{
			ethFrame(wanMAC, bMAC, header.IPv4ProtocolNumber, ipv4Packet(bIP4, wanIP4, 64, proto, payload)),
			ethFrame(wanMAC, bMAC, header.IPv6ProtocolNumber, ipv6Packet(bIP6, wan6, 64, proto, payload)),
		} {
			if v := classifyWAN(frame); !v.dropped || v.drop != dropFirewallInput {
				t.Errorf("proto %d to the router from WAN: dropped=%v (%s), want firewall_input", proto, v.dropped, v.drop)
			}
		}
	}
	// A UDP datagram's first fragment.
	udp := make([]byte, 8+16)
	binary.BigEndian.PutUint16(udp, 1000)
	binary.BigEndian.PutUint16(udp[2:], 7)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+64))
	ip := ipv4Packet(bIP4, wanIP4, 64, header.UDPProtocolNumber, udp)
	binary.BigEndian.PutUint16(ip[6:], 0x2000) // MF
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
	if v := classifyWAN(ethFrame(wanMAC, bMAC, header.IPv4ProtocolNumber, ip)); !v.dropped || v.drop != dropFirewallInput {
		t.Errorf("first UDP fragment to the router: dropped=%v (%s), want firewall_input", v.dropped, v.drop)
	}
	// And IPv6's: a Fragment header, then the UDP header.
	frag6 := append(fragmentHeader(protoUDP, 0, true, 0x77), udp...)
	if v := classifyWAN(ethFrame(wanMAC, bMAC, header.IPv6ProtocolNumber, ipv6Packet(bIP6, wan6, 64, nhFragment, frag6))); !v.dropped || v.drop != dropFirewallInput {
		t.Errorf("first IPv6 UDP fragment to the router: dropped=%v (%s), want firewall_input", v.dropped, v.drop)
	}
	// Echo, IGMP and a DHCP server's answer pass to netstack.
	dhcp := make([]byte, 8+16)
	binary.BigEndian.PutUint16(dhcp, 67)
	binary.BigEndian.PutUint16(dhcp[2:], 68)
	binary.BigEndian.PutUint16(dhcp[4:], uint16(len(dhcp)))
	echo := make([]byte, 8+8)
	echo[0] = 8
	binary.BigEndian.PutUint16(echo[2:], ^checksum.Checksum(echo, 0))
	igmp := make([]byte, 8)
	igmp[0] = 0x11
	binary.BigEndian.PutUint16(igmp[2:], ^checksum.Checksum(igmp, 0))
	for name, frame := range map[string][]byte{
		"echo": ethFrame(wanMAC, bMAC, header.IPv4ProtocolNumber, ipv4Packet(bIP4, wanIP4, 64, header.ICMPv4ProtocolNumber, echo)),
		"igmp": ethFrame(wanMAC, bMAC, header.IPv4ProtocolNumber, ipv4Packet(bIP4, netip.MustParseAddr("224.0.0.1"), 1, 2, igmp)),
		"dhcp": ethFrame(wanMAC, bMAC, header.IPv4ProtocolNumber, ipv4Packet(bIP4, wanIP4, 64, header.UDPProtocolNumber, dhcp)),
	} {
		if v := classifyWAN(frame); v.dropped {
			t.Errorf("%s to the router from WAN: dropped (%s)", name, v.drop)
		}
	}
}
