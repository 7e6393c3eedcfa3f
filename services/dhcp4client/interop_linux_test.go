package dhcp4client

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// speedup is how much faster than real time the interop client's clock
// runs. dnsmasq's shortest lease is 2 minutes; at 6× the client lives
// through T1 (20 s), T2 (40 s) and expiry (120 s) of a real dnsmasq lease
// in 20 s of real time. dnsmasq keeps real time: it only answers.
const speedup = 6

// slack is how late (in the client's clock) a timer may fire on a loaded
// machine: half a second of real time.
const slack = speedup * 500 * time.Millisecond

// scaledClock is a Clock running speedup times faster than real time.
type scaledClock struct{ start time.Time }

func (c scaledClock) Now() time.Time { return c.start.Add(time.Since(c.start) * speedup) }

func (c scaledClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc((d+speedup-1)/speedup, f)
}

// wire is one DHCP datagram a watcher saw on a link.
type wire struct {
	at       time.Time // real time
	out      bool      // sent by the watcher's own namespace (the server)
	src, dst netip.Addr
	dstMAC   net.HardwareAddr
	srcMAC   net.HardwareAddr
	msg      *dhcpv4.DHCPv4
	payload  []byte
}

func (w wire) String() string {
	return fmt.Sprintf("%s %v->%v ciaddr %v", w.msg.MessageType(), w.src, w.dst, w.msg.ClientIPAddr)
}

// watcher records the DHCP datagrams on one interface of a namespace
// through its own AF_PACKET socket: what is on the wire, independently of
// the client's and the server's own accounts.
type watcher struct {
	mu  sync.Mutex
	got []wire
}

func watch(t *testing.T, ctx context.Context, n *netnstest.Netns, ifname string) *watcher {
	w := &watcher{}
	fd := n.PacketSocket(t, ifname, unix.ETH_P_ALL) // ETH_P_ALL: the only kind that sees outgoing frames too
	go func() {
		defer unix.Close(fd)
		buf := make([]byte, 65536)
		for ctx.Err() == nil {
			nr, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			p, ok := parseUDP(buf[:nr])
			if !ok || (p.Dst.Port() != 67 && p.Dst.Port() != 68) {
				continue
			}
			m, err := dhcpv4.FromBytes(p.Payload)
			if err != nil {
				continue
			}
			ll, _ := from.(*unix.SockaddrLinklayer)
			w.mu.Lock()
			w.got = append(w.got, wire{at: time.Now(), out: ll != nil && ll.Pkttype == unix.PACKET_OUTGOING,
				src: p.Src.Addr(), dst: p.Dst.Addr(), dstMAC: p.DstMAC, srcMAC: p.SrcMAC, msg: m, payload: p.Payload})
			w.mu.Unlock()
		}
	}()
	return w
}

// parseUDP parses an Ethernet frame carrying an IPv4 UDP datagram.
func parseUDP(f []byte) (rawudp.Packet, bool) {
	if len(f) < 14+20+8 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return rawudp.Packet{}, false
	}
	ip := f[14:]
	ihl, total := int(ip[0]&0xf)*4, int(binary.BigEndian.Uint16(ip[2:]))
	if ip[9] != 17 || ihl < 20 || total > len(ip) || total < ihl+8 {
		return rawudp.Packet{}, false
	}
	u := ip[ihl:total]
	return rawudp.Packet{
		Payload: bytes.Clone(u[8:]),
		Src:     netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[12:16])), binary.BigEndian.Uint16(u[0:])),
		Dst:     netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip[16:20])), binary.BigEndian.Uint16(u[2:])),
		SrcMAC:  bytes.Clone(f[6:12]),
		DstMAC:  bytes.Clone(f[0:6]),
	}, true
}

// find returns the first datagram after since matching f.
func (w *watcher) find(since time.Time, f func(wire) bool) (wire, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.got {
		if !x.at.Before(since) && f(x) {
			return x, true
		}
	}
	return wire{}, false
}

func (w *watcher) dump() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, x := range w.got {
		fmt.Fprintf(&b, "  %s %v\n", x.at.Format("15:04:05.000"), x)
	}
	return b.String()
}

// syncBuffer is a bytes.Buffer safe for a process's output and a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dnsmasq runs dnsmasq as the ISP's DHCP server in n (DNS off, no config
// file, leases in a temp dir, log to stderr) with extra arguments, and
// stops it, by its PID, when the test ends. It returns the process and
// its log.
func dnsmasq(t *testing.T, n *netnstest.Netns, args ...string) (*os.Process, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	all := append([]string{"netns", "exec", n.Name(), "dnsmasq",
		"--no-daemon", "--conf-file=/dev/null", "--pid-file=", "--port=0", "--user=root", "--group=root",
		"--dhcp-leasefile=" + filepath.Join(t.TempDir(), "dnsmasq.leases"),
		"--log-dhcp", "--log-facility=-", "--bind-interfaces"}, args...)
	cmd := exec.Command("ip", all...) // ip netns exec execs dnsmasq: same PID
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dnsmasq: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("dnsmasq log:\n%s", log.String())
		}
	})
	// Ready when it says it serves the range.
	waitFor(t, 5*time.Second, "dnsmasq to start", func() bool { return strings.Contains(log.String(), "DHCP, IP range") })
	return cmd.Process, log
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// clientSide runs the client under test in n on ifname: a rawudp.Conn on
// a PacketLink for the DHCP datagrams, an AF_PACKET socket for ARP that
// feeds the ARPProber and answers ARP for the leased address (what the
// router's netstack does once the address is applied; the kernel
// interface itself has no IPv4 address).
type clientSide struct {
	c      *Client
	prober *ARPProber
	leases chan change
	leased atomic.Pointer[netip.Addr]
	mac    net.HardwareAddr
	runErr chan error
}

func startClient(t *testing.T, ctx context.Context, n *netnstest.Netns, ifname string, mod func(*Config)) *clientSide {
	t.Helper()
	var link *rawudp.PacketLink
	var err error
	n.Do(t, func() { link, err = rawudp.OpenPacketLink(ifname) })
	if err != nil {
		t.Fatal(err)
	}
	conn := rawudp.New(link, 68, 64)
	cs := &clientSide{leases: make(chan change, 16), mac: link.HardwareAddr(), runErr: make(chan error, 1)}
	cs.prober, err = NewARPProber(ARPProberConfig{Link: link,
		ProbeWait: 100 * time.Millisecond, ProbeMin: 50 * time.Millisecond, ProbeMax: 100 * time.Millisecond, AnnounceWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	arpFD := n.PacketSocket(t, ifname, unix.ETH_P_ARP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer unix.Close(arpFD)
		buf := make([]byte, 1514)
		for ctx.Err() == nil {
			nr, from, err := unix.Recvfrom(arpFD, buf, 0)
			if err != nil {
				continue
			}
			ll, ok := from.(*unix.SockaddrLinklayer)
			if !ok || ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			f := buf[:nr]
			cs.prober.Deliver(f)
			a, ok := parseARP(f[14:])
			if l := cs.leased.Load(); ok && l != nil && a.op == 1 && a.targetIP == *l {
				r := arpFrame(2, cs.mac, *l, net.HardwareAddr(a.senderMAC), a.senderIP)
				copy(r[0:6], a.senderMAC)
				unix.Sendto(arpFD, r, 0, &unix.SockaddrLinklayer{Ifindex: ll.Ifindex})
			}
		}
	}()
	go func() {
		defer wg.Done()
		link.Run(ctx, conn)
	}()
	cfg := Config{
		Transport: conn,
		HWAddr:    cs.mac,
		Hostname:  "gvrouter-test",
		ClientID:  append([]byte{1}, cs.mac...),
		Prober:    cs.prober,
		Clock:     scaledClock{start: time.Now()},
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnLease: func(old, new *Lease) {
			if new != nil {
				a := new.Addr.Addr()
				cs.leased.Store(&a)
			} else {
				cs.leased.Store(nil)
			}
			cs.leases <- change{old, new}
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	cs.c, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { cs.runErr <- cs.c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-cs.runErr; err != nil {
			t.Errorf("Run = %v", err)
		}
		wg.Wait()
	})
	return cs
}

func (cs *clientSide) next(t *testing.T, d time.Duration, what string) change {
	t.Helper()
	select {
	case ch := <-cs.leases:
		return ch
	case <-time.After(d):
		t.Fatalf("no OnLease call within %v: %s (status %+v)", d, what, cs.c.Status())
	}
	return change{}
}

// veth makes a veth pair a (in na, with MAC macA) and b (in nb) and
// brings both up.
func veth(t *testing.T, na *netnstest.Netns, a, macA string, nb *netnstest.Netns, b string) {
	na.IP(t, "link", "add", a, "address", macA, "type", "veth", "peer", "name", b, "netns", nb.Name())
	na.IP(t, "link", "set", a, "up")
	nb.IP(t, "link", "set", b, "up")
}

// wireLike turns TX checksum offload off on ifname in n, so that the
// server's datagrams carry full checksums as on a wire: over a veth they
// otherwise leave with the checksum only partly computed, which rawudp,
// like any receiver past the wire, rejects as malformed.
func wireLike(t *testing.T, n *netnstest.Netns, ifname string) {
	n.Run(t, "ethtool", "-K", ifname, "tx", "off")
}

// TestInteropDnsmasq runs the client against dnsmasq, the ISP's server,
// in network namespaces: acquire, a renewal at T1, rebinding and expiry
// when the server is gone (subtest lease, about 20 s), and DHCPDECLINE of
// an address a third host holds (subtest decline, about 4 s). The two run
// in parallel.
func TestInteropDnsmasq(t *testing.T) {
	netnstest.Privileged(t, "ip", "dnsmasq", "ethtool")
	t.Run("lease", func(t *testing.T) { t.Parallel(); testInteropLease(t) })
	t.Run("decline", func(t *testing.T) { t.Parallel(); testInteropDecline(t) })
}

func testInteropLease(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := netnstest.New(t, "d4c", netnstest.WithoutIPv6())
	cli := netnstest.New(t, "d4c", netnstest.WithoutIPv6())
	const serverMACs = "02:00:00:00:09:01"
	veth(t, srv, "s0", serverMACs, cli, "c0")
	srv.IP(t, "addr", "add", "10.9.0.1/24", "dev", "s0")
	wireLike(t, srv, "s0")
	w := watch(t, ctx, srv, "s0")
	proc, log := dnsmasq(t, srv, "--interface=s0", "--no-ping", "--domain=isp.test",
		"--dhcp-range=10.9.0.50,10.9.0.60,255.255.255.0,2m",
		"--dhcp-option=121,0.0.0.0/0,10.9.0.254,198.51.100.0/24,10.9.0.253",
		"--dhcp-option=26,1400", "--dhcp-option=6,10.9.0.53",
		"--dhcp-option=option:T1,20", "--dhcp-option=option:T2,40")
	leaseFile := filepath.Join(t.TempDir(), "wan.lease")
	cs := startClient(t, ctx, cli, "c0", func(c *Config) { c.LeaseFile = leaseFile })

	// Acquire.
	ch := cs.next(t, 10*time.Second, "the first lease")
	l := ch.new
	if ch.old != nil || l == nil {
		t.Fatalf("first OnLease = %+v, want (nil, lease)", ch)
	}
	t.Logf("bound %v after %v", l.Addr, time.Since(start))
	if a := l.Addr.Addr(); l.Addr.Bits() != 24 || a.Less(netip.MustParseAddr("10.9.0.50")) || netip.MustParseAddr("10.9.0.60").Less(a) {
		t.Errorf("address %v, want 10.9.0.50-60/24", l.Addr)
	}
	smac, _ := net.ParseMAC(serverMACs)
	want := Lease{
		Addr:      l.Addr,
		Server:    netip.MustParseAddr("10.9.0.1"),
		ServerMAC: smac,
		Routers:   []netip.Addr{netip.MustParseAddr("10.9.0.1")}, // dnsmasq sends its own address as option 3
		Routes: []Route{ // from option 121, preferred over 3 (RFC 3442)
			{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.9.0.254")},
			{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParseAddr("10.9.0.253")},
		},
		DNS:      []netip.Addr{netip.MustParseAddr("10.9.0.53")},
		Domain:   "isp.test",
		MTU:      1400,
		Acquired: l.Acquired,
		T1:       l.Acquired.Add(20 * time.Second),
		T2:       l.Acquired.Add(40 * time.Second),
		Expiry:   l.Acquired.Add(2 * time.Minute),
	}
	if diff := cmp.Diff(&want, l, eq); diff != "" {
		t.Errorf("lease from dnsmasq (-want +got):\n%s", diff)
	}
	ack, ok := w.find(start, func(x wire) bool { return x.msg.MessageType() == dhcpv4.MessageTypeAck })
	if !ok {
		t.Fatalf("no DHCPACK on the wire:\n%s", w.dump())
	}
	t.Logf("dnsmasq's DHCPACK: %s", hex.EncodeToString(ack.payload))
	if _, err := os.Stat(leaseFile); err != nil {
		t.Errorf("lease file: %v", err)
	}
	if got := cs.prober.Stats().Probes.Load(); got != ProbeNum {
		t.Errorf("ARP probes = %d, want %d", got, ProbeNum)
	}
	addr := l.Addr.Addr()

	// The renewal at T1, on the wire: unicast from the address to the
	// server's address and MAC, answered.
	isRenew := func(x wire) bool {
		return !x.out && x.msg.MessageType() == dhcpv4.MessageTypeRequest && x.src == addr && x.dst == want.Server && bytes.Equal(x.dstMAC, smac)
	}
	// The ACK is counted before the client binds it: wait for the bound
	// state too, or the status read below can still say RENEWING.
	waitFor(t, 10*time.Second, "the renewal at T1", func() bool {
		st := cs.c.Status()
		return cs.c.Stats().Acks.Load() >= 2 && st.State == "bound" && st.Lease != nil && st.Lease.Acquired.After(l.Acquired)
	})
	rn, ok := w.find(start, isRenew)
	if !ok {
		t.Fatalf("no unicast DHCPREQUEST from %v to %v on the wire:\n%s", addr, want.Server, w.dump())
	}
	if !rn.msg.ClientIPAddr.Equal(addr.AsSlice()) {
		t.Errorf("renewal ciaddr = %v, want %v", rn.msg.ClientIPAddr, addr)
	}
	if _, ok := w.find(rn.at, func(x wire) bool {
		return x.out && x.msg.MessageType() == dhcpv4.MessageTypeAck && x.dst == addr && x.msg.TransactionID == rn.msg.TransactionID
	}); !ok {
		t.Errorf("no unicast DHCPACK from dnsmasq to %v for the renewal:\n%s", addr, w.dump())
	}
	st := cs.c.Status()
	// The renewal's lease counts from its DHCPREQUEST, sent at T1 (the
	// timer's own latency, times speedup, is the slack).
	if st.State != "bound" || st.Lease.Acquired.Before(l.T1) || st.Lease.Acquired.After(l.T1.Add(slack)) {
		t.Errorf("after the renewal: %s, acquired %v; want BOUND, acquired at the first lease's T1 %v", st.State, st.Lease.Acquired, l.T1)
	}
	if !strings.Contains(log.String(), "DHCPACK(s0) "+addr.String()) {
		t.Errorf("dnsmasq did not log the DHCPACKs")
	}
	l2 := st.Lease
	t.Logf("renewed after %v", time.Since(start))

	// The server goes away: the next renewal goes unanswered, T2 rebinds
	// by broadcast, and the lease expires.
	killed := time.Now()
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "REBINDING", func() bool { return cs.c.Stats().Rebinds.Load() == 1 })
	rb, ok := w.find(killed, func(x wire) bool {
		return !x.out && x.msg.MessageType() == dhcpv4.MessageTypeRequest && x.dst == netip.MustParseAddr("255.255.255.255")
	})
	if !ok {
		// The watcher may lag the client by a receive: give it a moment.
		time.Sleep(200 * time.Millisecond)
		rb, ok = w.find(killed, func(x wire) bool {
			return !x.out && x.msg.MessageType() == dhcpv4.MessageTypeRequest && x.dst == netip.MustParseAddr("255.255.255.255")
		})
	}
	if !ok {
		t.Fatalf("no broadcast DHCPREQUEST after the server stopped:\n%s", w.dump())
	}
	if rb.src != addr || !rb.msg.ClientIPAddr.Equal(addr.AsSlice()) || !bytes.Equal(rb.dstMAC, rawudp.Broadcast) {
		t.Errorf("rebinding sent %v (MAC %v), want from %v with ciaddr, Ethernet broadcast", rb, rb.dstMAC, addr)
	}
	if _, ok := w.find(killed, isRenew); !ok {
		t.Errorf("no unicast renewal between the server's end and T2:\n%s", w.dump())
	}
	if st := cs.c.Status(); st.State != "rebinding" || st.Since.Before(l2.T2) || st.Since.After(l2.T2.Add(slack)) {
		t.Errorf("status %s since %v, want REBINDING since T2 %v", st.State, st.Since, l2.T2)
	}
	t.Logf("rebinding after %v", time.Since(start))

	ch = cs.next(t, 25*time.Second, "expiry")
	if ch.new != nil || ch.old == nil || ch.old.Addr != l.Addr {
		t.Fatalf("OnLease at expiry = %+v, want (lease, nil)", ch)
	}
	if now := cs.c.clock.Now(); now.Before(l2.Expiry) || now.After(l2.Expiry.Add(slack)) {
		t.Errorf("expired at %v, want at %v", now, l2.Expiry)
	}
	if got := cs.c.Stats().Expiries.Load(); got != 1 {
		t.Errorf("Expiries = %d, want 1", got)
	}
	waitFor(t, 5*time.Second, "a DHCPDISCOVER after expiry", func() bool {
		_, ok := w.find(killed, func(x wire) bool { return x.msg.MessageType() == dhcpv4.MessageTypeDiscover })
		return ok
	})
	t.Logf("expired after %v", time.Since(start))
}

func testInteropDecline(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv := netnstest.New(t, "d4c", netnstest.WithoutIPv6())
	cli := netnstest.New(t, "d4c", netnstest.WithoutIPv6())
	third := netnstest.New(t, "d4c", netnstest.WithoutIPv6())
	// One segment: the server's bridge with the client and a third host
	// that already holds 10.9.1.50.
	srv.IP(t, "link", "add", "br0", "type", "bridge", "forward_delay", "0")
	srv.IP(t, "link", "set", "br0", "up")
	srv.IP(t, "addr", "add", "10.9.1.1/24", "dev", "br0")
	wireLike(t, srv, "br0")
	const clientMACs = "02:00:00:00:0a:02"
	veth(t, cli, "c0", clientMACs, srv, "p0")
	veth(t, third, "t0", "02:00:00:00:0a:03", srv, "p1")
	srv.IP(t, "link", "set", "p0", "master", "br0")
	srv.IP(t, "link", "set", "p1", "master", "br0")
	third.IP(t, "addr", "add", "10.9.1.50/24", "dev", "t0")
	w := watch(t, ctx, srv, "br0")
	// dnsmasq offers the client 10.9.1.50 and, with --no-ping, does not
	// check it first.
	_, log := dnsmasq(t, srv, "--interface=br0", "--no-ping",
		"--dhcp-range=10.9.1.51,10.9.1.52,255.255.255.0,2m",
		"--dhcp-host="+clientMACs+",10.9.1.50")
	cs := startClient(t, ctx, cli, "c0", nil)

	ch := cs.next(t, 15*time.Second, "a lease after the decline")
	t.Logf("bound %v after %v", ch.new.Addr, time.Since(start))
	if ch.old != nil || ch.new == nil || !slices.Contains([]string{"10.9.1.51", "10.9.1.52"}, ch.new.Addr.Addr().String()) {
		t.Errorf("OnLease = %+v, want (nil, 10.9.1.51 or .52): never the address in use", ch)
	}
	dc, ok := w.find(start, func(x wire) bool { return x.msg.MessageType() == dhcpv4.MessageTypeDecline })
	if !ok {
		t.Fatalf("no DHCPDECLINE on the wire:\n%s", w.dump())
	}
	if got := dc.msg.Options.Get(dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, []byte{10, 9, 1, 50}) || dc.dst != netip.MustParseAddr("255.255.255.255") || !dc.src.IsUnspecified() {
		t.Errorf("DHCPDECLINE %v option 50 %v, want 0.0.0.0 -> 255.255.255.255 for 10.9.1.50", dc, got)
	}
	if !strings.Contains(log.String(), "DHCPDECLINE(br0) 10.9.1.50") {
		t.Errorf("dnsmasq did not log the DHCPDECLINE of 10.9.1.50")
	}
	// RFC 2131 §3.1.5: ten seconds (of the client's clock) before the
	// next DHCPDISCOVER.
	d, ok := w.find(dc.at, func(x wire) bool { return x.msg.MessageType() == dhcpv4.MessageTypeDiscover })
	if !ok {
		t.Fatalf("no DHCPDISCOVER after the DHCPDECLINE:\n%s", w.dump())
	}
	if gap := d.at.Sub(dc.at) * speedup; gap < DefaultDeclineWait-500*time.Millisecond {
		t.Errorf("DHCPDISCOVER %v (client time) after the DHCPDECLINE, want at least %v", gap, DefaultDeclineWait)
	}
	if s := cs.c.Stats(); s.Declines.Load() != 1 || cs.prober.Stats().Conflicts.Load() != 1 {
		t.Errorf("Declines %d, probe conflicts %d; want 1, 1", s.Declines.Load(), cs.prober.Stats().Conflicts.Load())
	}
	t.Logf("declined and bound elsewhere after %v", time.Since(start))
}
