package natengine

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestConntrackFlood fills the table with a SYN flood while assured flows
// exist: new flows early-drop the oldest unassured flows (Linux
// early_drop), assured flows are never evicted, and when the shards near a
// new flow hold only assured flows the new flow is dropped and counted.
func TestConntrackFlood(t *testing.T) {
	const max = 1024
	e, clk := newTestEngine(t, max, nil)
	const assured = 256
	for i := 0; i < assured; i++ {
		establishTCP(t, e, hostA, uint16(20000+i), remote, 80)
	}
	// Flood: 20x the table size of SYNs from spoofed LAN sources.
	const flood = 20 * max
	accepted := 0
	for i := 0; i < flood; i++ {
		clk.Forward(time.Millisecond)
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		syn := pk{src: src, dst: remote2, proto: ProtoTCP, sport: uint16(1024 + i%60000), dport: 443, flags: tcpSYN}.build()
		if fwd(t, e, syn, lanIf, wanIf) == Accept {
			accepted++
		}
		if e.Len() > max {
			t.Fatalf("table holds %d flows, limit %d", e.Len(), max)
		}
	}
	st := e.Stats()
	sc := e.StateCounts()
	if sc.Assured != assured {
		t.Fatalf("assured flows %d after the flood, want %d", sc.Assured, assured)
	}
	if sc.Total != max {
		t.Fatalf("table holds %d, want full (%d)", sc.Total, max)
	}
	dropped := int(st.Drop(DropTableFull))
	if accepted+dropped != flood {
		t.Fatalf("accepted %d + dropped %d != %d", accepted, dropped, flood)
	}
	if st.EarlyDropped.Load() == 0 {
		t.Fatal("no early drops")
	}
	t.Logf("flood %d SYNs: %d accepted (early drops %d), %d dropped table_full", flood, accepted, st.EarlyDropped.Load(), dropped)
	// Every assured flow still translates its replies.
	for i := 0; i < assured; i++ {
		ack := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: uint16(20000 + i), flags: tcpACK}.build()
		if v := fwd(t, e, ack, wanIf, lanIf); v != Accept {
			t.Fatalf("assured flow %d lost: %v", i, v)
		}
	}
	// Fill the rest with assured flows: now every new flow is refused.
	e2, _ := newTestEngine(t, 64, nil)
	for i := 0; i < 64; i++ {
		establishTCP(t, e2, hostA, uint16(30000+i), remote, 80)
	}
	syn := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 9, dport: 80, flags: tcpSYN}.build()
	if v := fwd(t, e2, syn, lanIf, wanIf); v != Drop || e2.Stats().Drop(DropTableFull) != 1 || e2.Len() != 64 {
		t.Fatalf("all-assured table: %v, table_full %d, len %d", v, e2.Stats().Drop(DropTableFull), e2.Len())
	}
}

func TestSweepReleasesMappings(t *testing.T) {
	e, clk := newTestEngine(t, 0, nil)
	outboundUDP(t, e, hostA, 5000, remote, 53)
	outboundUDP(t, e, hostA, 5000, remote2, 53)
	if m := e.Mappings(); len(m) != 1 || m[0].Flows != 2 {
		t.Fatalf("mappings %+v, want one with 2 flows", m)
	}
	clk.Forward(3 * time.Minute)
	if n := e.Sweep(); n != 2 {
		t.Fatalf("swept %d, want 2", n)
	}
	if m := e.Mappings(); len(m) != 0 {
		t.Fatalf("mappings %+v after expiry", m)
	}
	if e.Stats().Expired.Load() != 2 {
		t.Fatalf("expired counter %d", e.Stats().Expired.Load())
	}
}

func TestStateCounts(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	establishTCP(t, e, hostA, 40000, remote, 80)
	fwd(t, e, pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40001, dport: 80, flags: tcpSYN}.build(), lanIf, wanIf)
	outboundUDP(t, e, hostA, 5000, remote, 53)
	fwd(t, e, pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 8, sport: 1}.build(), lanIf, wanIf)
	sc := e.StateCounts()
	if sc.TCP[TCPEstablished] != 1 || sc.TCP[TCPSynSent] != 1 || sc.UDPUnreplied != 1 || sc.ICMP != 1 || sc.Total != 4 || sc.Assured != 1 {
		t.Fatalf("census %+v", sc)
	}
}

func TestTCPStateMachine(t *testing.T) {
	type step struct {
		dir   int
		flags uint8
		want  TCPState
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"handshake and active close", []step{
			{0, tcpSYN, TCPSynSent}, {1, tcpSYN | tcpACK, TCPSynRecv}, {0, tcpACK, TCPEstablished},
			{0, tcpFIN | tcpACK, TCPFinWait}, {1, tcpFIN | tcpACK, TCPLastAck}, {0, tcpACK, TCPTimeWait}}},
		{"passive close", []step{
			{0, tcpSYN, TCPSynSent}, {1, tcpSYN | tcpACK, TCPSynRecv}, {0, tcpACK, TCPEstablished},
			{1, tcpFIN | tcpACK, TCPFinWait}, {0, tcpACK, TCPCloseWait}, {0, tcpFIN | tcpACK, TCPLastAck}, {1, tcpACK, TCPTimeWait}}},
		{"reset", []step{{0, tcpSYN, TCPSynSent}, {1, tcpRST | tcpACK, TCPClose}, {0, tcpSYN, TCPSynSent}}},
		{"retransmitted SYN", []step{{0, tcpSYN, TCPSynSent}, {0, tcpSYN, TCPSynSent}}},
		{"simultaneous open", []step{{0, tcpSYN, TCPSynSent}, {1, tcpSYN, TCPSynSent2}, {0, tcpSYN | tcpACK, TCPSynRecv}, {1, tcpACK, TCPEstablished}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr tcpTrack
			if !tr.open(tc.steps[0].flags) {
				t.Fatal("open refused")
			}
			for i, s := range tc.steps[1:] {
				tr.update(s.dir, s.flags)
				if tr.state != s.want {
					t.Fatalf("step %d (dir %d flags %#x): %v, want %v", i+1, s.dir, s.flags, tr.state, s.want)
				}
			}
		})
	}
	var tr tcpTrack
	for _, f := range []uint8{tcpRST, tcpFIN | tcpACK, tcpSYN | tcpACK, 0} {
		if tr.open(f) {
			t.Errorf("open(%#x) accepted", f)
		}
	}
}

func TestHashIndexUnsigned(t *testing.T) {
	// Shard indexes come from uint32 math: never negative, always in range
	// (gVisor's int(h.Sum32()) % n goes negative on GOARCH=arm). This test
	// also runs under qemu-arm.
	tb := newTable(16, 0xdeadbeef)
	for i := 0; i < 100000; i++ {
		k := Tuple{SrcPort: uint16(i), DstPort: uint16(i >> 16), Proto: ProtoTCP}
		k.Src[0], k.Src[1], k.Src[2] = byte(i), byte(i>>8), 0xff
		if s := tb.shardOf(&k); s >= numShards {
			t.Fatalf("shard %d out of range", s)
		}
	}
}

func TestLockSetOrder(t *testing.T) {
	var l lockSet
	for _, i := range []uint32{200, 3, 200, 77} {
		l.add(i)
	}
	if l.n != 3 || l.idx[0] != 3 || l.idx[1] != 77 || l.idx[2] != 200 {
		t.Fatalf("lockSet %v", l.idx[:l.n])
	}
}

// TestConcurrent runs flows on several goroutines against sweeps, early
// drops and rule swaps (run with -race).
func TestConcurrent(t *testing.T) {
	e, clk := newTestEngine(t, 512, nil)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				src := netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + g)})
				sp := uint16(1024 + i%700)
				out := pk{src: src, dst: remote, proto: ProtoUDP, sport: sp, dport: 53}.build()
				if e.Prerouting(out, lanIf) != Accept || e.Postrouting(out, wanIf) != Accept {
					continue
				}
				s, _ := addrs(out)
				in := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: s.Port()}.build()
				e.Prerouting(in, wanIf)
				e.Offload(in, lanIf, macA, macRtrL)
				f := eth(macRtrW, macGw, pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: s.Port()}.build())
				e.FastPath(f, wanIf)
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50; i++ {
			clk.Forward(5 * time.Second)
			e.Sweep()
			e.StateCounts()
			if i%10 == 0 {
				if err := e.SetRules(testRules()); err != nil {
					panic(fmt.Sprint(err))
				}
			}
		}
	}()
	wg.Wait()
	if e.Len() > 512 {
		t.Fatalf("len %d > limit", e.Len())
	}
}

// TestPortExhaustionRecovers: with every port taken, new flows fail fast
// (the failed search is remembered) and succeed again once a mapping is
// released.
func TestPortExhaustionRecovers(t *testing.T) {
	e, clk := newTestEngine(t, 0, func(r *Rules) {
		r.Reserved = func(proto uint8, a netip.Addr, port uint16) bool { return port != 5000 }
	})
	outboundUDP(t, e, hostA, 5000, remote, 53)
	for i := 0; i < 100; i++ {
		p := pk{src: hostB, dst: remote, proto: ProtoUDP, sport: uint16(6000 + i), dport: 53}.build()
		if v := fwd(t, e, p, lanIf, wanIf); v != Drop {
			t.Fatalf("flow %d: %v", i, v)
		}
	}
	if e.Stats().Drop(DropNoPort) != 100 {
		t.Fatalf("no_port %d", e.Stats().Drop(DropNoPort))
	}
	clk.Forward(3 * time.Minute)
	e.Sweep()
	if p := outboundUDP(t, e, hostB, 6000, remote, 53); p != 5000 {
		t.Fatalf("after release got port %d, want 5000", p)
	}
}

// TestPreroutingOverloadedShedsNewFlows: while a port falls behind, a
// packet that would open a flow (TCP SYN, UDP, ICMP echo, a port
// forward's first packet) is dropped and counted as "overload" without
// touching the table, while every packet of a flow already tracked, in
// both directions, is handled as usual.
func TestPreroutingOverloadedShedsNewFlows(t *testing.T) {
	e, _ := newTestEngine(t, 64, nil)
	wanPort := establishTCP(t, e, hostA, 40000, remote, 80)
	udpPort := outboundUDP(t, e, hostA, 5353, remote, 53)
	before := e.Len()

	news := [][]byte{
		pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 1234, dport: 443, flags: tcpSYN}.build(),
		pk{src: hostB, dst: remote, proto: ProtoUDP, sport: 1234, dport: 53}.build(),
		pk{src: hostB, dst: remote, proto: ProtoICMP, typ: 8, sport: 77}.build(),
	}
	for i, p := range news {
		if v := e.PreroutingOverloaded(p, lanIf); v != Drop {
			t.Fatalf("new flow %d under overload: %v, want Drop", i, v)
		}
	}
	if got := e.Stats().Drop(DropOverload); got != uint64(len(news)) {
		t.Fatalf("overload drops %d, want %d", got, len(news))
	}
	if e.Len() != before {
		t.Fatalf("table holds %d flows, want %d: a shed packet was tracked", e.Len(), before)
	}

	// Packets of tracked flows pass, translated, in both directions.
	out := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpACK}.build()
	if v := e.PreroutingOverloaded(out, lanIf); v != Accept {
		t.Fatalf("established TCP out under overload: %v", v)
	}
	if v := e.Postrouting(out, wanIf); v != Accept {
		t.Fatalf("established TCP out, postrouting: %v", v)
	}
	expectAddrs(t, out, ap(wanAddr, wanPort), ap(remote, 80))
	in := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: wanPort, flags: tcpACK}.build()
	if v := e.PreroutingOverloaded(in, wanIf); v != Accept {
		t.Fatalf("established TCP reply under overload: %v", v)
	}
	expectAddrs(t, in, ap(remote, 80), ap(hostA, 40000))
	reply := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: udpPort}.build()
	if v := e.PreroutingOverloaded(reply, wanIf); v != Accept {
		t.Fatalf("UDP reply under overload: %v", v)
	}
	expectAddrs(t, reply, ap(remote, 53), ap(hostA, 5353))

	// Once the port has caught up the same new flow opens.
	if v := fwd(t, e, news[0], lanIf, wanIf); v != Accept || e.Len() != before+1 {
		t.Fatalf("new flow after the overload: %v, table %d, want Accept and %d", v, e.Len(), before+1)
	}
}

// TestPreroutingOverloadedKeepsQueriesToTheRouter: under overload a LAN
// host's DNS query or TCP connection to the router's own address opens
// no flow, so it passes untracked (it would only time out if shed),
// while a packet from the WAN to the router and a LAN packet that would
// open a flow are still shed.
func TestPreroutingOverloadedKeepsQueriesToTheRouter(t *testing.T) {
	e, _ := newTestEngine(t, 64, nil)
	before := e.Len()
	for _, tc := range []struct {
		name  string
		pkt   []byte
		in    Iface
		want  Verdict
		state CTState
	}{
		{"LAN DNS query to the router", pk{src: hostA, dst: lanAddr, proto: ProtoUDP, sport: 40001, dport: 53}.build(), lanIf, Accept, CTNew},
		{"LAN SYN to the status page", pk{src: hostA, dst: lanAddr, proto: ProtoTCP, sport: 40002, dport: 80, flags: tcpSYN}.build(), lanIf, Accept, CTNew},
		{"LAN UDP through the router", pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 40003, dport: 53}.build(), lanIf, Drop, 0},
		{"WAN UDP to the router", pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 40004, dport: 53}.build(), wanIf, Drop, 0},
	} {
		v, st, _ := e.PreroutingCT(tc.pkt, tc.in, true)
		if v != tc.want || (v == Accept && st != tc.state) {
			t.Errorf("%s under overload: %v %v, want %v %v", tc.name, v, st, tc.want, tc.state)
		}
	}
	if got := e.Stats().Drop(DropOverload); got != 2 {
		t.Errorf("overload drops %d, want 2", got)
	}
	if e.Len() != before {
		t.Errorf("table holds %d flows, want %d: a query to the router was tracked", e.Len(), before)
	}
}
