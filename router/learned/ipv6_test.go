package learned

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestWithIPv6: an RA's default router and on-link prefix become wan
// routes (a file route for ::/0 wins), the delegation gives each lan its
// ::1 in its /64, the input is untouched, and with nothing learned the
// config is returned as is.
func TestWithIPv6(t *testing.T) {
	cfg := &config.Config{
		Interfaces: []config.Interface{
			{Name: "wan", Role: config.RoleWAN, Addresses: []netip.Prefix{netip.MustParsePrefix("2001:db8:ffff::2/64")}},
			{Name: "lan", Role: config.RoleLAN, Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.1/24")}},
			{Name: "guest", Role: config.RoleLAN},
		},
	}
	if got := WithIPv6(cfg, nil, nil, nil); got != cfg {
		t.Errorf("WithIPv6(nothing learned) made a copy")
	}
	ll := netip.MustParseAddr("fe80::1")
	ras := map[string]*RA{"wan": {
		Routers: []netip.Addr{ll, netip.MustParseAddr("fe80::2")},
		OnLink:  []netip.Prefix{netip.MustParsePrefix("2001:db8:ffff::/64"), netip.MustParsePrefix("2001:db8:eeee::/64")},
	}}
	pd := &Delegation{Prefix: netip.MustParsePrefix("2001:db8:aa00::/56"), ValidUntil: time.Now().Add(time.Hour)}
	ids := map[string]int{"lan": 1, "guest": 0}
	eff := WithIPv6(cfg, ras, pd, ids)
	wantRoutes := []config.Route{
		{To: netip.MustParsePrefix("::/0"), Via: ll, Dev: "wan"},
		{To: netip.MustParsePrefix("2001:db8:eeee::/64"), Dev: "wan"}, // the other is on the interface already
	}
	if !slices.EqualFunc(eff.Routes, wantRoutes, config.Route.Equal) {
		t.Errorf("routes = %v, want %v", eff.Routes, wantRoutes)
	}
	if got := eff.Interface("lan").Addresses; !slices.Contains(got, netip.MustParsePrefix("2001:db8:aa00:1::1/64")) || len(got) != 2 {
		t.Errorf("lan addresses = %v, want 192.168.1.1/24 and 2001:db8:aa00:1::1/64", got)
	}
	if got := eff.Interface("guest").Addresses; !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("2001:db8:aa00::1/64")}) {
		t.Errorf("guest addresses = %v", got)
	}
	if len(cfg.Routes) != 0 || len(cfg.Interface("lan").Addresses) != 1 || len(cfg.Interface("guest").Addresses) != 0 {
		t.Errorf("WithIPv6 changed its input: %+v", cfg)
	}
	// The operator's default route wins.
	cfg.Routes = []config.Route{{To: netip.MustParsePrefix("::/0"), Via: netip.MustParseAddr("2001:db8:ffff::9")}}
	eff = WithIPv6(cfg, ras, nil, nil)
	if n := len(eff.Routes); n != 2 || eff.Routes[0].Via != netip.MustParseAddr("2001:db8:ffff::9") {
		t.Errorf("with a file default route, routes = %v", eff.Routes)
	}
	del, asg := UnassignedSets(pd, ids)
	if !slices.Equal(del, []netip.Prefix{pd.Prefix}) ||
		!slices.Equal(asg, []netip.Prefix{netip.MustParsePrefix("2001:db8:aa00::/64"), netip.MustParsePrefix("2001:db8:aa00:1::/64")}) {
		t.Errorf("UnassignedSets = %v, %v", del, asg)
	}
	if d, a := UnassignedSets(nil, ids); d != nil || a != nil {
		t.Errorf("UnassignedSets(no delegation) = %v, %v", d, a)
	}
}

// TestWithIPv6HostileOnLink: an on-link prefix from a wan's
// RAs becomes no route when it is shorter than ra.MinOnLinkBits or
// overlaps a lan's prefix (a /128 of a LAN host, a /80 in it, the /64
// itself, a /32 around it), the delegation or a /64 of it; a prefix of
// the wan's own link and an unrelated /64 do.
func TestWithIPv6HostileOnLink(t *testing.T) {
	cfg := &config.Config{
		Interfaces: []config.Interface{
			{Name: "wan", Role: config.RoleWAN, Addresses: []netip.Prefix{netip.MustParsePrefix("2001:db8:ffff::2/64")}},
			{Name: "lan", Role: config.RoleLAN, Addresses: []netip.Prefix{netip.MustParsePrefix("fd77:1::1/64"), netip.MustParsePrefix("fe80::1/64")}},
		},
	}
	pd := &Delegation{Prefix: netip.MustParsePrefix("2001:db8:aa00::/56"), ValidUntil: time.Now().Add(time.Hour)}
	for _, tc := range []struct {
		prefix string
		routed bool
	}{
		{"2001:db8:eeee::/64", true},
		{"2001:db8:ffff:0:8000::/65", true}, // inside the wan's own /64: on that link anyway
		{"2001:db8:ee00::/48", true},        // MinOnLinkBits itself
		{"fd77:1::2/128", false},
		{"fd77:1::/80", false},
		{"fd77:1::/64", false},
		{"fd77::/32", false},
		{"2001:db8:aa00::/56", false},
		{"2001:db8:aa00:1::/64", false},
		{"2001:db8:aa00:1::5/128", false},
		{"::/1", false},
		{"8000::/1", false},
		{"2001:db8:ee00::/47", false},
	} {
		p := netip.MustParsePrefix(tc.prefix)
		ras := map[string]*RA{"wan": {OnLink: []netip.Prefix{p}}}
		eff := WithIPv6(cfg, ras, pd, map[string]int{"lan": 1})
		routed := slices.ContainsFunc(eff.Routes, func(r config.Route) bool { return r.To == p && r.Dev == "wan" })
		if routed != tc.routed {
			t.Errorf("WithIPv6(on-link %s): routed %v, want %v (routes %v)", p, routed, tc.routed, eff.Routes)
		}
	}
	o := NewOwned(cfg, pd)
	got := o.Except("wan")
	slices.SortFunc(got, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	if want := []netip.Prefix{netip.MustParsePrefix("2001:db8:aa00::/56"), netip.MustParsePrefix("fd77:1::/64")}; !slices.Equal(got, want) {
		t.Errorf("except(wan) = %v, want %v (no link-local, not the wan's own)", got, want)
	}
	if got := (*Owned)(nil).Except("wan"); got != nil {
		t.Errorf("nil except = %v", got)
	}
}
