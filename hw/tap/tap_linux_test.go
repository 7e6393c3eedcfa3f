package tap

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

var (
	routerSide = []netip.Prefix{netip.MustParsePrefix("10.9.0.1/30"), netip.MustParsePrefix("fd09::1/64")}
	kernelSide = []netip.Prefix{netip.MustParsePrefix("10.9.0.2/30"), netip.MustParsePrefix("fd09::2/64")}
)

// openIn opens a TAP inside a namespace of the test's own.
func openIn(tb testing.TB, n *netnstest.Netns, cfg Config) *Tap {
	tb.Helper()
	var t *Tap
	var err error
	n.Do(tb, func() { t, err = Open(cfg, nil) })
	if err != nil {
		netnstest.SkipIfNotPermitted(tb, err, "Open: %v", err)
		tb.Fatalf("Open(%+v): %v", cfg, err)
	}
	tb.Cleanup(func() { t.Close() })
	return t
}

func setup(tb testing.TB) (*netnstest.Netns, *Tap) {
	tb.Helper()
	netnstest.Privileged(tb, "ip")
	n := netnstest.New(tb, "tapt")
	return n, openIn(tb, n, Config{Name: "gvr-host", Addresses: routerSide, KernelAddresses: kernelSide})
}

func TestGateways(t *testing.T) {
	got := Gateways(routerSide, kernelSide)
	want := []netip.Addr{netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("fd09::1")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Gateways() = %v, want %v", got, want)
	}
	if got := Gateways(routerSide[:1], []netip.Prefix{netip.MustParsePrefix("10.8.0.2/30")}); len(got) != 0 {
		t.Errorf("Gateways() with no shared subnet = %v, want none", got)
	}
}

func TestOpenKernelSide(t *testing.T) {
	n, tp := setup(t)
	link := n.Run(t, "ip", "-n", n.Name(), "-d", "link", "show", "gvr-host")
	if !strings.Contains(link, "tap") || !strings.Contains(link, "mtu 1500") || !strings.Contains(link, "UP") {
		t.Errorf("kernel side is not an up TAP with MTU 1500:\n%s", link)
	}
	if strings.Contains(link, "persist on") {
		t.Errorf("TAP is persistent:\n%s", link)
	}
	addrs := n.Run(t, "ip", "-n", n.Name(), "addr", "show", "dev", "gvr-host")
	for _, k := range kernelSide {
		if !strings.Contains(addrs, k.String()) {
			t.Errorf("kernel side lacks %s:\n%s", k, addrs)
		}
	}
	if strings.Contains(addrs, "fd09::2/64 scope global tentative") {
		t.Errorf("an address is tentative (DAD not skipped):\n%s", addrs)
	}
	r4 := n.Run(t, "ip", "-n", n.Name(), "-4", "route", "show", "default")
	r6 := n.Run(t, "ip", "-n", n.Name(), "-6", "route", "show", "default")
	if !strings.Contains(r4, "via 10.9.0.1 dev gvr-host") || !strings.Contains(r6, "via fd09::1 dev gvr-host") {
		t.Errorf("default routes:\n%s%s", r4, r6)
	}
	if tp.MTU() != 1500 || len(tp.HardwareAddr()) != 6 || tp.HardwareAddr()[0]&3 != 2 || !tp.LinkUp() {
		t.Errorf("MTU %d, MAC %s, link %v", tp.MTU(), tp.HardwareAddr(), tp.LinkUp())
	}
	if mac := strings.TrimSpace(readIn(t, n, "/sys/class/net/gvr-host/address")); mac == tp.HardwareAddr().String() {
		t.Errorf("router side and kernel side share MAC %s", mac)
	}
}

// readIn reads a file in the namespace's own /sys (ip netns exec mounts
// it).
func readIn(tb testing.TB, n *netnstest.Netns, path string) string {
	tb.Helper()
	return n.Run(tb, "cat", path)
}

// collector keeps copies of the frames Run hands over.
type collector struct {
	mu     sync.Mutex
	frames [][]byte
}

func (c *collector) handle(q int, fs []hw.Frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range fs {
		c.frames = append(c.frames, bytes.Clone(f.Data))
	}
}

func (c *collector) find(marker []byte, d time.Duration) []byte {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		c.mu.Lock()
		for _, f := range c.frames {
			if bytes.Contains(f, marker) {
				c.mu.Unlock()
				return f
			}
		}
		c.mu.Unlock()
	}
	return nil
}

func run(t *testing.T, tp *Tap, c *collector) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tp.Run(ctx, c.handle) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run after cancel = %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
}

// udp4Frame builds an Ethernet/IPv4/UDP frame (UDP checksum 0: none).
func udp4Frame(dst, src net.HardwareAddr, from, to netip.AddrPort, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	a, b := from.Addr().As4(), to.Addr().As4()
	copy(ip[12:], a[:])
	copy(ip[16:], b[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], from.Port())
	binary.BigEndian.PutUint16(u[2:], to.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	return f
}

// TestReceiveTransmit sends a datagram from a kernel socket to the
// router's side (Run must hand the frame over) and writes one to a kernel
// socket (it must arrive), and checks the counters.
func TestReceiveTransmit(t *testing.T) {
	n, tp := setup(t)
	n.IP(t, "neigh", "replace", "10.9.0.1", "lladdr", tp.HardwareAddr().String(), "dev", "gvr-host")
	c := &collector{}
	run(t, tp, c)

	var conn net.PacketConn
	var err error
	n.Do(t, func() { conn, err = net.ListenPacket("udp4", "10.9.0.2:9999") })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.WriteTo([]byte("to-router"), &net.UDPAddr{IP: net.IPv4(10, 9, 0, 1), Port: 7}); err != nil {
		t.Fatal(err)
	}
	f := c.find([]byte("to-router"), 3*time.Second)
	if f == nil {
		t.Fatal("the kernel's datagram did not reach Run")
	}
	if !bytes.Equal(f[0:6], tp.HardwareAddr()) {
		t.Errorf("frame to %x, want the router side's MAC %s", f[0:6], tp.HardwareAddr())
	}

	kmac, _ := net.ParseMAC(strings.TrimSpace(readIn(t, n, "/sys/class/net/gvr-host/address")))
	frame := udp4Frame(kmac, tp.HardwareAddr(), netip.MustParseAddrPort("10.9.0.1:5000"), netip.MustParseAddrPort("10.9.0.2:9999"), []byte("to-kernel"))
	if k, err := tp.WriteFrames([][]byte{frame, {1, 2, 3}}); k != 1 || err != nil {
		t.Fatalf("WriteFrames = %d, %v; want 1, nil (the 3-byte frame dropped)", k, err)
	}
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 100)
	k, from, err := conn.ReadFrom(buf)
	if err != nil || string(buf[:k]) != "to-kernel" || from.String() != "10.9.0.1:5000" {
		t.Fatalf("kernel socket read %q from %v, %v; want \"to-kernel\" from 10.9.0.1:5000", buf[:k], from, err)
	}
	s := tp.Stats()
	if s.RxPackets < 1 || s.TxPackets != 1 || s.TxBytes != uint64(len(frame)) || s.Drops[hw.DropTxError] != 1 || len(s.Drops) != 6 {
		t.Errorf("Stats() = %+v", s)
	}
}

// TestLinkDown: the kernel's side set down shows as link down within a
// second (a netlink link event, not the fallback poll), and a write then
// fails as the port's does.
func TestLinkDown(t *testing.T) {
	n, tp := setup(t)
	var ups []bool
	var mu sync.Mutex
	tp.SetLinkHandler(func(up bool) { mu.Lock(); ups = append(ups, up); mu.Unlock() })
	n.IP(t, "link", "set", "gvr-host", "down")
	deadline := time.Now().Add(time.Second)
	for tp.LinkUp() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if tp.LinkUp() {
		t.Fatal("LinkUp() still true after ip link set down")
	}
	mu.Lock()
	if len(ups) != 1 || ups[0] {
		t.Errorf("link handler calls %v, want [false]", ups)
	}
	mu.Unlock()
	frame := make([]byte, 60)
	if k, err := tp.WriteFrames([][]byte{frame, frame}); k != 0 || err == nil {
		t.Errorf("WriteFrames on a down TAP = %d, %v; want 0 and an error", k, err)
	}
	if s := tp.Stats(); s.Drops[hw.DropTxError] != 2 {
		t.Errorf("tx_error = %d, want 2", s.Drops[hw.DropTxError])
	}
}

// TestCloseDeletes: Close removes the interface, Run ends, and a
// persistent TAP of the same name made beforehand is taken over and goes
// too (it is made non-persistent).
func TestCloseDeletes(t *testing.T) {
	netnstest.Privileged(t, "ip")
	n := netnstest.New(t, "tapt")
	n.IP(t, "tuntap", "add", "mode", "tap", "name", "stale0")
	tp := openIn(t, n, Config{Name: "stale0", KernelAddresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/30")}})
	done := make(chan error, 1)
	go func() { done <- tp.Run(context.Background(), func(int, []hw.Frame) {}) }()
	time.Sleep(50 * time.Millisecond)
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != hw.ErrClosed {
			t.Errorf("Run after Close = %v, want hw.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if out, err := exec.Command("ip", "-n", n.Name(), "link", "show", "stale0").CombinedOutput(); err == nil {
		t.Errorf("stale0 still exists after Close:\n%s", out)
	}
	if k, err := tp.WriteFrames([][]byte{make([]byte, 60)}); k != 0 || err != hw.ErrClosed {
		t.Errorf("WriteFrames after Close = %d, %v", k, err)
	}
	if err := tp.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	netnstest.Privileged(t, "ip")
	n := netnstest.New(t, "tapt")
	n.IP(t, "link", "add", "notatap", "type", "veth", "peer", "name", "peer0")
	for _, cfg := range []Config{
		{Name: ""},
		{Name: "much-too-long-name"},
		{Name: "x", MTU: 20},
		{Name: "notatap"},
		{Name: "gw0", KernelAddresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/30")}, Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/30")}, MTU: 1500},
	} {
		var err error
		var tp *Tap
		n.Do(t, func() { tp, err = Open(cfg, nil) })
		if cfg.Name == "gw0" {
			// A valid one, for contrast.
			if err != nil {
				t.Errorf("Open(%+v) = %v", cfg, err)
			} else {
				tp.Close()
			}
			continue
		}
		if err == nil {
			tp.Close()
			t.Errorf("Open(%+v) succeeded, want an error", cfg)
		}
	}
	if out, err := exec.Command("ip", "-n", n.Name(), "link", "show", "x").CombinedOutput(); err == nil {
		t.Errorf("a failed Open left its TAP:\n%s", out)
	}
}

func TestWriteFramesAllocs(t *testing.T) {
	_, tp := setup(t)
	frame := udp4Frame(net.HardwareAddr{2, 0, 0, 0, 0, 9}, tp.HardwareAddr(), netip.MustParseAddrPort("10.9.0.1:5000"), netip.MustParseAddrPort("10.9.0.2:9"), []byte("allocs"))
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = frame
	}
	if a := testing.AllocsPerRun(20, func() { tp.WriteFrames(batch) }); a != 0 {
		t.Errorf("WriteFrames allocs = %v, want 0", a)
	}
}

// BenchmarkWriteFrames writes 60-byte frames, 64 a call, to a MAC the
// kernel's side does not have (it drops them after its receive path).
func BenchmarkWriteFrames(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	_, tp := setup(b)
	frame := udp4Frame(net.HardwareAddr{2, 0, 0, 0, 0, 9}, tp.HardwareAddr(), netip.MustParseAddrPort("10.9.0.1:5000"), netip.MustParseAddrPort("10.9.0.2:9"), []byte("bench"))
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = frame
	}
	b.ReportAllocs()
	for b.Loop() {
		tp.WriteFrames(batch)
	}
	s := tp.Stats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/frame")
	b.ReportMetric(float64(s.Drops[hw.DropTxNoBufs])/float64(b.N*len(batch)), "nobufs/frame")
}
