package rawudp

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

var (
	clientLL = netip.MustParseAddr("fe80::ff:fe00:1")
	serverLL = netip.MustParseAddr("fe80::ff:fe00:9")
	agents   = netip.MustParseAddr("ff02::1:2") // All_DHCP_Relay_Agents_and_Servers
)

// TestBuild6 checks Build6's headers, checksum and Hop Limit with
// gVisor's independent IPv6 and UDP header code.
func TestBuild6(t *testing.T) {
	for _, tc := range []struct {
		dst      netip.Addr
		hopLimit uint8
	}{
		{agents, 1},                                // link-scoped multicast
		{netip.MustParseAddr("ff01::1"), 1},        // interface-local multicast
		{netip.MustParseAddr("ff05::1:3"), 64},     // site-scoped: not kept on the link by scope
		{serverLL, 64},                             // unicast
		{netip.MustParseAddr("2001:db8::547"), 64}, // global unicast
	} {
		t.Run(tc.dst.String(), func(t *testing.T) {
			payload := []byte("hello dhcpv6, odd length")
			src := netip.AddrPortFrom(clientLL, 546)
			dst := netip.AddrPortFrom(tc.dst, 547)
			f := Build6(MulticastMAC(agents), net.HardwareAddr{2, 0, 0, 0, 0, 1}, src, dst, payload)
			if got := binary.BigEndian.Uint16(f[12:]); got != 0x86dd {
				t.Fatalf("EtherType = %#x, want 0x86dd", got)
			}
			ip := header.IPv6(f[14:])
			if !ip.IsValid(len(f) - 14) {
				t.Fatalf("IPv6 header not valid")
			}
			if ip.TransportProtocol() != header.UDPProtocolNumber || ip.HopLimit() != tc.hopLimit || ip.PayloadLength() != uint16(8+len(payload)) {
				t.Errorf("next header %d, hop limit %d, payload length %d; want 17, %d, %d",
					ip.TransportProtocol(), ip.HopLimit(), ip.PayloadLength(), tc.hopLimit, 8+len(payload))
			}
			if ip.SourceAddress() != tcpip.AddrFrom16(clientLL.As16()) || ip.DestinationAddress() != tcpip.AddrFrom16(tc.dst.As16()) {
				t.Errorf("addresses %v -> %v, want %v -> %v", ip.SourceAddress(), ip.DestinationAddress(), clientLL, tc.dst)
			}
			u := header.UDP(ip.Payload())
			if u.SourcePort() != 546 || u.DestinationPort() != 547 || string(u.Payload()) != string(payload) {
				t.Errorf("UDP %d -> %d %q", u.SourcePort(), u.DestinationPort(), u.Payload())
			}
			if !u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)) {
				t.Errorf("UDP checksum %#x not valid", u.Checksum())
			}
		})
	}
}

// gvisorFrame6 builds an IPv6 UDP frame with gVisor's encoders and
// checksum code, not ours; csum, if not nil, replaces the checksum.
func gvisorFrame6(src, dst netip.AddrPort, payload []byte, csum *uint16) []byte {
	f := make([]byte, 14+40+8+len(payload))
	header.Ethernet(f).Encode(&header.EthernetFields{
		SrcAddr: tcpip.LinkAddress([]byte{2, 0, 0, 0, 0, 9}), DstAddr: tcpip.LinkAddress([]byte{2, 0, 0, 0, 0, 1}),
		Type: header.IPv6ProtocolNumber,
	})
	s, d := tcpip.AddrFrom16(src.Addr().As16()), tcpip.AddrFrom16(dst.Addr().As16())
	header.IPv6(f[14:]).Encode(&header.IPv6Fields{
		PayloadLength: uint16(8 + len(payload)), TransportProtocol: header.UDPProtocolNumber, HopLimit: 255,
		SrcAddr: s, DstAddr: d,
	})
	u := header.UDP(f[54:])
	u.Encode(&header.UDPFields{SrcPort: src.Port(), DstPort: dst.Port(), Length: uint16(8 + len(payload))})
	copy(u.Payload(), payload)
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, s, d, uint16(len(u)))
	xsum = checksum.Checksum(payload, xsum)
	c := ^u.CalculateChecksum(xsum)
	if c == 0 {
		c = 0xffff
	}
	if csum != nil {
		c = *csum
	}
	u.SetChecksum(c)
	return f
}

func TestDeliver6(t *testing.T) {
	src := netip.AddrPortFrom(serverLL, 547)
	dst := netip.AddrPortFrom(clientLL, 546)
	good := gvisorFrame6(src, dst, []byte("advertise"), nil)
	c := New6(&fakeLink{}, 546, 8)
	if !c.Deliver(good) {
		t.Fatalf("Deliver(advertise) = false, want true")
	}
	p, err := c.Recv(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(p.Payload) != "advertise" || p.Src != src || p.Dst != dst ||
		!bytes.Equal(p.SrcMAC, net.HardwareAddr{2, 0, 0, 0, 0, 9}) || !bytes.Equal(p.DstMAC, net.HardwareAddr{2, 0, 0, 0, 0, 1}) {
		t.Errorf("Recv = %+v", p)
	}
	padded := append(bytes.Clone(good), 0, 0, 0, 0) // octets past the Payload Length: ignored
	if !c.Deliver(padded) {
		t.Errorf("Deliver(padded) = false")
	} else if p, _ := c.Recv(context.Background()); string(p.Payload) != "advertise" {
		t.Errorf("padded frame gave %q", p.Payload)
	}

	// Not ours: left to the caller and not counted.
	v4 := Build(Broadcast, Broadcast, netip.MustParseAddrPort("192.0.2.1:547"), netip.MustParseAddrPort("192.0.2.2:546"), 1, []byte("x"))
	hopByHop := bytes.Clone(good)
	hopByHop[14+6] = 0 // Next Header: Hop-by-Hop Options; the UDP header is not walked to
	fragment := bytes.Clone(good)
	fragment[14+6] = 44
	version := bytes.Clone(good)
	version[14] = 0x40
	otherPort := gvisorFrame6(src, netip.AddrPortFrom(clientLL, 547), []byte("x"), nil)
	for name, f := range map[string][]byte{
		"IPv4": v4, "hop-by-hop": hopByHop, "fragment": fragment, "version 4": version, "port 547": otherPort,
		"truncated": good[:14+40+7], "empty": nil,
	} {
		if c.Deliver(f) {
			t.Errorf("Deliver(%s) = true, want false", name)
		}
	}

	// Ours and malformed: counted.
	zero := uint16(0)
	wrong := uint16(0x1234)
	long := bytes.Clone(good)
	binary.BigEndian.PutUint16(long[14+4:], uint16(len(good)-54+1)) // Payload Length past the frame
	short := bytes.Clone(good)
	binary.BigEndian.PutUint16(short[14+4:], 7) // shorter than a UDP header
	jumbo := bytes.Clone(good)
	binary.BigEndian.PutUint16(jumbo[14+4:], 0)
	ulenLong := bytes.Clone(good)
	binary.BigEndian.PutUint16(ulenLong[54+4:], uint16(len(good)-54+1))
	ulenShort := bytes.Clone(good)
	binary.BigEndian.PutUint16(ulenShort[54+4:], 7)
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	for name, f := range map[string][]byte{
		"zero checksum (RFC 8200 §8.1)": gvisorFrame6(src, dst, []byte("advertise"), &zero),
		"wrong checksum":                gvisorFrame6(src, dst, []byte("advertise"), &wrong),
		"payload flipped":               flipped,
		"payload length past the frame": long,
		"payload length 7":              short,
		"jumbo payload length 0":        jumbo,
		"UDP length past the payload":   ulenLong,
		"UDP length 7":                  ulenShort,
	} {
		if !c.Deliver(f) {
			t.Errorf("Deliver(%s) = false, want true (ours, counted)", name)
		}
	}
	if got := c.Stats().Malformed.Load(); got != 8 {
		t.Errorf("Malformed = %d, want 8", got)
	}
	if got := c.Stats().Received.Load(); got != 2 {
		t.Errorf("Received = %d, want 2", got)
	}

	// An IPv4 Conn on the same port takes none of the IPv6 frames.
	c4 := New(&fakeLink{}, 546, 1)
	if c4.Deliver(good) {
		t.Errorf("IPv4 Conn took an IPv6 frame")
	}
}

func TestSend6(t *testing.T) {
	l := &fakeLink{}
	c := New6(l, 546, 1)
	src := netip.AddrPortFrom(clientLL, 546)
	if err := c.Send(Packet{Payload: []byte("solicit"), Src: src, Dst: netip.AddrPortFrom(agents, 547)}); err != nil {
		t.Fatal(err)
	}
	// RFC 2464 §7: 33:33 and the last four octets.
	if want := (net.HardwareAddr{0x33, 0x33, 0, 1, 0, 2}); len(l.frames) != 1 || !bytes.Equal(l.frames[0][:6], want) || !bytes.Equal(l.frames[0][6:12], l.HardwareAddr()) {
		t.Fatalf("frames = %x, want one to %v from %v", l.frames, want, l.HardwareAddr())
	}
	q, ok := parse6(l.frames[0])
	if !ok || string(q.Payload) != "solicit" || q.Src != src || q.Dst != netip.AddrPortFrom(agents, 547) {
		t.Errorf("sent %+v", q)
	}
	serverMAC := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	zoned := netip.AddrPortFrom(serverLL.WithZone("wan"), 547)
	if err := c.Send(Packet{Payload: []byte("x"), Src: src, Dst: zoned, DstMAC: serverMAC}); err != nil {
		t.Fatal(err)
	}
	if f := l.frames[1]; !bytes.Equal(f[:6], serverMAC) || !bytes.Equal(f[14+24:14+40], serverLL.AsSlice()) {
		t.Errorf("unicast frame %x, want to %v at %v", f, serverLL, serverMAC)
	}
	for name, tc := range map[string]struct {
		p    Packet
		want error
	}{
		"unicast without a MAC": {Packet{Src: src, Dst: netip.AddrPortFrom(serverLL, 547)}, ErrNoDstMAC},
		"IPv4 source":           {Packet{Src: netip.MustParseAddrPort("192.0.2.1:546"), Dst: netip.AddrPortFrom(agents, 547)}, ErrAddress},
		"IPv4-mapped dest":      {Packet{Src: src, Dst: netip.MustParseAddrPort("[::ffff:192.0.2.1]:547"), DstMAC: serverMAC}, ErrAddress},
		"too big":               {Packet{Payload: make([]byte, MTU-40-8+1), Src: src, Dst: netip.AddrPortFrom(agents, 547)}, ErrTooBig},
	} {
		if err := c.Send(tc.p); err != tc.want {
			t.Errorf("Send(%s) = %v, want %v", name, err, tc.want)
		}
	}
	if err := c.Send(Packet{Payload: make([]byte, MTU-40-8), Src: src, Dst: netip.AddrPortFrom(agents, 547)}); err != nil {
		t.Errorf("Send(exactly MTU) = %v", err)
	}
	if got := c.Stats().Sent.Load(); got != 3 {
		t.Errorf("Sent = %d, want 3", got)
	}
}

// FuzzDeliver6 feeds arbitrary frames to an IPv6 Conn: Deliver never
// panics, what it queues has a valid checksum by gVisor's code, and it
// re-encodes to a datagram with the same payload and addresses.
func FuzzDeliver6(f *testing.F) {
	f.Add(gvisorFrame6(netip.AddrPortFrom(serverLL, 547), netip.AddrPortFrom(clientLL, 546), []byte("x"), nil))
	f.Add(Build6(MulticastMAC(agents), Broadcast, netip.AddrPortFrom(clientLL, 547), netip.AddrPortFrom(agents, 546), nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := New6(&fakeLink{}, 546, 1)
		if !c.Deliver(frame) {
			return
		}
		select {
		case p := <-c.queue:
			ip := header.IPv6(frame[14:])
			u := header.UDP(ip.Payload()[:binary.BigEndian.Uint16(ip.Payload()[4:])])
			if !u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)) {
				t.Fatalf("queued a datagram gVisor finds a bad checksum in: %x", frame)
			}
			again := Build6(p.DstMAC, p.SrcMAC, p.Src, p.Dst, p.Payload)
			q, ok := parse6(again)
			if !ok || !bytes.Equal(q.Payload, p.Payload) || q.Src != p.Src || q.Dst != p.Dst {
				t.Fatalf("round trip: %+v vs %+v", q, p)
			}
		default:
		}
	})
}
