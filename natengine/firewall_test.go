package natengine

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/firewall"
)

// The zone tests add a guest interface to the test topology.
const guestIf Iface = 3

var (
	guestAddr = netip.MustParseAddr("192.168.2.1")
	guestHost = netip.MustParseAddr("192.168.2.10")
)

// zonePolicy is lan, guest and wan as the README's guest example sets
// them up, plus extra rules.
func zonePolicy(extra ...firewall.Rule) firewall.Policy {
	return firewall.Policy{
		Zones: []firewall.Zone{
			{Name: "lan", Ifaces: []int32{int32(lanIf)}, Input: firewall.Accept, Forward: firewall.Accept, Output: firewall.Accept},
			{Name: "guest", Ifaces: []int32{int32(guestIf)}, Input: firewall.Reject, Forward: firewall.Drop, Output: firewall.Accept},
			{Name: "wan", Ifaces: []int32{int32(wanIf)}, Input: firewall.Drop, Forward: firewall.Drop, Output: firewall.Accept},
		},
		Rules: append(extra,
			firewall.Rule{Name: "guest-dns", Src: "guest", DestPorts: []firewall.PortRange{{First: 53, Last: 53}}},
			firewall.Rule{Name: "guest-wan", Src: "guest", Dest: "wan"},
			firewall.Rule{Name: "wan-ping6", Src: "wan", Dest: "*", ICMPTypes: []firewall.ICMPType{{Type: 128, V6: true}}},
		),
	}
}

func withZones(t testing.TB, p firewall.Policy) func(*Rules) {
	return func(r *Rules) {
		r.Ifaces = append(r.Ifaces, IfaceConfig{ID: guestIf, Name: "guest", Addrs: []netip.Addr{guestAddr}, MTU: testMTU})
		rs, err := firewall.Compile(p)
		if err != nil {
			t.Fatal(err)
		}
		r.Zones = rs
	}
}

func TestZonesForward(t *testing.T) {
	e, _ := newTestEngine(t, 1024, withZones(t, zonePolicy()))
	// lan to wan: lan's forward policy.
	outboundUDP(t, e, hostA, 5000, remote, 53)
	// guest to wan: the guest-wan rule, masqueraded like the lan.
	p := pk{src: guestHost, dst: remote, proto: ProtoTCP, sport: 5001, dport: 443, flags: tcpSYN}.build()
	if v := fwd(t, e, p, guestIf, wanIf); v != Accept {
		t.Fatalf("guest to wan: %v", v)
	}
	// guest to a lan host: guest's forward policy drops it, at
	// confirmation, and the pending flow goes.
	n := e.Len()
	p = pk{src: guestHost, dst: hostA, proto: ProtoTCP, sport: 5002, dport: 22, flags: tcpSYN}.build()
	if v := fwd(t, e, p, guestIf, lanIf); v != Drop {
		t.Fatalf("guest to lan: %v, want drop", v)
	}
	if e.Len() != n || e.Stats().Drop(DropFirewall) != 1 {
		t.Fatalf("flows %d (want %d), firewall drops %d (want 1)", e.Len(), n, e.Stats().Drop(DropFirewall))
	}
	// A lan host's flow to the guest is lan's forward policy (accept),
	// and the guest host's reply passes as the flow's: no rule decides it.
	p = pk{src: hostA, dst: guestHost, proto: ProtoUDP, sport: 5003, dport: 9, payload: []byte("x")}.build()
	if v := fwd(t, e, p, lanIf, guestIf); v != Accept {
		t.Fatalf("lan to guest: %v", v)
	}
	p = pk{src: guestHost, dst: hostA, proto: ProtoUDP, sport: 9, dport: 5003, payload: []byte("x")}.build()
	if v := fwd(t, e, p, guestIf, lanIf); v != Accept {
		t.Fatalf("guest's reply to lan: %v", v)
	}
	rules, zones := e.rules.Load().fw.Counters()
	if rules[1].Hits != 1 || zones[0].Forward != 2 || zones[1].Forward != 1 {
		t.Fatalf("counters: rules %+v zones %+v", rules, zones)
	}
}

func TestZonesInput(t *testing.T) {
	e, _ := newTestEngine(t, 1024, withZones(t, zonePolicy()))
	for _, tc := range []struct {
		name string
		p    pk
		in   Iface
		want Verdict
	}{
		{"guest dns", pk{src: guestHost, dst: guestAddr, proto: ProtoUDP, sport: 5000, dport: 53, payload: []byte("q")}, guestIf, Accept},
		{"guest status page", pk{src: guestHost, dst: guestAddr, proto: ProtoTCP, sport: 5000, dport: 80, flags: tcpSYN}, guestIf, Reject},
		{"guest to the lan address's page", pk{src: guestHost, dst: lanAddr, proto: ProtoTCP, sport: 5000, dport: 80, flags: tcpSYN}, guestIf, Reject},
		{"guest ping", pk{src: guestHost, dst: guestAddr, proto: ProtoICMP, sport: 7, typ: 8}, guestIf, Reject},
		{"guest tcp ack (no new flow)", pk{src: guestHost, dst: guestAddr, proto: ProtoTCP, sport: 5000, dport: 80, flags: tcpACK}, guestIf, Accept},
		{"lan status page", pk{src: hostA, dst: lanAddr, proto: ProtoTCP, sport: 5000, dport: 80, flags: tcpSYN}, lanIf, Accept},
		{"wan ssh", pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 22, flags: tcpSYN}, wanIf, Drop},
		{"wan dhcp answer", pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 67, dport: 68, payload: []byte("x")}, wanIf, Accept},
		{"wan ping6 to the router (no input rule)", pk{src: remote6, dst: wan6, proto: ProtoICMPv6, sport: 7, typ: 128}, wanIf, Drop},
	} {
		if v := e.Prerouting(tc.p.build(), tc.in); v != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
		}
	}
	if got := e.Stats().FirewallRejects.Load(); got != 3 {
		t.Errorf("rejects answered %d, want 3", got)
	}
}

func TestZonesIPv6FromWAN(t *testing.T) {
	nas := firewall.Rule{Name: "nas", Src: "wan", Dest: "lan", Family: 6, Protos: []uint8{ProtoTCP},
		DestPorts: []firewall.PortRange{{First: 443, Last: 443}}, DestSuffix: []firewall.Suffix{firewall.Suffix(netip.MustParseAddr("::10"))}}
	e, _ := newTestEngine(t, 1024, withZones(t, zonePolicy(nas)))
	for _, tc := range []struct {
		name string
		p    pk
		want Verdict
	}{
		{"to the suffix host", pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 5000, dport: 443, flags: tcpSYN}, Accept},
		{"same suffix, new prefix", pk{src: remote6, dst: netip.MustParseAddr("2001:db8:99::10"), proto: ProtoTCP, sport: 5000, dport: 443, flags: tcpSYN}, Accept},
		{"other port", pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 5000, dport: 22, flags: tcpSYN}, Drop},
		{"other host", pk{src: remote6, dst: netip.MustParseAddr("2001:db8:1::11"), proto: ProtoTCP, sport: 5000, dport: 443, flags: tcpSYN}, Drop},
		{"echo request", pk{src: remote6, dst: host6, proto: ProtoICMPv6, sport: 9, typ: 128}, Accept},
	} {
		if v := fwd(t, e, tc.p.build(), wanIf, lanIf); v != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
		}
	}
}

func TestZonesRedirect(t *testing.T) {
	e, _ := newTestEngine(t, 1024, func(r *Rules) {
		withZones(t, zonePolicy())(r)
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(hostA, 80)}}
	})
	// From the wan: the redirect's own interface, accepted with no rule.
	p := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 8080, flags: tcpSYN}.build()
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("wan to the forward: %v", v)
	}
	// Hairpinned from the lan: lan's forward policy accepts.
	p = pk{src: hostB, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 8080, flags: tcpSYN}.build()
	if v := fwd(t, e, p, lanIf, lanIf); v != Accept {
		t.Fatalf("lan hairpin to the forward: %v", v)
	}
	// Hairpinned from the guest: guest's forward policy drops it.
	p = pk{src: guestHost, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 8080, flags: tcpSYN}.build()
	if v := fwd(t, e, p, guestIf, lanIf); v != Drop {
		t.Fatalf("guest hairpin to the forward: %v, want drop", v)
	}
}

// TestZonesReloadFlushes: a reload that adds a rule blocking hostB from
// the wan removes hostB's open flows and keeps hostA's.
func TestZonesReloadFlushes(t *testing.T) {
	mod := withZones(t, zonePolicy())
	e, _ := newTestEngine(t, 1024, mod)
	establishTCP(t, e, hostA, 4000, remote, 443)
	establishTCP(t, e, hostB, 4000, remote, 443)
	outboundUDP(t, e, hostB, 4001, remote, 53)
	if e.Len() != 3 {
		t.Fatalf("%d flows, want 3", e.Len())
	}
	block := firewall.Rule{Name: "block-b", Src: "lan", Dest: "wan", SrcAddrs: []netip.Prefix{netip.PrefixFrom(hostB, 32)}, Target: firewall.Reject}
	r := testRules()
	withZones(t, zonePolicy(block))(&r)
	if err := e.SetRules(r); err != nil {
		t.Fatal(err)
	}
	if e.Len() != 1 || e.Stats().FlushedFirewall.Load() != 2 {
		t.Fatalf("after reload: %d flows (want 1), flushed %d (want 2)", e.Len(), e.Stats().FlushedFirewall.Load())
	}
	// hostA's connection goes on; hostB's next SYN is refused.
	ack := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 4000, dport: 443, flags: tcpACK}.build()
	if v := fwd(t, e, ack, lanIf, wanIf); v != Accept {
		t.Fatalf("hostA after reload: %v", v)
	}
	syn := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 4002, dport: 443, flags: tcpSYN}.build()
	if v := fwd(t, e, syn, lanIf, wanIf); v != Reject {
		t.Fatalf("hostB after reload: %v, want reject", v)
	}
}

// BenchmarkConntrackInsertZones is BenchmarkConntrackInsert (a new NATed
// UDP flow: table insert, rule evaluation, mapping, SNAT) with zones and
// 0 or 1,000 extra lan-to-wan rules ahead of the flow's.
//
// Two shapes of 1,000 rules: "ports" refuse one destination port each
// (the index skips them: the flows' port is none of theirs), "hosts"
// refuse one source address each with no port (a block list of hosts:
// every new flow is checked against all of them).
func BenchmarkConntrackInsertZones(b *testing.B) {
	for _, shape := range []string{"none", "1000ports", "1000hosts"} {
		b.Run(shape, func(b *testing.B) {
			extra := benchRules(shape, "lan", func(i int) netip.Addr {
				return netip.AddrFrom4([4]byte{192, 168, byte(9 + i>>8), byte(i)})
			})
			// The flows go to port 53 on remote, so the 1,000 rules'
			// ports never cover them; a block list with an any-port rule
			// per host would be scanned in full (see firewall's index).
			const flows = 65536
			pkts := flowPackets(flows)
			work := make([]byte, 64)
			mod := withZones(b, zonePolicy(extra...))
			e, _ := newTestEngine(b, 2*flows, func(r *Rules) { twoAddrs(r); mod(r) })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%flows == 0 && i > 0 {
					b.StopTimer()
					e, _ = newTestEngine(b, 2*flows, func(r *Rules) { twoAddrs(r); mod(r) })
					b.StartTimer()
				}
				p := pkts[i%flows]
				w := work[:len(p)]
				copy(w, p)
				if e.Prerouting(w, lanIf) != Accept || e.Postrouting(w, wanIf) != Accept {
					b.Fatal("drop")
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
		})
	}
}

// benchRules returns the 1,000 rules of a zone benchmark's shape ("none":
// no rule) from zone src to lan, or, from a wan, to lan: each refuses one
// source host, host(i), and with "1000ports" only on destination port
// 20000+i of TCP and UDP.
func benchRules(shape, src string, host func(i int) netip.Addr) []firewall.Rule {
	var rules []firewall.Rule
	dest := "wan"
	if src == "wan" {
		dest = "lan"
	}
	for i := 0; i < 1000 && shape != "none"; i++ {
		r := firewall.Rule{Name: "block", Src: src, Dest: dest, Target: firewall.Drop,
			SrcAddrs: []netip.Prefix{netip.PrefixFrom(host(i), host(i).BitLen())}}
		if shape == "1000ports" {
			r.Protos = []uint8{ProtoTCP, ProtoUDP}
			r.DestPorts = []firewall.PortRange{{First: uint16(20000 + i), Last: uint16(20000 + i)}}
		}
		rules = append(rules, r)
	}
	return rules
}

// BenchmarkConntrackInsertZonesWAN is BenchmarkConntrackInsertZones for
// new flows from the wan, which decideEverywhere tries against every
// interface before they take a slot, with 0 or 1,000 extra wan-to-lan
// rules of the same two shapes (none covers the flows).
//
// "admitted" flows are new UDP flows from distinct outside endpoints
// through a port forward to an inside host (Prerouting + Postrouting:
// decideEverywhere, insert, DNAT, then the decision at confirmation).
// "refused" flows are the flood decideEverywhere serves: new TCP SYNs
// to distinct addresses of the LAN's IPv6 prefix that wan's forward
// policy drops (Prerouting only; each is decided, counted and refused
// before it takes a slot).
func BenchmarkConntrackInsertZonesWAN(b *testing.B) {
	const flows = 65536
	for _, shape := range []string{"none", "1000ports", "1000hosts"} {
		b.Run("admitted/"+shape, func(b *testing.B) {
			extra := benchRules(shape, "wan", func(i int) netip.Addr {
				return netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
			})
			pkts := make([][]byte, flows)
			for i := range pkts {
				src := netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)})
				pkts[i] = pk{src: src, dst: wanAddr, proto: ProtoUDP, sport: uint16(1024 + i%50000), dport: 5000}.build()
			}
			zones := withZones(b, zonePolicy(extra...))
			mod := func(r *Rules) {
				zones(r)
				r.Forwards = []Forward{{Proto: ProtoUDP, In: wanIf, FirstPort: 5000, LastPort: 5000, To: netip.AddrPortFrom(hostA, 5000)}}
			}
			e, _ := newTestEngine(b, 2*flows, mod)
			work := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%flows == 0 && i > 0 {
					b.StopTimer()
					e, _ = newTestEngine(b, 2*flows, mod)
					b.StartTimer()
				}
				p := pkts[i%flows]
				w := work[:len(p)]
				copy(w, p)
				if e.Prerouting(w, wanIf) != Accept || e.Postrouting(w, lanIf) != Accept {
					b.Fatal("drop")
				}
			}
			b.StopTimer()
			if n := e.Stats().Drop(DropFirewall); n != 0 {
				b.Fatalf("%d firewall drops of admitted flows", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
		})
	}
	for _, shape := range []string{"none", "1000ports", "1000hosts"} {
		b.Run("refused/"+shape, func(b *testing.B) {
			extra := benchRules(shape, "wan", func(i int) netip.Addr {
				a := netip.MustParseAddr("2001:db8:eeee::").As16()
				a[14], a[15] = byte(i>>8), byte(i)
				return netip.AddrFrom16(a)
			})
			pkts := make([][]byte, flows)
			for i := range pkts {
				a := host6.As16()
				a[14], a[15] = byte(i>>8), byte(i)
				pkts[i] = pk{src: remote6, dst: netip.AddrFrom16(a), proto: ProtoTCP, sport: uint16(1024 + i%50000), dport: 22, flags: tcpSYN}.build()
			}
			e, _ := newTestEngine(b, 2*flows, withZones(b, zonePolicy(extra...)))
			work := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := pkts[i%flows]
				w := work[:len(p)]
				copy(w, p)
				if e.Prerouting(w, wanIf) != Drop {
					b.Fatal("a refused flow from the wan passed")
				}
			}
			b.StopTimer()
			if n, drops := e.Len(), e.Stats().Drop(DropFirewall); n != 0 || drops != uint64(b.N) {
				b.Fatalf("%d flows in the table (want 0), %d firewall drops (want %d)", n, drops, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "refusals/s")
		})
	}
}

// TestZonesPortMapping: a port mapping (NAT-PMP, PCP, UPnP) is a
// redirect the router made at run time: its flow from the wan is
// accepted with no rule, as a port forward's is (fw4 "Accept port
// redirections"), and a guest hairpinned to it is still its zone's
// forward.
func TestZonesPortMapping(t *testing.T) {
	e, _ := newTestEngine(t, 1024, withZones(t, zonePolicy()))
	if err := e.AddPortMapping(PortMapping{Proto: ProtoTCP, In: wanIf, Port: 15600, To: netip.AddrPortFrom(hostA, 15600)}); err != nil {
		t.Fatal(err)
	}
	p := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 15600, flags: tcpSYN}.build()
	if v := fwd(t, e, p, wanIf, lanIf); v != Accept {
		t.Fatalf("wan to the mapping: %v, want accept", v)
	}
	p = pk{src: guestHost, dst: wanAddr, proto: ProtoTCP, sport: 5000, dport: 15600, flags: tcpSYN}.build()
	if v := fwd(t, e, p, guestIf, lanIf); v != Drop {
		t.Fatalf("guest hairpin to the mapping: %v, want drop", v)
	}
}

// TestZonesRefusedFromWANTakeNoSlot floods the engine from the WAN with
// more new flows than the table holds, each refused by the zones (wan's
// forward policy: drop), through Prerouting only: a SYN to an IPv6
// address in the LAN's prefix where no host answers neighbour
// discovery never reaches Postrouting (netstack drops it unresolved),
// so a refusal taken at confirmation would leave each one in the table
// until its timeout, and the flood would early-drop the LAN's own
// pending flows and fill the table. Refused before insertion, the
// flood takes no slot: the LAN host's pending flow survives, a new
// allowed flow gets a slot, and every refusal is counted.
func TestZonesRefusedFromWANTakeNoSlot(t *testing.T) {
	const size = 64
	e, _ := newTestEngine(t, size, withZones(t, zonePolicy()))
	// A LAN host's connection in progress (confirmed, not yet assured).
	p := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 443, flags: tcpSYN}.build()
	if v := fwd(t, e, p, lanIf, wanIf); v != Accept {
		t.Fatalf("lan to wan: %v", v)
	}
	const flood = 4 * size
	for i := range flood {
		a := host6.As16()
		a[14], a[15] = byte(i>>8), byte(i)+1
		p := pk{src: remote6, dst: netip.AddrFrom16(a), proto: ProtoTCP, sport: uint16(1024 + i), dport: 22, flags: tcpSYN}.build()
		e.Prerouting(p, wanIf) // no Postrouting: the packet dies unresolved in netstack
	}
	if n := e.Len(); n != 1 {
		t.Errorf("after %d refused flows from the wan: %d flows in the table, want 1 (the lan host's)", flood, n)
	}
	if n := e.Stats().EarlyDropped.Load(); n != 0 {
		t.Errorf("%d flows early-dropped to make room for refused ones, want 0", n)
	}
	if n := e.Stats().Drop(DropFirewall); n != flood {
		t.Errorf("firewall drops %d, want %d (every refused flow counted)", n, flood)
	}
	// An allowed new flow still gets a slot, and the first is still there.
	p = pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 40001, dport: 443, flags: tcpSYN}.build()
	if v := fwd(t, e, p, lanIf, wanIf); v != Accept {
		t.Fatalf("a new lan flow after the flood: %v, want accept", v)
	}
	if n, full := e.Len(), e.Stats().Drop(DropTableFull); n != 2 || full != 0 {
		t.Errorf("flows %d (want 2), table-full drops %d (want 0)", n, full)
	}
	_, zones := e.rules.Load().fw.Counters()
	if zones[2].Forward != flood {
		t.Errorf("zone wan forward policy counted %d, want %d", zones[2].Forward, flood)
	}
}

// TestZonesInputRefusalReported: PreroutingCT says when the zones' input
// chain refused a packet (the stack's firewall_input), and not for the
// engine's other refusals (an unsolicited IPv4 packet to no mapping).
func TestZonesInputRefusalReported(t *testing.T) {
	e, _ := newTestEngine(t, 1024, withZones(t, zonePolicy()))
	toRouter := pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 4000, dport: 22, flags: tcpSYN}.build()
	if v, _, input := e.PreroutingCT(toRouter, wanIf, false); v != Drop || !input {
		t.Errorf("wan SYN to the router: %v, input %v; want drop, input true", v, input)
	}
	guest := pk{src: guestHost, dst: guestAddr, proto: ProtoTCP, sport: 4001, dport: 80, flags: tcpSYN}.build()
	if v, _, input := e.PreroutingCT(guest, guestIf, false); v != Reject || !input {
		t.Errorf("guest SYN to the router's page: %v, input %v; want reject, input true", v, input)
	}
	dns := pk{src: guestHost, dst: guestAddr, proto: ProtoUDP, sport: 4002, dport: 53, payload: []byte("q")}.build()
	if v, _, input := e.PreroutingCT(dns, guestIf, false); v != Accept || input {
		t.Errorf("guest DNS to the router: %v, input %v; want accept, input false", v, input)
	}
	invalid := pk{src: remote, dst: hostA, proto: ProtoTCP, sport: 4003, dport: 22, flags: tcpACK}.build()
	if v, _, input := e.PreroutingCT(invalid, wanIf, false); v != Drop || input {
		t.Errorf("wan ACK without a flow: %v, input %v; want drop, input false", v, input)
	}
}

// TestZonesCountersSurviveReapply: re-applying the rules (a reload, a
// new WAN lease) with a freshly compiled ruleset keeps the counters of
// the rules and zone policies that did not change; a changed rule starts
// from zero.
func TestZonesCountersSurviveReapply(t *testing.T) {
	e, _ := newTestEngine(t, 1024, withZones(t, zonePolicy()))
	for i := range 3 {
		p := pk{src: guestHost, dst: remote, proto: ProtoTCP, sport: 6000 + uint16(i), dport: 443, flags: tcpSYN}.build()
		if v := fwd(t, e, p, guestIf, wanIf); v != Accept {
			t.Fatalf("guest to wan: %v", v)
		}
	}
	p := pk{src: guestHost, dst: hostA, proto: ProtoTCP, sport: 6100, dport: 22, flags: tcpSYN}.build()
	if v := fwd(t, e, p, guestIf, lanIf); v != Drop {
		t.Fatalf("guest to lan: %v, want drop", v)
	}
	reapply := func(pol firewall.Policy) {
		t.Helper()
		r := testRules()
		withZones(t, pol)(&r)
		if err := e.SetRules(r); err != nil {
			t.Fatal(err)
		}
	}
	count := func(name string) uint64 {
		rules, _ := e.Firewall().Counters()
		for _, r := range rules {
			if r.Name == name {
				return r.Hits
			}
		}
		t.Fatalf("no rule %q", name)
		return 0
	}
	reapply(zonePolicy())
	if got := count("guest-wan"); got != 3 {
		t.Errorf("guest-wan hits after a re-apply of the same rules: %d, want 3", got)
	}
	if _, zones := e.Firewall().Counters(); zones[1].Forward != 1 {
		t.Errorf("guest forward policy decisions after a re-apply: %d, want 1", zones[1].Forward)
	}
	// A new rule in front shifts guest-wan's position: same name and
	// content, same counters. A changed guest-wan starts from zero.
	reapply(zonePolicy(firewall.Rule{Name: "block-tv", Src: "lan", Dest: "wan", SrcAddrs: []netip.Prefix{netip.MustParsePrefix("192.168.1.99/32")}, Target: firewall.Drop}))
	if got := count("guest-wan"); got != 3 {
		t.Errorf("guest-wan hits after a rule was added before it: %d, want 3", got)
	}
	changed := zonePolicy()
	changed.Rules[1].Family = 4
	reapply(changed)
	if got := count("guest-wan"); got != 0 {
		t.Errorf("guest-wan hits after it changed: %d, want 0", got)
	}
}

// TestZonesRedirectSourceFilters: a redirect with sources (fw4 src_ip)
// redirects only those outside sources, the others meet the router's
// input chain as if there were no redirect; two redirects may share a
// port for different sources. One with an address (fw4 src_dip) listens
// on that address of its interface, not the first one.
func TestZonesRedirectSourceFilters(t *testing.T) {
	wanAddr2 := netip.MustParseAddr("203.0.113.3")
	e, _ := newTestEngine(t, 1024, func(r *Rules) {
		withZones(t, zonePolicy())(r)
		r.Ifaces[1].Addrs = append(r.Ifaces[1].Addrs, wanAddr2)
		r.Forwards = []Forward{
			{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(hostA, 80), Src: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/29")}},
			{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(hostB, 80), Src: []netip.Prefix{netip.PrefixFrom(remote2, 32)}},
			{Proto: ProtoTCP, In: wanIf, FirstPort: 9090, LastPort: 9090, To: netip.AddrPortFrom(hostB, 90), Dst: wanAddr2},
		}
	})
	dst := func(p []byte) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(p[16:20])), uint16(p[22])<<8|uint16(p[23]))
	}
	for _, tc := range []struct {
		name   string
		src    netip.Addr
		to     netip.Addr
		port   uint16
		want   Verdict
		wantTo netip.AddrPort
	}{
		{"first redirect's source", remote, wanAddr, 8080, Accept, netip.AddrPortFrom(hostA, 80)},
		{"second redirect's source", remote2, wanAddr, 8080, Accept, netip.AddrPortFrom(hostB, 80)},
		{"no redirect's source", netip.MustParseAddr("192.0.2.9"), wanAddr, 8080, Drop, netip.AddrPort{}},
		{"src_dip address", remote, wanAddr2, 9090, Accept, netip.AddrPortFrom(hostB, 90)},
		{"not the src_dip address", remote, wanAddr, 9090, Drop, netip.AddrPort{}},
	} {
		p := pk{src: tc.src, dst: tc.to, proto: ProtoTCP, sport: 5000, dport: tc.port, flags: tcpSYN}.build()
		v := fwd(t, e, p, wanIf, lanIf)
		if v != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
			continue
		}
		if v == Accept && dst(p) != tc.wantTo {
			t.Errorf("%s: redirected to %v, want %v", tc.name, dst(p), tc.wantTo)
		}
	}
	// Hairpinned from the lan, sources are not filtered.
	p := pk{src: hostB, dst: wanAddr, proto: ProtoTCP, sport: 5001, dport: 8080, flags: tcpSYN}.build()
	if v := fwd(t, e, p, lanIf, lanIf); v != Accept {
		t.Errorf("lan hairpin to the filtered redirect: %v, want accept", v)
	}
	// A src_dip that is not the interface's is a rules error.
	err := e.SetRules(Rules{Ifaces: testRules().Ifaces, Forwards: []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 1, LastPort: 1, To: netip.AddrPortFrom(hostA, 1), Dst: lanAddr}}})
	if err == nil || !strings.Contains(err.Error(), "is not one of interface") {
		t.Errorf("SetRules with a forward on another interface's address: %v", err)
	}
}

// TestZonesBroadcastInput: IPv4 broadcast and multicast reach the router
// through its zone's input chain, as fw4's input filters them: the guest
// zone (input reject, DNS admitted) refuses NetBIOS to the limited
// broadcast and mDNS to its group, without an answer (a drop: no ICMP
// error about a broadcast, RFC 1122 section 3.2.2), admits DNS to its
// directed broadcast;
// the lan zone (input accept) admits them all; none opens a flow.
func TestZonesBroadcastInput(t *testing.T) {
	e, _ := newTestEngine(t, 1024, func(r *Rules) {
		withZones(t, zonePolicy())(r)
		r.Ifaces[0].Subnets = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}
		r.Ifaces[2].Subnets = []netip.Prefix{netip.MustParsePrefix("192.168.2.0/24")}
	})
	for _, tc := range []struct {
		name      string
		src       netip.Addr
		in        Iface
		dst       string
		port      uint16
		want      Verdict
		wantInput bool
	}{
		{"guest netbios to 255.255.255.255", guestHost, guestIf, "255.255.255.255", 137, Drop, true},
		{"guest mdns to its group", guestHost, guestIf, "224.0.0.251", 5353, Drop, true},
		{"guest dns to its directed broadcast", guestHost, guestIf, "192.168.2.255", 53, Accept, false},
		{"guest netbios to its directed broadcast", guestHost, guestIf, "192.168.2.255", 137, Drop, true},
		{"lan netbios to 255.255.255.255", hostA, lanIf, "255.255.255.255", 137, Accept, false},
		{"lan mdns to its group", hostA, lanIf, "224.0.0.251", 5353, Accept, false},
		{"lan netbios to its directed broadcast", hostA, lanIf, "192.168.1.255", 137, Accept, false},
		{"wan ssdp to its group", remote, wanIf, "239.255.255.250", 1900, Drop, true},
	} {
		n := e.Len()
		p := pk{src: tc.src, dst: netip.MustParseAddr(tc.dst), proto: ProtoUDP, sport: tc.port, dport: tc.port, payload: []byte("b")}.build()
		v, _, input := e.PreroutingCT(p, tc.in, false)
		if v != tc.want || input != tc.wantInput {
			t.Errorf("%s: %v, input %v; want %v, input %v", tc.name, v, input, tc.want, tc.wantInput)
		}
		if e.Len() != n {
			t.Errorf("%s: opened a flow (%d -> %d)", tc.name, n, e.Len())
		}
	}
}

// TestRefusedNewFlowAllocs: a new flow refused before it takes a slot
// (a wan SYN the zones drop, an unsolicited IPv4 packet from the wan, a
// TCP packet that cannot open a flow) costs no allocation: the conn
// built to decide it is kept for the next new flow, so a flood of them
// makes no garbage.
func TestRefusedNewFlowAllocs(t *testing.T) {
	e, _ := newTestEngine(t, 64, withZones(t, zonePolicy()))
	for _, tc := range []struct {
		name string
		p    pk
		want Verdict
	}{
		{"wan SYN to a lan prefix host", pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 5000, dport: 22, flags: tcpSYN}, Drop},
		{"unsolicited IPv4 from the wan", pk{src: remote, dst: hostA, proto: ProtoUDP, sport: 5000, dport: 9}, Drop},
		{"wan ACK without a flow", pk{src: remote6, dst: host6, proto: ProtoTCP, sport: 5000, dport: 443, flags: tcpACK}, Drop},
	} {
		b := tc.p.build()
		w := make([]byte, len(b))
		n := testing.AllocsPerRun(200, func() {
			copy(w, b)
			if v := e.Prerouting(w, wanIf); v != tc.want {
				t.Fatalf("%s: %v, want %v", tc.name, v, tc.want)
			}
		})
		if n != 0 {
			t.Errorf("%s: %.1f allocations per packet, want 0", tc.name, n)
		}
	}
	if e.Len() != 0 {
		t.Errorf("%d flows in the table after refusals, want 0", e.Len())
	}
}
