package natengine

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// newLimitedEngine is newTestEngine with cfg's limits.
func newLimitedEngine(t testing.TB, cfg Config) (*Engine, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.NewAt(baseTime)
	var n atomic.Uint32
	cfg.TimeNow, cfg.Rand = clk.Now, func() uint32 { return n.Add(7919) }
	e := New(cfg)
	if err := e.SetRules(testRules()); err != nil {
		t.Fatalf("SetRules: %v", err)
	}
	return e, clk
}

// TestPerHostFlowLimit: an inside address holds at most MaxConnsPerHost
// flows; past it its new flows are refused and counted as host_flows,
// while another host's (IPv4 or IPv6) open as usual, and the host opens
// flows again once its old ones expire.
func TestPerHostFlowLimit(t *testing.T) {
	e, clk := newLimitedEngine(t, Config{MaxConns: 64, MaxConnsPerHost: 8})
	for i := range 8 {
		outboundUDP(t, e, hostA, uint16(20000+i), remote, 53)
	}
	for _, p := range [][]byte{
		pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 20100, dport: 53}.build(),
		pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 20101, dport: 443, flags: tcpSYN}.build(),
		pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 8, sport: 7}.build(),
	} {
		if v := e.Prerouting(p, lanIf); v != Drop {
			t.Fatalf("hostA's flow past its limit: %v, want Drop", v)
		}
	}
	if got := e.Stats().Drop(DropHostFlows); got != 3 {
		t.Fatalf("host_flows drops %d, want 3", got)
	}
	if e.Len() != 8 {
		t.Fatalf("table holds %d flows, want 8", e.Len())
	}
	// Packets of hostA's flows still pass, and other hosts open theirs.
	outboundUDP(t, e, hostA, 20000, remote, 53)
	outboundUDP(t, e, hostB, 20000, remote, 53)
	if v := fwd(t, e, pk{src: host6, dst: remote6, proto: ProtoUDP, sport: 1, dport: 53}.build(), lanIf, wanIf); v != Accept {
		t.Fatalf("IPv6 host's flow: %v", v)
	}
	if e.Len() != 10 {
		t.Fatalf("table holds %d flows, want 10", e.Len())
	}
	clk.Forward(3 * time.Minute) // past udp_unreplied
	if n := e.Sweep(); n != 10 {
		t.Fatalf("Sweep removed %d flows, want 10", n)
	}
	outboundUDP(t, e, hostA, 20100, remote, 53)
	if got := e.tab.hosts.n[hostKey{addrOf(hostA), false}]; got != 1 || len(e.tab.hosts.n) != 1 {
		t.Fatalf("host counts %v after the sweep and one new flow, want hostA at 1", e.tab.hosts.n)
	}
}

func addrOf(a netip.Addr) [16]byte { b, _ := fromAddr(a); return b }

// TestPerHostPortLimit: an inside address holds at most MaxPortsPerHost
// NAT mappings; a flow that needs one more is refused at postrouting
// (host_ports) and leaves no flow behind, while flows that reuse one of
// the host's mappings (endpoint-independent mapping, RFC 4787 REQ-1) and
// other hosts' new mappings go on; the ports the host does not hold stay
// free for the router's own sockets.
func TestPerHostPortLimit(t *testing.T) {
	e, _ := newLimitedEngine(t, Config{MaxConns: 64, MaxPortsPerHost: 4})
	var ext []uint16
	for i := range 4 {
		ext = append(ext, outboundUDP(t, e, hostA, uint16(30000+i), remote, 53))
	}
	p := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 30004, dport: 53}.build()
	if v := fwd(t, e, p, lanIf, wanIf); v != Drop {
		t.Fatalf("hostA's fifth mapping: %v, want Drop", v)
	}
	if got := e.Stats().Drop(DropHostPorts); got != 1 {
		t.Fatalf("host_ports drops %d, want 1", got)
	}
	if e.Len() != 4 || len(e.Mappings()) != 4 {
		t.Fatalf("%d flows, %d mappings after the refusal, want 4 and 4", e.Len(), len(e.Mappings()))
	}
	// The same inside port to another destination reuses its mapping.
	if got := outboundUDP(t, e, hostA, 30000, remote2, 123); got != ext[0] {
		t.Fatalf("hostA :30000 to a second destination got port %d, want its mapping's %d", got, ext[0])
	}
	outboundUDP(t, e, hostB, 30004, remote, 53)
	if release, err := e.ReservePortAny(ProtoUDP, 30005); err != nil {
		t.Fatalf("ReservePortAny(udp, 30005) = %v, want a free port", err)
	} else {
		release()
	}
	if _, err := e.ReservePortAny(ProtoUDP, ext[1]); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("ReservePortAny(udp, %d) of hostA's mapping = %v, want ErrPortInUse", ext[1], err)
	}
}

// TestRouterReserve: forwarded flows fill at most MaxConns-RouterReserve
// of the table, so with the forwarded share full of flows that may not
// be early-dropped the router's own flows still open, up to the whole
// table; a forwarded flow early-drops forwarded flows only, never the
// router's.
func TestRouterReserve(t *testing.T) {
	e, _ := newLimitedEngine(t, Config{MaxConns: 64, RouterReserve: 16})
	for i := range 48 {
		establishTCP(t, e, hostA, uint16(40000+i), remote, 443)
	}
	syn := pk{src: hostB, dst: remote, proto: ProtoTCP, sport: 41000, dport: 443, flags: tcpSYN}.build()
	if v := e.Prerouting(syn, lanIf); v != Drop {
		t.Fatalf("forwarded flow past the share: %v, want Drop", v)
	}
	if got := e.Stats().Drop(DropTableFull); got != 1 {
		t.Fatalf("table_full drops %d, want 1", got)
	}
	for i := range 16 {
		q := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: uint16(50000 + i), dport: 53}.build()
		if v := e.PostroutingLocal(q, wanIf); v != Accept {
			t.Fatalf("router's flow %d with the forwarded share full: %v", i, v)
		}
	}
	if e.Len() != 64 || e.RouterFlows() != 16 {
		t.Fatalf("table %d flows, %d the router's; want 64 and 16", e.Len(), e.RouterFlows())
	}
	// Forwarded flows that may be early-dropped never evict the router's.
	e, _ = newLimitedEngine(t, Config{MaxConns: 64, RouterReserve: 16})
	for i := range 16 {
		q := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: uint16(50000 + i), dport: 53}.build()
		if v := e.PostroutingLocal(q, wanIf); v != Accept {
			t.Fatalf("router's flow %d: %v", i, v)
		}
	}
	for i := range 2000 {
		p := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: uint16(1024 + i), dport: 53}.build()
		e.Prerouting(p, lanIf)
		e.Postrouting(p, wanIf)
	}
	if e.RouterFlows() != 16 || e.Len() > 64 || e.Len()-e.RouterFlows() > 48 {
		t.Fatalf("after a flood of forwarded flows: %d flows, %d the router's; want 16 of the router's and at most 48 others", e.Len(), e.RouterFlows())
	}
	if e.Stats().EarlyDropped.Load() == 0 {
		t.Fatalf("the flood early-dropped nothing")
	}
}
