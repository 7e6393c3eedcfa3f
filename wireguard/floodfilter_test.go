package wireguard

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestFloodFilter: a source is dropped only after a cookie reply to
// it, for floodQuiet after that or after its last drop; another port
// of the same address, and a v4-mapped form of another source, are not
// it.
func TestFloodFilter(t *testing.T) {
	flooder := netip.MustParseAddrPort("192.0.2.7:40000")
	peer := netip.MustParseAddrPort("192.0.2.7:51820") // behind the same NAT
	mapped := netip.MustParseAddrPort("[::ffff:192.0.2.7]:40000")
	f := newFloodFilter()
	steps := []struct {
		name   string
		cookie bool // a cookie reply to from at at, instead of a message from it
		from   netip.AddrPort
		at     time.Duration
		want   bool // dropped
	}{
		{name: "before any cookie reply", from: flooder, at: 0, want: false},
		{name: "cookie reply", cookie: true, from: flooder, at: 100 * time.Millisecond},
		{name: "within the quiet time", from: flooder, at: 600 * time.Millisecond, want: true},
		{name: "v4-mapped form of it", from: mapped, at: 700 * time.Millisecond, want: true},
		{name: "another port of the same address", from: peer, at: 700 * time.Millisecond, want: false},
		{name: "a drop restarted the quiet time", from: flooder, at: 1600 * time.Millisecond, want: true},
		{name: "quiet for floodQuiet", from: flooder, at: 2700 * time.Millisecond, want: false},
		{name: "still let through", from: flooder, at: 2701 * time.Millisecond, want: false},
		{name: "a peer's cookie reply", cookie: true, from: peer, at: 3 * time.Second},
		{name: "its retry after REKEY_TIMEOUT", from: peer, at: 8 * time.Second, want: false},
	}
	for _, s := range steps {
		if s.cookie {
			f.cookieReplySent(s.from, s.at)
			continue
		}
		if got := f.drop(s.from, s.at); got != s.want {
			t.Errorf("%s: drop(%v, %v) = %v, want %v", s.name, s.from, s.at, got, s.want)
		}
	}
}

// TestFloodFilterSlotOwner: a source whose slot another source took
// over is no longer dropped, and never is for the other's cookie reply.
func TestFloodFilterSlotOwner(t *testing.T) {
	f := newFloodFilter()
	a := netip.MustParseAddrPort("198.51.100.1:1")
	k := f.key(a)
	var b netip.AddrPort
	for port := 2; ; port++ { // another source in a's slot
		b = netip.AddrPortFrom(a.Addr(), uint16(port))
		if kb := f.key(b); kb != k && kb&(floodTableSize-1) == k&(floodTableSize-1) {
			break
		}
		if port == 1<<16-1 {
			t.Fatal("no port of a's address shares its slot")
		}
	}
	f.cookieReplySent(a, 0)
	if f.drop(b, time.Millisecond) {
		t.Errorf("drop(%v) after a cookie reply to %v, which shares its slot = true, want false", b, a)
	}
	f.cookieReplySent(b, 2*time.Millisecond)
	if f.drop(a, 3*time.Millisecond) {
		t.Errorf("drop(%v) after %v took its slot = true, want false", a, b)
	}
	if !f.drop(b, 4*time.Millisecond) {
		t.Errorf("drop(%v) after a cookie reply to it = false, want true", b)
	}
}

// scriptConn returns its datagrams in turn, over and over.
type scriptConn struct {
	dgrams []scripted
	i      int
}

type scripted struct {
	p    []byte
	from netip.AddrPort
}

func (c *scriptConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	d := c.dgrams[c.i%len(c.dgrams)]
	c.i++
	return copy(b, d.p), d.from, nil
}
func (c *scriptConn) WriteToUDPAddrPort(b []byte, _ netip.AddrPort) (int, error) { return len(b), nil }
func (c *scriptConn) LocalAddr() net.Addr                                        { return &net.UDPAddr{Port: 51820} }
func (c *scriptConn) Close() error                                               { return nil }

// floodScript is a Bind on a scriptConn that gives, in turn, an
// initiation from flooder and a transport packet from flooder, and the
// flooder's Endpoint.
func floodScript(t testing.TB, flooder netip.AddrPort) (*Bind, *scriptConn, func() (int, []int), *Endpoint) {
	init := make([]byte, sizeInitiation)
	init[0] = msgInitiation
	transport := make([]byte, 100)
	transport[0] = msgTransport
	sc := &scriptConn{dgrams: []scripted{{init, flooder}, {transport, flooder}}}
	b, fns := openUDP4Bind(t, sc)
	bufs, sizes, eps := [][]byte{make([]byte, 1500)}, make([]int, 1), make([]connEndpoint, 1)
	recv := func() (int, []int) {
		n, err := fns[0](bufs, sizes, eps)
		if err != nil {
			t.Fatal(err)
		}
		return n, sizes[:n]
	}
	ep, err := b.ParseEndpoint(flooder.String())
	if err != nil {
		t.Fatal(err)
	}
	return b, sc, recv, ep.(*Endpoint)
}

// TestBindDropsHandshakeFlood: after the device sent a source a cookie
// reply, the Bind drops that source's initiations and counts them
// (drops/handshake_flood, as the status page names it), and still
// hands the device its transport packets.
func TestBindDropsHandshakeFlood(t *testing.T) {
	flooder := netip.MustParseAddrPort("192.0.2.7:40000")
	b, _, recv, ep := floodScript(t, flooder)
	if n, sizes := recv(); n != 1 || sizes[0] != sizeInitiation {
		t.Fatalf("receive before any cookie reply = %d datagrams of sizes %v, want the initiation", n, sizes)
	}
	recv() // the transport packet
	cookie := make([]byte, sizeCookieReply)
	cookie[0] = msgCookieReply
	if err := b.Send([][]byte{cookie}, ep); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n, sizes := recv(); n != 1 || sizes[0] != 100 {
			t.Fatalf("receive after a cookie reply = %d datagrams of sizes %v, want the transport packet alone", n, sizes)
		}
	}
	if got := b.Stats.RxHandshakeFlood.Load(); got != 3 {
		t.Errorf("RxHandshakeFlood = %d after 3 initiations from a source sent a cookie reply, want 3", got)
	}
	if got := b.Stats.RxInitiations.Load(); got != 1 {
		t.Errorf("RxInitiations = %d, want 1 (the one before the cookie reply)", got)
	}
	if got := (Stats{Bind: &b.Stats}).Counters()["drops"]["handshake_flood"]; got != 3 {
		t.Errorf("Counters()[drops][handshake_flood] = %d, want 3", got)
	}
}
