package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// wireCapture records the DHCP client messages (UDP to port 67) that
// reach the WAN host's interface, read with a packet socket of its own:
// what the router put on the wire, not what it says it sent.
type wireCapture struct {
	mu   sync.Mutex
	msgs []capturedDHCP
}

type capturedDHCP struct {
	at     time.Time
	dst    netip.AddrPort
	typ    dhcpv4.MessageType
	ciaddr netip.Addr
}

// startWireCapture captures on the WAN host's hostIf until ctx ends.
func (l *lab) startWireCapture(ctx context.Context) (*wireCapture, error) {
	var link *rawudp.PacketLink
	if err := inNetns(l.wanNS, func() error {
		var err error
		link, err = rawudp.OpenPacketLink(hostIf)
		return err
	}); err != nil {
		return nil, err
	}
	conn := rawudp.New(link, 67, 256)
	w := &wireCapture{}
	go link.Run(ctx, conn)
	go func() {
		for {
			p, err := conn.Recv(ctx)
			if err != nil {
				return
			}
			m, err := dhcpv4.FromBytes(p.Payload)
			if err != nil || m.OpCode != dhcpv4.OpcodeBootRequest {
				continue
			}
			ci, _ := netip.AddrFromSlice(m.ClientIPAddr.To4())
			w.mu.Lock()
			w.msgs = append(w.msgs, capturedDHCP{at: time.Now(), dst: p.Dst, typ: m.MessageType(), ciaddr: ci})
			w.mu.Unlock()
		}
	}()
	return w, nil
}

// wait returns the first captured message since `since` that ok accepts.
func (w *wireCapture) wait(ctx context.Context, since time.Time, d time.Duration, ok func(capturedDHCP) bool) (capturedDHCP, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		w.mu.Lock()
		for _, m := range w.msgs {
			if !m.at.Before(since) && ok(m) {
				w.mu.Unlock()
				return m, nil
			}
		}
		w.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var seen []string
	for _, m := range w.msgs {
		seen = append(seen, fmt.Sprintf("%s %s→%s ciaddr %s", m.at.Format(time.TimeOnly), m.typ, m.dst, m.ciaddr))
	}
	return capturedDHCP{}, fmt.Errorf("not on the wire within %v; captured: %s", d, strings.Join(seen, "; "))
}

// wanDHCPRenew is the T1 TestLabWANDHCP's ISP gives the first lease
// (option 58): the test waits for T1 and then a whole lease of 2 minutes
// (dnsmasq's shortest) after the renewal, so every second off T1 is one
// off the test, which is the floor of the lab package's parallel phase.
// dnsmasq's own T1 is half the lease, 60 s; the lab's proofs end about
// 8 s after the lease (CI), and the test must change the ISP's MTU
// before T1.
const wanDHCPRenew = 40 * time.Second

// TestLabWANDHCP runs the router's WAN DHCP client against dnsmasq as the
// ISP through a whole lease life (RFC 2131 §4.4.5), with dnsmasq's
// shortest lease (2 minutes):
//   - acquire: address, option 121 routes (preferred over option 3), DNS,
//     domain, hostname (option 12) in dnsmasq's log;
//   - renew at T1 (wanDHCPRenew, the ISP's option 58): a DHCPREQUEST
//     unicast to the server with ciaddr set, captured on the WAN host's
//     wire; the renewed lease's MTU
//     (option 26, changed at the server meanwhile) is applied: a LAN host's
//     DF ping above it gets Fragmentation Needed with the new MTU;
//   - the server goes away: REBINDING at T2 (a broadcast REQUEST on the
//     wire), then expiry removes the address and the routes, says so on
//     the status page, and flushes the flows masqueraded to it;
//   - the server returns with another address: the router takes it and
//     masquerade follows (a new flow leaves from the new address).
func TestLabWANDHCP(t *testing.T) {
	parallelLongLab(t)
	requirePrivileged(t, "dnsmasq", "ping")
	runLabWithHook(t, 6*time.Minute, func(o *Options) { o.ispRenew = wanDHCPRenew }, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		gw := wanHost4.Addr()

		// Acquire (the lab waited for BOUND).
		c, snap, err := l.wanClient(ctx)
		if err != nil {
			return err
		}
		acquired := c.Acquired
		if c.State != "bound" || c.Addr != wanRouter4 || c.Server != gw || !slices.Equal(c.DNS, []netip.Addr{gw}) || c.Domain != ispZone {
			return fmt.Errorf("WAN lease = %+v, want bound %s from %s, DNS %s, domain %s", c, wanRouter4, gw, gw, ispZone)
		}
		wantRoutes := []dhcp4client.Route{{Dst: farNet, Via: gw}, {Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: gw}}
		if d := c.T1.Sub(acquired); d < wanDHCPRenew-time.Second || d > wanDHCPRenew+time.Second {
			return fmt.Errorf("lease T1 %s, %v after acquiring; want the ISP's option 58, %v", c.T1.Format(time.TimeOnly), d, wanDHCPRenew)
		}
		if !slices.Equal(c.Routes, wantRoutes) {
			return fmt.Errorf("lease routes = %v, want option 121's %v", c.Routes, wantRoutes)
		}
		if !hasRoute(snap, farNet.String(), gw.String(), "wan") || !hasRoute(snap, "0.0.0.0/0", gw.String(), "wan") {
			return fmt.Errorf("router routes %v lack the option 121 routes via %s dev wan", snap.Routes, gw)
		}
		if log := l.ispLog(); !strings.Contains(log, wanHostname) {
			return fmt.Errorf("the ISP never saw hostname %q (option 12); its log:\n%s", wanHostname, tailString(log, 1500))
		}
		t.Logf("acquired %s at %s (T1 %s, T2 %s, expiry %s)", c.Addr, c.Acquired.Format(time.TimeOnly),
			c.T1.Format(time.TimeOnly), c.T2.Format(time.TimeOnly), c.Expiry.Format(time.TimeOnly))

		// A flow masqueraded to the address, held open until expiry.
		ln, err := listenIn(l.wanNS, netip.AddrPortFrom(gw, 0).String())
		if err != nil {
			return err
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			if a, err := ln.Accept(); err == nil {
				accepted <- a
			}
		}()
		held, err := dialIn(ctx, l.lanNS, ln.Addr().String(), proofTimeout)
		if err != nil {
			return fmt.Errorf("flow LAN→WAN before expiry: %w", err)
		}
		defer held.Close()
		select {
		case a := <-accepted:
			defer a.Close()
			if peer := unmapAddrPort(netip.MustParseAddrPort(a.RemoteAddr().String())); peer.Addr() != wanRouter4.Addr() {
				return fmt.Errorf("WAN host saw %s, want the leased %s", peer, wanRouter4.Addr())
			}
		case <-time.After(proofTimeout):
			return fmt.Errorf("WAN host accepted nothing")
		}

		// The ISP changes the MTU; the router learns it at T1.
		wire, err := l.startWireCapture(ctx)
		if err != nil {
			return err
		}
		const newMTU = 1400
		if left := time.Until(c.T1); left < 5*time.Second {
			return fmt.Errorf("the lab's proofs ended %v before T1 %s: too late to change the MTU before the renewal (wanDHCPRenew too short)", left, c.T1.Format(time.TimeOnly))
		}
		if err := l.startISP(ispOptions{mtu: newMTU}); err != nil {
			return err
		}
		renew, err := wire.wait(ctx, acquired, time.Until(c.T1)+15*time.Second, func(m capturedDHCP) bool {
			return m.typ == dhcpv4.MessageTypeRequest && m.ciaddr == wanRouter4.Addr()
		})
		if err != nil {
			return fmt.Errorf("renewal at T1: %w", err)
		}
		if renew.dst != netip.AddrPortFrom(gw, 67) {
			return fmt.Errorf("renewing REQUEST went to %s, want unicast to the server %s:67 (RFC 2131 §4.4.5)", renew.dst, gw)
		}
		if early := c.T1.Sub(renew.at); early > time.Second {
			return fmt.Errorf("renewing REQUEST at %s, %v before T1 %s", renew.at.Format(time.TimeOnly), early, c.T1.Format(time.TimeOnly))
		}
		t.Logf("renewal on the wire at %s: unicast to %s, %.1f s after acquiring", renew.at.Format(time.TimeOnly), renew.dst, renew.at.Sub(acquired).Seconds())
		if err := waitFor(ctx, 10*time.Second, func() error {
			c, snap, err = l.wanClient(ctx)
			if err != nil {
				return err
			}
			if c.State != "bound" || c.MTU != newMTU || ifaceMTU(snap, "wan") != newMTU {
				return fmt.Errorf("after renewal: state %s, lease MTU %d, wan MTU %d; want bound, %d", c.State, c.MTU, ifaceMTU(snap, "wan"), newMTU)
			}
			return nil
		}); err != nil {
			return err
		}
		out, _ := command(ctx, l.lanNS, "ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", gw.String()).CombinedOutput()
		if !strings.Contains(string(out), fmt.Sprintf("mtu = %d", newMTU)) {
			return fmt.Errorf("a 1500-byte DF ping LAN→WAN after the MTU option: want Fragmentation Needed (mtu = %d), got:\n%s", newMTU, out)
		}

		// The server is gone: REBINDING at T2, then expiry.
		l.stopISP()
		before := snap.Conntrack.Events["flushed_address_gone"]
		rebindAt := c.T2
		if _, err := wire.wait(ctx, renew.at, time.Until(rebindAt)+15*time.Second, func(m capturedDHCP) bool {
			return m.typ == dhcpv4.MessageTypeRequest && m.ciaddr == wanRouter4.Addr() && m.dst.Addr() == netip.AddrFrom4([4]byte{255, 255, 255, 255})
		}); err != nil {
			return fmt.Errorf("rebinding at T2 %s: %w", rebindAt.Format(time.TimeOnly), err)
		}
		// The status page samples once a second.
		if c, _, err = l.waitWANState(ctx, 5*time.Second, "rebinding"); err != nil {
			return fmt.Errorf("after T2: %w", err)
		}
		// At expiry the client drops the lease and starts again: INIT,
		// and at once SELECTING with a DHCPDISCOVER (the status page
		// samples once a second, so it seldom shows INIT).
		expiry := c.Expiry
		c, snap, err = l.waitWANState(ctx, time.Until(expiry)+15*time.Second, "init", "selecting")
		if err != nil {
			return fmt.Errorf("at expiry %s: %w", expiry.Format(time.TimeOnly), err)
		}
		if c.Since.Before(expiry.Add(-time.Second)) {
			return fmt.Errorf("the lease was dropped at %s, before its expiry %s", c.Since.Format(time.TimeOnly), expiry.Format(time.TimeOnly))
		}
		if err := waitFor(ctx, 5*time.Second, func() error {
			c, snap, err = l.wanClient(ctx)
			if err != nil {
				return err
			}
			if addrs := ifaceAddrs(snap, "wan"); slices.Contains(addrs, wanRouter4.String()) {
				return fmt.Errorf("after expiry wan still has %v", addrs)
			}
			if hasRoute(snap, "0.0.0.0/0", gw.String(), "wan") {
				return fmt.Errorf("after expiry the default route stays: %v", snap.Routes)
			}
			if !strings.Contains(c.LastError, "lease lost") {
				return fmt.Errorf("status says nothing of the lost lease: %q", c.LastError)
			}
			if got := snap.Conntrack.Events["flushed_address_gone"]; got <= before {
				return fmt.Errorf("conntrack flushed_address_gone = %d after expiry, want > %d (the held flow)", got, before)
			}
			return nil
		}); err != nil {
			return err
		}
		t.Logf("expired at %s: address and routes removed, %q, flushed_address_gone %d→%d",
			time.Now().Format(time.TimeOnly), c.LastError, before, snap.Conntrack.Events["flushed_address_gone"])

		// The ISP returns with another address: masquerade follows it.
		newAddr := netip.MustParseAddr("10.77.2.9")
		if err := l.startISP(ispOptions{addr: newAddr}); err != nil {
			return err
		}
		if _, err := l.waitWANLease(ctx, newAddr, 40*time.Second); err != nil {
			return err
		}
		peer, d, err := echoPeer(ctx, l.lanNS, l.wanNS, netip.AddrPortFrom(gw, 0), netip.AddrPort{})
		if err := wantPeer(peer, newAddr, err); err != nil {
			return fmt.Errorf("masquerade after the new lease: %w", err)
		}
		t.Logf("new lease %s: %s", newAddr, d)
		return nil
	})
}
