// Package portmaptest builds what the protocol servers' tests share: a
// NAT engine with a LAN and a WAN interface, a port mapping table on it
// and a clock the test moves.
package portmaptest

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
)

// The test topology: LAN interface 1 (192.168.1.0/24, the router at .1),
// WAN interface 2 (203.0.113.2).
const (
	LANIf natengine.Iface = 1
	WANIf natengine.Iface = 2
)

// Addresses of the test topology.
var (
	LANAddr = netip.MustParseAddr("192.168.1.1")
	LANNet  = netip.MustParsePrefix("192.168.1.0/24")
	WANAddr = netip.MustParseAddr("203.0.113.2")
	HostA   = netip.MustParseAddr("192.168.1.10")
	HostB   = netip.MustParseAddr("192.168.1.20")
	Remote  = netip.MustParseAddr("198.51.100.7")
	Start   = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
)

// Clock is a test clock: time moves when Add says. Safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// Engine returns a NAT engine with the test topology.
func Engine(tb testing.TB) *natengine.Engine { tb.Helper(); return EngineOn(tb, WANAddr) }

// EngineOn is Engine with wan as the WAN address.
func EngineOn(tb testing.TB, wan netip.Addr) *natengine.Engine {
	tb.Helper()
	e := natengine.New(natengine.Config{})
	err := e.SetRules(natengine.Rules{Ifaces: []natengine.IfaceConfig{
		{ID: LANIf, Name: "lan", Addrs: []netip.Addr{LANAddr}, Subnets: []netip.Prefix{LANNet}},
		{ID: WANIf, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wan}},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// Table returns a table with policy p on a new Engine, the engine and
// the table's clock (at Start).
func Table(tb testing.TB, p portmap.Policy) (*portmap.Table, *natengine.Engine, *Clock) {
	tb.Helper()
	return TableOn(tb, p, WANAddr)
}

// TableOn is Table with wan as the WAN address.
func TableOn(tb testing.TB, p portmap.Policy, wan netip.Addr) (*portmap.Table, *natengine.Engine, *Clock) {
	tb.Helper()
	e := EngineOn(tb, wan)
	clk := &Clock{now: Start}
	t, err := portmap.New(portmap.Config{Policy: p, NAT: e, WAN: WANIf, ExternalAddr: func() netip.Addr { return wan }, Now: clk.Now})
	if err != nil {
		tb.Fatal(err)
	}
	return t, e, clk
}

// Installed reports whether e has a port mapping of proto on ext to to.
func Installed(e *natengine.Engine, proto uint8, ext uint16, to netip.AddrPort) bool {
	for _, m := range e.PortMappings() {
		if m.Proto == proto && m.Port == ext && m.In == WANIf && m.To == to {
			return true
		}
	}
	return false
}

// UDPPacket builds an IPv4 UDP packet with valid checksums.
func UDPPacket(src netip.Addr, sport uint16, dst netip.Addr, dport uint16) []byte {
	b := make([]byte, 28+4)
	b[0], b[8], b[9] = 0x45, 64, natengine.ProtoUDP
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[10:], ^checksum.Checksum(b[:20], 0))
	u := b[20:]
	binary.BigEndian.PutUint16(u, sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], "ping")
	sum := checksum.Checksum(b[12:20], uint16(natengine.ProtoUDP))
	sum = checksum.Checksum(u, checksum.Combine(sum, uint16(len(u))))
	binary.BigEndian.PutUint16(u[6:], ^sum)
	return b
}
