package stack

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// echoRequest4 is an ICMPv4 echo request from src to dst.
func echoRequest4(src, dst netip.Addr) []byte {
	p := make([]byte, header.IPv4MinimumSize+header.ICMPv4MinimumSize+4)
	ip := header.IPv4(p)
	ip.Encode(&header.IPv4Fields{TotalLength: uint16(len(p)), TTL: 64, Protocol: uint8(header.ICMPv4ProtocolNumber),
		SrcAddr: tcpip.AddrFrom4(src.As4()), DstAddr: tcpip.AddrFrom4(dst.As4())})
	ip.SetChecksum(^ip.CalculateChecksum())
	icmp := header.ICMPv4(p[header.IPv4MinimumSize:])
	icmp.SetType(header.ICMPv4Echo)
	icmp.SetIdent(7)
	copy(icmp[header.ICMPv4MinimumSize:], "link")
	icmp.SetChecksum(^checksum.Checksum(icmp, 0))
	return p
}

// readLink returns the next packet netstack wrote to ch, or nil.
func readLink(ch *channel.Endpoint, d time.Duration) header.IPv4 {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	pkt := ch.ReadContext(ctx)
	if pkt == nil {
		return nil
	}
	defer pkt.DecRef()
	v := pkt.ToView()
	defer v.Release()
	return header.IPv4(append([]byte(nil), v.AsSlice()...))
}

// TestLink: a LinkConfig is a NIC with its address and routes: the
// router's packets for a routed prefix go into it, a packet it delivers
// is forwarded to a LAN host and the reply comes back into it, its
// forwarding pins are released, Apply with the same endpoint keeps the
// NIC, and a link left out of the config goes with its routes.
func TestLink(t *testing.T) {
	l := newLab(t)
	ch := channel.New(64, 1420, "")
	cfg := l.config()
	cfg.Links = []LinkConfig{{Name: "wg0", Endpoint: ch, Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")},
		Routes: []netip.Prefix{netip.MustParsePrefix("192.168.50.0/24")}}}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	id, ok := l.r.NATIface("wg0")
	if !ok {
		t.Fatal("NATIface(wg0): no such interface after Apply")
	}
	if got := l.r.LinkAddresses("wg0"); len(got) != 1 || got[0] != netip.MustParsePrefix("10.8.0.1/24") {
		t.Errorf("LinkAddresses(wg0) = %v", got)
	}

	// Host A pings a host behind the link: the request goes into it.
	remote := netip.MustParseAddr("192.168.50.7")
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		l.a.Ping(ctxTimeout(t, time.Second), remote, []byte("x"))
	}()
	defer ch.Drain() // the ping's retries
	defer func() { <-pinged }()
	if p := readLink(ch, 5*time.Second); p == nil || p.DestinationAddress() != tcpip.AddrFrom4(remote.As4()) {
		t.Fatalf("packet into the link = %x, want A's echo request to %s", []byte(p), remote)
	}

	// The far side pings A: forwarded to A, and A's reply comes back.
	in := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(echoRequest4(remote, aIP4))})
	ch.InjectInbound(header.IPv4ProtocolNumber, in)
	in.DecRef()
	p := readLink(ch, 5*time.Second)
	if p == nil || p.DestinationAddress() != tcpip.AddrFrom4(remote.As4()) || header.ICMPv4(p.Payload()).Type() != header.ICMPv4EchoReply {
		t.Fatalf("packet into the link = %x, want A's echo reply to %s", []byte(p), remote)
	}
	// A's reply reaches the link inside the forwarding call on A's
	// port's receive goroutine, which releases the pin only when that
	// call returns: give it a moment (a CI run read the pin still held).
	for deadline := time.Now().Add(2 * time.Second); l.r.pins.n.Load() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := l.r.pins.n.Load(); n != 0 {
		t.Errorf("%d forwarding pins held 2 s after the link's packet was forwarded, want 0", n)
	}

	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if id2, _ := l.r.NATIface("wg0"); id2 != id {
		t.Errorf("Apply with the same endpoint made a new NIC: %d, was %d", id2, id)
	}
	cfg.Links = nil
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.r.NATIface("wg0"); ok {
		t.Error("the link is still there after Apply without it")
	}
	for _, rt := range l.r.Stack().GetRouteTable() {
		if rt.NIC == tcpip.NICID(id) {
			t.Errorf("route %v still points at the removed link", rt)
		}
	}
}

// TestAdmitUDP: only UDP to a listed port passes the WAN input policy's
// exception.
func TestAdmitUDP(t *testing.T) {
	udp := func(dst uint16) []byte {
		b := make([]byte, 8)
		b[2], b[3] = byte(dst>>8), byte(dst)
		return b
	}
	ports := &[]uint16{51820}
	for _, tt := range []struct {
		name  string
		ports *[]uint16
		proto uint8
		l4    []byte
		want  bool
	}{
		{"listen port", ports, protoUDP, udp(51820), true},
		{"other port", ports, protoUDP, udp(51821), false},
		{"tcp to the port", ports, uint8(header.TCPProtocolNumber), udp(51820), false},
		{"short", ports, protoUDP, udp(51820)[:4], false},
		{"no ports", nil, protoUDP, udp(51820), false},
	} {
		if got := admitUDP(tt.ports, tt.proto, tt.l4); got != tt.want {
			t.Errorf("%s: admitUDP = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestListenUDP6Only: an IPv6 socket with V6ONLY shares a port with an
// IPv4 one (WireGuard's two sockets); a dual-stack one cannot.
func TestListenUDP6Only(t *testing.T) {
	l := newLab(t)
	v4, err := l.r.ListenUDPConn(netip.MustParseAddrPort("0.0.0.0:51820"))
	if err != nil {
		t.Fatal(err)
	}
	defer v4.Close()
	if c, err := l.r.ListenUDPConn(netip.MustParseAddrPort("[::]:51820")); err == nil {
		c.Close()
		t.Error("a dual-stack [::]:51820 socket opened beside 0.0.0.0:51820; the test would not show V6ONLY's effect")
	}
	v6, err := l.r.ListenUDP6Only(netip.MustParseAddrPort("[::]:51820"))
	if err != nil {
		t.Fatalf("ListenUDP6Only([::]:51820) beside 0.0.0.0:51820: %v", err)
	}
	v6.Close()
	if _, err := l.r.ListenUDP6Only(netip.MustParseAddrPort("0.0.0.0:51821")); err == nil {
		t.Error("ListenUDP6Only took an IPv4 address")
	}
}

// attachLink is a channel endpoint that keeps the dispatcher netstack
// attached it to.
type attachLink struct {
	*channel.Endpoint
	d stack.NetworkDispatcher
}

func (l *attachLink) Attach(d stack.NetworkDispatcher) {
	l.d = d
	l.Endpoint.Attach(d)
}

// TestLinkBatch: a link's dispatcher can bracket a batch of deliveries
// (BeginBatch, EndBatch, as a WireGuard TUN does with each batch of
// decrypted packets), and what netstack forwards out of the batch leaves
// the LAN interface in one write instead of one per packet.
func TestLinkBatch(t *testing.T) {
	l := newLab(t)
	ch := &attachLink{Endpoint: channel.New(64, 1420, "")}
	defer ch.Drain()
	cfg := l.config()
	cfg.Links = []LinkConfig{{Name: "wg0", Endpoint: ch, Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}}}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	b, ok := ch.d.(interface {
		BeginBatch()
		EndBatch()
	})
	if !ok {
		t.Fatalf("the link's dispatcher %T cannot bracket a batch", ch.d)
	}
	remote := netip.MustParseAddr("10.8.0.2")
	deliver := func() {
		in := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(echoRequest4(remote, aIP4))})
		ch.d.DeliverNetworkPacket(header.IPv4ProtocolNumber, in)
		in.DecRef()
	}
	deliver() // resolves A's MAC; its reply comes back into the link
	if p := readLink(ch.Endpoint, 5*time.Second); p == nil {
		t.Fatal("no echo reply from A through the link")
	}
	before := l.tapA.Writes.Load()
	b.BeginBatch()
	for range 16 {
		deliver()
	}
	mid := l.tapA.Writes.Load()
	b.EndBatch()
	if w := l.tapA.Writes.Load() - before; mid != before || w != 1 {
		t.Errorf("16 packets forwarded out of one batch: %d writes during it, %d in all; want 0 and 1", mid-before, w)
	}
}
