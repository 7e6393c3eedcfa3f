package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"

	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/natengine"
)

// TestLinkFastPathSlow: a link's packets of flows the engine has not
// offloaded (here: all of them), packets that are not IP, and a batch
// without room for an Ethernet header all go to slow, each once and in
// order, and a batch costs no allocation. The hits are the lab's
// TestWireGuardThroughput (inside/fast_path).
func TestLinkFastPathSlow(t *testing.T) {
	l, _ := newNATLab(t, nil)
	cfg := l.config()
	cfg.Links = []LinkConfig{{Name: "wg0", Endpoint: channel.New(64, 1420, ""), Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}}}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.r.LinkFastPath("hostlan"); ok {
		t.Error("LinkFastPath of an Ethernet interface: ok, want only links")
	}
	fp, ok := l.r.LinkFastPath("wg0")
	if !ok {
		t.Fatal("LinkFastPath(wg0): no fast path")
	}
	const off = 16
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = append(make([]byte, off), echoRequest4(netip.MustParseAddr("10.8.0.2"), aIP4)...)
		bufs[i][off+5] = byte(i) // the IP ID's low byte numbers them
	}
	bufs[2][off] = 0x00 // not IP
	var got []byte
	slow := func(ip []byte) { got = append(got, ip[5]) }
	fwd, dropped := fp.ForwardBatch(bufs, off, slow)
	if fwd != 0 || dropped != 0 || string(got) != "\x00\x01\x02\x03" {
		t.Errorf("ForwardBatch without offloaded flows: %d forwarded, %d dropped, slow got %x; want 0, 0, 00010203", fwd, dropped, got)
	}
	got = got[:0]
	// No room for the Ethernet header: the packets start 4 bytes in.
	fp.ForwardBatch(bufs, 4, func(ip []byte) { got = append(got, ip[off-4+5]) })
	if string(got) != "\x00\x01\x02\x03" {
		t.Errorf("ForwardBatch with 4 bytes of room: slow got %x, want 00010203", got)
	}
	got = got[:0]
	if n := testing.AllocsPerRun(1000, func() { fp.ForwardBatch(bufs, off, func([]byte) {}) }); n != 0 {
		t.Errorf("ForwardBatch: %v allocations per batch, want 0", n)
	}
}

// fastLinkRecorder is a link the fast path can write into (a
// FastLinkWriter, as *wireguard.TUN is): it keeps a copy of each packet.
type fastLinkRecorder struct {
	*channel.Endpoint
	got [][]byte
}

func (f *fastLinkRecorder) WriteFast(ip []byte) { f.got = append(f.got, append([]byte(nil), ip...)) }

// TestLinkFastPathLinkToLink: a TCP flow between two links (a peer of
// wg0 to a peer of wg1, or hub-and-spoke between two peers of one
// tunnel), admitted and offloaded as the TUN's Out hook does, keeps
// flowing once offloaded: a decrypted packet of it goes into the egress
// link with TTL - 1 and correct checksums, as netstack would forward
// it, instead of being dropped as "egress gone". The same packet coming
// in from the other link does not match the flow's entry (the lookup is
// by ingress). A reload whose zones no longer admit the flow flushes it
// like a port's flow.
func TestLinkFastPathLinkToLink(t *testing.T) {
	l, nat := newNATLab(t, nil)
	wg1 := &fastLinkRecorder{Endpoint: channel.New(64, 1420, "")}
	cfg := l.config()
	cfg.Links = []LinkConfig{
		{Name: "wg0", Endpoint: channel.New(64, 1420, ""), Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}},
		{Name: "wg1", Endpoint: wg1, Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}},
	}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	lanID, _ := l.r.NATIface("lan")
	wanID, _ := l.r.NATIface("wan")
	in, _ := l.r.NATIface("wg0")
	out, _ := l.r.NATIface("wg1")
	// rules are the router's NAT rules, with the zones of wg0 (whose
	// peers may reach wg1's if peersToFar) and wg1.
	rules := func(peersToFar bool) natengine.Rules {
		p := firewall.Policy{Zones: []firewall.Zone{
			{Name: "peers", Ifaces: []int32{int32(in)}, Input: firewall.Drop, Forward: firewall.Drop, Output: firewall.Accept},
			{Name: "far", Ifaces: []int32{int32(out)}, Input: firewall.Drop, Forward: firewall.Accept, Output: firewall.Accept},
		}}
		if peersToFar {
			p.Rules = []firewall.Rule{{Name: "peers-far", Src: "peers", Dest: "far"}}
		}
		rs, err := firewall.Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		return natengine.Rules{Zones: rs, Ifaces: []natengine.IfaceConfig{
			{ID: lanID, Name: "lan", Addrs: []netip.Addr{lanIP4}, MTU: 1500},
			{ID: wanID, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanIP4}, MTU: 1500},
			{ID: in, Name: "wg0", Addrs: []netip.Addr{netip.MustParseAddr("10.8.0.1")}, MTU: 1420},
			{ID: out, Name: "wg1", Addrs: []netip.Addr{netip.MustParseAddr("10.9.0.1")}, MTU: 1420},
		}}
	}
	if err := nat.SetRules(rules(true)); err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddr("10.8.0.2"), netip.MustParseAddr("10.9.0.2")
	ab := func(flags header.TCPFlags, seq, ack uint32, data string) []byte {
		return ipv4Packet(a, b, 64, header.TCPProtocolNumber, tcpSeg(40000, 22, flags, seq, ack, nil, []byte(data)))
	}
	ba := func(flags header.TCPFlags, seq, ack uint32) []byte {
		return ipv4Packet(b, a, 64, header.TCPProtocolNumber, tcpSeg(22, 40000, flags, seq, ack, nil, nil))
	}
	// The slow path: each packet through the link's NAT Prerouting (the
	// TUN's In hook) and the other link's Postrouting (its Out hook).
	for i, s := range []struct {
		p       []byte
		in, out natengine.Iface
	}{
		{ab(header.TCPFlagSyn, 100, 0, ""), in, out},
		{ba(header.TCPFlagSyn|header.TCPFlagAck, 500, 101), out, in},
		{ab(header.TCPFlagAck, 101, 501, ""), in, out},
		{ab(header.TCPFlagAck|header.TCPFlagPsh, 101, 501, "one"), in, out},
	} {
		if v := nat.Prerouting(s.p, s.in); v != natengine.Accept {
			t.Fatalf("packet %d: Prerouting %v", i, v)
		}
		if v := nat.Postrouting(s.p, s.out); v != natengine.Accept {
			t.Fatalf("packet %d: Postrouting %v", i, v)
		}
	}
	// What the TUN's Out hook does with a forwarded packet (router/wireguard.go).
	if !nat.OffloadAt(ab(header.TCPFlagAck|header.TCPFlagPsh, 101, 501, "one"), out, [6]byte{}, [6]byte{}, nat.FastPathGeneration()) {
		t.Fatal("OffloadAt(wg0 -> wg1) = false")
	}
	fp0, _ := l.r.LinkFastPath("wg0")
	fp1, _ := l.r.LinkFastPath("wg1")
	const off = 16
	pkt := ab(header.TCPFlagAck|header.TCPFlagPsh, 104, 501, "two")
	slow := 0
	bufs := [][]byte{append(make([]byte, off), pkt...)}
	if fwd, _ := fp1.ForwardBatch(bufs, off, func([]byte) { slow++ }); fwd != 0 || slow != 1 {
		t.Errorf("wg0's flow arriving from wg1: %d forwarded, %d to the slow path; want 0, 1", fwd, slow)
	}
	slow = 0
	bufs = [][]byte{append(make([]byte, off), pkt...)}
	fwd, dropped := fp0.ForwardBatch(bufs, off, func([]byte) { slow++ })
	if fwd != 1 || dropped != 0 || slow != 0 || len(wg1.got) != 1 {
		t.Fatalf("offloaded wg0 -> wg1 packet: %d forwarded, %d dropped, %d to the slow path, wg1 got %d; want 1, 0, 0, 1", fwd, dropped, slow, len(wg1.got))
	}
	want := append([]byte(nil), pkt...)
	want[8]-- // netstack's forward: TTL - 1 and a new header checksum
	binary.BigEndian.PutUint16(want[10:], 0)
	binary.BigEndian.PutUint16(want[10:], ^header.IPv4(want).CalculateChecksum())
	if got := wg1.got[0]; !bytes.Equal(got, want) {
		t.Errorf("into wg1:\n got %x\nwant %x", got, want)
	}

	// Larger than wg1's MTU: the slow path (netstack's frag-needed), not
	// an oversize write into the tunnel.
	mtu0 := nat.Stats().Slow[natengine.SlowMTU].Load()
	big := ab(header.TCPFlagAck|header.TCPFlagPsh, 107, 501, string(make([]byte, 1420-40+1)))
	slow = 0
	bufs = [][]byte{append(make([]byte, off), big...)}
	if fwd, _ := fp0.ForwardBatch(bufs, off, func([]byte) { slow++ }); fwd != 0 || slow != 1 || len(wg1.got) != 1 || nat.Stats().Slow[natengine.SlowMTU].Load() != mtu0+1 {
		t.Errorf("a %d-byte packet into wg1 (MTU 1420): %d forwarded, %d to the slow path, wg1 got %d, slow_mtu +%d; want 0, 1, 1, +1",
			len(big), fwd, slow, len(wg1.got), nat.Stats().Slow[natengine.SlowMTU].Load()-mtu0)
	}
	// A reload that takes away the rule that let wg0's peers reach wg1's
	// flushes the flow (as a port's): its next packet misses the fast
	// path, and netstack's way (Prerouting) drops it as a new flow.
	if err := nat.SetRules(rules(false)); err != nil {
		t.Fatal(err)
	}
	if n := nat.Stats().FlushedFirewall.Load(); n != 1 {
		t.Errorf("reload without the peers-far rule: %d flows flushed, want 1", n)
	}
	slow = 0
	var slowPkt []byte
	bufs = [][]byte{append(make([]byte, off), pkt...)}
	if fwd, _ := fp0.ForwardBatch(bufs, off, func(ip []byte) { slow++; slowPkt = append([]byte(nil), ip...) }); fwd != 0 || slow != 1 || len(wg1.got) != 1 {
		t.Fatalf("after the reload: %d forwarded, %d to the slow path, wg1 got %d; want 0, 1, 1", fwd, slow, len(wg1.got))
	}
	if v := nat.Prerouting(slowPkt, in); v == natengine.Accept {
		if v = nat.Postrouting(slowPkt, out); v == natengine.Accept {
			t.Errorf("after the reload: the flow's packet still passes the slow path (%v)", v)
		}
	}
}
