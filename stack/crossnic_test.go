package stack

import (
	"net/netip"
	"testing"
)

// TestAnswerToInsideHostFromWANAddress: a LAN host that pings or
// connects to the router's wan address is answered on the lan, as Linux
// routes an answer by its destination, even with a default route on the
// wan. Netstack alone prefers a route by the interface that holds the
// source address and sent these answers to the wan gateway (host B).
func TestAnswerToInsideHostFromWANAddress(t *testing.T) {
	wanIP6 := netip.MustParseAddr("fd00:2::1")
	l := newLabRoutes(t, nil, nil, []RouteConfig{
		{To: netip.MustParsePrefix("0.0.0.0/0"), Via: bIP4, Dev: "wan"},
		{To: netip.MustParsePrefix("::/0"), Via: bIP6, Dev: "wan"},
	})
	t.Run("ping v4", func(t *testing.T) { ping(t, l.a, wanIP4) })
	t.Run("ping v6", func(t *testing.T) { ping(t, l.a, wanIP6) })
	t.Run("tcp v4", func(t *testing.T) {
		ln, err := l.r.ListenTCP(netip.AddrPortFrom(wanIP4, 8081))
		if err != nil {
			t.Fatal(err)
		}
		echoServer(t, ln)
		exchange(t, dial(t, l.a, netip.AddrPortFrom(wanIP4, 8081)), 64<<10)
	})
	t.Run("tcp v6", func(t *testing.T) {
		ln, err := l.r.ListenTCP(netip.AddrPortFrom(wanIP6, 8082))
		if err != nil {
			t.Fatal(err)
		}
		echoServer(t, ln)
		exchange(t, dial(t, l.a, netip.AddrPortFrom(wanIP6, 8082)), 1000)
	})
	// The router's own traffic to the wan side still leaves by the wan.
	t.Run("ping b", func(t *testing.T) { ping(t, l.b, wanIP4) })
}
