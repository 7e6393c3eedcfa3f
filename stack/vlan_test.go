package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// tagged inserts in-band tags (TPID, TCI pairs) after the MACs of frame.
func tagged(frame []byte, tags ...uint16) []byte {
	out := append([]byte(nil), frame[:12]...)
	for _, t := range tags {
		out = binary.BigEndian.AppendUint16(out, t)
	}
	return append(out, frame[12:]...)
}

func TestUntag(t *testing.T) {
	plain := ethFrame(routerMAC, hostMAC, header.ARPProtocolNumber, make([]byte, header.ARPSize))
	tests := []struct {
		name  string
		f     hw.Frame
		want  vlanKey
		ok    bool
		strip int
	}{
		{name: "untagged", f: hw.Frame{Data: plain}, want: vlanKey{}, ok: true},
		{name: "ring header 802.1Q", f: hw.Frame{Data: plain, VLANValid: true, VLANTCI: 5<<13 | 1, VLANTPID: 0x8100}, want: vlanKey{outer: 1, n: 1}, ok: true},
		{name: "ring header without TPID", f: hw.Frame{Data: plain, VLANValid: true, VLANTCI: 2}, want: vlanKey{outer: 2, n: 1}, ok: true},
		{name: "ring header 802.1ad + in-band C-tag", f: hw.Frame{Data: tagged(plain, 0x8100, 10), VLANValid: true, VLANTCI: 100, VLANTPID: 0x88a8}, want: vlanKey{outer: 100, inner: 10, n: 2, ad: true}, ok: true, strip: 4},
		{name: "in-band 802.1Q", f: hw.Frame{Data: tagged(plain, 0x8100, 3<<13|2)}, want: vlanKey{outer: 2, n: 1}, ok: true, strip: 4},
		{name: "in-band QinQ", f: hw.Frame{Data: tagged(plain, 0x88a8, 100, 0x8100, 10)}, want: vlanKey{outer: 100, inner: 10, n: 2, ad: true}, ok: true, strip: 8},
		{name: "priority tag VID 0", f: hw.Frame{Data: plain, VLANValid: true, VLANTCI: 6 << 13, VLANTPID: 0x8100}, want: vlanKey{}, ok: true},
		{name: "priority tag in-band", f: hw.Frame{Data: tagged(plain, 0x8100, 6<<13)}, want: vlanKey{}, ok: true, strip: 4},
		{name: "three tags", f: hw.Frame{Data: tagged(plain, 0x8100, 1, 0x8100, 2), VLANValid: true, VLANTCI: 3}, ok: false},
		{name: "VID 4095", f: hw.Frame{Data: plain, VLANValid: true, VLANTCI: 0xfff}, ok: false},
		{name: "inner S-tag", f: hw.Frame{Data: tagged(plain, 0x88a8, 10), VLANValid: true, VLANTCI: 100, VLANTPID: 0x88a8}, ok: false},
		{name: "short", f: hw.Frame{Data: []byte{1, 2, 3}}, want: vlanKey{}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f
			f.Data = bytes.Clone(f.Data)
			f.WireLen = len(f.Data)
			before := bytes.Clone(f.Data)
			k, ok := untag(&f)
			if ok != tt.ok || (ok && k != tt.want) {
				t.Fatalf("untag() = %+v, %v, want %+v, %v", k, ok, tt.want, tt.ok)
			}
			if !ok {
				if !bytes.Equal(f.Data, before) {
					t.Fatalf("untag() changed a rejected frame")
				}
				return
			}
			if f.VLANValid || len(before)-len(f.Data) != tt.strip || f.WireLen != len(f.Data) {
				t.Fatalf("untag() left VLANValid=%v, stripped %d bytes (WireLen %d), want %d", f.VLANValid, len(before)-len(f.Data), f.WireLen, tt.strip)
			}
			if tt.strip > 0 && (!bytes.Equal(f.Data[:12], before[:12]) || !bytes.Equal(f.Data[12:], plain[12:])) {
				t.Fatalf("untag() = %x, want MACs then %x", f.Data, plain[12:])
			}
		})
	}
}

// trunkLab is a Netstack with an untagged, two 802.1Q and one QinQ
// interface on one port, whose frames are captured.
type trunkLab struct {
	r     *Netstack
	t     *Trunk
	w     *captureWriter
	lan   *Interface
	wan   *Interface
	qinq  *Interface
	plain *Interface
}

type captureWriter struct {
	mu     sync.Mutex
	frames [][]byte
}

func (c *captureWriter) WriteFrames(frames [][]byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range frames {
		c.frames = append(c.frames, bytes.Clone(f))
	}
	return len(frames), nil
}

func (c *captureWriter) take() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.frames
	c.frames = nil
	return f
}

// trunkConfig is the trunkLab's config, writing to w.
func trunkConfig(w hw.FrameWriter) Config {
	pfx := netip.MustParsePrefix
	return Config{Interfaces: []InterfaceConfig{
		{Name: "eth0.1", MAC: routerMAC, Writer: w, VLAN: []uint16{1}, PCP: 5, Addresses: []netip.Prefix{pfx("192.168.1.1/24")}},
		{Name: "eth0.2", MAC: routerMAC, Writer: w, VLAN: []uint16{2}, Addresses: []netip.Prefix{pfx("203.0.113.2/24")}},
		{Name: "eth0.100.10", MAC: routerMAC, Writer: w, VLAN: []uint16{100, 10}, VLANProtocol: TPID8021AD, PCP: 3, Addresses: []netip.Prefix{pfx("10.100.10.1/24")}},
		{Name: "eth0", MAC: routerMAC, Writer: w, Addresses: []netip.Prefix{pfx("10.0.0.1/24")}},
	}}
}

func newTrunkLab(t *testing.T) *trunkLab {
	t.Helper()
	w := &captureWriter{}
	r, err := New(trunkConfig(w), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	l := &trunkLab{r: r, t: r.NewTrunk(), w: w, lan: r.Interface("eth0.1"), wan: r.Interface("eth0.2"), qinq: r.Interface("eth0.100.10"), plain: r.Interface("eth0")}
	if err := l.t.Set(l.lan, l.wan, l.qinq, l.plain); err != nil {
		t.Fatal(err)
	}
	return l
}

// arpRequest is a broadcast ARP request from host for target.
func arpRequest(target netip.Addr) []byte {
	arp := make([]byte, header.ARPSize)
	a := header.ARP(arp)
	a.SetIPv4OverEthernet()
	a.SetOp(header.ARPRequest)
	copy(a.HardwareAddressSender(), hostMAC)
	src := target.As4()
	src[3] = 77
	copy(a.ProtocolAddressSender(), src[:])
	t4 := target.As4()
	copy(a.ProtocolAddressTarget(), t4[:])
	return ethFrame(bcastMAC, hostMAC, header.ARPProtocolNumber, arp)
}

// waitFrames waits for n frames from the router.
func (l *trunkLab) waitFrames(t *testing.T, n int) [][]byte {
	t.Helper()
	var got [][]byte
	for deadline := time.Now().Add(5 * time.Second); len(got) < n && time.Now().Before(deadline); {
		got = append(got, l.w.take()...)
		time.Sleep(time.Millisecond)
	}
	if len(got) != n {
		t.Fatalf("router sent %d frames, want %d: %x", len(got), n, got)
	}
	return got
}

func TestTrunkARP(t *testing.T) {
	tests := []struct {
		name   string
		f      hw.Frame
		target string
		// tags is the link header the reply must carry between the
		// MACs and the Ethertype.
		tags []byte
	}{
		{"vid 1 in ring header", hw.Frame{VLANValid: true, VLANTCI: 1, VLANTPID: 0x8100}, "192.168.1.1", []byte{0x81, 0, 0xa0, 1}},
		{"vid 2 in-band", hw.Frame{}, "203.0.113.2", []byte{0x81, 0, 0, 2}},
		{"qinq", hw.Frame{VLANValid: true, VLANTCI: 100, VLANTPID: 0x88a8}, "10.100.10.1", []byte{0x88, 0xa8, 0x60, 100, 0x81, 0, 0x60, 10}},
		{"priority tagged", hw.Frame{VLANValid: true, VLANTCI: 7 << 13, VLANTPID: 0x8100}, "10.0.0.1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTrunkLab(t)
			f := tt.f
			f.Data = arpRequest(netip.MustParseAddr(tt.target))
			switch tt.name {
			case "vid 2 in-band":
				f.Data = tagged(f.Data, 0x8100, 2)
			case "qinq":
				f.Data = tagged(f.Data, 0x8100, 10)
			}
			f.WireLen = len(f.Data)
			l.t.HandleBatch(0, []hw.Frame{f})
			got := l.waitFrames(t, 1)[0]
			if !bytes.Equal(got[:6], hostMAC) || !bytes.Equal(got[6:12], routerMAC) {
				t.Fatalf("reply MACs %x, want to %s from %s", got[:12], hostMAC, routerMAC)
			}
			n := len(tt.tags)
			if !bytes.Equal(got[12:12+n], tt.tags) || binary.BigEndian.Uint16(got[12+n:]) != uint16(header.ARPProtocolNumber) {
				t.Fatalf("reply link header %x, want tags %x then 0806", got[12:16+n], tt.tags)
			}
			a := header.ARP(got[14+n:])
			if a.Op() != header.ARPReply || netip.AddrFrom4([4]byte(a.ProtocolAddressSender())) != netip.MustParseAddr(tt.target) {
				t.Fatalf("reply %x is not an ARP reply from %s", got, tt.target)
			}
		})
	}
}

func TestTrunkUnknownVLAN(t *testing.T) {
	l := newTrunkLab(t)
	frames := []hw.Frame{
		{Data: arpRequest(netip.MustParseAddr("192.168.1.1")), VLANValid: true, VLANTCI: 3},
		{Data: tagged(arpRequest(netip.MustParseAddr("192.168.1.1")), 0x8100, 1, 0x8100, 2)},
		{Data: arpRequest(netip.MustParseAddr("192.168.1.1")), VLANValid: true, VLANTCI: 100, VLANTPID: 0x8100},
	}
	l.t.HandleBatch(0, frames)
	if got := l.t.Drops()["vlan_unknown"]; got != 3 {
		t.Fatalf("vlan_unknown = %d, want 3", got)
	}
	time.Sleep(50 * time.Millisecond)
	if got := l.w.take(); len(got) != 0 {
		t.Fatalf("router answered frames for unknown VLANs: %x", got)
	}
	if err := l.t.Set(l.lan, l.r.Interface("eth0.1")); err == nil {
		t.Fatal("Set with a VLAN twice: no error")
	}
}

func TestTrunkPing(t *testing.T) {
	l := newTrunkLab(t)
	// The router resolves the sender first: answer its ARP request.
	echo := ipv4Packet(netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("203.0.113.2"), 64, header.ICMPv4ProtocolNumber, icmpEcho(7, 1, []byte("vlan ping")))
	l.t.HandleBatch(0, []hw.Frame{{Data: ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, echo), VLANValid: true, VLANTCI: 2}})
	got := l.waitFrames(t, 1)[0]
	if binary.BigEndian.Uint16(got[16:]) == uint16(header.ARPProtocolNumber) {
		arp := header.ARP(got[18:])
		reply := make([]byte, header.ARPSize)
		r := header.ARP(reply)
		r.SetIPv4OverEthernet()
		r.SetOp(header.ARPReply)
		copy(r.HardwareAddressSender(), hostMAC)
		copy(r.ProtocolAddressSender(), arp.ProtocolAddressTarget())
		copy(r.HardwareAddressTarget(), routerMAC)
		copy(r.ProtocolAddressTarget(), arp.ProtocolAddressSender())
		l.t.HandleBatch(0, []hw.Frame{{Data: ethFrame(routerMAC, hostMAC, header.ARPProtocolNumber, reply), VLANValid: true, VLANTCI: 2}})
		got = l.waitFrames(t, 1)[0]
	}
	if !bytes.Equal(got[12:16], []byte{0x81, 0, 0, 2}) {
		t.Fatalf("echo reply tag %x, want 81000002", got[12:16])
	}
	ip := header.IPv4(got[18:])
	icmp := header.ICMPv4(ip.Payload())
	if ip.Protocol() != uint8(header.ICMPv4ProtocolNumber) || icmp.Type() != header.ICMPv4EchoReply {
		t.Fatalf("reply %x is not an echo reply", got)
	}
	if st := l.wan.Stats(); st.RxPackets == 0 || st.TxPackets == 0 {
		t.Fatalf("eth0.2 stats %+v, want rx and tx", st)
	}
	if vids, tpid, pcp := l.qinq.VLAN(); len(vids) != 2 || vids[0] != 100 || vids[1] != 10 || tpid != TPID8021AD || pcp != 3 {
		t.Fatalf("VLAN() = %v, %#x, %d, want [100 10], 0x88a8, 3", vids, tpid, pcp)
	}
}

// TestTrunkApply checks that Apply changes an interface's PCP and VID in
// place and that the trunk follows once Set again, as router reload does.
func TestTrunkApply(t *testing.T) {
	l := newTrunkLab(t)
	cfg := trunkConfig(l.w)
	cfg.Interfaces[0].PCP = 1
	cfg.Interfaces[1].VLAN = []uint16{20}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	if l.r.Interface("eth0.1") != l.lan || l.r.Interface("eth0.2") != l.wan {
		t.Fatal("Apply recreated interfaces whose VLAN or PCP changed")
	}
	if err := l.t.Set(l.lan, l.wan, l.qinq, l.plain); err != nil {
		t.Fatal(err)
	}
	l.t.HandleBatch(0, []hw.Frame{
		{Data: arpRequest(netip.MustParseAddr("192.168.1.1")), VLANValid: true, VLANTCI: 1},
		{Data: arpRequest(netip.MustParseAddr("203.0.113.2")), VLANValid: true, VLANTCI: 2},
	})
	got := l.waitFrames(t, 1)[0]
	if !bytes.Equal(got[12:16], []byte{0x81, 0, 0x20, 1}) {
		t.Fatalf("eth0.1 reply tag %x, want 81002001 (PCP 1, VID 1)", got[12:16])
	}
	if n := l.t.Drops()["vlan_unknown"]; n != 1 {
		t.Fatalf("vlan_unknown = %d, want 1 (VID 2 is gone)", n)
	}
	l.t.HandleBatch(0, []hw.Frame{{Data: arpRequest(netip.MustParseAddr("203.0.113.2")), VLANValid: true, VLANTCI: 20}})
	got = l.waitFrames(t, 1)[0]
	if !bytes.Equal(got[12:16], []byte{0x81, 0, 0, 20}) {
		t.Fatalf("eth0.2 reply tag %x, want 81000014 (VID 20)", got[12:16])
	}
}

// demuxFrames is a batch alternating between two VLANs: the ring-header
// tag (the usual case) and an in-band QinQ inner tag.
func demuxFrames(n int) (frames, tmpl []hw.Frame) {
	udp := ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber,
		ipv4Packet(hostIP4, farIP4, 64, header.UDPProtocolNumber, udpDatagram(1000, 2000, make([]byte, 18))))
	tmpl = make([]hw.Frame, n)
	for i := range tmpl {
		if i%2 == 0 {
			tmpl[i] = hw.Frame{Data: bytes.Clone(udp), VLANValid: true, VLANTCI: 1, VLANTPID: 0x8100}
		} else {
			d := tagged(udp, 0x8100, 10)
			tmpl[i] = hw.Frame{Data: d, VLANValid: true, VLANTCI: 100, VLANTPID: 0x88a8}
		}
		tmpl[i].WireLen = len(tmpl[i].Data)
	}
	frames = make([]hw.Frame, n)
	return frames, tmpl
}

// resetFrames undoes what the demux did to frames (in-band tags stripped
// in place), as a fresh ring block would.
func resetFrames(frames, tmpl []hw.Frame) {
	for i := 1; i < len(tmpl); i += 2 {
		binary.BigEndian.PutUint16(tmpl[i].Data[12:], 0x8100)
		binary.BigEndian.PutUint16(tmpl[i].Data[14:], 10)
		copy(tmpl[i].Data[:6], routerMAC)
		copy(tmpl[i].Data[6:12], hostMAC)
	}
	copy(frames, tmpl)
}

// detachedTrunk is a trunk over two endpoints that are not attached to a
// NIC, so HandleBatch measures the demux and the hand-off alone.
func detachedTrunk() (*Trunk, [2]*Endpoint) {
	var r Netstack
	t := r.NewTrunk()
	a := newEndpoint(routerMAC, 1500, nil, nil)
	a.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{1}}))
	b := newEndpoint(routerMAC, 1500, nil, nil)
	b.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{100, 10}, VLANProtocol: TPID8021AD}))
	t.table.Store(&trunkTable{entries: []trunkEntry{{a.vlan.Load().key, a}, {b.vlan.Load().key, b}}})
	return t, [2]*Endpoint{a, b}
}

func TestTrunkAllocs(t *testing.T) {
	tr, eps := detachedTrunk()
	frames, tmpl := demuxFrames(benchBatch)
	allocs := testing.AllocsPerRun(100, func() {
		resetFrames(frames, tmpl)
		tr.HandleBatch(0, frames)
	})
	if allocs != 0 {
		t.Fatalf("Trunk.HandleBatch: %v allocs per batch, want 0", allocs)
	}
	for i, e := range eps {
		if n := e.stats.drops[dropNotAttached].Load(); n == 0 {
			t.Fatalf("endpoint %d got no frames", i)
		}
	}
	if n := tr.vlanUnknown.Load(); n != 0 {
		t.Fatalf("vlan_unknown = %d, want 0", n)
	}
}

// BenchmarkVLANDemux measures the trunk's per-frame cost: reading the
// ring-header tag and any in-band tag, the table lookup, stripping the
// in-band tag, and the hand-off to the endpoint (detached, so netstack is
// not measured). Each op is one frame.
//
//   - trunk: the worst case, frames alternating between an 802.1Q VLAN
//     and a QinQ VLAN with an in-band inner tag, so every frame is its
//     own run; resetFrames (a 16-byte rewrite per QinQ frame) is included.
//   - trunk-one-vlan: a batch of one 802.1Q VLAN, tags in the ring header.
//   - untag: the tag parser alone.
func BenchmarkVLANDemux(b *testing.B) {
	tr, _ := detachedTrunk()
	frames, tmpl := demuxFrames(benchBatch)
	b.Run("trunk", func(b *testing.B) {
		runBatches(b, tmpl, func(batch []hw.Frame) {
			resetFrames(frames, tmpl)
			tr.HandleBatch(0, frames[:len(batch)])
		})
	})
	b.Run("trunk-one-vlan", func(b *testing.B) {
		// The common case: a whole batch of one VLAN, tag in the ring
		// header, nothing to strip.
		one := make([]hw.Frame, benchBatch)
		for i := range one {
			one[i] = tmpl[0]
		}
		runBatches(b, one, func(batch []hw.Frame) {
			copy(frames, one)
			tr.HandleBatch(0, frames[:len(batch)])
		})
	})
	b.Run("untag", func(b *testing.B) {
		f := tmpl[0]
		var k vlanKey
		b.ReportAllocs()
		for range b.N {
			g := f
			k, _ = untag(&g)
		}
		_ = k
	})
}

// FuzzTrunk feeds arbitrary frames and ring-header tags to a trunk with an
// untagged, an 802.1Q and a QinQ interface: nothing may panic, each frame
// is either counted as vlan_unknown or reaches exactly one endpoint (as a
// delivery or a drop), and endpoints only deliver ARP, IPv4 and IPv6.
func FuzzTrunk(f *testing.F) {
	arp := arpRequest(netip.MustParseAddr("192.168.1.1"))
	f.Add(arp, false, uint16(0), uint16(0))
	f.Add(arp, true, uint16(1), uint16(0x8100))
	f.Add(tagged(arp, 0x8100, 10), true, uint16(100), uint16(0x88a8))
	f.Add(tagged(arp, 0x88a8, 100, 0x8100, 10), false, uint16(0), uint16(0))
	f.Add(tagged(arp, 0x8100, 0), false, uint16(0), uint16(0))
	f.Add(arp, true, uint16(0xe000), uint16(0x8100))
	f.Add(tagged(arp, 0x8100, 1, 0x8100, 2), true, uint16(3), uint16(0x8100))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0}, true, uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, valid bool, tci, tpid uint16) {
		var r Netstack
		tr := r.NewTrunk()
		var ds [3]recordingDispatcher
		var eps [3]*Endpoint
		for i, c := range []InterfaceConfig{{}, {VLAN: []uint16{1}}, {VLAN: []uint16{100, 10}, VLANProtocol: TPID8021AD}} {
			eps[i] = testEndpoint(&ds[i])
			eps[i].vlan.Store(newEgressVLAN(&c))
		}
		tr.table.Store(&trunkTable{entries: []trunkEntry{{vlanKey{}, eps[0]}, {vlanKey{outer: 1, n: 1}, eps[1]}, {vlanKey{outer: 100, inner: 10, n: 2, ad: true}, eps[2]}}})
		frame := bytes.Clone(data)
		tr.HandleBatch(0, []hw.Frame{{Data: frame, WireLen: len(frame), VLANValid: valid, VLANTCI: tci, VLANTPID: tpid}})
		total := tr.vlanUnknown.Load()
		for i, e := range eps {
			var s InterfaceStats
			e.stats.fill(&s)
			total += s.RxPackets
			for _, p := range ds[i].pkts {
				if p.proto != header.ARPProtocolNumber && p.proto != header.IPv4ProtocolNumber && p.proto != header.IPv6ProtocolNumber {
					t.Fatalf("endpoint %d got protocol %#x", i, p.proto)
				}
			}
		}
		if total != 1 {
			t.Fatalf("frame counted %d times, want 1", total)
		}
	})
}
