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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pppoeLease(tt.st)
			if !got.Equal(tt.want) {
				t.Errorf("pppoeLease = %+v, want %+v", got, tt.want)
			}
			if diff := cmp.Diff(tt.link, dataLink(tt.st)); diff != "" {
				t.Errorf("dataLink (-want +got):\n%s", diff)
			}
		})
	}
}
