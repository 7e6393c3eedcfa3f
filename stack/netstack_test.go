package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/stack/stacktest"
)

var (
	lanMAC = mustMAC("02:00:00:00:00:01")
	wanMAC = mustMAC("02:00:00:00:00:02")
	aMAC   = mustMAC("02:00:00:00:00:0a")
	bMAC   = mustMAC("02:00:00:00:00:0b")

	lanIP4 = netip.MustParseAddr("10.1.0.1")
	wanIP4 = netip.MustParseAddr("10.2.0.1")
	aIP4   = netip.MustParseAddr("10.1.0.2")
	bIP4   = netip.MustParseAddr("10.2.0.2")
	lanIP6 = netip.MustParseAddr("fd00:1::1")
	aIP6   = netip.MustParseAddr("fd00:1::2")
	bIP6   = netip.MustParseAddr("fd00:2::2")
)

// lab is host A — router (lan, wan) — host B. tapA and tapB see every
// frame the router sends to A and B.
type lab struct {
	r          *Netstack
	a, b       *stacktest.Host
	tapA, tapB *stacktest.Tap
	routes     []RouteConfig // the router's static routes, if any
}

func (l *lab) config() Config {
	return Config{
		Interfaces: []InterfaceConfig{
			{Name: "lan", MAC: lanMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/24"), netip.MustParsePrefix("fd00:1::1/64")}, Writer: l.tapA},
			{Name: "wan", MAC: wanMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.1/24"), netip.MustParsePrefix("fd00:2::1/64")}, Writer: l.tapB},
		},
		Routes: l.routes,
	}
}

// goroutineLeakCheck fails t if goroutines started during the test are
// still running a second after its cleanups (wireguard-go
// device/device_test.go). Register it first so it runs last.
func goroutineLeakCheck(t testing.TB) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(labTimeout(time.Second))
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if after := runtime.NumGoroutine(); after > before {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines leaked:\n%s", after-before, buf[:runtime.Stack(buf, true)])
		}
	})
}

func newLab(t *testing.T) *lab { return newLabWith(t, nil, nil) }

// newLabWith is newLab with a NAT engine (nil for none; the caller sets
// its rules) and, if wrapLAN is not nil, a wrapper around the handler host
// A delivers its frames to.
func newLabWith(t testing.TB, nat *natengine.Engine, wrapLAN func(hw.BatchHandler) hw.BatchHandler) *lab {
	t.Helper()
	return newLabRoutes(t, nat, wrapLAN, nil)
}

// newLabRoutes is newLabWith with the router's static routes.
func newLabRoutes(t testing.TB, nat *natengine.Engine, wrapLAN func(hw.BatchHandler) hw.BatchHandler, routes []RouteConfig) *lab {
	t.Helper()
	if _, fuzzing := t.(*testing.F); !fuzzing {
		// The fuzzing engine's own goroutines outlive the cleanups.
		goroutineLeakCheck(t)
	}
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
	l := &lab{a: a, b: b, tapA: &stacktest.Tap{Next: a}, tapB: &stacktest.Tap{Next: b}, routes: routes}
	cfg := l.config()
	cfg.NAT = nat
	l.r, err = New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	lanRx := hw.BatchHandler(l.r.Interface("lan").HandleBatch)
	if wrapLAN != nil {
		lanRx = wrapLAN(lanRx)
	}
	a.Start(lanRx)
	b.Start(l.r.Interface("wan").HandleBatch)
	t.Cleanup(func() {
		a.Close()
		b.Close()
		l.r.Close()
	})
	return l
}

// labSlowdown stretches the lab helpers' timeouts for runs on a CPU far
// slower than this one: scripts/armproj.sh runs the benchmarks under
// qemu-arm with a trace line per instruction, some 500 times slower than
// native, where a 5 s dial timeout expires before the handshake is done.
var labSlowdown = flag.Int("stack.slowdown", 1, "multiply the lab helpers' timeouts by this factor (for runs under an instruction tracer)")

// labTimeout is d stretched by -stack.slowdown.
func labTimeout(d time.Duration) time.Duration { return d * time.Duration(*labSlowdown) }

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), labTimeout(d))
	t.Cleanup(cancel)
	return ctx
}

func ping(t *testing.T, h *stacktest.Host, dst netip.Addr) {
	t.Helper()
	payload := []byte("gvrouter ping " + dst.String())
	got, err := h.Ping(ctxTimeout(t, 5*time.Second), dst, payload)
	if err != nil {
		t.Fatalf("ping %s: %v", dst, err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("ping %s: reply payload %q, want %q", dst, got, payload)
	}
}

func TestPingThroughRouter(t *testing.T) {
	l := newLab(t)
	for _, tt := range []struct {
		name string
		from *stacktest.Host
		to   netip.Addr
	}{
		{"a to b", l.a, bIP4},
		{"b to a", l.b, aIP4},
		{"a to b ipv6", l.a, bIP6},
		{"b to a ipv6", l.b, aIP6},
		{"a to router lan", l.a, lanIP4},
		{"a to router wan", l.a, wanIP4},
		{"a to router ipv6", l.a, lanIP6},
	} {
		t.Run(tt.name, func(t *testing.T) { ping(t, tt.from, tt.to) })
	}
	if s := l.r.Interface("lan").Stats(); s.RxPackets == 0 || s.TxPackets == 0 || s.RxBytes == 0 || s.TxBytes == 0 {
		t.Errorf("lan stats = %+v, want non-zero rx and tx", s)
	}
}

// echoServer accepts connections on ln and echoes everything back.
func echoServer(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
}

// exchange sends n bytes over c and checks they come back.
func exchange(t testing.TB, c net.Conn, n int) {
	t.Helper()
	// A guard against a hang, not a speed check: a 4 MiB echo under -race
	// took past 10 s beside a busy machine's other tests (load 12-16 on 2
	// cores).
	c.SetDeadline(time.Now().Add(labTimeout(30 * time.Second)))
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(want)
		errc <- err
	}()
	got := make([]byte, n)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("echoed data differs")
	}
}

func dial(t testing.TB, h *stacktest.Host, dst netip.AddrPort) net.Conn {
	t.Helper()
	proto := ipv4.ProtocolNumber
	if dst.Addr().Is6() {
		proto = ipv6.ProtocolNumber
	}
	c, err := gonet.DialContextTCP(ctxTimeout(t, 5*time.Second), h.Stack, tcpip.FullAddress{Addr: tcpip.AddrFromSlice(dst.Addr().AsSlice()), Port: dst.Port()}, proto)
	if err != nil {
		t.Fatalf("dial %s: %v", dst, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func listen(t *testing.T, h *stacktest.Host, at netip.AddrPort) {
	t.Helper()
	proto := ipv4.ProtocolNumber
	if at.Addr().Is6() {
		proto = ipv6.ProtocolNumber
	}
	ln, err := gonet.ListenTCP(h.Stack, tcpip.FullAddress{Addr: tcpip.AddrFromSlice(at.Addr().AsSlice()), Port: at.Port()}, proto)
	if err != nil {
		t.Fatalf("listen %s: %v", at, err)
	}
	echoServer(t, ln)
}

func TestTCPThroughRouter(t *testing.T) {
	l := newLab(t)
	for _, tt := range []struct {
		name     string
		from, to *stacktest.Host
		addr     netip.AddrPort
	}{
		{"a to b", l.a, l.b, netip.AddrPortFrom(bIP4, 5001)},
		{"b to a", l.b, l.a, netip.AddrPortFrom(aIP4, 5002)},
		{"a to b ipv6", l.a, l.b, netip.AddrPortFrom(bIP6, 5003)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			listen(t, tt.to, tt.addr)
			exchange(t, dial(t, tt.from, tt.addr), 256<<10)
		})
	}
}

func TestListenTCP(t *testing.T) {
	l := newLab(t)
	ln, err := l.r.ListenTCP(netip.AddrPortFrom(lanIP4, 80))
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	exchange(t, dial(t, l.a, netip.AddrPortFrom(lanIP4, 80)), 64<<10)

	ln6, err := l.r.ListenTCP(netip.MustParseAddrPort("[::]:8080"))
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln6)
	exchange(t, dial(t, l.b, netip.AddrPortFrom(lanIP6, 8080)), 1000)
}

// inject sends frame to the router's lan interface as if host A sent it.
func (l *lab) inject(frame []byte) {
	l.r.Interface("lan").HandleBatch(0, []hw.Frame{{Data: frame, WireLen: len(frame)}})
}

// icmpFrom matches an IPv4 ICMP frame of type typ sent by src.
func icmpFrom(src netip.Addr, typ header.ICMPv4Type) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14+20+8 || be16(f[12:]) != uint16(header.IPv4ProtocolNumber) {
			return false
		}
		ip := header.IPv4(f[14:])
		return ip.Protocol() == uint8(header.ICMPv4ProtocolNumber) &&
			ip.SourceAddress() == tcpip.AddrFrom4(src.As4()) &&
			header.ICMPv4(ip.Payload()).Type() == typ
	}
}

func TestTTL1TimeExceeded(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4) // resolve neighbours both ways.
	orig := ipv4Packet(aIP4, bIP4, 1, header.ICMPv4ProtocolNumber, icmpEcho(0x77, 1, []byte("ttl one!")))
	l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, orig))

	f := l.tapA.Wait(ctxTimeout(t, 5*time.Second), icmpFrom(lanIP4, header.ICMPv4TimeExceeded))
	if f == nil {
		t.Fatal("no ICMP Time Exceeded from the lan address")
	}
	ip := header.IPv4(f[14:])
	if !ip.IsChecksumValid() {
		t.Error("Time Exceeded: bad IPv4 header checksum")
	}
	if got, want := ip.DestinationAddress(), tcpip.AddrFrom4(aIP4.As4()); got != want {
		t.Errorf("Time Exceeded to %s, want %s", got, want)
	}
	icmp := header.ICMPv4(ip.Payload())
	if checksum.Checksum(icmp, 0) != 0xffff {
		t.Error("Time Exceeded: bad ICMP checksum")
	}
	if icmp.Code() != header.ICMPv4TTLExceeded {
		t.Errorf("code = %d, want %d", icmp.Code(), header.ICMPv4TTLExceeded)
	}
	if !bytes.Equal(icmp.Payload(), orig) {
		t.Errorf("quoted packet = %x, want %x (the original, TTL 1)", icmp.Payload(), orig)
	}
	if inner := header.IPv4(icmp.Payload()); inner.TTL() != 1 {
		t.Errorf("quoted TTL = %d, want 1", inner.TTL())
	}
	// B never sees the packet.
	if got := l.tapB.Wait(ctxTimeout(t, 200*time.Millisecond), func(f []byte) bool {
		return len(f) >= 34 && be16(f[12:]) == uint16(header.IPv4ProtocolNumber) && header.IPv4(f[14:]).ID() == 0x1234
	}); got != nil {
		t.Errorf("router forwarded the TTL 1 packet to B: %x", got)
	}
	if got := l.r.Interface("lan").Stats().Drops["ttl_exceeded"]; got != 1 {
		t.Errorf("ttl_exceeded drops = %d, want 1", got)
	}
}

func TestTTL1ToRouterIsDelivered(t *testing.T) {
	l := newLab(t)
	for _, dst := range []netip.Addr{lanIP4, wanIP4} {
		orig := ipv4Packet(aIP4, dst, 1, header.ICMPv4ProtocolNumber, icmpEcho(0x99, 7, []byte("to me")))
		l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, orig))
		f := l.tapA.Wait(ctxTimeout(t, 5*time.Second), icmpFrom(dst, header.ICMPv4EchoReply))
		if f == nil {
			t.Fatalf("no echo reply from %s to a TTL 1 echo request", dst)
		}
		if icmp := header.ICMPv4(header.IPv4(f[14:]).Payload()); icmp.Ident() != 0x99 || icmp.Sequence() != 7 {
			t.Errorf("echo reply id/seq = %#x/%d, want 0x99/7", icmp.Ident(), icmp.Sequence())
		}
	}
}

func TestIPv6HopLimit1TimeExceeded(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP6)
	orig := ipv6Packet(aIP6, bIP6, 1, header.ICMPv6ProtocolNumber, icmpv6Echo(0x66, 1))
	l.inject(ethFrame(lanMAC, aMAC, header.IPv6ProtocolNumber, orig))
	f := l.tapA.Wait(ctxTimeout(t, 5*time.Second), func(f []byte) bool {
		if len(f) < 14+40+8 || be16(f[12:]) != uint16(header.IPv6ProtocolNumber) {
			return false
		}
		ip := header.IPv6(f[14:])
		return ip.TransportProtocol() == header.ICMPv6ProtocolNumber && header.ICMPv6(ip.Payload()).Type() == header.ICMPv6TimeExceeded
	})
	if f == nil {
		t.Fatal("no ICMPv6 Time Exceeded")
	}
	quoted := header.ICMPv6(header.IPv6(f[14:]).Payload()).Payload()
	if inner := header.IPv6(quoted); len(quoted) < 40 || inner.HopLimit() != 1 || inner.DestinationAddress() != tcpip.AddrFrom16(bIP6.As16()) {
		t.Errorf("quoted packet = %x, want the original with hop limit 1", quoted)
	}
}

func TestNetUnreachable(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, lanIP4)
	orig := ipv4Packet(aIP4, netip.MustParseAddr("192.0.2.1"), 64, header.ICMPv4ProtocolNumber, icmpEcho(1, 1, nil))
	l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, orig))
	f := l.tapA.Wait(ctxTimeout(t, 5*time.Second), icmpFrom(lanIP4, header.ICMPv4DstUnreachable))
	if f == nil {
		t.Fatal("no ICMP Destination Unreachable")
	}
	if code := header.ICMPv4(header.IPv4(f[14:]).Payload()).Code(); code != header.ICMPv4NetUnreachable {
		t.Errorf("code = %d, want %d (net unreachable)", code, header.ICMPv4NetUnreachable)
	}
	if got := l.r.Interface("lan").Stats().Drops["netstack_ipv4_no_route"]; got != 1 {
		t.Errorf("netstack_ipv4_no_route = %d, want 1", got)
	}
}

func TestBadChecksumsToRouter(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, lanIP4)
	echo := ipv4Packet(aIP4, lanIP4, 64, header.ICMPv4ProtocolNumber, icmpEcho(0x55, 1, nil))
	l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, corrupt(echo, 10)))
	// A TCP SYN to a closed port would get a RST; with a bad checksum it
	// must be dropped before netstack sees it.
	syn := make([]byte, header.TCPMinimumSize)
	header.TCP(syn).Encode(&header.TCPFields{SrcPort: 4000, DstPort: 81, SeqNum: 1, DataOffset: header.TCPMinimumSize, Flags: header.TCPFlagSyn, WindowSize: 1000})
	l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, corrupt(ipv4Packet(aIP4, lanIP4, 64, header.TCPProtocolNumber, syn), 20+4)))

	if f := l.tapA.Wait(ctxTimeout(t, 300*time.Millisecond), func(f []byte) bool {
		return icmpFrom(lanIP4, header.ICMPv4EchoReply)(f) && header.ICMPv4(header.IPv4(f[14:]).Payload()).Ident() == 0x55 ||
			len(f) >= 54 && be16(f[12:]) == uint16(header.IPv4ProtocolNumber) && header.IPv4(f[14:]).Protocol() == protoTCP
	}); f != nil {
		t.Errorf("router answered a packet with a bad checksum: %x", f)
	}
	drops := l.r.Interface("lan").Stats().Drops
	if drops["ipv4_header_checksum"] != 1 || drops["l4_checksum"] != 1 {
		t.Errorf("drops = %v, want ipv4_header_checksum 1 and l4_checksum 1", drops)
	}
}

// TestForwardedChecksumUntouched checks that forwarded packets are not
// re-checksummed: a bad UDP checksum reaches B as it was.
func TestForwardedChecksumUntouched(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4)
	p := corrupt(ipv4Packet(aIP4, bIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 9, []byte("bad sum"))), 20+6)
	l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, p))
	f := l.tapB.Wait(ctxTimeout(t, 5*time.Second), func(f []byte) bool {
		return len(f) >= 42 && be16(f[12:]) == uint16(header.IPv4ProtocolNumber) && header.IPv4(f[14:]).Protocol() == protoUDP
	})
	if f == nil {
		t.Fatal("UDP packet not forwarded")
	}
	if got, want := binary.BigEndian.Uint16(f[14+20+6:]), binary.BigEndian.Uint16(p[20+6:]); got != want {
		t.Errorf("forwarded UDP checksum = %#x, want %#x (unchanged)", got, want)
	}
	if ttl := header.IPv4(f[14:]).TTL(); ttl != 63 {
		t.Errorf("forwarded TTL = %d, want 63", ttl)
	}
}

func TestApplyKeepsConnections(t *testing.T) {
	l := newLab(t)
	addr := netip.AddrPortFrom(bIP4, 6000)
	listen(t, l.b, addr)
	c := dial(t, l.a, addr)
	exchange(t, c, 10000)

	cfg := l.config()
	cfg.Interfaces[0].Addresses = append(cfg.Interfaces[0].Addresses, netip.MustParsePrefix("10.1.1.1/24"))
	cfg.Routes = []RouteConfig{
		{To: netip.MustParsePrefix("10.9.0.0/16"), Via: bIP4},
		{To: netip.MustParsePrefix("::/0"), Via: netip.MustParseAddr("fd00:2::2")},
	}
	if err := l.r.Apply(cfg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	exchange(t, c, 10000)
	ping(t, l.a, netip.MustParseAddr("10.1.1.1"))

	want := []RouteConfig{
		{To: netip.MustParsePrefix("10.1.0.0/24"), Dev: "lan"},
		{To: netip.MustParsePrefix("fd00:1::/64"), Dev: "lan"},
		{To: netip.MustParsePrefix("10.1.1.0/24"), Dev: "lan"},
		{To: netip.MustParsePrefix("10.2.0.0/24"), Dev: "wan"},
		{To: netip.MustParsePrefix("fd00:2::/64"), Dev: "wan"},
		{To: netip.MustParsePrefix("10.9.0.0/16"), Via: bIP4, Dev: "wan"},
		{To: netip.MustParsePrefix("::/0"), Via: netip.MustParseAddr("fd00:2::2"), Dev: "wan"},
	}
	if got := l.r.Routes(); !equalRoutes(got, want) {
		t.Errorf("Routes() = %v, want %v", got, want)
	}

	// Back to the first config: the extra address and routes go, the
	// connection stays.
	if err := l.r.Apply(l.config()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	exchange(t, c, 10000)
	if _, err := l.a.Ping(ctxTimeout(t, 300*time.Millisecond), netip.MustParseAddr("10.1.1.1"), nil); err == nil {
		t.Error("10.1.1.1 still answers after it was removed")
	}
}

func equalRoutes(a, b []RouteConfig) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestApplyAddsAndRemovesInterfaces(t *testing.T) {
	l := newLab(t)
	cfg := l.config()
	extra := &stacktest.Tap{}
	cfg.Interfaces = append(cfg.Interfaces, InterfaceConfig{Name: "dmz", MAC: mustMAC("02:00:00:00:00:03"), Addresses: []netip.Prefix{netip.MustParsePrefix("10.3.0.1/24")}, Writer: extra})
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ifc := range l.r.Interfaces() {
		names = append(names, ifc.Name())
	}
	if got, want := fmt.Sprint(names), "[dmz lan wan]"; got != want {
		t.Fatalf("Interfaces() = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(l.r.Interface("dmz").Addresses()), "[10.3.0.1/24]"; got != want {
		t.Errorf("dmz Addresses() = %s, want %s", got, want)
	}
	ping(t, l.a, netip.MustParseAddr("10.3.0.1"))
	dmz := l.r.Interface("dmz")
	if err := l.r.Apply(l.config()); err != nil {
		t.Fatal(err)
	}
	if l.r.Interface("dmz") != nil {
		t.Fatal("dmz not removed")
	}
	dmz.HandleBatch(0, []hw.Frame{{Data: make([]byte, 60)}})
	if got := dmz.Stats().Drops["not_attached"]; got != 1 {
		t.Errorf("frame to a removed interface: not_attached = %d, want 1", got)
	}
	ping(t, l.a, bIP4)
}

func TestApplyRejectsBadConfig(t *testing.T) {
	l := newLab(t)
	cfg := l.config()
	cfg.Routes = []RouteConfig{{To: netip.MustParsePrefix("10.9.0.0/16"), Via: netip.MustParseAddr("192.0.2.1")}}
	cfg.Interfaces = append(cfg.Interfaces, InterfaceConfig{Name: "lan", MAC: lanMAC, Writer: l.tapA})
	err := l.r.Apply(cfg)
	if err == nil {
		t.Fatal("Apply accepted a bad config")
	}
	for _, want := range []string{"duplicate name", "on no interface's subnet"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("Apply error %q does not mention %q", err, want)
		}
	}
	ping(t, l.a, bIP4)
}

func TestSetLinkUp(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4)
	wan := l.r.Interface("wan")
	wan.SetLinkUp(false)
	if _, err := l.a.Ping(ctxTimeout(t, 300*time.Millisecond), bIP4, nil); err == nil {
		t.Error("ping through a link that is down succeeded")
	}
	wan.SetLinkUp(true)
	ping(t, l.a, bIP4)
	ping(t, l.b, wanIP4)
}

// TestTimeExceededRateLimited checks that Time Exceeded shares netstack's
// ICMP rate limiter (burst 50, then 1000/s).
func TestTimeExceededRateLimited(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4)
	const n = 300
	frames := make([]hw.Frame, n)
	for i := range frames {
		f := ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, ipv4Packet(aIP4, bIP4, 1, header.ICMPv4ProtocolNumber, icmpEcho(0x42, uint16(i), nil)))
		frames[i] = hw.Frame{Data: f, WireLen: len(f)}
	}
	l.r.Interface("lan").HandleBatch(0, frames)
	isTE := icmpFrom(lanIP4, header.ICMPv4TimeExceeded)
	l.tapA.Wait(ctxTimeout(t, 5*time.Second), isTE)
	time.Sleep(100 * time.Millisecond)
	sent := l.r.Interface("lan").Stats().TxPackets
	t.Logf("lan sent %d frames in all for %d expired packets", sent, n)
	if got := l.r.Interface("lan").Stats().Drops["ttl_exceeded"]; got != n {
		t.Errorf("ttl_exceeded drops = %d, want %d", got, n)
	}
	// A's echo reply and ARP exchanges are a handful of frames; without
	// the limiter there would be n Time Exceeded messages.
	if sent >= n/2 {
		t.Errorf("lan sent %d frames for %d expired packets, want the ICMP rate limiter to stop most", sent, n)
	}
}

// TestForwardTTLConcurrent forwards in both directions at once from two
// receive goroutines and checks every forwarded TTL. Without forwardPins,
// gVisor reads the TTL from a freed chunk; -race reports it here.
func TestForwardTTLConcurrent(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4)
	ping(t, l.b, aIP4)
	const n = 2000
	burst := func(ifc string, dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr) {
		f := ethFrame(dstMAC, srcMAC, header.IPv4ProtocolNumber, ipv4Packet(src, dst, 64, header.UDPProtocolNumber, udpDatagram(7, 9, make([]byte, 200))))
		batch := make([]hw.Frame, 32)
		for i := range batch {
			batch[i] = hw.Frame{Data: f, WireLen: len(f)}
		}
		for i := 0; i < n; i += len(batch) {
			l.r.Interface(ifc).HandleBatch(1, batch)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		burst("lan", lanMAC, aMAC, aIP4, bIP4)
	}()
	burst("wan", wanMAC, bMAC, bIP4, aIP4)
	<-done
	for name, tap := range map[string]*stacktest.Tap{"a": l.tapA, "b": l.tapB} {
		bad, udp := 0, 0
		tap.Wait(ctxTimeout(t, 100*time.Millisecond), func(f []byte) bool {
			if len(f) >= 34 && be16(f[12:]) == uint16(header.IPv4ProtocolNumber) && header.IPv4(f[14:]).Protocol() == protoUDP {
				udp++
				if header.IPv4(f[14:]).TTL() != 63 {
					bad++
				}
			}
			return false
		})
		if udp == 0 || bad != 0 {
			t.Errorf("to %s: %d UDP frames forwarded, %d with TTL != 63", name, udp, bad)
		}
	}
}
