package xdpport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The tests in this file run over both port backends, hw.Port
// (af_packet) and this package's Port (af_xdp), where the router needs
// the same behaviour of both: what the kernel does on the port, and the
// multicast groups it hears.

// backendPort is what the tests use of either backend: the router's
// port API (router.portIO) and multicast.
type backendPort interface {
	hw.FrameWriter
	HardwareAddr() net.HardwareAddr
	Run(ctx context.Context, h hw.BatchHandler) error
	Stats() hw.Stats
	SetMulticast([]net.HardwareAddr) error
	Multicast() []net.HardwareAddr
	Close() error
	hw.BridgePort
}

var (
	_ backendPort = (*hw.Port)(nil)
	_ backendPort = (*Port)(nil)
)

// backends are the drivers, as config ports[].driver names them.
var backends = []string{"af_packet", "af_xdp"}

// openBackend opens ifname in ns with driver and a state directory
// stateDir ("" for none); Close is the caller's.
func openBackend(tb testing.TB, ns *netnstest.Netns, driver, ifname, stateDir string) backendPort {
	tb.Helper()
	var p backendPort
	var err error
	ns.Do(tb, func() {
		switch driver {
		case "af_packet":
			var hp *hw.Port
			if hp, err = hw.Open(hw.Config{Name: ifname, StateDir: stateDir}, nil); err == nil {
				p = hp
			}
		case "af_xdp":
			var xp *Port
			if xp, err = Open(Config{Name: ifname, StateDir: stateDir}, nil); err == nil {
				p = xp
			}
		}
	})
	if err != nil {
		if !netnstest.CI() && (errors.Is(err, xsk.ErrPermission) || errors.Is(err, xsk.ErrUnsupported)) {
			tb.Skipf("%s: %v", driver, err)
		}
		tb.Fatalf("open %s on %s: %v", ifname, driver, err)
	}
	return p
}

// maddrs returns the link-layer groups `ip maddr show dev ifname` lists.
func maddrs(t *testing.T, ns *netnstest.Netns, ifname string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(ns.Run(t, "ip", "-n", ns.Name(), "maddr", "show", "dev", ifname), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "link" {
			out = append(out, f[1])
		}
	}
	return out
}

// TestMulticast: the groups the router asks for (IPv6 all-routers,
// all-DHCP-agents, a solicited-node group and MKA's PAE group) are on
// the interface's list (ip maddr) while the port is open, a changed set
// leaves the old ones, and Close, or the end of a SIGKILLed process,
// takes them all off. Frames to a joined group reach the handler; on a
// veth so do frames to any group, since veth filters nothing (the
// groups matter on a real NIC, whose filter runs before XDP): the test
// shows that as well, so the filtering it cannot see here stays named.
func TestMulticast(t *testing.T) {
	pae := net.HardwareAddr{0x01, 0x80, 0xc2, 0x00, 0x00, 0x03}
	allRouters := hw.IPv6MulticastMAC([16]byte{0xff, 0x02, 15: 2})
	dhcpAgents := hw.IPv6MulticastMAC([16]byte{0xff, 0x02, 13: 1, 15: 2})
	solicited := hw.SolicitedNodeMAC([16]byte{0xfe, 0x80, 13: 0xab, 14: 0xcd, 15: 0xef})
	for _, driver := range backends {
		t.Run(driver, func(t *testing.T) {
			ns := newLab(t)
			for _, g := range maddrs(t, ns, "va") {
				if g == pae.String() || g == allRouters.String() {
					t.Fatalf("va is in %s before the port opened: %v", g, maddrs(t, ns, "va"))
				}
			}
			p := openBackend(t, ns, driver, "va", "")
			defer p.Close()
			in := &counter{marker: []byte("group")}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx, in.handle) }()
			stop := sync.OnceFunc(func() { cancel(); <-done })
			defer stop()

			if err := p.SetMulticast([]net.HardwareAddr{allRouters, dhcpAgents, solicited, pae}); err != nil {
				t.Fatalf("SetMulticast: %v", err)
			}
			got := maddrs(t, ns, "va")
			for _, want := range []net.HardwareAddr{allRouters, dhcpAgents, solicited, pae} {
				if !slices.Contains(got, want.String()) {
					t.Errorf("ip maddr show dev va = %v, want %s", got, want)
				}
			}
			if len(p.Multicast()) != 4 {
				t.Errorf("Multicast() = %v, want 4 groups", p.Multicast())
			}
			peer := ns.RawSocket(t, "vb")
			other := net.HardwareAddr{0x01, 0x00, 0x5e, 0x7f, 0x00, 0x01} // joined by no one
			for _, dst := range []net.HardwareAddr{pae, allRouters, other} {
				peer.Send(t, netnstest.Frame(dst, macB, "group"))
			}
			if n := waitCount(in, 3, 2*time.Second); n != 3 {
				t.Errorf("handler got %d of 3 frames to PAE, all-routers and an unjoined group, want 3 (veth passes every group)", n)
			}

			// A new address: the old solicited-node group and PAE go.
			solicited2 := hw.SolicitedNodeMAC([16]byte{0x20, 0x01, 13: 0x12, 14: 0x34, 15: 0x56})
			if err := p.SetMulticast([]net.HardwareAddr{allRouters, dhcpAgents, solicited2}); err != nil {
				t.Fatal(err)
			}
			got = maddrs(t, ns, "va")
			if slices.Contains(got, solicited.String()) || slices.Contains(got, pae.String()) || !slices.Contains(got, solicited2.String()) {
				t.Errorf("after the change ip maddr = %v, want %s in, %s and %s out", got, solicited2, solicited, pae)
			}
			if err := p.SetMulticast([]net.HardwareAddr{{0x02, 0, 0, 0, 0, 1}}); err == nil {
				t.Error("SetMulticast took a unicast MAC")
			}
			stop()
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if got := maddrs(t, ns, "va"); slices.Contains(got, allRouters.String()) || slices.Contains(got, solicited2.String()) {
				t.Errorf("after Close ip maddr = %v, want the router's groups gone", got)
			}
			if err := p.SetMulticast(nil); !errors.Is(err, hw.ErrClosed) {
				t.Errorf("SetMulticast after Close = %v, want hw.ErrClosed", err)
			}
		})
	}
}

// TestMulticastSIGKILL: the groups a SIGKILLed router held leave the
// interface with it; no record is needed.
func TestMulticastSIGKILL(t *testing.T) {
	ns := newLab(t)
	killedChild(t, ns, "va", "", func() {
		if got := maddrs(t, ns, "va"); !slices.Contains(got, childGroup) {
			t.Errorf("while the child holds the port: ip maddr = %v, want %s", got, childGroup)
		}
	}, groupEnv+"="+childGroup)
	if got := maddrs(t, ns, "va"); slices.Contains(got, childGroup) {
		t.Errorf("after SIGKILL: ip maddr = %v, want %s gone", got, childGroup)
	}
}

// childGroup is the group the killed child joins (MKA's PAE group).
const childGroup = "01:80:c2:00:00:03"

// framesFrom reads fd (a packet socket on the port's peer) for d and
// returns the frames that came from mac, at most max (0: no limit).
func framesFrom(fd int, mac net.HardwareAddr, d time.Duration, max int) [][]byte {
	buf := make([]byte, 2048)
	var got [][]byte
	for end := time.Now().Add(d); time.Now().Before(end) && (max == 0 || len(got) < max); {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || n < 14 {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if net.HardwareAddr(buf[6:12]).String() == mac.String() {
			got = append(got, slices.Clone(buf[:n]))
		}
	}
	return got
}

// TestKernelSilence: while a port is open the kernel holds no address on
// its interface and has IPv6 off there, so it sends nothing from it:
// neither the ARP and neighbour solicitations of a local process's
// traffic to the port's subnets, nor DAD, router solicitations and MLD
// reports when the carrier comes back. Before the port opens the same
// steps make the kernel send (the watch can see them); after Close the
// addresses and the IPv6 setting are back. On af_xdp, XDP keeps every
// received frame from the kernel's stack, but not the kernel's own
// sends: this is what the silencing adds there.
func TestKernelSilence(t *testing.T) {
	for _, driver := range backends {
		t.Run(driver, func(t *testing.T) {
			netnstest.Privileged(t, "ip", "nft", "tc")
			ns := netnstest.New(t, "xdps") // IPv6 on, unlike newLab
			ns.IP(t, "link", "add", "va", "address", "02:00:00:00:00:0a", "type", "veth", "peer", "name", "vb", "address", "02:00:00:00:00:0b")
			ns.IP(t, "addr", "add", "10.99.0.1/24", "dev", "va")
			ns.IP(t, "addr", "add", "fd00:99::1/64", "dev", "va", "nodad")
			ns.IP(t, "link", "set", "va", "up")
			ns.IP(t, "link", "set", "vb", "up")
			before := ns.PortStateOf(t, "va")
			watch := ns.PacketSocket(t, "vb", unix.ETH_P_ALL)
			defer unix.Close(watch)
			va := net.HardwareAddr(macA)
			// provoke makes the kernel want to speak on va: traffic from a
			// local process to a neighbour on each subnet, and a carrier
			// loss and return (the peer down and up).
			provoke := func() {
				ns.Do(t, func() {
					for _, dst := range []string{"10.99.0.2:9", "[fd00:99::2]:9"} {
						// Fails once the addresses are gone: no route.
						if c, err := net.Dial("udp", dst); err == nil {
							c.Write([]byte("provoke"))
							c.Close()
						}
					}
				})
				ns.IP(t, "link", "set", "vb", "down")
				ns.IP(t, "link", "set", "vb", "up")
			}
			provoke()
			if got := framesFrom(watch, va, 3*time.Second, 2); len(got) == 0 {
				t.Fatal("the kernel sent nothing from va before the port opened: the watch is blind")
			}

			p := openBackend(t, ns, driver, "va", t.TempDir())
			defer p.Close()
			st := ns.PortStateOf(t, "va")
			if st.DisableIPv6 != "1" || len(st.Addrs) != 0 {
				t.Errorf("while open: disable_ipv6=%s, addresses %v; want 1 and none", st.DisableIPv6, st.Addrs)
			}
			framesFrom(watch, va, 100*time.Millisecond, 0) // what was in flight
			provoke()
			if got := framesFrom(watch, va, 3*time.Second, 0); len(got) != 0 {
				t.Errorf("while open the kernel sent %d frames from va, want none; first:\n% x", len(got), got[0])
			}
			if err := p.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if after := ns.PortStateOf(t, "va"); !slices.Equal(after.Addrs, before.Addrs) || after.DisableIPv6 != before.DisableIPv6 {
				t.Errorf("after Close:\n%s\nwant as before:\n%s", after, before)
			}
		})
	}
}

// promiscuity returns ifname's promiscuity count (ip -d link).
func promiscuity(t *testing.T, ns *netnstest.Netns, ifname string) string {
	t.Helper()
	f := strings.Fields(ns.Run(t, "ip", "-n", ns.Name(), "-d", "link", "show", "dev", ifname))
	if i := slices.Index(f, "promiscuity"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	t.Fatalf("ip -d link show %s has no promiscuity", ifname)
	return ""
}

// TestBridge runs hw.Bridge (router bridge, the bench's mode c) on each
// backend between two veth pairs: frames for a MAC that is neither
// port's cross in both directions, with both interfaces promiscuous
// while the bridge runs and not after.
func TestBridge(t *testing.T) {
	for _, driver := range backends {
		t.Run(driver, func(t *testing.T) {
			netnstest.Privileged(t, "ip")
			ns := netnstest.New(t, "xdpb", netnstest.WithoutIPv6())
			for _, pair := range [][2]string{{"a0", "a1"}, {"b0", "b1"}} {
				ns.IP(t, "link", "add", pair[0], "type", "veth", "peer", "name", pair[1])
				ns.IP(t, "link", "set", pair[0], "up")
				ns.IP(t, "link", "set", pair[1], "up")
			}
			pa := openBackend(t, ns, driver, "a1", "")
			pb := openBackend(t, ns, driver, "b1", "")
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- hw.Bridge(ctx, pa, pb) }()
			hostA := []byte{0x02, 0xaa, 0, 0, 0, 1}
			hostB := []byte{0x02, 0xbb, 0, 0, 0, 1}
			a0, b0 := ns.RawSocket(t, "a0"), ns.RawSocket(t, "b0")
			for end := time.Now().Add(5 * time.Second); promiscuity(t, ns, "b1") == "0"; {
				if time.Now().After(end) {
					t.Fatal("b1 not promiscuous 5 s after the bridge started")
				}
				time.Sleep(10 * time.Millisecond)
			}
			for i := range 3 {
				a0.Send(t, netnstest.Frame(hostB, hostA, fmt.Sprint("a-to-b-", i)))
				b0.Send(t, netnstest.Frame(hostA, hostB, fmt.Sprint("b-to-a-", i)))
			}
			if _, ok := b0.WaitFor("a-to-b-2", 2*time.Second); !ok {
				t.Error("a0's frame to another MAC did not cross the bridge to b0")
			}
			if _, ok := a0.WaitFor("b-to-a-2", 2*time.Second); !ok {
				t.Error("b0's frame to another MAC did not cross the bridge to a0")
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Bridge = %v", err)
			}
			for _, p := range []backendPort{pa, pb} {
				p.Close()
			}
			if got := promiscuity(t, ns, "a1"); got != "0" {
				t.Errorf("a1 promiscuity after the ports closed = %s, want 0", got)
			}
		})
	}
}
