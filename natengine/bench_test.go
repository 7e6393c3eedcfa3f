package natengine

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// BenchmarkFastPath measures one fast-path forward (lookup, NAT rewrite,
// TTL, incremental checksums, MACs, counters) per op; the first 54 bytes
// of the frame are restored between packets (a ~2 ns copy).
func BenchmarkFastPath(b *testing.B) {
	for _, tc := range []struct {
		name string
		v6   bool
		size int
	}{{"tcp4-64B", false, 64}, {"tcp4-1500B", false, 1500}, {"tcp6-64B", true, 64}} {
		b.Run(tc.name, func(b *testing.B) {
			e := New(Config{}) // the real clock, as in production
			if err := e.SetRules(testRules()); err != nil {
				b.Fatal(err)
			}
			var ip []byte
			in := wanIf
			if tc.v6 {
				syn := pk{src: host6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpSYN}.build()
				fwd(b, e, syn, lanIf, wanIf)
				fwd(b, e, pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 443, dport: 40000, flags: tcpSYN | tcpACK}.build(), wanIf, lanIf)
				ack := pk{src: host6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpACK}.build()
				fwd(b, e, ack, lanIf, wanIf)
				if !e.Offload(ack, wanIf, macGw, macRtrW) {
					b.Fatal("offload")
				}
				ip = pk{src: host6, dst: remote6, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpACK, payload: make([]byte, tc.size-60)}.build()
				in = lanIf
			} else {
				ext := offloadedTCP(b, e)
				ip = pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK, payload: make([]byte, tc.size-40)}.build()
			}
			orig := eth(macRtrW, macGw, ip)
			frame := append([]byte(nil), orig...)
			b.ReportAllocs()
			b.SetBytes(int64(len(ip)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				copy(frame[:54], orig[:54])
				if _, ok := e.FastPath(frame, in); !ok {
					b.Fatal("miss")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
		})
	}
	// A receive batch of 128 frames (wireguard-go IdealBatchSize), one clock
	// read per batch; b.N counts packets.
	b.Run("tcp4-64B-batch128", func(b *testing.B) {
		e := New(Config{})
		if err := e.SetRules(testRules()); err != nil {
			b.Fatal(err)
		}
		ext := offloadedTCP(b, e)
		orig := eth(macRtrW, macGw, pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK, payload: make([]byte, 24)}.build())
		const batch = 128
		frames := make([][]byte, batch)
		for i := range frames {
			frames[i] = append([]byte(nil), orig...)
		}
		outs := make([]Iface, batch)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i += batch {
			for _, f := range frames {
				copy(f[:54], orig[:54])
			}
			if e.FastPathBatch(frames, wanIf, outs) != batch {
				b.Fatal("miss")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
	})
}

// BenchmarkSlowPathHooks measures Prerouting+Postrouting for a packet of an
// established flow (what non-offloaded packets pay, netstack not included).
func BenchmarkSlowPathHooks(b *testing.B) {
	e, _ := newTestEngine(b, 0, nil)
	ext := establishTCP(b, e, hostA, 40000, remote, 80)
	ip := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK, payload: make([]byte, 24)}.build()
	pkt := append([]byte(nil), ip...)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		copy(pkt, ip)
		if e.Prerouting(pkt, wanIf) != Accept || e.Postrouting(pkt, lanIf) != Accept {
			b.Fatal("drop")
		}
	}
}

// flowPackets returns n distinct outbound UDP packets (n distinct flows).
func flowPackets(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		src := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		out[i] = pk{src: src, dst: remote, proto: ProtoUDP, sport: uint16(1024 + i%50000), dport: 53}.build()
	}
	return out
}

// BenchmarkConntrackInsert measures creating and confirming a new NATed
// UDP flow (Prerouting + Postrouting of its first packet: table insert,
// mapping allocation, SNAT). The table is rebuilt every 65,536 flows.
func BenchmarkConntrackInsert(b *testing.B) {
	const n = 65536
	pkts := flowPackets(n)
	work := make([]byte, 64)
	e, _ := newTestEngine(b, 2*n, twoAddrs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%n == 0 && i > 0 {
			b.StopTimer()
			e, _ = newTestEngine(b, 2*n, twoAddrs)
			b.StartTimer()
		}
		p := pkts[i%n]
		w := work[:len(p)]
		copy(w, p)
		if e.Prerouting(w, lanIf) != Accept || e.Postrouting(w, wanIf) != Accept {
			b.Fatal("drop")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

// BenchmarkConntrackLookup measures table lookups among 65,536 flows.
func BenchmarkConntrackLookup(b *testing.B) {
	const n = 65536
	e, _ := newTestEngine(b, n, twoAddrs)
	keys := make([]Tuple, n)
	for i, p := range flowPackets(n) {
		if e.Prerouting(p, lanIf) != Accept || e.Postrouting(p, wanIf) != Accept {
			b.Fatal("drop")
		}
		pp, _ := Classify(p)
		keys[i] = pp.tuple(p).Invert() // the reply key
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := e.tab.lookup(&keys[(i*7919)&(n-1)]); !ok {
				b.Fatal("miss")
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i += 7919
				if _, ok := e.tab.lookup(&keys[i&(n-1)]); !ok {
					b.Fatal("miss")
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
	})
}

// TestMemoryPerFlow measures the heap held per tracked flow with 65,536
// confirmed NATed UDP flows (each with its own mapping), via
// runtime.MemStats. Goal: <= 1 KiB per flow (64 MB RSS budget).
func TestMemoryPerFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~40 MB")
	}
	const n = 65536
	pkts := flowPackets(n)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	// Two SNAT addresses: one address has only 64,512 ports (1024-65535).
	e, _ := newTestEngine(t, n, func(r *Rules) {
		r.Ifaces[1].SNAT = []netip.Addr{wanAddr, netip.MustParseAddr("203.0.113.3")}
	})
	for _, p := range pkts {
		if e.Prerouting(p, lanIf) != Accept || e.Postrouting(p, wanIf) != Accept {
			t.Fatal("drop")
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if e.Len() != n {
		t.Fatalf("%d flows", e.Len())
	}
	per := float64(m1.HeapAlloc-m0.HeapAlloc) / n
	t.Logf("%d flows: heap %.1f MB, %.0f bytes/flow (HeapSys %.1f MB)", n, float64(m1.HeapAlloc-m0.HeapAlloc)/1e6, per, float64(m1.HeapSys)/1e6)
	if per > 1024 {
		t.Errorf("%.0f bytes per flow, goal <= 1024", per)
	}
	runtime.KeepAlive(e)
	runtime.KeepAlive(pkts)
}

// twoAddrs gives the WAN a two-address SNAT pool (65,536 mappings do not
// fit in one address's 64,512 ports).
func twoAddrs(r *Rules) {
	r.Ifaces[1].SNAT = []netip.Addr{wanAddr, netip.MustParseAddr("203.0.113.3")}
}

// BenchmarkFastPathManyFlows forwards batches of 128 frames of 128
// different flows chosen from 65,536 offloaded UDP flows (cache-cold
// lookups, unlike BenchmarkFastPath's single flow). b.N counts packets.
func BenchmarkFastPathManyFlows(b *testing.B) {
	const n = 65536
	e, clk := newTestEngine(b, n, twoAddrs)
	pkts := flowPackets(n)
	for _, p := range pkts {
		w := append([]byte(nil), p...)
		if fwd(b, e, w, lanIf, wanIf) != Accept {
			b.Fatal("drop")
		}
		s, d := addrs(w)
		r := pk{src: d.Addr(), dst: s.Addr(), proto: ProtoUDP, sport: d.Port(), dport: s.Port()}.build()
		if fwd(b, e, r, wanIf, lanIf) != Accept {
			b.Fatal("reply drop")
		}
	}
	clk.Forward(3 * time.Second)
	frames := make([][]byte, n)
	for i, p := range pkts {
		w := append([]byte(nil), p...)
		fwd(b, e, w, lanIf, wanIf)
		if !e.Offload(w, wanIf, macGw, macRtrW) {
			b.Fatal("offload")
		}
		frames[i] = eth(macRtrL, macA, p)
	}
	const batch = 128
	work := make([][]byte, batch)
	for i := range work {
		work[i] = make([]byte, len(frames[0]))
	}
	outs := make([]Iface, batch)
	b.ReportAllocs()
	b.ResetTimer()
	k := 0
	for i := 0; i < b.N; i += batch {
		for j := range work {
			k = (k + 7919) & (n - 1)
			copy(work[j], frames[k])
		}
		if e.FastPathBatch(work, lanIf, outs) != batch {
			b.Fatal("miss")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
}

// BenchmarkConntrackFlood measures a SYN flood's new flow against a full
// table (10,000 flows, all unassured SYN_SENT): Prerouting (early drop of
// the oldest unassured flow, insert) and Postrouting (mapping, SNAT,
// confirm) of one SYN from a new source port, as TestNATSYNFlood drives
// it in the lab.
func BenchmarkConntrackFlood(b *testing.B) {
	const max = 10000
	const n = 1 << 16
	pkts := make([][]byte, n)
	for i := range pkts {
		pkts[i] = pk{src: netip.AddrFrom4([4]byte{10, 1, 0, 2}), dst: remote, proto: ProtoTCP, sport: uint16(1024 + i%64000), dport: 9, flags: tcpSYN}.build()
	}
	work := make([]byte, 128)
	e, _ := newTestEngine(b, max, twoAddrs)
	run := func(i int) {
		p := pkts[i%n]
		w := work[:len(p)]
		copy(w, p)
		if e.Prerouting(w, lanIf) != Accept || e.Postrouting(w, wanIf) != Accept {
			b.Fatal("drop")
		}
	}
	for i := range 2 * max { // fill, then churn once around
		run(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(2*max + i)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "flows/s")
	if got := e.Stats().EarlyDropped.Load(); got == 0 {
		b.Fatal("no early drop: the table was not full")
	}
}
