package natengine

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// narrowPorts leaves SNAT only ports 5000-5002 of the high range (through
// Rules.Reserved, which keeps working beside reservations), so a test can
// force it onto a given port.
func narrowPorts(r *Rules) {
	r.Reserved = func(proto uint8, a netip.Addr, port uint16) bool { return port > 1023 && (port < 5000 || port > 5002) }
}

// TestReservePortCollision forces the collision between SNAT and the
// router's own sockets with SNAT narrowed to ports 5000-5002: (a) a port
// SNAT already mapped cannot be reserved (ErrPortInUse, counted); (b)
// once 5001 is reserved, new flows never get it: a flow from port 5001
// takes the one port left, the next fails as "no_port"; (c) released, the
// port is allocated again.
func TestReservePortCollision(t *testing.T) {
	e, _ := newTestEngine(t, 0, narrowPorts)
	if p := outboundUDP(t, e, hostA, 5000, remote, 53); p != 5000 {
		t.Fatalf("host A's flow mapped to %d, want 5000", p)
	}

	// (a)
	release, err := e.ReservePort(ProtoUDP, wanAddr, 5000)
	if !errors.Is(err, ErrPortInUse) || release != nil {
		t.Fatalf("ReservePort(udp, %s, 5000) = %v, want ErrPortInUse", wanAddr, err)
	}
	if !strings.Contains(err.Error(), "192.168.1.10:5000") {
		t.Errorf("ReservePort error %q does not name the mapping's internal endpoint", err)
	}
	if _, err := e.ReservePortAny(ProtoUDP, 5000); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("ReservePortAny(udp, 5000) = %v, want ErrPortInUse", err)
	}
	if n := e.Stats().ReserveRefused.Load(); n != 2 {
		t.Fatalf("ReserveRefused = %d, want 2", n)
	}
	// Another protocol's port 5000 is free.
	relTCP, err := e.ReservePort(ProtoTCP, wanAddr, 5000)
	if err != nil {
		t.Fatalf("ReservePort(tcp, %s, 5000) = %v, want nil", wanAddr, err)
	}
	relTCP()

	// (b)
	release, err = e.ReservePort(ProtoUDP, wanAddr, 5001)
	if err != nil {
		t.Fatalf("ReservePort(udp, %s, 5001) = %v", wanAddr, err)
	}
	if p := outboundUDP(t, e, hostB, 5001, remote, 53); p != 5002 {
		t.Fatalf("flow from port 5001 mapped to %d, want 5002 (5001 is reserved)", p)
	}
	pkt := pk{src: netip.MustParseAddr("192.168.1.30"), dst: remote, proto: ProtoUDP, sport: 5001, dport: 53}.build()
	if v := fwd(t, e, pkt, lanIf, wanIf); v != Drop {
		t.Fatalf("third flow with ports 5000-5002 taken or reserved: %v, want Drop", v)
	}
	if n := e.Stats().Drop(DropNoPort); n != 1 {
		t.Fatalf("no_port = %d, want 1", n)
	}
	for _, m := range e.Mappings() {
		if m.External.Port() == 5001 {
			t.Fatalf("mapping %+v on the reserved port", m)
		}
	}

	// (c)
	release()
	release() // only the first call counts
	// From a port SNAT cannot preserve: the search that failed a moment
	// ago is not trusted once a reservation was released.
	if p := outboundUDP(t, e, netip.MustParseAddr("192.168.1.30"), 6000, remote, 53); p != 5001 {
		t.Fatalf("after release a flow from 6000 mapped to %d, want 5001", p)
	}
	if len(e.nat.resv) != 0 {
		t.Fatalf("reservations left after release: %v", e.nat.resv)
	}
}

// TestReservePortCounted: reservations of one port add up (two WAN DHCP
// clients both reserve 68); the port stays reserved until the last is
// released, and a second call of one release does not undo the other.
func TestReservePortCounted(t *testing.T) {
	e, _ := newTestEngine(t, 0, narrowPorts)
	r1, err := e.ReservePort(ProtoUDP, wanAddr, 5001)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.ReservePort(ProtoUDP, wanAddr, 5001)
	if err != nil {
		t.Fatalf("second ReservePort of one port = %v, want nil", err)
	}
	r1()
	r1()
	if p := outboundUDP(t, e, hostA, 5001, remote, 53); p == 5001 {
		t.Fatal("mapped onto a port still reserved once")
	}
	r2()
	if p := outboundUDP(t, e, hostB, 5001, remote, 53); p != 5001 {
		t.Fatalf("after the last release mapped to %d, want 5001", p)
	}
}

// TestReservePortAnyFollowsAddress: a port reserved on every address (a
// DNS forwarder's query port, the DHCP client's 68) stays out of SNAT's
// reach after the WAN address changes (a new DHCP lease), until released.
func TestReservePortAnyFollowsAddress(t *testing.T) {
	e, _ := newTestEngine(t, 0, narrowPorts)
	release, err := e.ReservePortAny(ProtoUDP, 5001)
	if err != nil {
		t.Fatal(err)
	}
	if p := outboundUDP(t, e, hostA, 5001, remote, 53); p == 5001 {
		t.Fatal("mapped onto a port reserved on every address")
	}
	newWAN := netip.MustParseAddr("203.0.113.9")
	r := testRules()
	narrowPorts(&r)
	r.Ifaces[1].Addrs = []netip.Addr{newWAN, wan6}
	if err := e.SetRules(r); err != nil {
		t.Fatal(err)
	}
	pkt := pk{src: hostB, dst: remote, proto: ProtoUDP, sport: 5001, dport: 53}.build()
	if v := fwd(t, e, pkt, lanIf, wanIf); v != Accept {
		t.Fatalf("flow on the new address: %v", v)
	}
	if s, _ := addrs(pkt); s.Addr() != newWAN || s.Port() == 5001 {
		t.Fatalf("flow on the new address mapped to %s, want %s and not port 5001", s, newWAN)
	}
	release()
	pkt = pk{src: netip.MustParseAddr("192.168.1.30"), dst: remote, proto: ProtoUDP, sport: 5001, dport: 53}.build()
	if v := fwd(t, e, pkt, lanIf, wanIf); v != Accept {
		t.Fatalf("flow after release: %v", v)
	}
	if s, _ := addrs(pkt); s != ap(newWAN, 5001) {
		t.Fatalf("after release mapped to %s, want %s", s, ap(newWAN, 5001))
	}
	// Now that a mapping holds 5001 on the new address, every-address
	// reservations of it are refused, specific ones on another address not.
	if _, err := e.ReservePortAny(ProtoUDP, 5001); !errors.Is(err, ErrPortInUse) {
		t.Fatalf("ReservePortAny(udp, 5001) = %v, want ErrPortInUse", err)
	}
	rel, err := e.ReservePort(ProtoUDP, lanAddr, 5001)
	if err != nil {
		t.Fatalf("ReservePort(udp, %s, 5001) = %v, want nil", lanAddr, err)
	}
	rel()
}

// TestReservePortRefusals: port forwards are in use; bad arguments are
// ErrInvalidReservation; IPv6 (never translated) always succeeds; the
// router's own flows (PostroutingLocal) do not block a reservation, since
// they belong to the sockets that reserve.
func TestReservePortRefusals(t *testing.T) {
	e, _ := newTestEngine(t, 0, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoUDP, In: wanIf, FirstPort: 7000, LastPort: 7010, To: ap(hostB, 0)}}
	})
	if _, err := e.ReservePort(ProtoUDP, wanAddr, 7005); !errors.Is(err, ErrPortInUse) {
		t.Errorf("ReservePort on a forwarded port = %v, want ErrPortInUse", err)
	}
	if _, err := e.ReservePortAny(ProtoUDP, 7000); !errors.Is(err, ErrPortInUse) {
		t.Errorf("ReservePortAny on a forwarded port = %v, want ErrPortInUse", err)
	}
	for _, tc := range []struct {
		name  string
		proto uint8
		addr  netip.Addr
		port  uint16
	}{
		{"icmp", ProtoICMP, wanAddr, 1},
		{"port 0", ProtoUDP, wanAddr, 0},
		{"no address", ProtoUDP, netip.Addr{}, 68},
		{"unspecified", ProtoUDP, netip.IPv4Unspecified(), 68},
	} {
		if _, err := e.ReservePort(tc.proto, tc.addr, tc.port); !errors.Is(err, ErrInvalidReservation) {
			t.Errorf("%s: ReservePort(%d, %v, %d) = %v, want ErrInvalidReservation", tc.name, tc.proto, tc.addr, tc.port, err)
		}
	}
	if _, err := e.ReservePortAny(ProtoICMP, 1); !errors.Is(err, ErrInvalidReservation) {
		t.Errorf("ReservePortAny(icmp) = %v, want ErrInvalidReservation", err)
	}
	if rel, err := e.ReservePort(ProtoUDP, wan6, 546); err != nil {
		t.Errorf("ReservePort on IPv6 = %v, want nil", err)
	} else {
		rel()
	}
	own := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: 40000, dport: 53}.build()
	if v := e.PostroutingLocal(own, wanIf); v != Accept || e.Len() != 1 {
		t.Fatalf("router's own query: %v, %d flows, want Accept and 1", v, e.Len())
	}
	rel, err := e.ReservePort(ProtoUDP, wanAddr, 40000)
	if err != nil {
		t.Fatalf("ReservePort on the router's own flow's port = %v, want nil", err)
	}
	rel()
	if n := e.Stats().ReserveRefused.Load(); n != 2 {
		t.Errorf("ReserveRefused = %d, want 2 (the forwards)", n)
	}
}

// TestReservePortConcurrent reserves and releases ports from several
// goroutines while others open SNAT flows: no flow is ever mapped onto a
// port held reserved throughout, and every reservation is gone at the
// end. Run it with -race.
func TestReservePortConcurrent(t *testing.T) {
	e, _ := newTestEngine(t, 0, nil)
	held := map[uint16]bool{}
	for p := uint16(20000); p < 20064; p++ {
		rel, err := e.ReservePortAny(ProtoUDP, p)
		if err != nil {
			t.Fatal(err)
		}
		defer rel()
		held[p] = true
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() { // churn
			defer wg.Done()
			for i := range 500 {
				p := uint16(30000 + g*1000 + i)
				rel, err := e.ReservePort(ProtoUDP, wanAddr, p)
				if err != nil && !errors.Is(err, ErrPortInUse) {
					t.Error(err)
					return
				}
				if rel != nil {
					rel()
				}
			}
		}()
		go func() { // LAN flows from the held ports and the churned ones
			defer wg.Done()
			host := netip.AddrFrom4([4]byte{192, 168, 1, byte(100 + g)})
			for i := range 200 {
				sport := uint16(20000 + i%64)
				if i%2 == 1 {
					sport = uint16(30000 + g*1000 + i)
				}
				pkt := pk{src: host, dst: remote, proto: ProtoUDP, sport: sport, dport: 53}.build()
				if e.Prerouting(pkt, lanIf) == Accept {
					e.Postrouting(pkt, wanIf)
				}
			}
		}()
	}
	wg.Wait()
	for _, m := range e.Mappings() {
		if held[m.External.Port()] {
			t.Fatalf("mapping %+v on a port reserved throughout", m)
		}
	}
	e.nat.mu.Lock()
	left := len(e.nat.resv)
	e.nat.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d single-address reservations left after every release", left)
	}
}
