package dhcp4server

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

var (
	srvAddr   = netip.MustParseAddr("192.168.1.1")
	staticMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xaa}
	staticIP  = netip.MustParseAddr("192.168.1.10")
)

// testConfig is a /24 with a range of size addresses from .100, one
// static lease (staticMAC → .10 "nas") and a 1 h lease.
func testConfig(size int) Config {
	return Config{
		ServerAddr: srvAddr,
		Subnet:     netip.MustParsePrefix("192.168.1.0/24"),
		RangeStart: netip.MustParseAddr("192.168.1.100"),
		RangeEnd:   addrFrom32(u32(netip.MustParseAddr("192.168.1.100")) + uint32(size) - 1),
		LeaseTime:  time.Hour,
		Static:     []StaticLease{{MAC: staticMAC, Addr: staticIP, Hostname: "nas"}},
		Rand:       rand.New(rand.NewPCG(1, 2)),
	}
}

// newTestServer builds a server on cfg with a fake clock and the
// never-used search starting at the range's first address.
func newTestServer(t testing.TB, cfg Config) (*Server, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New()
	if cfg.Clock == nil {
		cfg.Clock = clk
	} else {
		clk = cfg.Clock.(*fakeclock.Clock)
	}
	s, err := New(cfg, nopTransport{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.cursor = 0
	return s, clk
}

func mac(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x10, 0, 0, byte(i >> 8), byte(i)} }

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// msg builds a client message from hw; the datagram is broadcast from
// 0.0.0.0:68 unless a modifier of the packet says otherwise.
func msg(typ dhcpv4.MessageType, hw net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	m, err := dhcpv4.New(append([]dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ), dhcpv4.WithHwAddr(hw),
		dhcpv4.WithTransactionID(dhcpv4.TransactionID{1, 2, 3, byte(typ)}),
	}, mods...)...)
	if err != nil {
		panic(err)
	}
	return m
}

func bcast(m *dhcpv4.DHCPv4) rawudp.Packet {
	return rawudp.Packet{
		Payload: m.ToBytes(),
		Src:     netip.MustParseAddrPort("0.0.0.0:68"),
		Dst:     netip.MustParseAddrPort("255.255.255.255:67"),
		SrcMAC:  m.ClientHWAddr, DstMAC: rawudp.Broadcast,
	}
}

// unicast is m sent from its ciaddr to the server, as in RENEWING.
func unicast(m *dhcpv4.DHCPv4) rawudp.Packet {
	p := bcast(m)
	p.Src = netip.AddrPortFrom(ip4(m.ClientIPAddr), 68)
	p.Dst = netip.AddrPortFrom(srvAddr, 67)
	return p
}

func withReq(a string) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(a)))
}

func withSID(a netip.Addr) dhcpv4.Modifier {
	return dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP(a.AsSlice())))
}

func withCI(a string) dhcpv4.Modifier { return dhcpv4.WithClientIP(net.ParseIP(a)) }

// exchange hands p to s as Run would, writing the lease file before an
// ACK, and returns the reply, if any.
func exchange(t testing.TB, s *Server, p rawudp.Packet) (*dhcpv4.DHCPv4, rawudp.Packet) {
	t.Helper()
	r := s.handle(p)
	if r.durable && s.cfg.LeaseFile != "" {
		if d, err := s.commitNow(); err != nil || d < r.gen {
			return nil, rawudp.Packet{}
		}
	}
	if !r.send {
		return nil, rawudp.Packet{}
	}
	s.send(r) // for the counters
	m, err := dhcpv4.FromBytes(r.reply.Payload)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	return m, r.reply
}

// dora runs DISCOVER, REQUEST for hw and returns the address acked.
func dora(t testing.TB, s *Server, hw net.HardwareAddr, mods ...dhcpv4.Modifier) netip.Addr {
	t.Helper()
	off, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeDiscover, hw, mods...)))
	if off == nil || off.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("DISCOVER from %v: reply %v, want OFFER", hw, off)
	}
	ack, _ := exchange(t, s, bcast(msg(dhcpv4.MessageTypeRequest, hw, append(mods,
		withReq(off.YourIPAddr.String()), withSID(srvAddr))...)))
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck {
		t.Fatalf("REQUEST from %v: reply %v, want ACK", hw, ack)
	}
	return ip4(ack.YourIPAddr)
}

func typeOf(m *dhcpv4.DHCPv4) string {
	if m == nil {
		return "none"
	}
	return m.MessageType().String()
}

// checkInvariants checks the table: every binding is where both maps say,
// and no address or client has two.
func checkInvariants(t testing.TB, s *Server) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for a, b := range s.byAddr {
		if b.addr != a {
			t.Fatalf("byAddr[%v] holds a binding for %v", a, b.addr)
		}
		if s.inPool(a) {
			n++
		}
		if b.static == nil && b.key != "" && s.byClient[b.key] != b {
			t.Fatalf("binding %v of client %q is not its byClient entry", a, b.key)
		}
	}
	for k, b := range s.byClient {
		if s.byAddr[b.addr] != b || b.key != k {
			t.Fatalf("byClient[%q] = %v is not byAddr's", k, b.addr)
		}
	}
	if n != s.inRange || n > s.size {
		t.Fatalf("inRange = %d, counted %d, range %d", s.inRange, n, s.size)
	}
}

// chanTransport is an in-memory Transport.
type chanTransport struct {
	in, out chan rawudp.Packet
}

func newChanTransport(n int) *chanTransport {
	return &chanTransport{in: make(chan rawudp.Packet, n), out: make(chan rawudp.Packet, n)}
}

func (c *chanTransport) Send(p rawudp.Packet) error {
	c.out <- p
	return nil
}

func (c *chanTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	select {
	case p := <-c.in:
		return p, nil
	case <-ctx.Done():
		return rawudp.Packet{}, ctx.Err()
	}
}

// nopTransport drops what is sent; exchange returns the replies.
type nopTransport struct{}

func (nopTransport) Send(rawudp.Packet) error { return nil }

func (nopTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	<-ctx.Done()
	return rawudp.Packet{}, ctx.Err()
}
