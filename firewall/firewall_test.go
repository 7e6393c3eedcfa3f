package firewall

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Interface IDs of the test policy.
const (
	lanIf   = 1
	guestIf = 2
	wanIf   = 3
	iotIf   = 4
	loneIf  = 9 // in no zone
)

func testPolicy() Policy {
	return Policy{
		Zones: []Zone{
			{Name: "lan", Ifaces: []int32{lanIf}, Input: Accept, Forward: Accept, Output: Accept},
			{Name: "guest", Ifaces: []int32{guestIf}, Input: Reject, Forward: Drop, Output: Accept},
			{Name: "wan", Ifaces: []int32{wanIf}, Input: Reject, Forward: Drop, Output: Accept},
			{Name: "iot", Ifaces: []int32{iotIf}, Input: Drop, Forward: Reject, Output: Drop},
		},
		Rules: []Rule{
			{Name: "guest-dhcp", Src: "guest", Protos: []uint8{17}, DestPorts: []PortRange{{67, 68}}},
			{Name: "guest-dns", Src: "guest", DestPorts: []PortRange{{53, 53}}},
			{Name: "guest-wan", Src: "guest", Dest: "wan", Protos: nil},
			{Name: "block-tv", Src: "lan", Dest: "wan", SrcAddrs: []netip.Prefix{netip.MustParsePrefix("192.168.1.50/32")}, Target: Reject, Log: true},
			{Name: "ping6", Src: "wan", Dest: "*", ICMPTypes: []ICMPType{{Type: 128, V6: true}}},
			{Name: "ping6-in", Src: "wan", ICMPTypes: []ICMPType{{Type: 128, V6: true}}, Limit: 2, Burst: 2},
			{Name: "nas6", Src: "wan", Dest: "lan", Family: 6, Protos: []uint8{6}, DestPorts: []PortRange{{8000, 8010}}, DestSuffix: []Suffix{Suffix(netip.MustParseAddr("::1234"))}},
			{Name: "esp", Src: "wan", Dest: "lan", Protos: []uint8{50}, DestAddrs: []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/64")}},
			{Name: "iot-ntp", Src: "iot", Dest: "wan", Protos: []uint8{17}, DestPorts: []PortRange{{123, 123}}},
		},
	}
}

func addr(s string) ([16]byte, bool) {
	a := netip.MustParseAddr(s)
	var b [16]byte
	if a.Is4() {
		x := a.As4()
		copy(b[:], x[:])
		return b, false
	}
	return a.As16(), true
}

func flow(in, out int32, proto uint8, src, dst string, sport, dport uint16) Flow {
	s, v6 := addr(src)
	d, _ := addr(dst)
	return Flow{Src: s, Dst: d, SrcPort: sport, DstPort: dport, Proto: proto, V6: v6, In: in, Out: out}
}

func icmp(in, out int32, src, dst string, typ uint8) Flow {
	f := flow(in, out, 1, src, dst, 0, 0)
	if f.V6 {
		f.Proto = 58
	}
	f.ICMPType = typ
	return f
}

func TestEval(t *testing.T) {
	rs, err := Compile(testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	dnat := flow(wanIf, lanIf, 6, "198.51.100.9", "192.168.1.10", 4000, 80)
	dnat.DNAT = true
	for _, tc := range []struct {
		name string
		f    Flow
		want Target
		rule string // "" for a policy
	}{
		{"lan to wan: lan forward policy", flow(lanIf, wanIf, 6, "192.168.1.10", "198.51.100.9", 4000, 443), Accept, ""},
		{"lan to router", flow(lanIf, 0, 6, "192.168.1.10", "192.168.1.1", 4000, 80), Accept, ""},
		{"blocked host to wan: a rule without proto is every protocol", flow(lanIf, wanIf, 17, "192.168.1.50", "198.51.100.9", 4000, 53), Reject, "block-tv"},
		{"blocked host, v6 unaffected", flow(lanIf, wanIf, 6, "fd00:1::50", "2001:db8:ff::9", 4000, 443), Accept, ""},
		{"blocked host to lan", flow(lanIf, lanIf, 6, "192.168.1.50", "192.168.1.10", 4000, 443), Accept, ""},
		{"guest dhcp", flow(guestIf, 0, 17, "0.0.0.0", "255.255.255.255", 68, 67), Accept, "guest-dhcp"},
		{"guest dns tcp", flow(guestIf, 0, 6, "192.168.2.10", "192.168.2.1", 4000, 53), Accept, "guest-dns"},
		{"guest status page", flow(guestIf, 0, 6, "192.168.2.10", "192.168.2.1", 4000, 80), Reject, ""},
		{"guest to lan router address", flow(guestIf, 0, 6, "192.168.2.10", "192.168.1.1", 4000, 80), Reject, ""},
		{"guest to lan host", flow(guestIf, lanIf, 6, "192.168.2.10", "192.168.1.10", 4000, 22), Drop, ""},
		{"guest to wan", flow(guestIf, wanIf, 6, "192.168.2.10", "198.51.100.9", 4000, 443), Accept, "guest-wan"},
		{"guest udp to wan", flow(guestIf, wanIf, 17, "192.168.2.10", "198.51.100.9", 4000, 443), Accept, "guest-wan"},
		{"guest gre to wan (no proto = every protocol)", flow(guestIf, wanIf, 47, "192.168.2.10", "198.51.100.9", 0, 0), Accept, "guest-wan"},
		{"wan to router", flow(wanIf, 0, 6, "198.51.100.9", "203.0.113.2", 4000, 22), Reject, ""},
		{"wan to lan", flow(wanIf, lanIf, 6, "2001:db8:ff::9", "2001:db8:1::10", 4000, 22), Drop, ""},
		{"wan redirect", dnat, Accept, ""},
		{"wan ping6 to lan", icmp(wanIf, lanIf, "2001:db8:ff::9", "2001:db8:1::10", 128), Accept, "ping6"},
		{"wan ping6 to guest", icmp(wanIf, guestIf, "2001:db8:ff::9", "2001:db8:2::10", 128), Accept, "ping6"},
		{"wan ping4 to lan", icmp(wanIf, lanIf, "198.51.100.9", "192.168.1.10", 8), Drop, ""},
		{"wan echo reply type 129 not the rule's", icmp(wanIf, lanIf, "2001:db8:ff::9", "2001:db8:1::10", 129), Drop, ""},
		{"nas suffix, prefix A", flow(wanIf, lanIf, 6, "2001:db8:ff::9", "2001:db8:1::1234", 4000, 8005), Accept, "nas6"},
		{"nas suffix, new prefix", flow(wanIf, lanIf, 6, "2001:db8:ff::9", "2001:db8:77::1234", 4000, 8000), Accept, "nas6"},
		{"nas suffix, other host", flow(wanIf, lanIf, 6, "2001:db8:ff::9", "2001:db8:1::1235", 4000, 8005), Drop, ""},
		{"nas suffix, port past range", flow(wanIf, lanIf, 6, "2001:db8:ff::9", "2001:db8:1::1234", 4000, 8011), Drop, ""},
		{"nas suffix, udp", flow(wanIf, lanIf, 17, "2001:db8:ff::9", "2001:db8:1::1234", 4000, 8005), Drop, ""},
		{"esp to prefix", flow(wanIf, lanIf, 50, "2001:db8:ff::9", "2001:db8:1::7", 0, 0), Accept, "esp"},
		{"esp outside prefix", flow(wanIf, lanIf, 50, "2001:db8:ff::9", "2001:db8:2::7", 0, 0), Drop, ""},
		{"iot ntp", flow(iotIf, wanIf, 17, "192.168.3.5", "198.51.100.9", 123, 123), Accept, "iot-ntp"},
		{"iot web", flow(iotIf, wanIf, 6, "192.168.3.5", "198.51.100.9", 4000, 443), Reject, ""},
		{"router to iot: output policy", flow(0, iotIf, 17, "192.168.3.1", "192.168.3.5", 53, 4000), Drop, ""},
		{"router to wan", flow(0, wanIf, 17, "203.0.113.2", "198.51.100.9", 4000, 53), Accept, ""},
		{"unzoned in", flow(loneIf, wanIf, 6, "10.9.9.9", "198.51.100.9", 4000, 443), Drop, ""},
		{"unzoned out", flow(lanIf, loneIf, 6, "192.168.1.10", "10.9.9.9", 4000, 443), Drop, ""},
	} {
		d := rs.Eval(&tc.f, 0)
		got := ""
		if d.Rule >= 0 {
			got = rs.rules[d.Rule].name
		}
		if d.Target != tc.want || got != tc.rule {
			t.Errorf("%s: got %s by %q, want %s by %q", tc.name, d.Target, got, tc.want, tc.rule)
		}
	}
	// The blocking rule is every protocol: a TCP flow from .50 is rejected.
	f := flow(lanIf, wanIf, 6, "192.168.1.50", "198.51.100.9", 4000, 443)
	if d := rs.Eval(&f, 0); d.Target != Reject || rs.rules[d.Rule].name != "block-tv" {
		t.Errorf("block-tv: got %+v", d)
	}
	rules, zones := rs.Counters()
	if rules[3].Name != "block-tv" || rules[3].Hits != 2 || rules[3].Logged != 2 {
		t.Errorf("block-tv counters %+v, want 2 hits, 2 logged", rules[3])
	}
	if zones[1].Name != "guest" || zones[1].Input != 2 || zones[1].Forward != 1 {
		t.Errorf("guest zone counters %+v, want input 2, forward 1", zones[1])
	}
	if rs.Unzoned.Load() != 2 {
		t.Errorf("unzoned %d, want 2", rs.Unzoned.Load())
	}
}

func TestLimit(t *testing.T) {
	rs, err := Compile(testPolicy())
	if err != nil {
		t.Fatal(err)
	}
	ping := icmp(wanIf, 0, "2001:db8:ff::9", "2001:db8:0:1::2", 128)
	now := int64(time.Second)
	var got []Target
	for i := 0; i < 4; i++ {
		got = append(got, rs.Eval(&ping, now).Target)
	}
	// Burst 2: two pass, the rest fall through to wan's input reject.
	if want := []Target{Accept, Accept, Reject, Reject}; !equal(got, want) {
		t.Fatalf("burst: %v, want %v", got, want)
	}
	now += int64(500 * time.Millisecond) // 2/s: one token back
	if d := rs.Eval(&ping, now); d.Target != Accept {
		t.Fatalf("after 500 ms: %v, want accept", d.Target)
	}
	if d := rs.Eval(&ping, now); d.Target != Reject {
		t.Fatalf("second after 500 ms: %v, want reject", d.Target)
	}
	rules, _ := rs.Counters()
	if rules[5].Hits != 3 || rules[5].Limited != 3 {
		t.Fatalf("ping6-in counters %+v, want 3 hits, 3 limited", rules[5])
	}
	// Reject answers: RejectBurst at once, then RejectRate a second.
	n := 0
	for i := 0; i < 2*RejectBurst; i++ {
		if rs.RejectAllowed(now) {
			n++
		}
	}
	if n != RejectBurst {
		t.Fatalf("reject answers at once: %d, want %d", n, RejectBurst)
	}
}

func equal(a, b []Target) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Policy)
		want string
	}{
		{"overlapping zones", func(p *Policy) { p.Zones[1].Ifaces = append(p.Zones[1].Ifaces, lanIf) }, `interface 1 is in zone "lan" too`},
		{"duplicate zone", func(p *Policy) { p.Zones[1].Name = "lan" }, "used twice"},
		{"unknown zone", func(p *Policy) { p.Rules[0].Dest = "dmz" }, `unknown zone "dmz"`},
		{"no zone", func(p *Policy) { p.Rules[0].Src = "" }, "neither src nor dest"},
		{"family vs address", func(p *Policy) { p.Rules[3].Family = 6 }, "no IP version in common"},
		{"suffix on ipv4", func(p *Policy) { p.Rules[6].Family = 4 }, "no IP version in common"},
		{"icmpv6 type with icmp proto", func(p *Policy) { p.Rules[4].Protos = []uint8{1} }, "no IP version in common"},
		{"ports without port protocol", func(p *Policy) { p.Rules[8].Protos = []uint8{47} }, "no protocol with ports"},
		{"empty port range", func(p *Policy) { p.Rules[8].DestPorts = []PortRange{{200, 100}} }, "is empty"},
		{"interface id", func(p *Policy) { p.Zones[0].Ifaces = []int32{0} }, "out of range"},
	} {
		p := testPolicy()
		tc.edit(&p)
		_, err := Compile(p)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestEvalAllocs(t *testing.T) {
	rs, err := Compile(bigPolicy(1000))
	if err != nil {
		t.Fatal(err)
	}
	f := flow(lanIf, wanIf, 6, "192.168.1.10", "198.51.100.9", 4000, 443)
	if n := testing.AllocsPerRun(1000, func() { rs.Eval(&f, 1) }); n != 0 {
		t.Fatalf("%v allocs per Eval, want 0", n)
	}
}

// bigPolicy is testPolicy with n more lan-to-wan rules ahead of the
// others, each refusing one destination port to one LAN host: the shape
// of a long block list.
func bigPolicy(n int) Policy {
	p := testPolicy()
	var extra []Rule
	for i := 0; i < n; i++ {
		extra = append(extra, Rule{
			Name:      "block",
			Src:       "lan",
			Dest:      "wan",
			Protos:    []uint8{6, 17},
			SrcAddrs:  []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, 1, byte(i)}), 32)},
			DestPorts: []PortRange{{uint16(10000 + i), uint16(10000 + i)}},
			Target:    Drop,
		})
	}
	p.Rules = append(extra, p.Rules...)
	return p
}

// TestIndexAgreesWithScan checks the port index against a plain scan of
// every rule in order, for many flows over the big policy.
func TestIndexAgreesWithScan(t *testing.T) {
	p := bigPolicy(300)
	rs, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	for port := 0; port < 65536; port += 7 {
		for _, in := range []int32{lanIf, guestIf, wanIf} {
			f := flow(in, wanIf, 6, "192.168.1.3", "198.51.100.9", 4000, uint16(port))
			got := rs.Eval(&f, 0)
			want := scan(rs, p, &f)
			if got.Rule != want {
				t.Fatalf("port %d from %d: index rule %d, scan %d", port, in, got.Rule, want)
			}
		}
	}
}

func scan(rs *Ruleset, p Policy, f *Flow) int {
	src, dst := rs.Zone(f.In), rs.Zone(f.Out)
	for i, r := range p.Rules {
		if (r.Src == src || r.Src == Any && src != "") && (r.Dest == dst || r.Dest == Any && dst != "") && rs.rules[i].matches(f) {
			return i
		}
	}
	return -1
}

// TestHostIndexAgreesWithScan checks the host index against a plain
// scan: host rules (some with two addresses, some with ports) between
// rules of other shapes, for flows from hosts the rules name and do not.
func TestHostIndexAgreesWithScan(t *testing.T) {
	p := testPolicy()
	var rules []Rule
	for i := 0; i < 600; i++ {
		r := Rule{Name: "host", Src: "lan", Dest: "wan", Target: Target(i % 3),
			SrcAddrs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, 9, byte(i)}), 32)}}
		switch i % 7 {
		case 1:
			r.SrcAddrs = append(r.SrcAddrs, netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, 9, byte(i + 1)}), 32))
		case 2:
			r.Protos, r.DestPorts = []uint8{6}, []PortRange{{First: 443, Last: 443}}
		case 3:
			r = Rule{Name: "subnet", Src: "lan", Dest: "wan", Target: Drop, SrcAddrs: []netip.Prefix{netip.MustParsePrefix("192.168.9.128/26")}, Protos: []uint8{17}}
		case 4:
			r = Rule{Name: "any", Src: "lan", Dest: "*", Target: Reject, Protos: []uint8{6}, DestPorts: []PortRange{{First: uint16(1000 + i), Last: uint16(1000 + i)}}}
		}
		rules = append(rules, r)
	}
	p.Rules = append(rules, p.Rules...)
	rs, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	indexed := 0
	for _, ch := range rs.chains {
		for _, l := range ch.lists {
			if l.byHost != nil {
				indexed++
			}
		}
	}
	if indexed == 0 {
		t.Fatal("no list got a host index: the test checks nothing")
	}
	for h := 0; h < 256; h++ {
		for _, port := range []uint16{80, 443, 1004, 1011, 53} {
			for _, proto := range []uint8{6, 17} {
				f := flow(lanIf, wanIf, proto, netip.AddrFrom4([4]byte{192, 168, 9, byte(h)}).String(), "198.51.100.9", 4000, port)
				if got, want := rs.Eval(&f, 0).Rule, scan(rs, p, &f); got != want {
					t.Fatalf("host %d proto %d port %d: index rule %d, scan %d", h, proto, port, got, want)
				}
			}
		}
	}
}
