package learned

import (
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

func testState(t *testing.T) *State {
	dir := t.TempDir()
	return &State{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Dir: func() (string, error) { return dir, nil }}
}

// TestStateTake: each Take reports a change only when the news differs
// from what is held, and a lost lease leaves a note for the status page
// until the next one.
func TestStateTake(t *testing.T) {
	a := &Lease{Addr: netip.MustParsePrefix("198.51.100.23/24")}
	b := &Lease{Addr: netip.MustParsePrefix("198.51.100.24/24")}
	ra := &RA{Routers: []netip.Addr{netip.MustParseAddr("fe80::1")}}
	s := testState(t)
	for i, step := range []struct {
		do      func() bool
		changed bool
		lost    bool
	}{
		{func() bool { return s.TakeLease("wan", a) }, true, false},
		{func() bool { return s.TakeLease("wan", &Lease{Addr: a.Addr}) }, false, false},
		{func() bool { return s.TakeLease("wan", b) }, true, false},
		{func() bool { return s.TakeLease("wan", nil) }, true, true},
		{func() bool { return s.TakeLease("wan", nil) }, false, true},
		{func() bool { return s.TakeLease("wan", a) }, true, false},
		{func() bool { return s.TakeRA("wan", ra) }, true, false},
		{func() bool { return s.TakeRA("wan", &RA{Routers: slices.Clone(ra.Routers)}) }, false, false},
		{func() bool { return s.TakeRA("wan", &RA{}) }, true, false}, // teaches nothing: forgotten
		{func() bool { return s.TakeRA("wan", nil) }, false, false},
	} {
		if got := step.do(); got != step.changed {
			t.Errorf("step %d: changed = %v, want %v", i, got, step.changed)
		}
		if lost := strings.HasPrefix(s.LeaseLost("wan"), "lease lost at "); lost != step.lost {
			t.Errorf("step %d: LeaseLost = %q, want a note: %v", i, s.LeaseLost("wan"), step.lost)
		}
	}
}

// TestStateDNS: the WAN side's DNS servers in order — leases by
// interface name, then the delegation's, then the RAs' by wan — without
// repeats.
func TestStateDNS(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name   string
		leases map[string][]string
		pd     []string
		ras    map[string][]string
		want   []string
	}{
		{name: "nothing"},
		{name: "leases by name", leases: map[string][]string{"wan2": {"192.0.2.2"}, "wan1": {"192.0.2.1", "192.0.2.2"}},
			want: []string{"192.0.2.1", "192.0.2.2"}},
		{name: "v4 then delegation then RAs", leases: map[string][]string{"wan": {"192.0.2.1"}}, pd: []string{"2001:db8::53"},
			ras:  map[string][]string{"wanb": {"2001:db8::b"}, "wana": {"2001:db8::a", "2001:db8::53"}},
			want: []string{"192.0.2.1", "2001:db8::53", "2001:db8::a", "2001:db8::b"}},
	} {
		s := testState(t)
		addrs := func(ss []string) (out []netip.Addr) {
			for _, a := range ss {
				out = append(out, ip(a))
			}
			return out
		}
		for name, d := range tc.leases {
			s.TakeLease(name, &Lease{DNS: addrs(d)})
		}
		for name, d := range tc.ras {
			s.TakeRA(name, &RA{DNS: addrs(d)})
		}
		if tc.pd != nil {
			s.pd = &Delegation{Prefix: netip.MustParsePrefix("2001:db8:aa00::/56"), DNS: addrs(tc.pd)}
		}
		if got := s.DNS(); !slices.Equal(got, addrs(tc.want)) {
			t.Errorf("%s: DNS() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStateDelegation: a delegation gives each lan its ::1, kept by the
// subnet store; DropStale forgets it when the file has no delegating wan
// and a lease whose interface no longer runs a DHCP client.
func TestStateDelegation(t *testing.T) {
	cfg := &config.Config{Interfaces: []config.Interface{
		{Name: "wan", Role: config.RoleWAN, DHCP: &config.DHCPClient{}, IPv6: &config.IPv6{PD: 56}},
		{Name: "lan", Role: config.RoleLAN},
	}}
	s := testState(t)
	pd := &Delegation{Prefix: netip.MustParsePrefix("2001:db8:aa00::/56")}
	if !s.TakeDelegation("wan", pd, cfg) || s.TakeDelegation("wan", &Delegation{Prefix: pd.Prefix}, cfg) {
		t.Fatal("TakeDelegation change reports wrong")
	}
	s.TakeLease("wan", &Lease{Addr: netip.MustParsePrefix("198.51.100.23/24")})
	eff := s.Effective(cfg, func(string) int { return 0 })
	if got := eff.Interface("lan").Addresses; !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("2001:db8:aa00::1/64")}) {
		t.Errorf("lan addresses = %v", got)
	}
	if got := eff.Interface("wan").Addresses; len(got) != 1 {
		t.Errorf("wan addresses = %v, want the lease's", got)
	}
	if d, a := s.Unassigned(); len(d) != 1 || len(a) != 1 {
		t.Errorf("Unassigned = %v, %v", d, a)
	}
	s.DropStale(&config.Config{Interfaces: []config.Interface{{Name: "wan", Role: config.RoleWAN}, {Name: "lan", Role: config.RoleLAN}}})
	if s.Delegation() != nil || len(s.LANSubnets()) != 0 || len(s.leases) != 0 {
		t.Errorf("after DropStale: delegation %v, subnets %v, leases %v", s.Delegation(), s.LANSubnets(), s.leases)
	}
}
