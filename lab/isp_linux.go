package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// The lab's ISP: dnsmasq on the WAN host hands the router its WAN address
// by DHCP (as a cable or fibre modem's network does) and answers DNS for
// ispZone. Its pool holds one address, wanRouter4 unless a test asks for
// another, so the proofs find the router where they expect it.
const (
	ispZone      = "isp.test"
	fillZone     = "fill.test"      // every name in it resolves (bench mode s)
	ispWebName   = "www." + ispZone // resolves to ispWebAddr
	ispLeaseTime = "2m"             // dnsmasq's shortest lease
	ispMTU       = 1500
	// wanLeaseTimeout bounds the wait for the router's WAN lease: the
	// exchange, the RFC 5227 ARP probe (about 5.5 s) and slack.
	wanLeaseTimeout = 30 * time.Second
)

// ispWebAddr is what the ISP's DNS answers for ispWebName: beyond the WAN
// host, in farNet.
var ispWebAddr = netip.MustParseAddr("198.18.77.80")

// ispOptions changes the ISP's DHCP service for one test.
type ispOptions struct {
	addr      netip.Addr    // the one address of the pool; zero: wanRouter4
	leaseTime string        // zero: ispLeaseTime
	mtu       int           // option 26; zero: ispMTU
	renew     time.Duration // option 58 (T1); zero: dnsmasq's, half the lease
	// fillNames, if not 0, makes the ISP answer n0.fill.test ...
	// n<fillNames-1>.fill.test (bench mode s fills the router's cache).
	fillNames int
	// webNames are more names in ispZone that resolve to ispWebAddr,
	// e.g. "h0.isp.test" (host-record: dnsmasq's authoritative answers
	// come from those).
	webNames []string
}

// ispConfig is dnsmasq's config file for the lab ISP.
func (l *lab) ispConfig(o ispOptions) string {
	if !o.addr.IsValid() {
		o.addr = wanRouter4.Addr()
	}
	if o.leaseTime == "" {
		o.leaseTime = ispLeaseTime
	}
	if o.mtu == 0 {
		o.mtu = ispMTU
	}
	gw := wanHost4.Addr().String()
	lines := []string{
		"# the lab ISP, written by gvlab run " + l.prefix,
		"interface=" + hostIf,
		"bind-interfaces",
		"listen-address=" + gw,
		"no-resolv", "no-hosts", "no-poll",
		"log-dhcp", "log-queries=extra", "log-facility=-",
		"dhcp-authoritative",
		"no-ping", // the router probes with ARP itself (RFC 5227)
		"dhcp-leasefile=" + filepath.Join(l.dir, "isp.leases"),
		fmt.Sprintf("dhcp-range=%s,%s,255.255.255.0,%s", o.addr, o.addr, o.leaseTime),
		"dhcp-option=option:router," + gw,
		"dhcp-option=option:dns-server," + gw,
		"dhcp-option=option:domain-name," + ispZone,
		fmt.Sprintf("dhcp-option=option:mtu,%d", o.mtu),
		// Option 121 (RFC 3442): the far network and the default route,
		// both via the WAN host; the router prefers these to option 3.
		fmt.Sprintf("dhcp-option=option:classless-static-route,%s,%s,0.0.0.0/0,%s", farNet, gw, gw),
		"local=/" + ispZone + "/",
		"local-ttl=300", // cacheable answers (dnsmasq's default TTL for its own records is 0)
		// Authoritative for the zone: its NXDOMAINs carry the SOA that
		// lets a resolver cache them (RFC 2308 §5).
		"auth-zone=" + ispZone, "auth-server=ns." + ispZone + "," + gw, "auth-ttl=300",
		"auth-soa=1,hostmaster." + ispZone + ",1200,180,1209600,300",
		"host-record=" + ispWebName + "," + ispWebAddr.String(),
		"host-record=isp-gw." + ispZone + "," + gw,
		ispBigTXTRecord(), // dns_linux.go: too big for UDP, the TC proof
	}
	for _, n := range o.webNames {
		lines = append(lines, "host-record="+n+","+ispWebAddr.String())
	}
	if o.renew > 0 {
		lines = append(lines, fmt.Sprintf("dhcp-option=option:T1,%d", int(o.renew.Seconds())))
	}
	if o.fillNames > 0 {
		// dnsmasq answers its auth-server address from its own records
		// only (an address=/zone/ wildcard does not apply there).
		lines = append(lines, "auth-zone="+fillZone, "addn-hosts="+filepath.Join(l.dir, "fill.hosts"))
	}
	return strings.Join(lines, "\n") + "\n"
}

// startISP starts (or restarts with new options) the lab ISP's dnsmasq in
// the WAN host's namespace. teardown stops it.
func (l *lab) startISP(o ispOptions) error {
	l.stopISP()
	if o.fillNames > 0 {
		var b strings.Builder
		for i := range o.fillNames {
			fmt.Fprintf(&b, "%s n%d.%s\n", ispWebAddr, i, fillZone)
		}
		if err := os.WriteFile(filepath.Join(l.dir, "fill.hosts"), []byte(b.String()), 0o600); err != nil {
			return fmt.Errorf("lab: ISP: %w", err)
		}
	}
	path := filepath.Join(l.dir, "isp.conf")
	if err := os.WriteFile(path, []byte(l.ispConfig(o)), 0o600); err != nil {
		return fmt.Errorf("lab: ISP: %w", err)
	}
	c, err := startChild(l.log, "isp-dnsmasq", l.wanNS, filepath.Join(l.dir, "isp.log"),
		"dnsmasq", "--keep-in-foreground", "--conf-file="+path, "--pid-file=")
	if err != nil {
		return err
	}
	l.isp = c
	// dnsmasq binds at once; a quick exit means a bad config or a taken port.
	select {
	case <-c.done:
		return fmt.Errorf("lab: ISP dnsmasq exited: %v; %s", c.err, tail(c.logPath, 2000))
	case <-time.After(200 * time.Millisecond):
	}
	return nil
}

// stopISP stops the ISP's dnsmasq if it runs (a test's "the server is
// gone").
func (l *lab) stopISP() {
	if l.isp == nil {
		return
	}
	if err := l.isp.stop(); err != nil {
		l.log.Warn("lab: ISP dnsmasq", "err", err)
	}
	l.isp = nil
}

// ispLog returns the ISP's dnsmasq log so far.
func (l *lab) ispLog() string {
	b, _ := os.ReadFile(filepath.Join(l.dir, "isp.log"))
	return string(b)
}

// wanByDHCP reports whether the lab router takes its WAN address from
// the ISP (every topology with a WAN host and NAT).
func (l *lab) wanByDHCP() bool { return l.natLab() }

// waitWANLease waits until the router's WAN DHCP client is bound to want
// (any address when want is zero) and the router has applied the lease
// (leaseApplied), and returns the client's status.
func (l *lab) waitWANLease(ctx context.Context, want netip.Addr, d time.Duration) (status.DHCPClient, error) {
	deadline := time.Now().Add(d)
	var last status.DHCPClient
	var lastErr error
	for {
		snap, err := l.statusSince(ctx, time.Time{})
		if err == nil {
			lastErr = fmt.Errorf("no DHCP client on the status page")
			for _, c := range snap.DHCPClients {
				last, lastErr = c, nil
				if c.State == "bound" && (!want.IsValid() || c.Held().Addr.Addr() == want) {
					if lastErr = leaseApplied(snap, c); lastErr == nil {
						return c, nil
					}
				}
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last, fmt.Errorf("lab: WAN lease: no bound lease for %v within %v (last: state %q address %v error %q; %v); ISP log:\n%s",
				want, d, last.State, last.Held().Addr, last.LastError, lastErr, tailString(l.ispLog(), 1500))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// leaseApplied reports whether the router applied c's lease: its address
// on c's interface and its routes in the table. The client is bound
// first; the runtime applies the lease it posts a moment later (the
// reload path), and a proof that looks in between finds no route.
func leaseApplied(snap status.Snapshot, c status.DHCPClient) error {
	lease := c.Held()
	if !slices.Contains(ifaceAddrs(snap, c.Interface), lease.Addr.String()) {
		return fmt.Errorf("bound, but %s is not on %s yet: %v", lease.Addr, c.Interface, ifaceAddrs(snap, c.Interface))
	}
	for _, r := range lease.Routes {
		via := ""
		if r.Via.IsValid() && !r.Via.IsUnspecified() {
			via = r.Via.String()
		}
		if !hasRoute(snap, r.Dst.String(), via, c.Interface) {
			return fmt.Errorf("bound, but the lease's route to %s via %s is not in the table yet", r.Dst, r.Via)
		}
	}
	return nil
}

// tailString returns the last n bytes of s.
func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// wanClient returns the router's WAN DHCP client on the status page.
func (l *lab) wanClient(ctx context.Context) (status.DHCPClient, status.Snapshot, error) {
	snap, err := l.statusSince(ctx, time.Time{})
	if err != nil {
		return status.DHCPClient{}, snap, err
	}
	_, wan := routerInterfaces(l.opt.Topology)
	for _, c := range snap.DHCPClients {
		if c.Interface == wan {
			return c, snap, nil
		}
	}
	return status.DHCPClient{}, snap, fmt.Errorf("no WAN DHCP client on the status page")
}

// waitWANState waits until the WAN client's state is one of states.
func (l *lab) waitWANState(ctx context.Context, d time.Duration, states ...string) (status.DHCPClient, status.Snapshot, error) {
	deadline := time.Now().Add(d)
	for {
		c, snap, err := l.wanClient(ctx)
		if err == nil && slices.Contains(states, c.State) {
			return c, snap, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return c, snap, fmt.Errorf("WAN client state %q (err %v), want %q within %v", c.State, err, states, d)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitFor retries check until it returns nil or d passes.
func waitFor(ctx context.Context, d time.Duration, check func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func hasRoute(s status.Snapshot, to, via, dev string) bool {
	return slices.ContainsFunc(s.Routes, func(r status.Route) bool { return r.To == to && r.Via == via && r.Dev == dev })
}

func ifaceMTU(s status.Snapshot, name string) int {
	for _, i := range s.Interfaces {
		if i.Name == name {
			return i.MTU
		}
	}
	return 0
}

func ifaceAddrs(s status.Snapshot, name string) []string {
	for _, i := range s.Interfaces {
		if i.Name == name {
			return i.Addresses
		}
	}
	return nil
}
