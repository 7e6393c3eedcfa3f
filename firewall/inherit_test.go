package firewall

import (
	"net/netip"
	"testing"
)

// TestInheritKeepsUnchangedRules: rules equal in name and content keep
// their counters and rate limiter across a recompile, the n-th of equal
// rules the n-th's; a changed rule and a changed zone start from zero.
func TestInheritKeepsUnchangedRules(t *testing.T) {
	pol := func(allow6 ...string) Policy {
		p := testPolicy()
		for _, a := range allow6 {
			p.Rules = append(p.Rules, Rule{Name: "allow6", Src: "wan", Dest: "lan", Family: 6, Protos: []uint8{6}, DestAddrs: []netip.Prefix{netip.MustParsePrefix(a)}})
		}
		return p
	}
	a, err := Compile(pol("2001:db8:1::10/128", "2001:db8:1::10/128", "2001:db8:1::20/128"))
	if err != nil {
		t.Fatal(err)
	}
	tcp6 := func(dst string) *Flow {
		f := flow(wanIf, lanIf, 6, "2001:db8:9::1", dst, 1000, 443)
		return &f
	}
	a.Eval(tcp6("2001:db8:1::10"), 0) // the first allow6 rule
	a.Eval(tcp6("2001:db8:1::20"), 0)
	a.Eval(tcp6("2001:db8:1::20"), 0)
	ping := icmp(wanIf, 0, "192.0.2.1", "192.0.2.2", 8)
	ping.V6, ping.Proto = true, 58
	ping.ICMPType = 128
	for range 3 { // ping6-in: 2 within its limit (burst 2), 1 over
		a.Eval(&ping, 1)
	}
	// The new lease drops the ::20 rule's prefix; the wan zone's input
	// changes to drop.
	p := pol("2001:db8:1::10/128", "2001:db8:1::10/128", "2001:db8:1::30/128")
	p.Zones[2].Input = Drop
	b, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	b.Inherit(a)
	rules, zones := b.Counters()
	n := len(testPolicy().Rules)
	if got := []uint64{rules[n].Hits, rules[n+1].Hits, rules[n+2].Hits}; got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Errorf("allow6 hits after Inherit = %v, want [1 0 0] (the first kept, the changed one from zero)", got)
	}
	if r := rules[5]; r.Name != "ping6-in" || r.Hits != 2 || r.Limited != 1 {
		t.Errorf("ping6-in after Inherit = %+v, want 2 hits, 1 limited", r)
	}
	if zones[2].Input != 0 {
		t.Errorf("wan input decisions after its policy changed = %d, want 0", zones[2].Input)
	}
	// The limiter came along: its bucket is still empty at the same time.
	if d := b.Eval(&ping, 1); d.Rule == 5 {
		t.Errorf("ping6-in matched right after Inherit: its rate limiter started over")
	}
}
