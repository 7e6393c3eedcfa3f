package stack

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/stack/stacktest"
)

// newNATLab is the lab of router_test.go with a NAT engine: lan is inside,
// wan is the outside interface, masqueraded, with the given forwards.
func newNATLab(t *testing.T, forwards []natengine.Forward) (*lab, *natengine.Engine) {
	t.Helper()
	goroutineLeakCheck(t)
	a, err := stacktest.NewHost(stacktest.HostConfig{
		MAC:       aMAC,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.2/24"), netip.MustParsePrefix("fd00:1::2/64")},
		Gateways:  []netip.Addr{lanIP4, lanIP6},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stacktest.NewHost(stacktest.HostConfig{
		MAC:       bMAC,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.2/24"), netip.MustParsePrefix("fd00:2::2/64")},
		Gateways:  []netip.Addr{wanIP4, netip.MustParseAddr("fd00:2::1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{a: a, b: b, tapA: &stacktest.Tap{Next: a}, tapB: &stacktest.Tap{Next: b}}
	nat := natengine.New(natengine.Config{})
	cfg := l.config()
	cfg.NAT = nat
	l.r, err = New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lanID, _ := l.r.NATIface("lan")
	wanID, _ := l.r.NATIface("wan")
	for i := range forwards {
		forwards[i].In = wanID
	}
	err = nat.SetRules(natengine.Rules{
		Ifaces: []natengine.IfaceConfig{
			{ID: lanID, Name: "lan", Addrs: []netip.Addr{lanIP4, lanIP6}, MTU: 1500},
			{ID: wanID, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanIP4, netip.MustParseAddr("fd00:2::1")}, MTU: 1500},
		},
		Forwards: forwards,
		Hairpin:  true,
	})
	if err != nil {
		t.Fatalf("SetRules: %v", err)
	}
	a.Start(l.r.Interface("lan").HandleBatch)
	b.Start(l.r.Interface("wan").HandleBatch)
	t.Cleanup(func() {
		a.Close()
		b.Close()
		l.r.Close()
	})
	return l, nat
}

// remoteServer accepts one connection at a time on h, reports each peer's
// address on the returned channel and echoes its data.
func remoteServer(t *testing.T, h *stacktest.Host, at netip.AddrPort) <-chan netip.AddrPort {
	t.Helper()
	ln, err := gonet.ListenTCP(h.Stack, tcpip.FullAddress{Addr: tcpip.AddrFromSlice(at.Addr().AsSlice()), Port: at.Port()}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("listen %s: %v", at, err)
	}
	t.Cleanup(func() { ln.Close() })
	peers := make(chan netip.AddrPort, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			peers <- netip.MustParseAddrPort(c.RemoteAddr().String())
			go func(c net.Conn) {
				defer c.Close()
				io.Copy(c, c)
			}(c)
		}
	}()
	return peers
}

func peer(t *testing.T, peers <-chan netip.AddrPort) netip.AddrPort {
	t.Helper()
	select {
	case p := <-peers:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("server saw no connection")
		return netip.AddrPort{}
	}
}

// TestNATMasqueradeFastPath: a LAN host's connection reaches the WAN host
// from the router's WAN address, and once assured its packets take the
// fast path: the engine's hit counter rises while netstack receives
// almost nothing of the second transfer.
func TestNATMasqueradeFastPath(t *testing.T) {
	l, nat := newNATLab(t, nil)
	peers := remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5001))
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5001))
	exchange(t, c, 64<<10)
	if got := peer(t, peers); got.Addr() != wanIP4 {
		t.Fatalf("WAN host saw the connection from %s, want the router's WAN address %s", got, wanIP4)
	}

	hits0 := nat.Stats().FastPathHits.Load()
	rx0 := l.r.Stack().Stats().IP.PacketsReceived.Value()
	exchange(t, c, 4<<20)
	hits := nat.Stats().FastPathHits.Load() - hits0
	rx := l.r.Stack().Stats().IP.PacketsReceived.Value() - rx0
	t.Logf("second transfer: %d fast-path packets, %d packets into netstack", hits, rx)
	if hits < 1000 {
		t.Errorf("fast path forwarded %d packets of a 4 MiB echo, want >= 1000", hits)
	}
	if rx*10 > hits {
		t.Errorf("netstack received %d packets while the fast path forwarded %d: the flow is not offloaded", rx, hits)
	}
	if n := nat.Stats().Offloaded.Load(); n < 2 {
		t.Errorf("offloaded %d flow directions, want both", n)
	}
}

// TestNATPortForward: the WAN host reaches a LAN server through a port
// forward on the WAN address, and the server sees the WAN host's own
// address (DNAT only).
func TestNATPortForward(t *testing.T) {
	l, _ := newNATLab(t, []natengine.Forward{{Proto: natengine.ProtoTCP, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(aIP4, 80)}})
	peers := remoteServer(t, l.a, netip.AddrPortFrom(aIP4, 80))
	exchange(t, dial(t, l.b, netip.AddrPortFrom(wanIP4, 8080)), 256<<10)
	if got := peer(t, peers); got.Addr() != bIP4 {
		t.Fatalf("LAN server saw %s, want the WAN host %s", got, bIP4)
	}
	// Hairpin: the LAN host reaches its own server through the WAN
	// address; the server then sees the router (so replies come back
	// through it).
	exchange(t, dial(t, l.a, netip.AddrPortFrom(wanIP4, 8080)), 64<<10)
	if got := peer(t, peers); got.Addr() != lanIP4 && got.Addr() != wanIP4 {
		t.Fatalf("hairpinned connection came from %s, want a router address", got)
	}
}

// TestNATUnsolicitedInboundDropped: with the WAN role, a new connection
// from the WAN host to a LAN host is dropped and counted.
func TestNATUnsolicitedInboundDropped(t *testing.T) {
	l, nat := newNATLab(t, nil)
	remoteServer(t, l.a, netip.AddrPortFrom(aIP4, 5002))
	ctx := ctxTimeout(t, time.Second)
	c, err := gonet.DialContextTCP(ctx, l.b.Stack, tcpip.FullAddress{Addr: tcpip.AddrFromSlice(aIP4.AsSlice()), Port: 5002}, ipv4.ProtocolNumber)
	if err == nil {
		c.Close()
		t.Fatal("WAN host connected to a LAN host without a forward")
	}
	if n := nat.Stats().Drop(natengine.DropUnsolicited); n == 0 {
		t.Error("no unsolicited drop counted")
	}
	if n := l.r.Interface("wan").Stats().Drops["nat"]; n == 0 {
		t.Error(`wan interface shows no "nat" drop`)
	}
}

// TestNATPingThroughRouter: ICMP echo is tracked by identifier and
// masqueraded; pings to the router itself still work.
func TestNATPingThroughRouter(t *testing.T) {
	l, _ := newNATLab(t, nil)
	ping(t, l.a, bIP4)
	ping(t, l.a, lanIP4)
	ping(t, l.a, wanIP4)
	ping(t, l.b, wanIP4)
	ping(t, l.a, bIP6)
}
