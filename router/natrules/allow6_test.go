package natrules

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
)

// TestAllow6Suffix: a suffix rule admits the host with that interface ID
// in each lan /64 in force — the static one and the delegated one learned.WithIPv6
// adds — and follows a new delegation; interface: narrows it to one lan.
func TestAllow6Suffix(t *testing.T) {
	cfg := &config.Config{
		Interfaces: []config.Interface{
			{Name: "wan", Role: config.RoleWAN},
			{Name: "lan", Role: config.RoleLAN, Addresses: []netip.Prefix{netip.MustParsePrefix("fd00:1::1/64"), netip.MustParsePrefix("192.168.1.1/24")}},
			{Name: "guest", Role: config.RoleLAN},
		},
	}
	all := config.Allow6{Suffix: netip.MustParseAddr("::1234"), Proto: config.ProtoTCP, FirstPort: 22, LastPort: 22}
	guest := all
	guest.Interface = "guest"
	ids := map[string]int{"lan": 1, "guest": 2}
	host := netip.MustParsePrefix
	for _, tc := range []struct {
		pd          string
		all, guestO []netip.Prefix
	}{
		{"", []netip.Prefix{host("fd00:1::1234/128")}, nil},
		{"2001:db8:aa00::/56", []netip.Prefix{host("fd00:1::1234/128"), host("2001:db8:aa00:1::1234/128"), host("2001:db8:aa00:2::1234/128")},
			[]netip.Prefix{host("2001:db8:aa00:2::1234/128")}},
		{"2001:db8:bb00::/56", []netip.Prefix{host("fd00:1::1234/128"), host("2001:db8:bb00:1::1234/128"), host("2001:db8:bb00:2::1234/128")},
			[]netip.Prefix{host("2001:db8:bb00:2::1234/128")}},
	} {
		var pd *learned.Delegation
		if tc.pd != "" {
			pd = &learned.Delegation{Prefix: netip.MustParsePrefix(tc.pd)}
		}
		eff := learned.WithIPv6(cfg, nil, pd, ids)
		if got := allow6Dsts(eff, all); !slices.Equal(got, tc.all) {
			t.Errorf("delegation %q: suffix rule admits %v, want %v", tc.pd, got, tc.all)
		}
		if got := allow6Dsts(eff, guest); !slices.Equal(got, tc.guestO) {
			t.Errorf("delegation %q: guest suffix rule admits %v, want %v", tc.pd, got, tc.guestO)
		}
	}
	to := config.Allow6{To: netip.MustParsePrefix("2001:db8::/64")}
	if got := allow6Dsts(cfg, to); !slices.Equal(got, []netip.Prefix{to.To}) {
		t.Errorf("to rule admits %v", got)
	}
}
