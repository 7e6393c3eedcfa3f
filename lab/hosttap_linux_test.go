package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer is a TCP listener in a lab namespace's kernel that echoes
// one line per connection and records who connected.
type echoServer struct {
	ln    net.Listener
	mu    sync.Mutex
	peers []netip.AddrPort
	wg    sync.WaitGroup
}

func listenEcho(ns, addr string) (*echoServer, error) {
	s := &echoServer{}
	err := inNetns(ns, func() error {
		var err error
		s.ln, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.peers = append(s.peers, c.RemoteAddr().(*net.TCPAddr).AddrPort())
			s.mu.Unlock()
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	return s, nil
}

func (s *echoServer) close() { s.ln.Close(); s.wg.Wait() }

func (s *echoServer) peerList() []netip.AddrPort {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.AddrPort(nil), s.peers...)
}

// roundTrip connects from namespace ns to addr, sends msg and wants it
// back; it returns the connection's local address.
func roundTrip(ns, addr, msg string, timeout time.Duration) (netip.AddrPort, error) {
	var c net.Conn
	if err := inNetns(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, timeout)
		return err
	}); err != nil {
		return netip.AddrPort{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, msg); err != nil {
		return netip.AddrPort{}, err
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if string(got) != msg {
		return netip.AddrPort{}, fmt.Errorf("%s echoed %q, want %q", addr, got, msg)
	}
	return c.LocalAddr().(*net.TCPAddr).AddrPort(), nil
}

// TestLabHostTAP runs the lab with host: (a TAP into the router
// namespace's kernel, kernel address 10.255.0.2, lan:2222 forwarded to
// it) and checks, against the kernel's own TCP stack: (a) the LAN host
// reaches a listener on the kernel's address; (b) the LAN host reaches it
// through the router's lan address and the host forward; (c) the kernel
// reaches the WAN host through the router's masquerade and resolves
// names through its DNS forwarder; (e) the WAN host
// reaches it neither through the WAN address's port nor on the kernel's
// address; the host interface and TAP port on the status page; and (d)
// SIGKILL of the router makes the TAP vanish (time logged). It logs the
// kernel→LAN host iperf3 throughput over the TAP.
func TestLabHostTAP(t *testing.T) {
	requirePrivileged(t, "iperf3", "dig")
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		hostTap:      true,
		testHook:     func(l *lab) error { return checkHostTAP(t, l) },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}

func checkHostTAP(t *testing.T, l *lab) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	kernel := hostKernel4.Addr().String()
	srv, err := listenEcho(l.rtrNS, net.JoinHostPort("0.0.0.0", strconv.Itoa(hostForwardPort)))
	if err != nil {
		return fmt.Errorf("listener in %s: %w", l.rtrNS, err)
	}
	defer srv.close()

	// (a) LAN host → the kernel's address.
	local, err := roundTrip(l.lanNS, net.JoinHostPort(kernel, strconv.Itoa(hostForwardPort)), "hello kernel", 5*time.Second)
	if err != nil {
		return fmt.Errorf("(a) LAN host to the kernel's address: %w", err)
	}
	if p := srv.peerList(); len(p) != 1 || p[0] != local {
		return fmt.Errorf("(a) the kernel saw %v, want the LAN host's %v (routed, not translated)", p, local)
	}
	// (b) LAN host → router's lan address:2222 → the kernel.
	if _, err := roundTrip(l.lanNS, net.JoinHostPort(lanRouter4.Addr().String(), strconv.Itoa(hostForwardPort)), "hello forward", 5*time.Second); err != nil {
		return fmt.Errorf("(b) LAN host to the router's lan address through the host forward: %w", err)
	}
	if p := srv.peerList(); len(p) != 2 {
		return fmt.Errorf("(b) the kernel's listener saw %v, want a second connection", p)
	}
	t.Logf("(a)+(b): kernel listener peers %v", srv.peerList())

	// (c) the kernel → WAN host, masqueraded behind the router's WAN
	// address.
	wanSrv, err := listenEcho(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 9099).String())
	if err != nil {
		return err
	}
	defer wanSrv.close()
	if _, err := roundTrip(l.rtrNS, netip.AddrPortFrom(wanHost4.Addr(), 9099).String(), "hello internet", 5*time.Second); err != nil {
		return fmt.Errorf("(c) the kernel to the WAN host: %w", err)
	}
	if p := wanSrv.peerList(); len(p) != 1 || p[0].Addr() != wanRouter4.Addr() {
		return fmt.Errorf("(c) the WAN host saw %v, want the router's WAN address %s (masquerade)", p, wanRouter4.Addr())
	}

	// The kernel resolves names through the router's DNS forwarder,
	// which serves the host interface like any lan one.
	ans, err := output(ctx, l.rtrNS, "dig", "+short", "+time=2", "+tries=3", "@"+hostRouter4.Addr().String(), ispWebName, "A")
	if err != nil || strings.TrimSpace(string(ans)) != ispWebAddr.String() {
		return fmt.Errorf("the kernel's query for %s to the router's DNS: %q, %v; want %s", ispWebName, ans, err, ispWebAddr)
	}

	// (e) the WAN host gets in neither by the forwarded port on the
	// WAN address nor straight to the kernel's address.
	for _, to := range []string{wanRouter4.Addr().String(), kernel, lanRouter4.Addr().String()} {
		addr := net.JoinHostPort(to, strconv.Itoa(hostForwardPort))
		if _, err := roundTrip(l.wanNS, addr, "intruder", 2*time.Second); err == nil {
			return fmt.Errorf("(e) the WAN host reached %s", addr)
		}
	}
	for _, p := range srv.peerList() {
		if p.Addr() == wanHost4.Addr() || p.Addr() == wanRouter4.Addr() {
			return fmt.Errorf("(e) the kernel's listener accepted a WAN connection from %v", p)
		}
	}

	// The status page lists the host interface and its TAP port.
	snap, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return err
	}
	foundIf, foundPort := false, false
	for _, ic := range snap.Interfaces {
		foundIf = foundIf || ic.Name == "host" && ic.State == "up"
	}
	for _, p := range snap.Ports {
		if p.Name == hostTapName && p.RxPackets > 0 && p.TxPackets > 0 {
			foundPort = true
		}
	}
	if !foundIf || !foundPort {
		return fmt.Errorf("status page: host interface up %v, %s port with traffic %v; interfaces %+v ports %+v", foundIf, hostTapName, foundPort, snap.Interfaces, snap.Ports)
	}

	// Throughput, kernel (router namespace) → LAN host, through the TAP
	// and the router.
	if bps, err := hostIperf(ctx, l); err != nil {
		return fmt.Errorf("iperf3 over the TAP: %w", err)
	} else {
		t.Logf("iperf3 kernel -> LAN host over the host TAP: %.0f Mbit/s", bps/1e6)
	}

	// A reload that moves the link to other addresses makes the TAP
	// anew with them, and the forward follows.
	if err := reloadHostTAP(ctx, l, srv); err != nil {
		return fmt.Errorf("reload: %w", err)
	}

	// (d) SIGKILL: the TAP goes with the process.
	gone := func() bool {
		return inNetns(l.rtrNS, func() error { _, err := net.InterfaceByName(hostTapName); return err }) != nil
	}
	if gone() {
		return fmt.Errorf("(d) %s is not there before the kill", hostTapName)
	}
	start := time.Now()
	if err := l.router.cmd.Process.Kill(); err != nil {
		return err
	}
	for !gone() {
		if time.Since(start) > 5*time.Second {
			return fmt.Errorf("(d) %s still exists 5 s after SIGKILL of the router", hostTapName)
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	<-l.router.done
	l.router = nil // killed on purpose: teardown has nothing to stop
	t.Logf("(d) SIGKILL of the router -> %s gone in %v", hostTapName, took.Round(100*time.Microsecond))
	return nil
}

// hostIperf runs iperf3 for 5 s from the router namespace's kernel to a
// server on the LAN host and returns the received bit rate.
func hostIperf(ctx context.Context, l *lab) (float64, error) {
	port := strconv.Itoa(5301)
	srv, err := startChild(l.log, "iperf3-host", l.lanNS, filepath.Join(l.dir, "iperf3-host.log"), "iperf3", "-s", "-1", "-B", lanHost4.Addr().String(), "-p", port)
	if err != nil {
		return 0, err
	}
	defer srv.stop()
	var res []byte
	for i := 0; ; i++ {
		cmd := command(ctx, l.rtrNS, "iperf3", "-c", lanHost4.Addr().String(), "-p", port, "-t", "5", "-J")
		res, err = cmd.Output()
		// iperf3 -J may exit 0 with the error in its JSON.
		var ee *exec.ExitError
		if i == 50 || err != nil && !errors.As(err, &ee) || !bytes.Contains(res, []byte("unable to connect")) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the server is not listening yet
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, res)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.End.SumReceived.BitsPerSecond == 0 {
		return 0, fmt.Errorf("iperf3 JSON: %v: %s", err, res)
	}
	return r.End.SumReceived.BitsPerSecond, nil
}

// reloadHostTAP rewrites the lab config with the host link on
// 10.255.0.8/30, sends SIGHUP and checks that the kernel's side has the
// new address and that the LAN host reaches it both ways.
func reloadHostTAP(ctx context.Context, l *lab, srv *echoServer) error {
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	next := strings.NewReplacer(hostRouter4.String(), "10.255.0.9/30", hostKernel4.String(), "10.255.0.10/30").Replace(string(orig))
	if next == string(orig) {
		return fmt.Errorf("lab config has no host: addresses to move:\n%s", orig)
	}
	if err := os.WriteFile(cfgPath, []byte(next), 0o600); err != nil {
		return err
	}
	if err := l.router.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return err
	}
	kernel := "10.255.0.10"
	var addrs []net.Addr
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := inNetns(l.rtrNS, func() error {
			ifc, err := net.InterfaceByName(hostTapName)
			if err == nil {
				addrs, err = ifc.Addrs()
			}
			return err
		})
		if err == nil && slicesContainsAddr(addrs, kernel) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s has %v (%v) 10 s after the reload, want %s; router log:\n%s", hostTapName, addrs, err, kernel, tail(filepath.Join(l.dir, "router.log"), 2000))
		}
	}
	before := len(srv.peerList())
	// The router's netstack may still be resolving the new kernel MAC:
	// allow a few attempts.
	var last error
	for i := 0; i < 20; i++ {
		if _, last = roundTrip(l.lanNS, net.JoinHostPort(kernel, strconv.Itoa(hostForwardPort)), "hello new kernel", 2*time.Second); last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		return fmt.Errorf("LAN host to the kernel's new address: %w", last)
	}
	if _, err := roundTrip(l.lanNS, net.JoinHostPort(lanRouter4.Addr().String(), strconv.Itoa(hostForwardPort)), "hello new forward", 5*time.Second); err != nil {
		return fmt.Errorf("the host forward after the reload: %w", err)
	}
	if got := len(srv.peerList()) - before; got < 2 {
		return fmt.Errorf("the kernel's listener saw %d new connections after the reload, want 2", got)
	}
	return nil
}

func slicesContainsAddr(addrs []net.Addr, ip string) bool {
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
			return true
		}
	}
	return false
}
