package dhcp6client

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"golang.org/x/sys/unix"
)

// speedup is how much faster than real time the interop client's clock
// runs: kea's lifetimes (T1 4 s, T2 6 s, preferred 8 s, valid 10 s) then
// pass in half the time. kea keeps real time: it only answers.
const speedup = 2

// slack is how late (in the client's clock) a timer may fire or a
// datagram be seen on a loaded machine: half a second of real time.
const slack = speedup * 500 * time.Millisecond

// scaledClock is a Clock running speedup times faster than real time.
type scaledClock struct{ start time.Time }

func (c scaledClock) Now() time.Time { return c.start.Add(time.Since(c.start) * speedup) }

func (c scaledClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc((d+speedup-1)/speedup, f)
}

// The lab link: the ISP's server side (s0) and the router's WAN (c0).
const (
	serverMACs = "02:00:00:00:09:01"
	clientMACs = "02:00:00:00:09:02"
)

var (
	keaDUID = []byte{0, 3, 0, 1, 2, 0, 0, 0, 9, 1} // DUID-LL of serverMACs, as the kea config sets it
	labLL   = netip.MustParseAddr("fe80::ff:fe00:902")
	keaLL   = netip.MustParseAddr("fe80::ff:fe00:901")
	pdPool  = netip.MustParsePrefix("2001:db8:aa00::/48")
)

// wire is one DHCPv6 datagram a watcher saw on a link.
type wire struct {
	at      time.Time // real time
	out     bool      // sent by the watcher's own namespace (the server's side)
	src     netip.Addr
	dst     netip.Addr
	dstMAC  net.HardwareAddr
	msg     *dhcpv6.Message
	payload []byte
}

func (w wire) String() string {
	return fmt.Sprintf("%s %v->%v xid %v", w.msg.MessageType, w.src, w.dst, w.msg.TransactionID)
}

// watcher records the DHCPv6 datagrams on one interface of a namespace
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
			f := buf[:nr]
			// IPv6, UDP straight after the fixed header, port 546 or 547.
			if nr < 14+40+8 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[14+6] != 17 {
				continue
			}
			u := f[14+40:]
			if dp := binary.BigEndian.Uint16(u[2:]); dp != 546 && dp != 547 {
				continue
			}
			m, err := dhcpv6.MessageFromBytes(u[8:])
			if err != nil {
				continue
			}
			ll, _ := from.(*unix.SockaddrLinklayer)
			w.mu.Lock()
			w.got = append(w.got, wire{at: time.Now(), out: ll != nil && ll.Pkttype == unix.PACKET_OUTGOING,
				src: netip.AddrFrom16([16]byte(f[14+8:])), dst: netip.AddrFrom16([16]byte(f[14+24:])),
				dstMAC: bytes.Clone(f[:6]), msg: m, payload: bytes.Clone(u[8:])})
			w.mu.Unlock()
		}
	}()
	return w
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

// findSoon is find, waiting up to a second for the watcher to catch up.
func (w *watcher) findSoon(since time.Time, f func(wire) bool) (wire, bool) {
	for end := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		if x, ok := w.find(since, f); ok || time.Now().After(end) {
			return x, ok
		}
	}
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

// is matches a datagram of type mt sent by the client (!out) or the
// server (out).
func is(mt dhcpv6.MessageType, out bool) func(wire) bool {
	return func(x wire) bool { return x.msg.MessageType == mt && x.out == out }
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

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// lab makes the two namespaces and the veth between them: srv (IPv6 on,
// no DAD, s0 with full checksums and a static neighbour entry for the
// client's link-local address, which the router's netstack would answer
// for) and cli (IPv6 off: the kernel stays out, the client has c0's raw
// frames to itself).
func lab(t *testing.T) (srv, cli *netnstest.Netns) {
	srv = netnstest.New(t, "d6c")
	cli = netnstest.New(t, "d6c", netnstest.WithoutIPv6())
	srv.Do(t, func() {
		for _, f := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/accept_dad", []byte("0"), 0); err != nil {
				t.Errorf("accept_dad: %v", err)
			}
		}
	})
	srv.IP(t, "link", "add", "s0", "address", serverMACs, "type", "veth", "peer", "name", "c0", "address", clientMACs, "netns", cli.Name())
	srv.IP(t, "link", "set", "s0", "up")
	cli.IP(t, "link", "set", "c0", "up")
	// Full checksums on the wire: a veth otherwise leaves them to an
	// offload that never happens, and rawudp rejects them.
	srv.Run(t, "ethtool", "-K", "s0", "tx", "off")
	srv.IP(t, "-6", "neigh", "add", labLL.String(), "dev", "s0", "lladdr", clientMACs, "nud", "permanent")
	return srv, cli
}

// kea runs kea-dhcp6 as the ISP's server on s0 in n: a /56 from a /48
// pd-pool, T1 4 s, T2 6 s, preferred 8 s, valid 10 s, DNS and a search
// domain, its DUID fixed, leases in a memfile in a temp dir. It stops
// kea, by its PID, when the test ends, and returns the process, its log
// and the lease file's path.
func kea(t *testing.T, n *netnstest.Netns) (*os.Process, *syncBuffer, string) {
	t.Helper()
	dir := t.TempDir()
	leases := filepath.Join(dir, "leases6.csv")
	cfg := map[string]any{"Dhcp6": map[string]any{
		"interfaces-config": map[string]any{"interfaces": []string{"s0"}},
		"server-id":         map[string]any{"type": "LL", "htype": 1, "identifier": strings.ReplaceAll(serverMACs, ":", ""), "persist": false},
		"data-directory":    dir,
		"lease-database":    map[string]any{"type": "memfile", "persist": true, "name": leases, "lfc-interval": 0},
		"renew-timer":       4, "rebind-timer": 6, "preferred-lifetime": 8, "valid-lifetime": 10,
		"option-data": []map[string]any{
			{"name": "dns-servers", "data": "2001:db8::53"},
			{"name": "domain-search", "data": "isp.test"},
		},
		"subnet6": []map[string]any{{
			"id": 1, "subnet": "2001:db8:1::/64", "interface": "s0",
			"pd-pools": []map[string]any{{"prefix": pdPool.Addr().String(), "prefix-len": pdPool.Bits(), "delegated-len": 56}},
		}},
		"loggers": []map[string]any{{"name": "kea-dhcp6", "output_options": []map[string]any{{"output": "stdout"}}, "severity": "INFO"}},
	}}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(dir, "kea-dhcp6.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	cmd := exec.Command("ip", "netns", "exec", n.Name(), "kea-dhcp6", "-c", path) // ip netns exec execs kea: same PID
	cmd.Env = append(os.Environ(), "KEA_LOCKFILE_DIR="+dir, "KEA_PIDFILE_DIR="+dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start kea-dhcp6: %v", err)
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
			t.Logf("kea-dhcp6 log:\n%s", log.String())
		}
	})
	waitFor(t, 10*time.Second, "kea-dhcp6 to start", func() bool { return strings.Contains(log.String(), "DHCP6_STARTED") })
	return cmd.Process, log, leases
}

// clientSide runs the client under test in n on c0: a rawudp IPv6 Conn
// on a PacketLink6, as the router runs it on the WAN's frame tap.
type clientSide struct {
	c          *Client
	changes    chan *Lease
	runErr     chan error
	cancel     context.CancelFunc // the client's
	cancelLink context.CancelFunc // the link's, after the client has stopped (and released)
	wg         sync.WaitGroup
}

func startClient(t *testing.T, n *netnstest.Netns, mod func(*Config)) *clientSide {
	t.Helper()
	var link *rawudp.PacketLink
	var err error
	n.Do(t, func() { link, err = rawudp.OpenPacketLink6("c0") })
	if err != nil {
		t.Fatal(err)
	}
	conn := rawudp.New6(link, ClientPort, 64)
	ctx, cancel := context.WithCancel(context.Background())
	linkCtx, cancelLink := context.WithCancel(context.Background())
	cs := &clientSide{changes: make(chan *Lease, 16), runErr: make(chan error, 1), cancel: cancel, cancelLink: cancelLink}
	cs.wg.Add(1)
	go func() { defer cs.wg.Done(); link.Run(linkCtx, conn) }()
	cfg := Config{
		Transport: conn,
		HWAddr:    link.HardwareAddr(),
		PDLength:  56,
		Clock:     scaledClock{start: time.Now()},
		Rand:      fakeclock.NewCounting(middle), // a 0.5 s initial delay, no jitter
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnChange:  func(l *Lease) { cs.changes <- l },
	}
	if mod != nil {
		mod(&cfg)
	}
	if cs.c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if cs.c.cfg.SrcAddr != labLL {
		t.Fatalf("SrcAddr %v, want the EUI-64 link-local %v", cs.c.cfg.SrcAddr, labLL)
	}
	go func() { cs.runErr <- cs.c.Run(ctx) }()
	t.Cleanup(func() { cs.stop(t) })
	return cs
}

// stop stops the client (releasing with ReleaseOnStop) and its link.
func (cs *clientSide) stop(t *testing.T) {
	if cs.cancel == nil {
		return
	}
	cs.cancel()
	cs.cancel = nil
	if err := <-cs.runErr; err != nil {
		t.Errorf("Run = %v", err)
	}
	cs.cancelLink()
	cs.wg.Wait()
}

func (cs *clientSide) next(t *testing.T, d time.Duration, what string) *Lease {
	t.Helper()
	select {
	case l := <-cs.changes:
		return l
	case <-time.After(d):
		t.Fatalf("no OnChange within %v: %s (status %+v)", d, what, cs.c.Status())
	}
	return nil
}

// TestInteropKea runs the client against kea-dhcp6, the ISP's server, in
// network namespaces: delegation, a real Renew at T1, and with kea gone
// Rebind at T2 and the loss at the end of the valid lifetime (subtest
// lease, about 8 s); a restart that confirms the saved lease with Rebind
// and a stop that releases it (subtest restart, about 3 s). scapy's
// malformed replies are TestInteropScapy's.
func TestInteropKea(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool", "kea-dhcp6")
	t.Run("lease", func(t *testing.T) { t.Parallel(); testInteropLease(t) })
	t.Run("restart", func(t *testing.T) { t.Parallel(); testInteropRestart(t) })
}

// checkKeaLease checks a lease from kea against its configuration.
func checkKeaLease(t *testing.T, l *Lease) {
	t.Helper()
	if len(l.Prefixes) != 1 {
		t.Fatalf("lease %+v, want one prefix", l)
	}
	p := l.Prefixes[0]
	if p.Prefix.Bits() != 56 || !pdPool.Contains(p.Prefix.Addr()) || p.PreferredLifetime != 8*time.Second || p.ValidLifetime != 10*time.Second {
		t.Errorf("prefix %v lifetimes %v/%v, want a /56 of %v, 8s/10s", p.Prefix, p.PreferredLifetime, p.ValidLifetime, pdPool)
	}
	if !p.PreferredUntil.Equal(l.Acquired.Add(8*time.Second)) || !p.ValidUntil.Equal(l.Acquired.Add(10*time.Second)) ||
		!l.T1.Equal(l.Acquired.Add(4*time.Second)) || !l.T2.Equal(l.Acquired.Add(6*time.Second)) {
		t.Errorf("times from %v: preferred %v valid %v T1 %v T2 %v; want +8s, +10s, +4s, +6s", l.Acquired, p.PreferredUntil, p.ValidUntil, l.T1, l.T2)
	}
	if !bytes.Equal(l.ServerID, keaDUID) || l.ServerAddr != keaLL || l.ServerMAC.String() != serverMACs {
		t.Errorf("server %x at %v (%v), want %x at %v (%s)", l.ServerID, l.ServerAddr, l.ServerMAC, keaDUID, keaLL, serverMACs)
	}
	if len(l.DNS) != 1 || l.DNS[0] != netip.MustParseAddr("2001:db8::53") || len(l.Domains) != 1 || l.Domains[0] != "isp.test" {
		t.Errorf("DNS %v domains %v, want [2001:db8::53] [isp.test]", l.DNS, l.Domains)
	}
}

func testInteropLease(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, cli := lab(t)
	w := watch(t, ctx, srv, "s0")
	proc, log, leases := kea(t, srv)
	leaseFile := filepath.Join(t.TempDir(), "wan.lease")
	cs := startClient(t, cli, func(c *Config) { c.LeaseFile = leaseFile })

	// Delegation.
	l := cs.next(t, 5*time.Second, "the delegation")
	if l == nil {
		t.Fatalf("first OnChange = nil, want a lease")
	}
	t.Logf("delegated %v after %v", l.Prefixes[0].Prefix, time.Since(start))
	checkKeaLease(t, l)
	sol, ok := w.find(start, is(dhcpv6.MessageTypeSolicit, false))
	if !ok {
		t.Fatalf("no Solicit on the wire:\n%s", w.dump())
	}
	if sol.src != labLL || sol.dst != AllAgents || sol.dstMAC.String() != "33:33:00:01:00:02" {
		t.Errorf("Solicit %v -> %v (MAC %v), want %v -> ff02::1:2 (33:33:00:01:00:02)", sol.src, sol.dst, sol.dstMAC, labLL)
	}
	rep, ok := w.find(start, is(dhcpv6.MessageTypeReply, true))
	if !ok {
		t.Fatalf("no Reply from kea on the wire:\n%s", w.dump())
	}
	t.Logf("kea's Reply: %s", hex.EncodeToString(rep.payload))
	if !strings.Contains(log.String(), "DHCP6_PD_LEASE_ALLOC") {
		t.Errorf("kea did not log the delegation (DHCP6_PD_LEASE_ALLOC)")
	}
	if data, err := os.ReadFile(leases); err != nil || !bytes.Contains(data, []byte(l.Prefixes[0].Prefix.Addr().String())) {
		t.Errorf("kea's lease file %s lacks %v: %v\n%s", leases, l.Prefixes[0].Prefix, err, data)
	}
	if _, err := os.Stat(leaseFile); err != nil {
		t.Errorf("client's lease file: %v", err)
	}

	// The Renew at T1, on the wire, to kea by its DUID, and kea's Reply.
	l2 := cs.next(t, 5*time.Second, "the renewal at T1")
	if l2 == nil || l2.Prefixes[0].Prefix != l.Prefixes[0].Prefix || !l2.Acquired.After(l.Acquired) {
		t.Fatalf("OnChange after T1 = %+v, want the same prefix with new times", l2)
	}
	checkKeaLease(t, l2)
	if l2.Acquired.Before(l.T1) || l2.Acquired.After(l.T1.Add(slack)) {
		t.Errorf("renewal sent at %v, want at T1 %v", l2.Acquired, l.T1)
	}
	rn, ok := w.findSoon(start, is(dhcpv6.MessageTypeRenew, false))
	if !ok {
		t.Fatalf("no Renew on the wire:\n%s", w.dump())
	}
	if sid := rawOption(rn.payload, dhcpv6.OptionServerID); !bytes.Equal(sid, keaDUID) || rn.dst != AllAgents {
		t.Errorf("Renew to %v with Server Identifier %x, want to ff02::1:2 naming %x", rn.dst, sid, keaDUID)
	}
	if _, ok := w.findSoon(rn.at, func(x wire) bool {
		return x.out && x.msg.MessageType == dhcpv6.MessageTypeReply && x.msg.TransactionID == rn.msg.TransactionID
	}); !ok {
		t.Errorf("no Reply from kea to the Renew:\n%s", w.dump())
	}
	if st := cs.c.Status(); st.State != "bound" || cs.c.Stats().Renewals.Load() != 1 {
		t.Errorf("after the renewal: %s, renewals %d; want BOUND, 1", st.State, cs.c.Stats().Renewals.Load())
	}
	t.Logf("renewed after %v", time.Since(start))

	// kea goes away: the next Renew is not answered, T2 rebinds, and the
	// prefix is withdrawn when its valid lifetime ends.
	killed := time.Now()
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone := cs.next(t, 10*time.Second, "the loss of the prefix")
	if gone != nil {
		t.Fatalf("OnChange after kea stopped = %+v, want nil at the valid lifetime's end", gone)
	}
	if now := cs.c.clock.Now(); now.Before(l2.Prefixes[0].ValidUntil) || now.After(l2.Prefixes[0].ValidUntil.Add(slack)) {
		t.Errorf("lost at %v, want at the valid lifetime's end %v", now, l2.Prefixes[0].ValidUntil)
	}
	if _, ok := w.findSoon(killed, is(dhcpv6.MessageTypeRenew, false)); !ok {
		t.Errorf("no Renew between kea's end and T2:\n%s", w.dump())
	}
	rb, ok := w.findSoon(killed, is(dhcpv6.MessageTypeRebind, false))
	if !ok {
		t.Fatalf("no Rebind after kea stopped:\n%s", w.dump())
	}
	if rawOption(rb.payload, dhcpv6.OptionServerID) != nil {
		t.Errorf("Rebind names a server")
	}
	s := cs.c.Stats()
	if s.Rebindings.Load() != 1 || s.Losses.Load() != 1 || s.Drops.Total() != 0 {
		t.Errorf("rebindings %d, losses %d, drops %d; want 1, 1, 0", s.Rebindings.Load(), s.Losses.Load(), s.Drops.Total())
	}
	if _, ok := w.findSoon(killed, is(dhcpv6.MessageTypeSolicit, false)); !ok {
		t.Errorf("no Solicit after the loss:\n%s", w.dump())
	}
	if _, err := os.Stat(leaseFile); !os.IsNotExist(err) {
		t.Errorf("client's lease file after the loss: %v, want it removed", err)
	}
	t.Logf("lost after %v", time.Since(start))
}

func testInteropRestart(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, cli := lab(t)
	w := watch(t, ctx, srv, "s0")
	_, log, _ := kea(t, srv)
	dir := t.TempDir()
	files := func(c *Config) {
		c.LeaseFile, c.DUIDFile = filepath.Join(dir, "wan.lease"), filepath.Join(dir, "wan.duid")
	}
	cs := startClient(t, cli, files)
	l := cs.next(t, 5*time.Second, "the delegation")
	checkKeaLease(t, l)
	duid := cs.c.DUID()
	cs.stop(t) // no Release: the lease stays saved

	restarted := time.Now()
	cs2 := startClient(t, cli, func(c *Config) { files(c); c.ReleaseOnStop = true })
	if !bytes.Equal(cs2.c.DUID(), duid) {
		t.Errorf("DUID after the restart %x, want %x", cs2.c.DUID(), duid)
	}
	l2 := cs2.next(t, 3*time.Second, "the confirmed lease")
	if l2 == nil || l2.Prefixes[0].Prefix != l.Prefixes[0].Prefix {
		t.Fatalf("lease after the restart %+v, want %v again", l2, l.Prefixes[0].Prefix)
	}
	checkKeaLease(t, l2)
	rb, ok := w.findSoon(restarted, is(dhcpv6.MessageTypeRebind, false))
	if !ok {
		t.Fatalf("no Rebind after the restart:\n%s", w.dump())
	}
	if _, ok := w.find(restarted, is(dhcpv6.MessageTypeSolicit, false)); ok {
		t.Errorf("Solicit after the restart: the saved lease must be confirmed by Rebind (RFC 8415 §18.2.12)\n%s", w.dump())
	}
	if _, ok := w.findSoon(rb.at, func(x wire) bool {
		return x.out && x.msg.MessageType == dhcpv6.MessageTypeReply && x.msg.TransactionID == rb.msg.TransactionID
	}); !ok {
		t.Errorf("no Reply from kea to the Rebind:\n%s", w.dump())
	}

	stopped := time.Now()
	cs2.stop(t)
	if gone := cs2.next(t, time.Second, "the release"); gone != nil {
		t.Errorf("OnChange at the stop = %+v, want nil", gone)
	}
	rel, ok := w.findSoon(stopped, is(dhcpv6.MessageTypeRelease, false))
	if !ok {
		t.Fatalf("no Release at the stop:\n%s", w.dump())
	}
	if _, ok := w.findSoon(rel.at, func(x wire) bool {
		return x.out && x.msg.MessageType == dhcpv6.MessageTypeReply && x.msg.TransactionID == rel.msg.TransactionID
	}); !ok {
		t.Errorf("no Reply from kea to the Release:\n%s", w.dump())
	}
	waitFor(t, 2*time.Second, "kea to log the release", func() bool { return strings.Contains(log.String(), "DHCP6_RELEASE_PD") })
	if got := cs2.c.Stats().Releases.Load(); got != 1 {
		t.Errorf("Releases = %d, want 1 (kea answered the first)", got)
	}
	t.Logf("restarted, confirmed and released after %v", time.Since(start))
}

// scapy runs testdata/malformed.py in n on s0 and returns a function that
// waits for a line it prints and one that tells it to go on.
func scapy(t *testing.T, n *netnstest.Netns) (expect func(line string), goOn func()) {
	t.Helper()
	script, err := filepath.Abs("testdata/malformed.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.Name(), "/usr/bin/python3", script, "s0", serverMACs, clientMACs, keaLL.String(), labLL.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start scapy: %v", err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		var buf []byte
		b := make([]byte, 512)
		for {
			n, err := out.Read(b)
			buf = append(buf, b[:n]...)
			for {
				i := bytes.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				lines <- string(buf[:i])
				buf = buf[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill() // by its PID: ip netns exec execs python
		cmd.Wait()
		if t.Failed() {
			t.Logf("scapy stderr:\n%s", stderr.String())
		}
	})
	expect = func(want string) {
		t.Helper()
		timeout := time.After(20 * time.Second) // scapy's import alone takes seconds
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("scapy ended before %q:\n%s", want, stderr.String())
				}
				t.Logf("scapy: %s", l)
				if l == want {
					return
				}
				if l == "timeout" {
					t.Fatalf("scapy saw no client message before %q", want)
				}
			case <-timeout:
				t.Fatalf("scapy did not print %q", want)
			}
		}
	}
	goOn = func() {
		if _, err := stdin.Write([]byte("go\n")); err != nil {
			t.Fatalf("tell scapy to go on: %v", err)
		}
	}
	return expect, goOn
}

// TestInteropScapy has scapy, an independent DHCPv6 encoder, answer the
// client in network namespaces: Advertises and Replies it must drop (a
// wrong transaction id, options cut short, a Relay-reply, another
// client's DUID, an Advertise without IA_PD, a Reply from another server)
// are each counted and change nothing, and then scapy's good Advertise
// and Reply bind the client.
func TestInteropScapy(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool", "/usr/bin/python3")
	if err := exec.Command("/usr/bin/python3", "-c", "import scapy.layers.dhcp6").Run(); err != nil {
		netnstest.SkipOrFail(t, "needs python3-scapy: %v", err)
	}
	t.Parallel()
	srv, cli := lab(t)
	expect, goOn := scapy(t, srv)
	expect("ready")
	cs := startClient(t, cli, nil)
	d := &cs.c.stats.Drops
	drops := func(want map[string]uint64) func() bool {
		return func() bool {
			got := map[string]uint64{"xid": d.XID.Load(), "malformed": d.Malformed.Load(), "relay": d.Relay.Load(),
				"client": d.ClientID.Load(), "noprefix": d.NoPrefix.Load(), "server": d.ServerID.Load()}
			for k, v := range got {
				if want[k] != v {
					return false
				}
			}
			return d.Total() == sum(want)
		}
	}

	expect("advertise-junk-done")
	waitFor(t, 2*time.Second, "the bad Advertises counted", drops(map[string]uint64{"xid": 1, "malformed": 1, "relay": 1, "client": 1, "noprefix": 1}))
	if st, s := cs.c.Status(), cs.c.Stats(); st.State != "solicit" || s.Advertises.Load() != 0 || s.Requests.Load() != 0 || len(cs.changes) != 0 {
		t.Fatalf("after the bad Advertises: %s, advertises %d, requests %d; want SOLICIT, 0, 0", st.State, s.Advertises.Load(), s.Requests.Load())
	}
	goOn()
	expect("advertise-sent")
	expect("reply-junk-done")
	waitFor(t, 2*time.Second, "the bad Replies counted", drops(map[string]uint64{"xid": 2, "malformed": 2, "relay": 2, "client": 2, "noprefix": 1, "server": 1}))
	if st := cs.c.Status(); st.State != "request" || st.Lease != nil || len(cs.changes) != 0 || cs.c.Stats().Replies.Load() != 0 {
		t.Fatalf("after the bad Replies: %s, lease %v; want REQUEST without one", st.State, st.Lease)
	}
	goOn()
	expect("reply-sent")
	l := cs.next(t, 3*time.Second, "scapy's Reply")
	if l == nil || len(l.Prefixes) != 1 || l.Prefixes[0].Prefix != netip.MustParsePrefix("2001:db8:cc00::/56") ||
		l.Prefixes[0].ValidLifetime != 2*time.Hour || !l.T1.Equal(l.Acquired.Add(30*time.Minute)) ||
		len(l.DNS) != 1 || l.DNS[0] != netip.MustParseAddr("2001:db8::53") || !bytes.Equal(l.ServerID, keaDUID) {
		t.Fatalf("lease from scapy %+v, want 2001:db8:cc00::/56 valid 2h, T1 30m, DNS 2001:db8::53 from %x", l, keaDUID)
	}
	if got := d.Total(); got != 10 {
		t.Errorf("drops = %d, want the 10 bad messages", got)
	}
}

func sum(m map[string]uint64) uint64 {
	var s uint64
	for _, v := range m {
		s += v
	}
	return s
}
