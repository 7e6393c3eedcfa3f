package svc

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/pppoe"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
)

func TestPPPoELease(t *testing.T) {
	local, peer, dns := netip.MustParseAddr("100.64.7.9"), netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("100.64.0.53")
	deflt := netip.MustParsePrefix("0.0.0.0/0")
	ll, peerLL := netip.MustParseAddr("fe80::1c2d:3e4f:5a6b:7c8d"), netip.MustParseAddr("fe80::aaaa:bbbb:cccc:dddd")
	tests := []struct {
		name string
		st   pppoe.Status
		want *learned.Lease
		link *pppoe.Link
	}{
		{"discovery", pppoe.Status{State: "discovery"}, nil, nil},
		{"up without IPCP", pppoe.Status{State: "up", SessionID: 7, ACMAC: "02:00:00:00:00:ac", MTU: 1492}, nil,
			&pppoe.Link{Peer: [6]byte{2, 0, 0, 0, 0, 0xac}, SessionID: 7}},
		{"up", pppoe.Status{State: "up", SessionID: 7, ACMAC: "02:00:00:00:00:ac", MTU: 1492,
			IPv4: &pppoe.IPv4Status{Local: local, Peer: peer, DNS: []netip.Addr{dns}}},
			&learned.Lease{Addr: netip.PrefixFrom(local, 32), MTU: 1492, DNS: []netip.Addr{dns},
				Routes: []config.Route{{To: deflt, Via: peer}}},
			&pppoe.Link{Peer: [6]byte{2, 0, 0, 0, 0, 0xac}, SessionID: 7}},
		{"up, no peer address", pppoe.Status{State: "up", SessionID: 7, ACMAC: "02:00:00:00:00:ac", MTU: 1480,
			IPv4: &pppoe.IPv4Status{Local: local}},
			&learned.Lease{Addr: netip.PrefixFrom(local, 32), MTU: 1480, DNS: []netip.Addr{},
				Routes: []config.Route{{To: deflt}}},
			&pppoe.Link{Peer: [6]byte{2, 0, 0, 0, 0, 0xac}, SessionID: 7}},
		{"backoff", pppoe.Status{State: "backoff", LastDownReason: "authentication failed"}, nil, nil},
		{"up with IPv6CP", pppoe.Status{State: "up", SessionID: 7, ACMAC: "02:00:00:00:00:ac", MTU: 1492,
			IPv4: &pppoe.IPv4Status{Local: local, Peer: peer}, IPv6: &pppoe.IPv6Status{Local: ll, Peer: peerLL}},
			&learned.Lease{Addr: netip.PrefixFrom(local, 32), MTU: 1492, LinkLocal: netip.PrefixFrom(ll, 64),
				Routes: []config.Route{{To: deflt, Via: peer}}},
			&pppoe.Link{Peer: [6]byte{2, 0, 0, 0, 0, 0xac}, SessionID: 7}},
		{"IPv6CP only, ra off", pppoe.Status{State: "up", SessionID: 7, ACMAC: "02:00:00:00:00:ac", MTU: 1492,
			IPv6: &pppoe.IPv6Status{Local: ll, Peer: peerLL}},
			&learned.Lease{MTU: 1492, LinkLocal: netip.PrefixFrom(ll, 64),
				Routes: []config.Route{{To: netip.MustParsePrefix("::/0"), Via: peerLL}}},
			&pppoe.Link{Peer: [6]byte{2, 0, 0, 0, 0, 0xac}, SessionID: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pppoeLease(tt.st, tt.name == "IPv6CP only, ra off")
			if !got.Equal(tt.want) {
				t.Errorf("pppoeLease = %+v, want %+v", got, tt.want)
			}
			if diff := cmp.Diff(tt.link, dataLink(tt.st)); diff != "" {
				t.Errorf("dataLink (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWANLinkLocalPPPoE: a PPPoE wan's RA learner and DHCPv6 client wait
// for IPv6CP's link-local address among the addresses in force and then
// speak from it, not from the MAC's EUI-64 address.
func TestWANLinkLocalPPPoE(t *testing.T) {
	ic := config.Interface{Name: "wan", Role: config.RoleWAN, PPPoE: &config.PPPoE{User: "u"},
		Addresses: []netip.Prefix{netip.MustParsePrefix("100.64.7.9/32")}}
	if a, ok := wanLinkLocal(ic, nil); ok {
		t.Errorf("wanLinkLocal before IPv6CP = %v, true; want false", a)
	}
	ll := netip.MustParseAddr("fe80::1c2d:3e4f:5a6b:7c8d")
	ic.Addresses = append(ic.Addresses, netip.PrefixFrom(ll, 64))
	if a, ok := wanLinkLocal(ic, nil); !ok || a != ll {
		t.Errorf("wanLinkLocal after IPv6CP = %v, %v; want %v, true", a, ok, ll)
	}
}
