package natengine

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// offloadedTCP sets up an established TCP flow hostA:40000 <-> remote:80
// with both directions offloaded; it returns the external port.
func offloadedTCP(t testing.TB, e *Engine) uint16 {
	t.Helper()
	ext := establishTCP(t, e, hostA, 40000, remote, 80)
	out := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpACK}.build()
	fwd(t, e, out, lanIf, wanIf)
	if !e.Offload(out, wanIf, macGw, macRtrW) {
		t.Fatal("Offload(orig) = false")
	}
	in := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK}.build()
	fwd(t, e, in, wanIf, lanIf)
	if !e.Offload(in, lanIf, macA, macRtrL) {
		t.Fatal("Offload(reply) = false")
	}
	return ext
}

// slowForward is what the slow path produces: NAT by the hooks, TTL
// decremented by netstack, the frame built with the given MACs.
func slowForward(t testing.TB, e *Engine, ip []byte, in, out Iface, dst, src [6]byte) []byte {
	t.Helper()
	ip = append([]byte(nil), ip...)
	if v := fwd(t, e, ip, in, out); v != Accept {
		t.Fatalf("slow path: %v", v)
	}
	if ip[0]>>4 == 4 {
		ip[8]--
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
	} else {
		ip[7]--
	}
	return eth(dst, src, ip)
}

func TestFastPathMatchesSlowPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, proto := range []uint8{ProtoUDP, ProtoTCP} {
		t.Run(protoName(proto), func(t *testing.T) {
			// Two engines in the same state: one forwards by the slow path,
			// the other by the fast path.
			var es [2]*Engine
			var ext uint16
			for i := range es {
				es[i], _ = newTestEngine(t, 0, nil)
				if proto == ProtoTCP {
					ext = offloadedTCP(t, es[i])
				} else {
					var clk *fakeclock.Clock
					var f offloadedFlow
					es[i], clk, f = offloadedUDP(t)
					_ = clk
					ext = f.ext
				}
			}
			sp := uint16(5000)
			if proto == ProtoTCP {
				sp = 40000
			}
			dp := uint16(53)
			if proto == ProtoTCP {
				dp = 80
			}
			for i := 0; i < 500; i++ {
				payload := make([]byte, r.IntN(1400))
				for j := range payload {
					payload[j] = byte(r.Uint32())
				}
				outbound := i%2 == 0
				var ip []byte
				var in, out Iface
				var dmac, smac [6]byte
				if outbound {
					ip = pk{src: hostA, dst: remote, proto: proto, sport: sp, dport: dp, flags: tcpACK, payload: payload, ttl: uint8(2 + r.IntN(250)), noUDPCsum: i%10 == 4}.build()
					in, out, dmac, smac = lanIf, wanIf, macGw, macRtrW
				} else {
					ip = pk{src: remote, dst: wanAddr, proto: proto, sport: dp, dport: ext, flags: tcpACK, payload: payload, ttl: uint8(2 + r.IntN(250))}.build()
					in, out, dmac, smac = wanIf, lanIf, macA, macRtrL
				}
				want := slowForward(t, es[0], ip, in, out, dmac, smac)
				frame := eth([6]byte{9, 9, 9, 9, 9, 9}, [6]byte{8, 8, 8, 8, 8, 8}, ip)
				gotOut, ok := es[1].FastPath(frame, in)
				if !ok || gotOut != out {
					t.Fatalf("packet %d: FastPath = %v, %v; want %v, true", i, gotOut, ok, out)
				}
				mustVerify(t, frame[14:])
				if string(frame) != string(want) {
					t.Fatalf("packet %d: fast path\n% x\nslow path\n% x", i, frame[:60], want[:60])
				}
			}
			if es[1].Stats().FastPathHits.Load() != 500 {
				t.Fatalf("hits %d", es[1].Stats().FastPathHits.Load())
			}
			f := es[1].Flows()[0]
			if f.Packets[0] < 250 || f.Packets[1] < 250 || f.Bytes[0] == 0 || !f.Offloaded[0] || !f.Offloaded[1] {
				t.Fatalf("flow counters %+v", f)
			}
		})
	}
}

func TestFastPathZeroAllocs(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	ext := offloadedTCP(t, e)
	// Offloading an already offloaded direction again does not allocate.
	again := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK}.build()
	fwd(t, e, again, wanIf, lanIf)
	if n := testing.AllocsPerRun(100, func() {
		if !e.Offload(again, lanIf, macA, macRtrL) {
			t.Fatal("Offload = false")
		}
	}); n != 0 {
		t.Fatalf("repeated Offload allocates %.1f times", n)
	}
	ip := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK, payload: make([]byte, 1400)}.build()
	frame := eth(macRtrW, macGw, ip)
	n := testing.AllocsPerRun(1000, func() {
		frame[14+8] = 64 // keep the TTL up
		if _, ok := e.FastPath(frame, wanIf); !ok {
			t.Fatal("miss")
		}
		// Undo the rewrite so every run sees the same input.
		copy(frame[14:], ip)
	})
	if n != 0 {
		t.Fatalf("FastPath allocates %.1f times per packet", n)
	}
	frames := [][]byte{append([]byte(nil), frame...), append([]byte(nil), frame...)}
	outs := make([]Iface, 2)
	n = testing.AllocsPerRun(1000, func() {
		for _, f := range frames {
			copy(f[14:], ip)
		}
		if e.FastPathBatch(frames, wanIf, outs) != 2 || outs[0] != lanIf {
			t.Fatal("batch miss")
		}
	})
	if n != 0 {
		t.Fatalf("FastPathBatch allocates %.1f times per batch", n)
	}
	super := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK, payload: make([]byte, 30000)}.build()
	partial(super)
	sframe := eth(macRtrW, macGw, super)
	n = testing.AllocsPerRun(1000, func() {
		copy(sframe[14:], super)
		if _, ok := e.FastPathMetaAt(sframe, wanIf, e.Now(), FrameMeta{SegmentSize: 1448, PartialCsum: true}); !ok {
			t.Fatal("superframe miss")
		}
	})
	if n != 0 {
		t.Fatalf("FastPathMetaAt allocates %.1f times per superframe", n)
	}
}

func TestFastPathHandBack(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	ext := offloadedTCP(t, e)
	base := func() pk { return pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK} }
	try := func(name string, frame []byte, in Iface, want SlowReason) {
		t.Helper()
		before := e.Stats().Slow[want].Load()
		orig := append([]byte(nil), frame...)
		if _, ok := e.FastPath(frame, in); ok {
			t.Fatalf("%s: forwarded", name)
		}
		if e.Stats().Slow[want].Load() != before+1 {
			t.Fatalf("%s: reason %v not counted", name, want)
		}
		if string(orig) != string(frame) {
			t.Fatalf("%s: frame modified", name)
		}
	}
	k := base()
	k.ttl = 1
	try("TTL 1", eth(macRtrW, macGw, k.build()), wanIf, SlowTTL)
	try("wrong interface", eth(macRtrW, macGw, base().build()), lanIf, SlowMiss)
	opt := base().build()
	opt = append(opt[:20:20], append([]byte{1, 1, 1, 0}, opt[20:]...)...) // 4 bytes of options
	opt[0] = 0x46
	binary.BigEndian.PutUint16(opt[2:], uint16(len(opt)))
	try("IPv4 options", eth(macRtrW, macGw, opt), wanIf, SlowOptions)
	fr := base().build()
	fr[6] = 0x20 // MF
	binary.BigEndian.PutUint16(fr[10:], 0)
	binary.BigEndian.PutUint16(fr[10:], ^checksum.Checksum(fr[:20], 0))
	try("fragment", eth(macRtrW, macGw, fr), wanIf, SlowFragment)
	bad := base().build()
	bad[1] ^= 0x04 // TOS: the header checksum no longer matches
	try("bad header checksum", eth(macRtrW, macGw, bad), wanIf, SlowNotIP)
	try("not IP", append(eth(macRtrW, macGw, base().build())[:12:12], append([]byte{0x08, 0x06}, base().build()...)...), wanIf, SlowNotIP)
	big := base()
	big.payload = make([]byte, 1500)
	try("over MTU", eth(macRtrW, macGw, big.build()), wanIf, SlowMTU)
	e.InvalidateFastPath()
	try("after a route change", eth(macRtrW, macGw, base().build()), wanIf, SlowStale)
	// Re-offload, then FIN: handed back and the offload ends.
	fwdAndOffload := func() {
		in := base().build()
		fwd(t, e, in, wanIf, lanIf)
		if !e.Offload(in, lanIf, macA, macRtrL) {
			t.Fatal("re-offload failed")
		}
	}
	fwdAndOffload()
	if _, ok := e.FastPath(eth(macRtrW, macGw, base().build()), wanIf); !ok {
		t.Fatal("miss after re-offload")
	}
	k = base()
	k.flags = tcpSYN
	try("SYN", eth(macRtrW, macGw, k.build()), wanIf, SlowSYN)
	if e.Offload(k.build(), lanIf, macA, macRtrL) {
		t.Fatal("Offload took a SYN")
	}
	k = base()
	k.flags = tcpFIN | tcpACK
	fin := eth(macRtrW, macGw, k.build())
	try("FIN", fin, wanIf, SlowFinRst)
	fwd(t, e, fin[14:], wanIf, lanIf) // the slow path sees the FIN
	if f := e.Flows()[0]; f.Offloaded[0] || f.Offloaded[1] {
		t.Fatalf("still offloaded after FIN: %+v", f)
	}
	try("after FIN", eth(macRtrW, macGw, base().build()), wanIf, SlowMiss)
	if e.Offload(base().build(), lanIf, macA, macRtrL) {
		t.Fatal("offloaded a closing flow")
	}
}

func TestFastPathIPv6(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	syn := pk{src: host6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpSYN}.build()
	fwd(t, e, syn, lanIf, wanIf)
	expectAddrs(t, syn, ap(host6, 40000), ap(remote6, 443)) // no NAT for IPv6
	fwd(t, e, pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 443, dport: 40000, flags: tcpSYN | tcpACK}.build(), wanIf, lanIf)
	ack := pk{src: host6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpACK}.build()
	fwd(t, e, ack, lanIf, wanIf)
	if !e.Offload(ack, wanIf, macGw, macRtrW) {
		t.Fatal("Offload = false")
	}
	ip := pk{src: host6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpACK, payload: []byte("data"), ttl: 9}.build()
	frame := eth(macRtrL, macA, ip)
	if out, ok := e.FastPath(frame, lanIf); !ok || out != wanIf {
		t.Fatalf("FastPath = %v, %v", out, ok)
	}
	mustVerify(t, frame[14:])
	if frame[14+7] != 8 || [6]byte(frame[:6]) != macGw {
		t.Fatalf("hop limit %d, dst MAC % x", frame[14+7], frame[:6])
	}
}

func TestMSSClamp(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) { r.Ifaces[1].MTU = 1492 }) // PPPoE WAN
	for _, opts := range [][]byte{
		{2, 4, 0x05, 0xb4, 1, 1, 4, 2},             // MSS 1460 first
		{1, 2, 4, 0x05, 0xb4, 1, 4, 2, 0, 0, 0, 0}, // MSS at an odd offset
	} {
		syn := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpSYN, tcpOpts: opts}.build()
		if v := fwd(t, e, syn, lanIf, wanIf); v != Accept {
			t.Fatal(v)
		}
		p, _ := Classify(syn)
		l4 := syn[p.L4Off:]
		i := 20
		for l4[i] != 2 {
			if l4[i] == 1 {
				i++
			} else {
				i += int(l4[i+1])
			}
		}
		if got := binary.BigEndian.Uint16(l4[i+2:]); got != 1452 {
			t.Fatalf("MSS %d, want 1452", got)
		}
	}
	// A smaller MSS is left alone.
	syn := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40001, dport: 80, flags: tcpSYN, tcpOpts: []byte{2, 4, 0x02, 0x00}}.build()
	fwd(t, e, syn, lanIf, wanIf)
	if got := binary.BigEndian.Uint16(syn[40+2:]); got != 512 {
		t.Fatalf("MSS %d, want 512", got)
	}
	if e.Stats().MSSClamped.Load() != 2 {
		t.Fatalf("clamped %d", e.Stats().MSSClamped.Load())
	}
}

func TestIPv6Firewall(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Allow6 = []Allow6{{Proto: ProtoTCP, Dst: netip.MustParsePrefix("2001:db8:1::10/128"), FirstPort: 22, LastPort: 22}}
	})
	// Established/related in.
	out := pk{src: host6, dst: remote6, proto: ProtoUDP, sport: 5000, dport: 53}.build()
	fwd(t, e, out, lanIf, wanIf)
	in := pk{src: remote6, dst: host6, proto: ProtoUDP, sport: 53, dport: 5000}.build()
	if v := fwd(t, e, in, wanIf, lanIf); v != Accept {
		t.Fatalf("reply: %v", v)
	}
	// New inbound dropped unless allowed.
	if v := e.Prerouting(pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 1, dport: 23, flags: tcpSYN}.build(), wanIf); v != Drop {
		t.Fatalf("inbound SYN to 23: %v", v)
	}
	if v := fwd(t, e, pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 1, dport: 22, flags: tcpSYN}.build(), wanIf, lanIf); v != Accept {
		t.Fatalf("allowed inbound SYN to 22: %v", v)
	}
	// RFC 4890 4.3.1: errors and echo pass; 4.3.5: renumbering does not.
	emb := pk{src: host6, dst: remote6, proto: ProtoUDP, sport: 5000, dport: 53}.build()
	for _, tc := range []struct {
		typ, code uint8
		want      Verdict
	}{{1, 4, Accept}, {2, 0, Accept}, {3, 0, Accept}, {4, 1, Accept}, {4, 2, Accept}, {128, 0, Accept}, {138, 0, Drop}, {139, 0, Drop}} {
		k := pk{src: remote6, dst: host6, proto: ProtoICMPv6, typ: tc.typ, code: tc.code, sport: 9}
		if icmpIsError(tc.typ, true) {
			k.payload = emb
		}
		if v := e.Prerouting(k.build(), wanIf); v != tc.want {
			t.Errorf("ICMPv6 %d/%d from WAN: %v, want %v", tc.typ, tc.code, v, tc.want)
		}
	}
	// ND to the router is local.
	ns := pk{src: netip.MustParseAddr("fe80::1"), dst: netip.MustParseAddr("ff02::1:ff00:2"), proto: ProtoICMPv6, typ: 135}.build()
	if v := e.Prerouting(ns, wanIf); v != Accept {
		t.Fatalf("neighbour solicitation: %v", v)
	}
}

func TestMasqueradeFollowsAddress(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	outboundUDP(t, e, hostA, 5000, remote, 53)
	r := testRules()
	newWAN := netip.MustParseAddr("203.0.113.99")
	r.Ifaces[1].Addrs = []netip.Addr{newWAN}
	if err := e.SetRules(r); err != nil {
		t.Fatal(err)
	}
	if e.Len() != 0 {
		t.Fatalf("%d flows on the old address remain", e.Len())
	}
	if got := e.Stats().FlushedAddressGone.Load(); got != 1 {
		t.Errorf("FlushedAddressGone = %d, want 1", got)
	}
	pkt := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53}.build()
	fwd(t, e, pkt, lanIf, wanIf)
	expectAddrs(t, pkt, ap(newWAN, 5000), ap(remote, 53))
}

func TestPortForwardRangeAndPool(t *testing.T) {
	pool := netip.MustParseAddr("198.18.0.5")
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoUDP, In: wanIf, FirstPort: 6000, LastPort: 6010, To: ap(hostB, 7000)}}
		r.Ifaces[1].SNAT = []netip.Addr{pool}
	})
	in := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 999, dport: 6004}.build()
	if v := fwd(t, e, in, wanIf, lanIf); v != Accept {
		t.Fatal(v)
	}
	expectAddrs(t, in, ap(remote, 999), ap(hostB, 7004))
	back := pk{src: hostB, dst: remote, proto: ProtoUDP, sport: 7004, dport: 999}.build()
	if v := fwd(t, e, back, lanIf, wanIf); v != Accept {
		t.Fatal(v)
	}
	expectAddrs(t, back, ap(wanAddr, 6004), ap(remote, 999))
	// Outbound flows use the pool address.
	out := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53}.build()
	fwd(t, e, out, lanIf, wanIf)
	expectAddrs(t, out, ap(pool, 5000), ap(remote, 53))
}

func TestSetRulesValidation(t *testing.T) {
	e := New(Config{})
	err := e.SetRules(Rules{
		Ifaces:   []IfaceConfig{{ID: 0, Name: "bad"}, {ID: 3, Name: "x", MTU: 100}},
		Forwards: []Forward{{Proto: 99, In: 7, FirstPort: 10, LastPort: 5}},
	})
	if err == nil {
		t.Fatal("no error")
	}
	t.Log(err)
}

func TestUntranslatableNotLeaked(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	// A later fragment whose first fragment never passed has no flow to
	// take its translation from.
	frags := fragment4(pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53, payload: make([]byte, 64)}.build(), 32)
	if v := e.Postrouting(frags[1], wanIf); v != Drop || e.Stats().Drop(DropUntranslatable) != 1 {
		t.Fatalf("untracked fragment out of the masquerade interface: %v", v)
	}
	gre := pk{src: hostA, dst: hostB, proto: 47, payload: make([]byte, 8)}.build()
	if v := fwd(t, e, gre, lanIf, lanIf); v != Accept {
		t.Fatalf("GRE between LAN hosts: %v", v)
	}
	v6 := pk{src: host6, dst: remote6, proto: 47, payload: make([]byte, 8)}.build()
	if v := fwd(t, e, v6, lanIf, wanIf); v != Accept {
		t.Fatalf("IPv6 GRE: %v", v)
	}
}

// frag6 splits an IPv6 packet without extension headers into fragments
// with a Fragment header (RFC 8200 4.5), payload at most size (multiple of 8).
func frag6(pkt []byte, size int, id uint32) [][]byte {
	payload := pkt[40:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := off + size
		m := uint16(1)
		if end >= len(payload) {
			end, m = len(payload), 0
		}
		f := make([]byte, 48+end-off)
		copy(f, pkt[:40])
		f[6] = 44
		binary.BigEndian.PutUint16(f[4:], uint16(8+end-off))
		f[40] = pkt[6]
		binary.BigEndian.PutUint16(f[42:], uint16(off)|m)
		binary.BigEndian.PutUint32(f[44:], id)
		copy(f[48:], payload[off:end])
		out = append(out, f)
	}
	return out
}

func TestIPv6Fragments(t *testing.T) {
	e, clk := newTestEngine(t, 0, nil)
	req := pk{src: host6, dst: remote6, proto: ProtoUDP, sport: 5000, dport: 53, payload: make([]byte, 3000)}.build()
	fr := frag6(req, 1232, 77)
	if v := e.Prerouting(fr[2], lanIf); v != Stolen {
		t.Fatalf("last fragment first: %v", v)
	}
	for _, f := range fr[:2] {
		if v := fwd(t, e, f, lanIf, wanIf); v != Accept {
			t.Fatal(v)
		}
	}
	n := 0
	e.DrainHeld(func(p []byte, in Iface) { n++ })
	if n != 1 {
		t.Fatalf("released %d", n)
	}
	rep := pk{src: remote6, dst: host6, proto: ProtoUDP, sport: 53, dport: 5000, payload: make([]byte, 3000)}.build()
	for i, f := range frag6(rep, 1232, 99) {
		if v := fwd(t, e, f, wanIf, lanIf); v != Accept {
			t.Fatalf("reply fragment %d: %v", i, v)
		}
	}
	// Fragments of an unsolicited inbound flow: the first is dropped, the
	// rest are held and then dropped by Sweep, all counted.
	bad := pk{src: remote6, dst: host6, proto: ProtoUDP, sport: 53, dport: 6000, payload: make([]byte, 3000)}.build()
	bf := frag6(bad, 1232, 100)
	if v := e.Prerouting(bf[0], wanIf); v != Drop {
		t.Fatalf("unsolicited first fragment: %v", v)
	}
	for _, f := range bf[1:] {
		e.Prerouting(f, wanIf)
	}
	clk.Forward(31 * time.Second)
	e.Sweep()
	if got := e.Stats().Drop(DropFragNoFlow); got != 2 {
		t.Fatalf("frag_no_flow %d, want 2", got)
	}
}

// TestFastPathDNATMatchesSlowPath checks the fast path of a port-forwarded
// TCP flow (DNAT on the way in, un-DNAT on the way out) against the slow path.
func TestFastPathDNATMatchesSlowPath(t *testing.T) {
	rules := func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: ap(hostB, 80)}}
	}
	in := func(flags uint8, payload []byte) []byte {
		return pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 3333, dport: 8080, flags: flags, payload: payload, ttl: 50}.build()
	}
	out := func(flags uint8, payload []byte) []byte {
		return pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 80, dport: 3333, flags: flags, payload: payload, ttl: 50}.build()
	}
	var es [2]*Engine
	for i := range es {
		es[i], _ = newTestEngine(t, 0, rules)
		e := es[i]
		for _, s := range []struct {
			pkt     []byte
			in, out Iface
		}{{in(tcpSYN, nil), wanIf, lanIf}, {out(tcpSYN|tcpACK, nil), lanIf, wanIf}, {in(tcpACK, nil), wanIf, lanIf}} {
			if v := fwd(t, e, s.pkt, s.in, s.out); v != Accept {
				t.Fatal(v)
			}
		}
		a := in(tcpACK, nil)
		fwd(t, e, a, wanIf, lanIf)
		expectAddrs(t, a, ap(remote, 3333), ap(hostB, 80))
		if !e.Offload(a, lanIf, macA, macRtrL) {
			t.Fatal("offload in")
		}
		b := out(tcpACK, nil)
		fwd(t, e, b, lanIf, wanIf)
		expectAddrs(t, b, ap(wanAddr, 8080), ap(remote, 3333))
		if !e.Offload(b, wanIf, macGw, macRtrW) {
			t.Fatal("offload out")
		}
	}
	for i := 0; i < 50; i++ {
		payload := make([]byte, i*13)
		for j := range payload {
			payload[j] = byte(i + j)
		}
		for _, d := range []struct {
			ip         []byte
			in, out    Iface
			dmac, smac [6]byte
		}{{in(tcpACK, payload), wanIf, lanIf, macA, macRtrL}, {out(tcpACK|0x08, payload), lanIf, wanIf, macGw, macRtrW}} {
			want := slowForward(t, es[0], d.ip, d.in, d.out, d.dmac, d.smac)
			frame := eth(macRtrW, macGw, d.ip)
			if o, ok := es[1].FastPath(frame, d.in); !ok || o != d.out {
				t.Fatalf("FastPath = %v, %v", o, ok)
			}
			mustVerify(t, frame[14:])
			if string(frame) != string(want) {
				t.Fatalf("fast path\n% x\nslow path\n% x", frame[:60], want[:60])
			}
		}
	}
}

// partial turns the full L4 checksum of ip (IPv4 TCP or UDP, no options)
// into what a CHECKSUM_PARTIAL sender leaves there: the pseudo-header sum,
// folded, not complemented (gVisor's PseudoHeaderChecksum, independent of
// the engine's sums).
func partial(ip []byte) {
	proto := ip[9]
	l4 := ip[20:]
	at := tcpChecksumAt
	if proto == ProtoUDP {
		at = udpChecksumAt
	}
	s := header.PseudoHeaderChecksum(tcpip.TransportProtocolNumber(proto), tcpip.AddrFrom4Slice(ip[12:16]), tcpip.AddrFrom4Slice(ip[16:20]), uint16(len(l4)))
	binary.BigEndian.PutUint16(l4[at:], s)
}

// complete finishes a partial checksum as the segmenting kernel or NIC
// would (skb_checksum_help): the complement of the sum over the segment
// as it is.
func complete(ip []byte) {
	l4 := ip[20:]
	at := tcpChecksumAt
	if ip[9] == ProtoUDP {
		at = udpChecksumAt
	}
	binary.BigEndian.PutUint16(l4[at:], ^checksum.Checksum(l4, 0))
}

// TestFastPathSuperframe: a local sender's superframe (TSO of TCP, USO
// of UDP) takes the fast path as one frame, NATed once: with a partial
// checksum the field must become the pseudo-header sum of the rewritten
// addresses (the ports are summed later, with the payload), so that the
// checksum completed after the rewrite is right; with a complete one the
// usual RFC 1624 update applies. The egress MTU applies to a segment, not
// to the superframe, and the flow counts every segment.
func TestFastPathSuperframe(t *testing.T) {
	payload := make([]byte, 20000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name    string
		proto   uint8
		partial bool
	}{
		{"tcp/partial", ProtoTCP, true},
		{"tcp/complete", ProtoTCP, false},
		{"udp/partial", ProtoUDP, true},
		{"udp/complete", ProtoUDP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *Engine
			var ext, sport, dport uint16
			if tc.proto == ProtoTCP {
				e, _ = newTestEngine(t, 0, nil)
				// hostB takes port 40000 first, so that hostA's flow
				// gets another: the rewrite changes a port as well as
				// the address.
				establishTCP(t, e, hostB, 40000, remote, 80)
				ext, sport, dport = offloadedTCP(t, e), 40000, 80
			} else {
				var clk *fakeclock.Clock
				e, clk = newTestEngine(t, 0, nil)
				outboundUDP(t, e, hostB, 5000, remote, 53) // takes port 5000
				ext, sport, dport = outboundUDP(t, e, hostA, 5000, remote, 53), 5000, 53
				reply := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: ext}.build()
				fwd(t, e, reply, wanIf, lanIf)
				clk.Forward(3 * time.Second) // assured
				out := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53}.build()
				fwd(t, e, out, lanIf, wanIf)
				if !e.Offload(out, wanIf, macGw, macRtrW) {
					t.Fatal("Offload(UDP) = false")
				}
			}
			if ext == sport {
				t.Fatalf("external port %d = internal: the rewrite must change a port too", ext)
			}
			flow := func() Flow {
				for _, f := range e.Flows() {
					if f.Offloaded[0] {
						return f
					}
				}
				t.Fatal("no offloaded flow")
				return Flow{}
			}
			before := flow().Packets[0]
			ip := pk{src: hostA, dst: remote, proto: tc.proto, sport: sport, dport: dport, flags: tcpACK, payload: payload, id: 77}.build()
			if tc.partial {
				partial(ip)
			}
			frame := eth([6]byte{9, 9, 9, 9, 9, 9}, [6]byte{8, 8, 8, 8, 8, 8}, ip)
			m := FrameMeta{SegmentSize: testMTU - 20 - 20, PartialCsum: tc.partial}
			if tc.proto == ProtoUDP {
				m.SegmentSize = testMTU - 20 - 8
			}
			tooBig := m
			tooBig.SegmentSize++
			if _, ok := e.FastPathMetaAt(frame, lanIf, e.Now(), tooBig); ok {
				t.Fatalf("FastPathMetaAt(segments one byte over the egress MTU) = ok, want the slow path")
			}
			if n := e.Stats().Slow[SlowMTU].Load(); n != 1 {
				t.Errorf("slow mtu = %d, want 1", n)
			}
			out, ok := e.FastPathMetaAt(frame, lanIf, e.Now(), m)
			if !ok || out != wanIf {
				t.Fatalf("FastPathMetaAt(superframe) = %v, %v; want %v, true", out, ok, wanIf)
			}
			got := frame[14:]
			expectAddrs(t, got, ap(wanAddr, ext), ap(remote, dport))
			if int(binary.BigEndian.Uint16(got[2:])) != len(ip) || binary.BigEndian.Uint16(got[4:]) != 77 || got[8] != 63 {
				t.Errorf("IPv4 total length %d, ID %d, TTL %d; want %d, 77, 63", binary.BigEndian.Uint16(got[2:]), binary.BigEndian.Uint16(got[4:]), got[8], len(ip))
			}
			if tc.partial {
				want := bytes.Clone(got)
				partial(want)
				if !bytes.Equal(got, want) {
					t.Errorf("partial checksum after the rewrite %#04x, want the new pseudo-header sum %#04x", binary.BigEndian.Uint16(got[20+16:]), binary.BigEndian.Uint16(want[20+16:]))
				}
				complete(got)
			}
			mustVerify(t, got)
			segs := (len(payload) + m.SegmentSize - 1) / m.SegmentSize
			if d := flow().Packets[0] - before; d != uint64(segs) {
				t.Errorf("flow packets +%d, want +%d (one per segment)", d, segs)
			}
		})
	}
}
