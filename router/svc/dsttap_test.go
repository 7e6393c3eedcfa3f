package svc

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

type nullLink struct{}

func (nullLink) WriteFrame([]byte) error        { return nil }
func (nullLink) HardwareAddr() net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, 1} }

// TestDstTap checks that one dstTap reads the destination of IPv4 and
// IPv6 frames alike, passes on only what accept allows, and refuses
// frames too short for their IP header.
func TestDstTap(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	own4, other4 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.9")
	own6, other6 := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::9")
	src4, src6 := netip.MustParseAddrPort("192.0.2.50:68"), netip.MustParseAddrPort("[fe80::50]:546")
	accept := func(dst netip.Addr) bool { return dst == own4 || dst == own6 }
	v4 := dstTap{conn: rawudp.New(nullLink{}, 67, 4), accept: accept}
	v6 := dstTap{conn: rawudp.New6(nullLink{}, 547, 4), accept: accept}
	to4 := func(dst netip.Addr) []byte {
		return rawudp.Build(mac, mac, src4, netip.AddrPortFrom(dst, 67), 1, []byte("x"))
	}
	to6 := func(dst netip.Addr) []byte {
		return rawudp.Build6(mac, mac, src6, netip.AddrPortFrom(dst, 547), []byte("x"))
	}
	for _, tc := range []struct {
		name  string
		tap   dstTap
		frame []byte
		want  bool
	}{
		{"IPv4 to own", v4, to4(own4), true},
		{"IPv4 to other", v4, to4(other4), false},
		{"IPv4 short", v4, to4(own4)[:14+19], false},
		{"IPv6 to own", v6, to6(own6), true},
		{"IPv6 to other", v6, to6(other6), false},
		{"IPv6 short", v6, to6(own6)[:14+39], false},
		{"no EtherType", v4, make([]byte, 13), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tap.Deliver(tc.frame); got != tc.want {
				t.Errorf("Deliver() = %v, want %v", got, tc.want)
			}
		})
	}
}
