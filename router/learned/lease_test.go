package learned

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

func TestWithLeases(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`ports: [{name: eth0}]
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24]}
  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24]}
routes:
  - {to: 10.0.0.0/8, via: 192.168.1.254}
`))
	if err != nil {
		t.Fatal(err)
	}
	// addresses: [dhcp], which the parser refuses until the client runs.
	wanIfc := cfg.Interface("wan")
	wanIfc.Addresses, wanIfc.DHCP = nil, &config.DHCPClient{}
	if got := WithLeases(cfg, nil, nil); got != cfg {
		t.Errorf("WithLeases(no leases) made a copy")
	}
	l := &Lease{
		Addr: netip.MustParsePrefix("198.51.100.23/24"),
		MTU:  9000,
		Routes: []config.Route{
			{To: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("198.51.100.1")},
			{To: netip.MustParsePrefix("10.0.0.0/8"), Via: netip.MustParseAddr("198.51.100.2")},
		},
	}
	eff := WithLeases(cfg, map[string]*Lease{"wan": l, "lan": l}, func(string) int { return 1500 })
	wan := eff.Interface("wan")
	if len(wan.Addresses) != 1 || wan.Addresses[0] != l.Addr {
		t.Errorf("wan addresses = %v, want [%v]", wan.Addresses, l.Addr)
	}
	if wan.MTU != 1500 {
		t.Errorf("wan MTU = %d, want 1500 (the lease's 9000 capped at the port's)", wan.MTU)
	}
	if lan := eff.Interface("lan"); len(lan.Addresses) != 1 {
		t.Errorf("lan (no DHCP client) got the lease: %v", lan.Addresses)
	}
	want := []config.Route{cfg.Routes[0], {To: l.Routes[0].To, Via: l.Routes[0].Via, Dev: "wan"}}
	if len(eff.Routes) != 2 || !eff.Routes[0].Equal(want[0]) || !eff.Routes[1].Equal(want[1]) {
		t.Errorf("routes = %+v, want %+v (the file's 10/8 wins)", eff.Routes, want)
	}
	if len(cfg.Interface("wan").Addresses) != 0 || len(cfg.Routes) != 1 {
		t.Errorf("WithLeases changed its input")
	}
}

func TestQueueKeepsNewest(t *testing.T) {
	q := NewQueue()
	a, b := &Lease{MTU: 1}, &Lease{MTU: 2}
	q.Post("wan", Change{Lease: a})
	q.Post("wan", Change{Lease: b})
	q.Post("wan2", Change{})
	<-q.Kick
	got := q.Take()
	if len(got) != 2 || got["wan"].Lease != b || got["wan2"].Lease != nil {
		t.Errorf("Take() = %+v", got)
	}
	if len(q.Take()) != 0 {
		t.Errorf("Take() twice returned changes")
	}
}

// TestWithLeasesPPPoE: a PPPoE session's IPCP result is a lease of its
// interface like a DHCP one (fails on main before stage 3: only
// interfaces with a DHCP client took leases), and DropStale keeps it
// while the interface runs PPPoE.
func TestWithLeasesPPPoE(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte(`ports: [{name: eth0}]
interfaces:
  - {name: wan, port: eth0, role: wan, addresses: [203.0.113.2/24]}
`))
	if err != nil {
		t.Fatal(err)
	}
	wanIfc := cfg.Interface("wan")
	wanIfc.Addresses, wanIfc.PPPoE = nil, &config.PPPoE{User: "u"}
	l := &Lease{
		Addr:   netip.MustParsePrefix("100.64.7.9/32"),
		MTU:    1492,
		DNS:    []netip.Addr{netip.MustParseAddr("100.64.0.53")},
		Routes: []config.Route{{To: netip.MustParsePrefix("0.0.0.0/0"), Via: netip.MustParseAddr("100.64.0.1")}},
		// IPv6CP's interface identifier
		LinkLocal: netip.MustParsePrefix("fe80::1c2d:3e4f:5a6b:7c8d/64"),
	}
	var s State
	s.TakeLease("wan", l)
	s.DropStale(cfg)
	eff := s.Effective(cfg, func(string) int { return 1500 })
	wan := eff.Interface("wan")
	if len(wan.Addresses) != 2 || wan.Addresses[0] != l.Addr || wan.Addresses[1] != l.LinkLocal || wan.MTU != 1492 {
		t.Errorf("wan = addresses %v, mtu %d; want [%v %v], 1492", wan.Addresses, wan.MTU, l.Addr, l.LinkLocal)
	}
	l2 := *l
	l2.LinkLocal = netip.MustParsePrefix("fe80::2/64")
	if l.Equal(&l2) || !s.TakeLease("wan", &l2) || !s.TakeLease("wan", l) {
		t.Errorf("a lease with another link-local address is Equal or not taken as a change")
	}
	if len(eff.Routes) != 1 || eff.Routes[0].Dev != "wan" || eff.Routes[0].Via != l.Routes[0].Via {
		t.Errorf("routes = %+v, want the default via 100.64.0.1 dev wan", eff.Routes)
	}
	if got := s.DNS(); len(got) != 1 || got[0] != l.DNS[0] {
		t.Errorf("DNS() = %v, want %v", got, l.DNS)
	}
	wanIfc.PPPoE = nil
	s.DropStale(cfg)
	if got := s.Effective(cfg, nil).Interface("wan"); len(got.Addresses) != 0 {
		t.Errorf("lease kept after pppoe was removed: %v", got.Addresses)
	}
}
