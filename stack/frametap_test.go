package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// *Interface is the link of a rawudp.Conn, and a *rawudp.Conn is a Tap.
var (
	_ rawudp.Link = (*Interface)(nil)
	_ Tap         = (*rawudp.Conn)(nil)
)

// Matches for the protocols the taps are for.
var (
	matchARP        = MatchARP()
	matchDHCPClient = MatchUDP4(68)
	matchDHCPServer = MatchUDP4(67)
	matchICMPv6     = MatchICMPv6()
	matchDHCPv6     = MatchUDP6(546)
	matchEAPOL      = MatchEtherType(0x888e)
)

// recordingTap keeps a copy of each frame and consumes it if consume.
type recordingTap struct {
	consume bool
	mu      sync.Mutex
	frames  [][]byte
}

func (r *recordingTap) Deliver(frame []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, bytes.Clone(frame))
	return r.consume
}

func (r *recordingTap) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.frames
	r.frames = nil
	return f
}

// udp4Frame is an IPv4 UDP frame from src to dst with both checksums set.
func udp4Frame(dstMAC []byte, src, dst netip.AddrPort, payload []byte) []byte {
	return ethFrame(dstMAC, hostMAC, header.IPv4ProtocolNumber,
		ipv4Packet(src.Addr(), dst.Addr(), 64, header.UDPProtocolNumber, udpDatagram(src.Port(), dst.Port(), payload)))
}

// TestMatchConstructors checks each named TapMatch against the numbers
// its protocol's specification assigns, and that AddTap would take it.
func TestMatchConstructors(t *testing.T) {
	tests := []struct {
		name string
		got  TapMatch
		want TapMatch
	}{
		{"ARP (RFC 826)", MatchARP(), TapMatch{EtherType: 0x0806}},
		{"UDP4 68 (RFC 768, RFC 2131)", MatchUDP4(68), TapMatch{EtherType: 0x0800, IPProto: 17, DstPort: 68}},
		{"UDP4 any", MatchUDP4(0), TapMatch{EtherType: 0x0800, IPProto: 17}},
		{"UDP6 547 (RFC 8415)", MatchUDP6(547), TapMatch{EtherType: 0x86dd, IPProto: 17, DstPort: 547}},
		{"ICMPv6 (RFC 4443)", MatchICMPv6(), TapMatch{EtherType: 0x86dd, IPProto: 58}},
		{"EAPOL (802.1X)", MatchEtherType(0x888e), TapMatch{EtherType: 0x888e}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got {%s}, want {%s}", tt.got, tt.want)
			}
			if err := tt.got.validate(); err != nil {
				t.Errorf("validate() = %v, want nil", err)
			}
		})
	}
}

func TestTapMatch(t *testing.T) {
	ap := netip.MustParseAddrPort
	dhcp := udp4Frame(bcastMAC, ap("0.0.0.0:68"), ap("255.255.255.255:67"), []byte("discover"))
	offer := udp4Frame(routerMAC, ap("203.0.113.1:67"), ap("203.0.113.77:68"), []byte("offer"))
	laterFrag := bytes.Clone(offer)
	binary.BigEndian.PutUint16(laterFrag[14+6:], 0x0001) // fragment offset 8 octets: no UDP header
	firstFrag := bytes.Clone(offer)
	binary.BigEndian.PutUint16(firstFrag[14+6:], 0x2000) // MF, offset 0: the UDP header is there
	withOpts := ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, append(append([]byte{0x46}, offer[15:34]...), append([]byte{1, 1, 1, 0}, offer[34:]...)...))
	binary.BigEndian.PutUint16(withOpts[14+2:], uint16(len(withOpts)-14))
	ra := ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, ipv6Packet(hostIP6, routerIP6, 255, header.ICMPv6ProtocolNumber, icmpv6Echo(1, 1)))
	dhcp6 := ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, ipv6Packet(hostIP6, routerIP6, 64, header.UDPProtocolNumber, udpDatagram(547, 546, []byte("reply"))))
	eapol := ethFrame(mustMAC("01:80:c2:00:00:03"), hostMAC, 0x888e, make([]byte, 46))
	arp := arpRequest(routerIP4)
	short4 := ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, offer[14:30])
	v6as4 := bytes.Clone(offer)
	v6as4[14] = 0x65

	tests := []struct {
		name  string
		m     TapMatch
		frame []byte
		want  bool
	}{
		{"arp", matchARP, arp, true},
		{"arp vs ipv4", matchARP, offer, false},
		{"dhcp client offer", matchDHCPClient, offer, true},
		{"dhcp client vs server port", matchDHCPClient, dhcp, false},
		{"dhcp server discover", matchDHCPServer, dhcp, true},
		{"first fragment", matchDHCPClient, firstFrag, true},
		{"later fragment", matchDHCPClient, laterFrag, false},
		{"ipv4 options", matchDHCPClient, withOpts, true},
		{"ipv4 short", matchDHCPClient, short4, false},
		{"ipv4 bad version", matchDHCPClient, v6as4, false},
		{"any udp", MatchUDP4(0), dhcp, true},
		{"any udp6", MatchUDP6(0), dhcp6, true},
		{"any udp6 vs ipv4", MatchUDP6(0), dhcp, false},
		{"any ipv4", TapMatch{EtherType: 0x0800}, arp, false},
		{"icmpv6", matchICMPv6, ra, true},
		{"icmpv6 vs udp", matchICMPv6, dhcp6, false},
		{"dhcpv6 client", matchDHCPv6, dhcp6, true},
		{"dhcpv6 vs ipv4 port 546", matchDHCPv6, udp4Frame(routerMAC, ap("10.0.0.2:547"), ap("10.0.0.1:546"), nil), false},
		{"eapol", matchEAPOL, eapol, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.matches(tt.frame); got != tt.want {
				t.Errorf("TapMatch{%s}.matches(%x) = %v, want %v", tt.m, tt.frame, got, tt.want)
			}
		})
	}
}

func TestAddTapInvalid(t *testing.T) {
	l := newTrunkLab(t)
	tests := []struct {
		name string
		m    TapMatch
		tap  Tap
	}{
		{"no ethertype", TapMatch{}, &recordingTap{}},
		{"vlan tpid", TapMatch{EtherType: 0x8100}, &recordingTap{}},
		{"qinq tpid", TapMatch{EtherType: 0x88a8}, &recordingTap{}},
		{"proto without ip", TapMatch{EtherType: 0x0806, IPProto: 17}, &recordingTap{}},
		{"port without tcp or udp", TapMatch{EtherType: 0x0800, IPProto: 1, DstPort: 68}, &recordingTap{}},
		{"port without proto", TapMatch{EtherType: 0x0800, DstPort: 68}, &recordingTap{}},
		{"nil tap", matchARP, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			remove, err := l.wan.AddTap(tt.m, tt.tap)
			if !errors.Is(err, ErrInvalidTapMatch) || remove != nil {
				t.Fatalf("AddTap(%s) = %v, %v, want nil, ErrInvalidTapMatch", tt.m, remove != nil, err)
			}
		})
	}
	if l.wan.ep.taps.Load() != nil {
		t.Fatal("a refused tap was registered")
	}
}

// natTrunkLab is a trunkLab whose router has a NAT engine: eth0.2 is the
// WAN (masquerade), eth0.1 the LAN.
func natTrunkLab(t *testing.T) (*trunkLab, *natengine.Engine) {
	t.Helper()
	w := &captureWriter{}
	nat := natengine.New(natengine.Config{})
	cfg := trunkConfig(w)
	cfg.NAT = nat
	r, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	l := &trunkLab{r: r, t: r.NewTrunk(), w: w, lan: r.Interface("eth0.1"), wan: r.Interface("eth0.2"), qinq: r.Interface("eth0.100.10"), plain: r.Interface("eth0")}
	if err := l.t.Set(l.lan, l.wan, l.qinq, l.plain); err != nil {
		t.Fatal(err)
	}
	lanID, _ := r.NATIface("eth0.1")
	wanID, _ := r.NATIface("eth0.2")
	if err := nat.SetRules(natengine.Rules{Ifaces: []natengine.IfaceConfig{
		{ID: lanID, Name: "eth0.1", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, Subnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}},
		{ID: wanID, Name: "eth0.2", WAN: true, Masquerade: true, Addrs: []netip.Addr{netip.MustParseAddr("203.0.113.2")}},
	}}); err != nil {
		t.Fatal(err)
	}
	return l, nat
}

// natDrops sums the engine's drop counters.
func natDrops(nat *natengine.Engine) (n uint64) {
	for r := natengine.DropReason(0); r.String() != "unknown"; r++ {
		n += nat.Stats().Drop(r)
	}
	return n
}

// TestTapConsumesDHCPClient: on the BCM47094's WAN, eth0.2 (802.1Q VLAN
// 2, tag in the ring header), a rawudp.Conn tapping UDP port 68 receives
// an OFFER unicast to the offered address, which the NAT engine would
// drop as unsolicited, and a datagram to the router's address, which
// netstack would answer with ICMP port unreachable (no socket): neither
// reaches NAT or netstack, and both count as tapped. After removal, the
// second one gets its port unreachable, tagged for VLAN 2.
func TestTapConsumesDHCPClient(t *testing.T) {
	l, nat := natTrunkLab(t)
	server := netip.MustParseAddr("203.0.113.1")
	if err := l.r.Stack().AddStaticNeighbor(l.wan.id, ipv4.ProtocolNumber, tcpip.AddrFrom4(server.As4()), tcpip.LinkAddress(hostMAC)); err != nil {
		t.Fatalf("AddStaticNeighbor: %s", err)
	}
	conn := rawudp.New(l.wan, 68, 8)
	defer conn.Close()
	remove, err := l.wan.AddTap(matchDHCPClient, conn)
	if err != nil {
		t.Fatal(err)
	}
	offer := udp4Frame(routerMAC, netip.AddrPortFrom(server, 67), netip.MustParseAddrPort("203.0.113.77:68"), []byte("offer"))
	toRouter := udp4Frame(routerMAC, netip.AddrPortFrom(server, 1000), netip.MustParseAddrPort("203.0.113.2:68"), []byte("to router"))
	vlan2 := func(d []byte) hw.Frame {
		d = bytes.Clone(d)
		return hw.Frame{Data: d, WireLen: len(d), VLANValid: true, VLANTCI: 2, VLANTPID: 0x8100}
	}
	drops0, len0, untracked0 := natDrops(nat), nat.Len(), nat.Stats().Untracked.Load()
	l.t.HandleBatch(0, []hw.Frame{vlan2(offer), vlan2(toRouter)})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, want := range []string{"offer", "to router"} {
		p, err := conn.Recv(ctx)
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if string(p.Payload) != want || p.Src.Addr() != server {
			t.Fatalf("Recv() = %q from %s, want %q from %s", p.Payload, p.Src, want, server)
		}
	}
	if st := l.wan.Stats(); st.Tapped != 2 || st.RxPackets != 2 {
		t.Fatalf("eth0.2 stats tapped %d rx %d, want 2 and 2", st.Tapped, st.RxPackets)
	}
	if d, n, u := natDrops(nat), nat.Len(), nat.Stats().Untracked.Load(); d != drops0 || n != len0 || u != untracked0 {
		t.Fatalf("NAT saw tapped frames: drops %d→%d, flows %d→%d, untracked %d→%d", drops0, d, len0, n, untracked0, u)
	}
	time.Sleep(50 * time.Millisecond)
	if got := l.w.take(); len(got) != 0 {
		t.Fatalf("router answered tapped frames: %x", got)
	}

	remove()
	remove() // a second call does nothing
	if l.wan.ep.taps.Load() != nil {
		t.Fatal("taps left after the last one was removed")
	}
	l.t.HandleBatch(0, []hw.Frame{vlan2(offer), vlan2(toRouter)})
	got := l.waitFrames(t, 1)[0]
	if !bytes.Equal(got[12:16], []byte{0x81, 0, 0, 2}) {
		t.Fatalf("reply tag %x, want 81000002", got[12:16])
	}
	ip := header.IPv4(got[18:])
	if icmp := header.ICMPv4(ip.Payload()); ip.Protocol() != uint8(header.ICMPv4ProtocolNumber) || icmp.Type() != header.ICMPv4DstUnreachable || icmp.Code() != header.ICMPv4PortUnreachable {
		t.Fatalf("reply %x is not ICMP port unreachable", got)
	}
	if got := nat.Stats().Drop(natengine.DropUnsolicited); got != 1 {
		t.Fatalf("NAT unsolicited drops %d, want 1 (the offer, untapped)", got)
	}
	if st := l.wan.Stats(); st.Tapped != 2 {
		t.Fatalf("tapped %d after removal, want 2", st.Tapped)
	}
}

// TestTapWatchesARP: a tap that only watches ARP (returns false) sees the
// request, untagged, and netstack still answers it, on VLAN 1 with PCP 5.
func TestTapWatchesARP(t *testing.T) {
	l := newTrunkLab(t)
	watch := &recordingTap{}
	remove, err := l.lan.AddTap(matchARP, watch)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	req := arpRequest(netip.MustParseAddr("192.168.1.1"))
	l.t.HandleBatch(0, []hw.Frame{{Data: bytes.Clone(req), WireLen: len(req), VLANValid: true, VLANTCI: 1, VLANTPID: 0x8100}})
	got := l.waitFrames(t, 1)[0]
	if !bytes.Equal(got[12:16], []byte{0x81, 0, 0xa0, 1}) || header.ARP(got[18:]).Op() != header.ARPReply {
		t.Fatalf("netstack's answer %x, want an ARP reply tagged 8100a001", got)
	}
	seen := watch.take()
	if len(seen) != 1 || !bytes.Equal(seen[0], req) {
		t.Fatalf("tap saw %x, want the request %x", seen, req)
	}
	if st := l.lan.Stats(); st.Tapped != 0 {
		t.Fatalf("tapped = %d for a watched frame, want 0", st.Tapped)
	}
}

// TestTapUntagged: whatever the tags (ring header, in-band, QinQ with the
// outer tag in the ring header or in-band, priority-tagged), a tap gets
// the frame as it was sent untagged, and only on its own interface; a
// unicast frame to another MAC and a tagged frame on an endpoint used
// without a trunk reach no tap.
func TestTapUntagged(t *testing.T) {
	plain := udp4Frame(bcastMAC, netip.MustParseAddrPort("0.0.0.0:68"), netip.MustParseAddrPort("255.255.255.255:67"), []byte("discover"))
	other := bytes.Clone(plain)
	copy(other, otherMAC)
	tests := []struct {
		name  string
		f     hw.Frame
		iface string // "" for none
	}{
		{"802.1Q ring header", hw.Frame{Data: plain, VLANValid: true, VLANTCI: 5<<13 | 1, VLANTPID: 0x8100}, "eth0.1"},
		{"802.1Q in-band", hw.Frame{Data: tagged(plain, 0x8100, 2)}, "eth0.2"},
		{"QinQ inner in-band", hw.Frame{Data: tagged(plain, 0x8100, 10), VLANValid: true, VLANTCI: 100, VLANTPID: 0x88a8}, "eth0.100.10"},
		{"QinQ all in-band", hw.Frame{Data: tagged(plain, 0x88a8, 100, 0x8100, 10)}, "eth0.100.10"},
		{"priority tag", hw.Frame{Data: plain, VLANValid: true, VLANTCI: 6 << 13, VLANTPID: 0x8100}, "eth0"},
		{"untagged", hw.Frame{Data: plain}, "eth0"},
		{"other host", hw.Frame{Data: other, VLANValid: true, VLANTCI: 1}, ""},
		{"unknown vlan", hw.Frame{Data: plain, VLANValid: true, VLANTCI: 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTrunkLab(t)
			taps := map[string]*recordingTap{}
			for _, ifc := range []*Interface{l.lan, l.wan, l.qinq, l.plain} {
				taps[ifc.Name()] = &recordingTap{consume: true}
				if _, err := ifc.AddTap(matchDHCPServer, taps[ifc.Name()]); err != nil {
					t.Fatal(err)
				}
			}
			f := tt.f
			f.Data = bytes.Clone(f.Data)
			f.WireLen = len(f.Data)
			l.t.HandleBatch(0, []hw.Frame{f})
			for name, tap := range taps {
				got := tap.take()
				want := 0
				if name == tt.iface {
					want = 1
				}
				if len(got) != want {
					t.Fatalf("tap on %s got %d frames, want %d", name, len(got), want)
				}
				if want == 1 && !bytes.Equal(got[0], plain) {
					t.Fatalf("tap on %s got %x, want %x", name, got[0], plain)
				}
				if st := l.r.Interface(name).Stats(); st.Tapped != uint64(want) {
					t.Fatalf("%s tapped = %d, want %d", name, st.Tapped, want)
				}
			}
		})
	}
	t.Run("endpoint without trunk", func(t *testing.T) {
		e := testEndpoint(&recordingDispatcher{})
		tap := &recordingTap{consume: true}
		if _, err := e.addTap(matchDHCPServer, tap); err != nil {
			t.Fatal(err)
		}
		d := bytes.Clone(plain)
		e.HandleBatch(0, []hw.Frame{{Data: d, WireLen: len(d), VLANValid: true, VLANTCI: 2}})
		if got := tap.take(); len(got) != 0 {
			t.Fatalf("tap got a frame tagged for a VLAN this endpoint is not on: %x", got)
		}
		if n := e.stats.drops[dropVLANUnknown].Load(); n != 1 {
			t.Fatalf("vlan_unknown = %d, want 1", n)
		}
	})
}

// TestTapCompletesPartialChecksum: a CHECKSUM_PARTIAL frame (a local peer
// with TX checksum offload: the UDP checksum field holds only the
// pseudo-header sum) reaches the tap with its checksum completed, so
// rawudp accepts it.
func TestTapCompletesPartialChecksum(t *testing.T) {
	l := newTrunkLab(t)
	conn := rawudp.New(l.plain, 67, 4)
	defer conn.Close()
	if _, err := l.plain.AddTap(matchDHCPServer, conn); err != nil {
		t.Fatal(err)
	}
	f := udp4Frame(bcastMAC, netip.MustParseAddrPort("0.0.0.0:68"), netip.MustParseAddrPort("255.255.255.255:67"), []byte("discover"))
	udp := header.UDP(f[34:])
	udp.SetChecksum(header.PseudoHeaderChecksum(header.UDPProtocolNumber,
		tcpip.AddrFrom4([4]byte{}), tcpip.AddrFrom4([4]byte{255, 255, 255, 255}), uint16(len(udp))))
	l.t.HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f), CsumPartial: true}})
	if got, bad := conn.Stats().Received.Load(), conn.Stats().Malformed.Load(); got != 1 || bad != 0 {
		t.Fatalf("rawudp received %d, malformed %d, want 1 and 0", got, bad)
	}
}

// TestWriteFrame: WriteFrame inserts each interface's tags and PCP as
// netstack's own frames carry them, counts the frame as tx, and refuses
// frames it cannot send. A rawudp.Conn sends through it.
func TestWriteFrame(t *testing.T) {
	l := newTrunkLab(t)
	frame := udp4Frame(bcastMAC, netip.MustParseAddrPort("0.0.0.0:68"), netip.MustParseAddrPort("255.255.255.255:67"), []byte("discover"))
	tests := []struct {
		ifc  *Interface
		tags []byte
	}{
		{l.lan, []byte{0x81, 0, 0xa0, 1}},
		{l.wan, []byte{0x81, 0, 0, 2}},
		{l.qinq, []byte{0x88, 0xa8, 0x60, 100, 0x81, 0, 0x60, 10}},
		{l.plain, nil},
	}
	for _, tt := range tests {
		t.Run(tt.ifc.Name(), func(t *testing.T) {
			tx0 := tt.ifc.Stats().TxPackets
			if err := tt.ifc.WriteFrame(frame); err != nil {
				t.Fatalf("WriteFrame: %v", err)
			}
			got := l.waitFrames(t, 1)[0]
			want := append(append(bytes.Clone(frame[:12]), tt.tags...), frame[12:]...)
			if !bytes.Equal(got, want) {
				t.Fatalf("WriteFrame sent %x, want %x", got, want)
			}
			if st := tt.ifc.Stats(); st.TxPackets != tx0+1 {
				t.Fatalf("tx_packets %d, want %d", st.TxPackets, tx0+1)
			}
		})
	}
	t.Run("rawudp", func(t *testing.T) {
		c := rawudp.New(l.wan, 68, 1)
		defer c.Close()
		if err := c.Send(rawudp.Packet{Payload: []byte("hi"), Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67")}); err != nil {
			t.Fatalf("Send: %v", err)
		}
		got := l.waitFrames(t, 1)[0]
		if !bytes.Equal(got[:6], bcastMAC) || !bytes.Equal(got[6:12], routerMAC) || !bytes.Equal(got[12:18], []byte{0x81, 0, 0, 2, 0x08, 0}) {
			t.Fatalf("rawudp frame header %x, want broadcast from %s tagged 81000002, IPv4", got[:18], routerMAC)
		}
	})
	t.Run("errors", func(t *testing.T) {
		big := ethFrame(bcastMAC, routerMAC, header.IPv4ProtocolNumber, make([]byte, 1501))
		for _, tc := range []struct {
			frame []byte
			want  error
		}{
			{frame[:13], ErrFrameInvalid},
			{tagged(frame, 0x8100, 2), ErrFrameInvalid},
			{big, ErrFrameTooBig},
		} {
			if err := l.wan.WriteFrame(tc.frame); !errors.Is(err, tc.want) {
				t.Errorf("WriteFrame(%d octets) = %v, want %v", len(tc.frame), err, tc.want)
			}
		}
		if n := l.wan.Stats().Drops["tx_oversize"]; n != 1 {
			t.Errorf("tx_oversize = %d, want 1", n)
		}
		l.wan.SetLinkUp(false)
		if err := l.wan.WriteFrame(frame); !errors.Is(err, ErrLinkDown) {
			t.Errorf("WriteFrame on a down link = %v, want ErrLinkDown", err)
		}
		l.wan.SetLinkUp(true)
		time.Sleep(20 * time.Millisecond)
		l.w.take()
	})
}

// echoTap answers every frame it consumes with WriteFrame from inside
// Deliver, as a DHCP server answering at once does.
type echoTap struct {
	ifc            *Interface
	n, writeFailed atomic.Uint64
}

func (e *echoTap) Deliver(frame []byte) bool {
	e.n.Add(1)
	if err := e.ifc.WriteFrame(frame); err != nil {
		e.writeFailed.Add(1)
	}
	return true
}

// TestTapConcurrent runs, at once: four receive queues handing the trunk
// DHCP frames (consumed by a tap that answers each with WriteFrame from
// Deliver) and ARP requests (watched by a tap added and removed in a
// loop, answered by netstack), and a goroutine calling WriteFrame. Every
// DHCP frame is tapped exactly once and answered, every ARP request
// answered, every WriteFrame sent. Run it with -race.
func TestTapConcurrent(t *testing.T) {
	l := newTrunkLab(t)
	echo := &echoTap{ifc: l.wan}
	if _, err := l.wan.AddTap(matchDHCPServer, echo); err != nil {
		t.Fatal(err)
	}
	const (
		queues  = 4
		batches = 50
		writes  = 200
	)
	dhcp := udp4Frame(bcastMAC, netip.MustParseAddrPort("0.0.0.0:68"), netip.MustParseAddrPort("255.255.255.255:67"), []byte("discover"))
	arp := arpRequest(netip.MustParseAddr("203.0.113.2"))
	var (
		wg   sync.WaitGroup
		stop atomic.Bool
	)
	watch := &recordingTap{}
	wg.Add(1)
	go func() { // the tap churner
		defer wg.Done()
		for !stop.Load() {
			remove, err := l.wan.AddTap(matchARP, watch)
			if err != nil {
				t.Error(err)
				return
			}
			remove()
		}
	}()
	wg.Add(1)
	go func() { // a service writing on its own
		defer wg.Done()
		for range writes {
			if err := l.wan.WriteFrame(dhcp); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var rx sync.WaitGroup
	for q := range queues {
		rx.Add(1)
		go func() {
			defer rx.Done()
			for range batches {
				batch := make([]hw.Frame, 0, 4)
				for _, d := range [][]byte{dhcp, arp, dhcp, dhcp} {
					d = bytes.Clone(d)
					batch = append(batch, hw.Frame{Data: d, WireLen: len(d), VLANValid: true, VLANTCI: 2, VLANTPID: 0x8100})
				}
				l.t.HandleBatch(q, batch)
			}
		}()
	}
	rx.Wait()
	stop.Store(true)
	wg.Wait()

	wantDHCP := uint64(queues * batches * 3)
	if n := echo.writeFailed.Load(); n != 0 {
		t.Fatalf("%d WriteFrame calls from Deliver failed", n)
	}
	if got := echo.n.Load(); got != wantDHCP {
		t.Fatalf("tap consumed %d DHCP frames, want %d", got, wantDHCP)
	}
	st := l.wan.Stats()
	if st.Tapped != wantDHCP || st.RxPackets != uint64(queues*batches*4) {
		t.Fatalf("tapped %d rx %d, want %d and %d", st.Tapped, st.RxPackets, wantDHCP, queues*batches*4)
	}
	wantTx := wantDHCP + writes + queues*batches // echoes, writes, ARP replies
	var frames [][]byte
	for deadline := time.Now().Add(5 * time.Second); uint64(len(frames)) < wantTx && time.Now().Before(deadline); {
		frames = append(frames, l.w.take()...)
		time.Sleep(time.Millisecond)
	}
	var dhcpOut, arpOut int
	for _, f := range frames {
		switch {
		case !bytes.Equal(f[12:16], []byte{0x81, 0, 0, 2}):
			t.Fatalf("frame %x not tagged for VLAN 2", f)
		case binary.BigEndian.Uint16(f[16:]) == 0x0806:
			arpOut++
		default:
			dhcpOut++
		}
	}
	if dhcpOut != int(wantDHCP)+writes || arpOut != queues*batches {
		t.Fatalf("sent %d DHCP and %d ARP frames, want %d and %d", dhcpOut, arpOut, int(wantDHCP)+writes, queues*batches)
	}
	if st := l.wan.Stats(); st.TxPackets != wantTx {
		t.Fatalf("tx_packets %d, want %d", st.TxPackets, wantTx)
	}
}

// TestTapAllocs: offering frames to taps allocates nothing, whether a
// tap only watches them or consumes them.
func TestTapAllocs(t *testing.T) {
	frame := udp4Frame(routerMAC, netip.MustParseAddrPort("10.1.0.2:1000"), netip.MustParseAddrPort("10.1.0.1:68"), make([]byte, 300))
	frames := make([]hw.Frame, benchBatch)
	for _, consume := range []bool{false, true} {
		t.Run(fmt.Sprintf("consume=%v", consume), func(t *testing.T) {
			e := testEndpoint(&nopDispatcher{})
			if _, err := e.addTap(matchARP, &countTap{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.addTap(matchDHCPClient, &countTap{consume: consume}); err != nil {
				t.Fatal(err)
			}
			ts, mac := e.taps.Load(), e.mac
			got := testing.AllocsPerRun(100, func() {
				for i := range frames {
					frames[i] = hw.Frame{Data: frame, WireLen: len(frame)}
				}
				e.tapFrames(ts, frames, mac, nil, nil)
			})
			if got != 0 {
				t.Fatalf("tapFrames: %v allocs per batch, want 0", got)
			}
		})
	}
}

// countTap counts frames and consumes them if consume.
type countTap struct {
	consume bool
	n       atomic.Uint64
}

func (c *countTap) Deliver([]byte) bool {
	c.n.Add(1)
	return c.consume
}

// BenchmarkTap measures the receive path with taps: HandleBatch to a no-op
// dispatcher, as BenchmarkDispatch's handoff/local/64B, with
//
//   - none: no tap (the per-run atomic load only);
//   - other: an ARP tap, which no frame matches (the match per frame);
//   - watch: a UDP:1000 tap that sees every frame and returns false;
//   - consume: a UDP:2000 tap that takes every frame (netstack sees none).
func BenchmarkTap(b *testing.B) {
	frames := benchFrames(64, routerIP4)
	for _, tc := range []struct {
		name string
		m    TapMatch
		tap  *countTap
	}{
		{"none", TapMatch{}, nil},
		{"other", matchARP, &countTap{}},
		{"watch", TapMatch{EtherType: 0x0800, IPProto: 17, DstPort: 2000}, &countTap{}},
		{"consume", TapMatch{EtherType: 0x0800, IPProto: 17, DstPort: 2000}, &countTap{consume: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := testEndpoint(&nopDispatcher{})
			if tc.tap != nil {
				if _, err := e.addTap(tc.m, tc.tap); err != nil {
					b.Fatal(err)
				}
			}
			batch := make([]hw.Frame, len(frames))
			runBatches(b, frames, func(fs []hw.Frame) {
				n := copy(batch, fs) // tapFrames compacts the batch
				e.HandleBatch(0, batch[:n])
			})
		})
	}
}

// checkingTap checks, independently of TapMatch.matches, that every frame
// it is offered is untagged and meets its match, and consumes it if
// consume.
type checkingTap struct {
	t       *testing.T
	m       TapMatch
	consume bool
	n       int
}

func (c *checkingTap) Deliver(frame []byte) bool {
	c.n++
	if len(frame) < header.EthernetMinimumSize || binary.BigEndian.Uint16(frame[12:]) != c.m.EtherType {
		c.t.Fatalf("tap for %s offered %x", c.m, frame)
	}
	if c.m.DstPort != 0 {
		ip := header.IPv4(frame[header.EthernetMinimumSize:])
		if len(ip) < header.IPv4MinimumSize || ip.Protocol() != c.m.IPProto || len(ip) < int(ip.HeaderLength())+4 ||
			binary.BigEndian.Uint16(ip[ip.HeaderLength()+2:]) != c.m.DstPort || ip.FragmentOffset() != 0 {
			c.t.Fatalf("tap for %s offered %x", c.m, frame)
		}
	}
	return c.consume
}

// FuzzTap feeds arbitrary frames, with arbitrary ring-header metadata, to
// an endpoint with an ARP tap that watches and a UDP:68 and an ICMPv6 tap
// that consume, and then to a trunk whose interfaces have taps: nothing
// panics, each frame is offered only to taps it matches, untagged, and it
// is tapped, delivered or counted as one drop, exactly one of the three.
func FuzzTap(f *testing.F) {
	ap := netip.MustParseAddrPort
	f.Add(udp4Frame(routerMAC, ap("203.0.113.1:67"), ap("203.0.113.77:68"), []byte("offer")), false, uint16(0), false)
	f.Add(udp4Frame(bcastMAC, ap("203.0.113.1:67"), ap("255.255.255.255:68"), []byte("ack")), false, uint16(0), true)
	f.Add(arpRequest(routerIP4), false, uint16(0), false)
	f.Add(arpRequest(routerIP4), true, uint16(2), false)
	f.Add(ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, ipv6Packet(hostIP6, routerIP6, 255, header.ICMPv6ProtocolNumber, icmpv6Echo(1, 1))), false, uint16(0), false)
	f.Add(tagged(arpRequest(routerIP4), 0x8100, 2), false, uint16(0), false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 8, 0, 0x4f}, false, uint16(0), false)
	f.Fuzz(func(t *testing.T, data []byte, vlanValid bool, tci uint16, csumPartial bool) {
		var d recordingDispatcher
		e := testEndpoint(&d)
		taps := []*checkingTap{
			{t: t, m: matchARP},
			{t: t, m: matchDHCPClient, consume: true},
			{t: t, m: matchICMPv6, consume: true},
		}
		for _, c := range taps {
			if _, err := e.addTap(c.m, c); err != nil {
				t.Fatal(err)
			}
		}
		frame := bytes.Clone(data)
		e.HandleBatch(0, []hw.Frame{{Data: frame, WireLen: len(frame), VLANValid: vlanValid, VLANTCI: tci, CsumPartial: csumPartial}})
		var s InterfaceStats
		e.stats.fill(&s)
		var drops uint64
		for _, n := range s.Drops {
			drops += n
		}
		if got := s.Tapped + uint64(len(d.pkts)) + drops; got != 1 {
			t.Fatalf("tapped %d + delivered %d + dropped %d (%v), want 1 in all", s.Tapped, len(d.pkts), drops, s.Drops)
		}
		if s.Tapped == 1 && taps[1].n+taps[2].n == 0 {
			t.Fatal("tapped without a consuming tap offered the frame")
		}

		// Through a trunk (untagged, VLAN 2, QinQ 100/10), every tap sees
		// the frame untagged, and each frame is counted once.
		var r Netstack
		tr := r.NewTrunk()
		var ds [3]recordingDispatcher
		var eps [3]*Endpoint
		var entries []trunkEntry
		for i, c := range []InterfaceConfig{{}, {VLAN: []uint16{2}}, {VLAN: []uint16{100, 10}, VLANProtocol: TPID8021AD}} {
			eps[i] = testEndpoint(&ds[i])
			eps[i].vlan.Store(newEgressVLAN(&c))
			entries = append(entries, trunkEntry{eps[i].vlan.Load().key, eps[i]})
			for _, m := range []TapMatch{matchARP, matchDHCPClient} {
				if _, err := eps[i].addTap(m, &checkingTap{t: t, m: m, consume: m == matchDHCPClient}); err != nil {
					t.Fatal(err)
				}
			}
		}
		tr.table.Store(&trunkTable{entries: entries})
		frame = bytes.Clone(data)
		tr.HandleBatch(0, []hw.Frame{{Data: frame, WireLen: len(frame), VLANValid: vlanValid, VLANTCI: tci, CsumPartial: csumPartial}})
		total := tr.vlanUnknown.Load()
		for i, e := range eps {
			var s InterfaceStats
			e.stats.fill(&s)
			var drops uint64
			for _, n := range s.Drops {
				drops += n
			}
			if s.Tapped+uint64(len(ds[i].pkts))+drops != s.RxPackets {
				t.Fatalf("endpoint %d: tapped %d + delivered %d + dropped %d, want rx %d", i, s.Tapped, len(ds[i].pkts), drops, s.RxPackets)
			}
			total += s.RxPackets
		}
		if total != 1 {
			t.Fatalf("frame counted %d times by the trunk, want 1", total)
		}
	})
}
