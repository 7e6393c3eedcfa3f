package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// The per-host conntrack limit test: one inside host may hold no more than
// its share of the table. The table is scaled down so that one host fills
// it in seconds: 4,096 flows, of which the router's config defaults give
// one inside host max/4 = 1,024 and keep max/16 = 256 for the router's own
// flows.
const (
	hostLimitMax = 4096
	// hostLimitSockets x hostLimitDsts flows (one per socket and echo
	// port) are the whole table: without per-host limits the host can
	// hold every slot, and no more, so that its flows do not evict each
	// other before they are assured.
	hostLimitSockets = hostLimitMax / hostLimitDsts
	hostLimitDsts    = 8
	hostLimitEcho    = 7001 // first echo port on the WAN host
	// hostLimitRounds rounds 2.1 s apart make the hostile flows assured
	// (a replied UDP flow older than 2 s: natengine udpStreamAfter), so
	// nothing may early-drop them.
	hostLimitRounds = 4
	// hostLimitPace: the hostile host sends hostLimitBurst datagrams,
	// then pauses, so the router's receive ring does not overflow and
	// shed new flows (natengine DropOverload) that would then open
	// round after round.
	hostLimitBurst = 64
	hostLimitPace  = 10 * time.Millisecond
	// hostLimitTries is what the second host runs of each kind.
	hostLimitTries = 20
)

// hostB4 is the second LAN host: a second address on the LAN host's
// interface (outside the DHCP pool and the static host), a source
// address of its own as far as the router is concerned.
var hostB4 = netip.MustParseAddr("10.77.1.3")

// TestLabHostLimits: one LAN host (lanHost4) opens more assured UDP
// flows than the whole conntrack table holds; another LAN host (hostB4)
// then opens TCP connections, new UDP flows and DNS lookups through the
// router, cached and uncached (the uncached ones need the router's own
// upstream flows), 20 of each, and every one succeeds. The status page
// counts the first host's refused flows (host_flows) and shows the
// table below its limit. Without per-host limits and the router's
// reserve, the first host fills the table with flows that may not be
// early-dropped and the second host's new flows and the router's
// upstream queries are refused (table_full).
func TestLabHostLimits(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "dig")
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		conntrackMax: hostLimitMax,
		runTag:       nextRunTag(),
		testHook: func(l *lab) error {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			return l.hostLimits(ctx, t)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}

func (l *lab) hostLimits(ctx context.Context, t *testing.T) error {
	// Uncached names: h0.isp.test ... resolve to ispWebAddr.
	var names []string
	for i := range hostLimitTries {
		names = append(names, fmt.Sprintf("h%d.%s", i, ispZone))
	}
	if err := l.startISP(ispOptions{webNames: names}); err != nil {
		return err
	}
	defer l.startISP(ispOptions{})
	if err := nsRun(ctx, l.lanNS, "ip", "addr", "add", hostB4.String()+"/24", "dev", hostIf); err != nil {
		return err
	}
	// Cached: one lookup now, the later ones from the router's cache.
	if out, err := dig(ctx, l.lanNS, lanRouter4.Addr(), "-b", hostB4.String(), ispWebName, "A", "+short"); err != nil || strings.TrimSpace(out) != ispWebAddr.String() {
		return fmt.Errorf("dig %s before the flood = %q (%v), want %s", ispWebName, out, err, ispWebAddr)
	}
	upstream := l.ispQueries("A", ispWebName)

	echo, err := startUDPEcho(l.wanNS, wanHost4.Addr(), hostLimitEcho, hostLimitDsts)
	if err != nil {
		return err
	}
	defer echo.close()
	ln, err := listenIn(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 7100).String())
	if err != nil {
		return err
	}
	defer ln.Close()
	go acceptEcho(ln)

	// The hostile host: its flows, made assured round after round.
	var socks []*net.UDPConn
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	if err := inNetns(l.lanNS, func() error {
		for range hostLimitSockets {
			s, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lanHost4.Addr(), 0)))
			if err != nil {
				return err
			}
			socks = append(socks, s)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("hostile sockets: %w", err)
	}
	for r := range hostLimitRounds {
		if r > 0 {
			time.Sleep(2100 * time.Millisecond)
		}
		sent := 0
		for _, s := range socks {
			for d := range hostLimitDsts {
				s.WriteToUDPAddrPort([]byte("hold"), netip.AddrPortFrom(wanHost4.Addr(), uint16(hostLimitEcho+d)))
				if sent++; sent%hostLimitBurst == 0 {
					time.Sleep(hostLimitPace)
				}
			}
		}
	}
	held, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return err
	}
	ct := held.Conntrack
	t.Logf("after the hostile host's %d flows: table %d of %d flows, router's %d (reserve %d), drops host_flows %d table_full %d, early drops %d",
		hostLimitSockets*hostLimitDsts, ct.Flows, ct.Max, ct.RouterFlows, ct.RouterReserve, ct.Drops["host_flows"], ct.Drops["table_full"], ct.Events["early_dropped"])

	// The second host, while the first holds its flows.
	var errs []string
	ok := func(what string, n int) {
		t.Logf("second host %s: %d/%d", what, n, hostLimitTries)
		if n != hostLimitTries {
			errs = append(errs, fmt.Sprintf("%s %d/%d", what, n, hostLimitTries))
		}
	}
	n := 0
	for i := range hostLimitTries {
		if err := tcpEchoFrom(ctx, l.lanNS, hostB4, netip.AddrPortFrom(wanHost4.Addr(), 7100)); err != nil {
			t.Logf("second host TCP %d: %v", i, err)
			continue
		}
		n++
	}
	ok("TCP connections", n)
	n = 0
	for i := range hostLimitTries {
		if err := udpEchoFrom(l.lanNS, hostB4, netip.AddrPortFrom(wanHost4.Addr(), hostLimitEcho)); err != nil {
			t.Logf("second host UDP %d: %v", i, err)
			continue
		}
		n++
	}
	ok("new UDP flows", n)
	n = 0
	for i := range hostLimitTries {
		out, err := dig(ctx, l.lanNS, lanRouter4.Addr(), "-b", hostB4.String(), ispWebName, "A", "+short")
		if err == nil && strings.TrimSpace(out) == ispWebAddr.String() {
			n++
		} else {
			t.Logf("second host cached lookup %d: %q %v", i, out, err)
		}
	}
	ok("cached lookups", n)
	if got := l.ispQueries("A", ispWebName); got != upstream {
		errs = append(errs, fmt.Sprintf("the ISP saw %d more queries for %s, want every lookup answered from the router's cache", got-upstream, ispWebName))
	}
	n = 0
	for i, name := range names {
		out, err := dig(ctx, l.lanNS, lanRouter4.Addr(), "-b", hostB4.String(), name, "A", "+short")
		if err == nil && strings.TrimSpace(out) == ispWebAddr.String() {
			n++
		} else {
			t.Logf("second host uncached lookup %d %s: %q %v", i, name, out, err)
		}
	}
	ok("uncached lookups", n)
	if got := l.ispQueries("A", names[0]); got != 1 {
		errs = append(errs, fmt.Sprintf("the ISP saw %d queries for %s, want the router's one upstream query", got, names[0]))
	}

	after, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return err
	}
	ct = after.Conntrack
	t.Logf("after the second host: table %d of %d flows, router's %d (reserve %d), drops host_flows %d table_full %d",
		ct.Flows, ct.Max, ct.RouterFlows, ct.RouterReserve, ct.Drops["host_flows"], ct.Drops["table_full"])
	if ct.Drops["host_flows"] == 0 {
		errs = append(errs, "status: no host_flows drops, want the hostile host's refused flows counted")
	}
	if ct.RouterReserve != hostLimitMax/16 {
		errs = append(errs, fmt.Sprintf("status: router_reserve %d, want %d (max/16)", ct.RouterReserve, hostLimitMax/16))
	}
	if len(errs) > 0 {
		return fmt.Errorf("with one LAN host holding its maximum of flows: %s", strings.Join(errs, "; "))
	}
	return nil
}

// udpEcho echoes UDP datagrams on n consecutive ports.
type udpEcho struct {
	conns []*net.UDPConn
	wg    sync.WaitGroup
}

// startUDPEcho starts an echo on addr, ports first..first+n-1, with
// sockets made in namespace ns.
func startUDPEcho(ns string, addr netip.Addr, first, n int) (*udpEcho, error) {
	e := &udpEcho{}
	err := inNetns(ns, func() error {
		for i := range n {
			c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(first+i))))
			if err != nil {
				return err
			}
			e.conns = append(e.conns, c)
		}
		return nil
	})
	if err != nil {
		e.close()
		return nil, err
	}
	for _, c := range e.conns {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			buf := make([]byte, 2048)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				c.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
	}
	return e, nil
}

func (e *udpEcho) close() {
	for _, c := range e.conns {
		c.Close()
	}
	e.wg.Wait()
}

// acceptEcho echoes every connection ln accepts until ln is closed.
func acceptEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 512)
			n, _ := c.Read(buf)
			c.Write(buf[:n])
		}()
	}
}

// tcpEchoFrom connects from src in namespace ns to srv, a TCP echo, and
// checks the echo.
func tcpEchoFrom(ctx context.Context, ns string, src netip.Addr, srv netip.AddrPort) error {
	var c net.Conn
	err := inNetns(ns, func() (err error) {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
		c, err = d.DialContext(ctx, "tcp4", srv.String())
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("second host")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if string(buf[:n]) != "second host" {
		return fmt.Errorf("echo %q", buf[:n])
	}
	return nil
}

// udpEchoFrom opens a new UDP flow from src (a new socket, so a new
// source port) in namespace ns to srv, a UDP echo, and waits for the
// echo, sending up to three times.
func udpEchoFrom(ns string, src netip.Addr, srv netip.AddrPort) error {
	var c *net.UDPConn
	if err := inNetns(ns, func() (err error) {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 64)
	for range 3 {
		if _, err := c.WriteToUDPAddrPort([]byte("second host"), srv); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			continue
		}
		if err != nil {
			return err
		}
		if string(buf[:n]) == "second host" {
			return nil
		}
	}
	return errors.New("no echo in 3 s")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
