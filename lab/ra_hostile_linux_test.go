package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/ra"
)

// raAttacker is the hostile neighbour on the WAN link (bad prefixes and an
// unreachable default router in its RAs), run with scapy in the WAN host's
// namespace. It sniffs the Neighbor Solicitations on the link, prints
// "ready", sends its RAs, prints "sent", and when its stdin closes prints
// the NS targets it saw.
//
//	prefixes IFACE PREFIX...  one RA, router lifetime 0 (no default
//	                          router), each prefix on-link (L=1, A=0)
//	router IFACE              a high-preference RA, router lifetime 9000 s,
//	                          from fe80::66:1 (02:66:00:00:00:01), an
//	                          address nothing on the link answers NS for
//	flood IFACE SECONDS       RAs from random link-local addresses and
//	                          MACs, high preference, lifetime 9000 s, each
//	                          with a random on-link /64 of 2001:db8::/32
const raAttacker = `
import random, sys, threading, time
from scapy.all import (AsyncSniffer, Ether, IPv6, ICMPv6ND_RA, ICMPv6ND_NS, ICMPv6NDOptPrefixInfo,
                       ICMPv6NDOptSrcLLAddr, conf, sendp)
conf.verb = 0
mode, iface = sys.argv[1:3]

def ra(mac, src, prf, life, prefixes):
    p = (Ether(src=mac, dst="33:33:00:00:00:01") / IPv6(src=src, dst="ff02::1", hlim=255) /
         ICMPv6ND_RA(prf=prf, routerlifetime=life) / ICMPv6NDOptSrcLLAddr(lladdr=mac))
    for pfx in prefixes:
        a, n = pfx.split("/")
        p = p / ICMPv6NDOptPrefixInfo(prefix=a, prefixlen=int(n), L=1, A=0, validlifetime=9000, preferredlifetime=9000)
    return p

targets = []
s = AsyncSniffer(iface=iface, filter="icmp6 and ip6[40] == 135",
                 prn=lambda p: targets.append(p[ICMPv6ND_NS].tgt), store=False)
s.start()
threading.Event().wait(0.5)
print("ready", flush=True)
if mode == "prefixes":
    sendp(ra("02:66:00:00:00:02", "fe80::66:2", 0, 0, sys.argv[3:]), iface=iface, count=3, inter=0.3)
elif mode == "router":
    sendp(ra("02:66:00:00:00:01", "fe80::66:1", 1, 9000, []), iface=iface, count=3, inter=0.5)
elif mode == "flood":
    end = time.time() + float(sys.argv[3])
    while time.time() < end:
        r = [random.randrange(256) for _ in range(4)]
        mac = "02:67:%02x:%02x:%02x:%02x" % tuple(r)
        src = "fe80::67:%02x%02x:%02x%02x" % tuple(r)
        pfx = "2001:db8:%x:%x::/64" % (random.randrange(65536), random.randrange(65536))
        sendp(ra(mac, src, 1, 9000, [pfx]), iface=iface)
        time.sleep(0.02)
print("sent", flush=True)
sys.stdin.read()
s.stop()
print(" ".join(targets), flush=True)
`

// attacker is a running raAttacker.
type attacker struct {
	cmd    interface{ Wait() error }
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *syncBuffer
}

// startAttacker runs raAttacker in the WAN host's namespace and waits
// until its RAs are sent.
func (l *lab) startAttacker(ctx context.Context, args ...string) (*attacker, error) {
	cmd := command(ctx, l.wanNS, scapyPython, append([]string{"-c", raAttacker}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a := &attacker{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout), stderr: &syncBuffer{}}
	cmd.Stderr = a.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for _, want := range []string{"ready", "sent"} {
		if !a.lines.Scan() || a.lines.Text() != want {
			stdin.Close()
			cmd.Wait()
			return nil, fmt.Errorf("RA attacker %v: got %q, want %q; %s", args, a.lines.Text(), want, a.stderr.String())
		}
	}
	return a, nil
}

// stop ends the attacker and returns the NS targets it saw on the link.
func (a *attacker) stop() ([]netip.Addr, error) {
	a.stdin.Close()
	a.lines.Scan()
	line := a.lines.Text()
	if err := a.cmd.Wait(); err != nil {
		return nil, fmt.Errorf("RA attacker: %w; %s", err, a.stderr.String())
	}
	var out []netip.Addr
	for _, f := range strings.Fields(line) {
		if ad, err := netip.ParseAddr(f); err == nil {
			out = append(out, ad)
		}
	}
	return out, nil
}

// wanRACounters returns the wan RA learner's counters.
func wanRACounters(s status.Snapshot, wan string) map[string]uint64 {
	if s.IPv6 != nil {
		for _, w := range s.IPv6.WANRA {
			if w.Interface == wan {
				return w.Counters
			}
		}
	}
	return nil
}

// TestLabRAHostilePrefixes: one RA on the WAN, with router lifetime 0,
// announces on-link the LAN host's /128, the LAN's /64 and a /80 in it, the
// delegated /56, the LAN's /64 of it, the LAN host's SLAAC address there as
// a /128, ::/1 and 8000::/1, and a harmless fd77:3::/64. The router takes
// the harmless prefix (a route on the wan: the RA was heard) and none of
// the others: no such route on the wan, the status counters
// prefix_overlap_ignored and prefix_too_short count them, the LAN host
// pings the WAN host from both its addresses and the WAN host pings it, and
// a capture on the WAN link shows no neighbour solicitation for a LAN
// host's address. Before the learner checked prefixes against what the
// router owns, the router routed all of them out of the wan and sent the
// LAN host's NSs there.
func TestLabRAHostilePrefixes(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		lanName, wan := routerInterfaces(l.opt.Topology)
		snap, err := l.waitIPv6(ctx, 30*time.Second, "a bound delegation", func(v *status.IPv6) bool {
			return bound(v) && v.LANPrefixes[lanName].IsValid()
		})
		if err != nil {
			return err
		}
		pd, lan64 := snap.IPv6.Delegation.Prefixes[0].Prefix, snap.IPv6.LANPrefixes[lanName]
		slaac, err := l.waitHostAddr(ctx, lan64, "a SLAAC address", func(a hostAddr) bool { return a.preferred > 0 && !a.tentative })
		if err != nil {
			return err
		}
		c0 := wanRACounters(snap, wan)
		hostile := []netip.Prefix{
			netip.PrefixFrom(lanHost6.Addr(), 128), lanHost6.Masked(), netip.PrefixFrom(lanHost6.Addr(), 80).Masked(),
			pd, lan64, netip.PrefixFrom(slaac.addr, 128),
			netip.MustParsePrefix("::/1"), netip.MustParsePrefix("8000::/1"),
		}
		control := netip.MustParsePrefix("fd77:3::/64")
		args := []string{"prefixes", hostIf}
		for _, p := range append(slices.Clone(hostile), control) {
			args = append(args, p.String())
		}
		a, err := l.startAttacker(ctx, args...)
		if err != nil {
			return err
		}
		var errs []error
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			snap, err = l.statusSince(ctx, time.Time{})
			if err == nil && hasRoute(snap, control.String(), "", wan) {
				break
			}
			if time.Now().After(deadline) {
				a.stop()
				return fmt.Errorf("the RA was not taken: no route %s dev %s (%v); routes %+v", control, wan, err, snap.Routes)
			}
		}
		for _, p := range hostile {
			for _, r := range snap.Routes {
				if r.Dev == wan && r.To == p.String() {
					errs = append(errs, fmt.Errorf("route %s via %q dev %s from a hostile RA", r.To, r.Via, r.Dev))
				}
			}
		}
		for _, from := range []netip.Addr{lanHost6.Addr(), slaac.addr} {
			if _, err := pingFrom(ctx, l.lanNS, from, wanHost6.Addr()); err != nil {
				errs = append(errs, fmt.Errorf("LAN host %s → WAN host: %w", from, err))
			}
		}
		if _, err := ping(ctx, l.wanNS, lanHost6.Addr()); err != nil {
			errs = append(errs, fmt.Errorf("WAN host → LAN host %s: %w", lanHost6.Addr(), err))
		}
		targets, err := a.stop()
		if err != nil {
			return err
		}
		seen := map[netip.Addr]int{}
		for _, tg := range targets {
			if lanHost6.Masked().Contains(tg) || lan64.Contains(tg) {
				seen[tg]++
			}
		}
		for tg, n := range seen {
			errs = append(errs, fmt.Errorf("%d NSs for the LAN host's %s seen on the WAN link", n, tg))
		}
		snap, err = l.statusSince(ctx, time.Time{})
		if err != nil {
			return err
		}
		c1 := wanRACounters(snap, wan)
		overlap, short := c1["prefix_overlap_ignored"]-c0["prefix_overlap_ignored"], c1["prefix_too_short"]-c0["prefix_too_short"]
		// Three copies of the RA: each hostile prefix at least once.
		if overlap < 6 || short < 2 {
			errs = append(errs, fmt.Errorf("counters prefix_overlap_ignored +%d, prefix_too_short +%d; want at least 6 and 2 (%v)", overlap, short, c1))
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		t.Logf("hostile prefixes refused (prefix_overlap_ignored +%d, prefix_too_short +%d); %s on-link on %s; NS targets on the WAN link: %v",
			overlap, short, control, wan, targets)
		return nil
	})
}

// sampleIPv6 pings to from the LAN host (from) once a second for d, each
// sample two echo requests with 2 s to answer, and returns how many
// samples got no reply, out of how many.
func (l *lab) sampleIPv6(ctx context.Context, d time.Duration, from, to netip.Addr) (failed, n int) {
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; n++ {
		next := time.Now().Add(time.Second)
		if _, err := output(ctx, l.lanNS, "ping", "-6", "-n", "-q", "-c", "2", "-i", "0.2", "-W", "2", "-I", from.String(), to.String()); err != nil {
			failed++
		}
		time.Sleep(time.Until(next))
	}
	return failed, n
}

// TestLabRAUnreachableRouter: a host beyond the ISP's router (fd77:ff::1 on
// the WAN host's loopback, reached only by the IPv6 default route) answers
// the LAN host's pings; then a high-preference RA with a 9000 s router
// lifetime comes from a link-local address nothing answers neighbour
// solicitations for, and later a 20 s flood of such RAs from random
// addresses, each with a random /64. The router keeps its default route via
// the ISP's router, which it knows reachable (RFC 4861 §6.3.6, RFC 4191
// §3.2): the LAN host's pings answer at every sample, the bogus routers
// show as unreachable (counter router_unreachable), the flood hits the
// bounds (routers_full, prefixes_full). Before the learner preferred
// routers that answer its neighbour solicitations, the bogus router became
// the default and every sample failed.
func TestLabRAUnreachableRouter(t *testing.T) {
	parallelLongLab(t)
	requirePrivileged(t, "ping")
	requireScapy(t)
	runWithHookTimeout(t, 4*time.Minute, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
		defer cancel()
		_, wan := routerInterfaces(l.opt.Topology)
		far := netip.MustParseAddr("fd77:ff::1")
		if err := nsRun(ctx, l.wanNS, "ip", "-6", "addr", "add", far.String()+"/128", "dev", "lo"); err != nil {
			return err
		}
		var isp string
		snap, err := l.waitIPv6(ctx, 30*time.Second, "the ISP's router as default", func(v *status.IPv6) bool {
			for _, w := range v.WANRA {
				if w.Interface == wan && len(w.Routers) > 0 {
					isp = w.Routers[0].Addr.String()
				}
			}
			return isp != ""
		})
		if err != nil {
			return err
		}
		if !hasRoute(snap, "::/0", isp, wan) {
			return fmt.Errorf("no ::/0 via %s dev %s: %+v", isp, wan, snap.Routes)
		}
		if _, err := pingFrom(ctx, l.lanNS, lanHost6.Addr(), far); err != nil {
			return fmt.Errorf("before the attack: %w", err)
		}
		c0 := wanRACounters(snap, wan)
		var errs []error
		check := func(what string, failed, n int) {
			snap, err := l.statusSince(ctx, time.Time{})
			if err != nil {
				errs = append(errs, err)
				return
			}
			var def []string
			for _, r := range snap.Routes {
				if r.To == "::/0" {
					def = append(def, r.Via+" dev "+r.Dev)
				}
			}
			t.Logf("%s: %d of %d samples failed; ::/0 via %v", what, failed, n, def)
			if failed > 0 {
				errs = append(errs, fmt.Errorf("%s: LAN host → %s failed at %d of %d samples (::/0 via %v, the ISP's router is %s)", what, far, failed, n, def, isp))
			}
			if !hasRoute(snap, "::/0", isp, wan) {
				errs = append(errs, fmt.Errorf("%s: ::/0 via %v, want via the ISP's router %s", what, def, isp))
			}
		}

		a, err := l.startAttacker(ctx, "router", hostIf)
		if err != nil {
			return err
		}
		failed, n := l.sampleIPv6(ctx, 15*time.Second, lanHost6.Addr(), far)
		if _, err := a.stop(); err != nil {
			return err
		}
		check("after one unreachable high-preference router", failed, n)
		snap, err = l.statusSince(ctx, time.Time{})
		if err != nil {
			return err
		}
		var bogus []status.RARouter
		for _, w := range snap.IPv6.WANRA {
			for _, r := range w.Routers {
				if w.Interface == wan && r.Addr == netip.MustParseAddr("fe80::66:1") {
					bogus = append(bogus, r)
				}
			}
		}
		if len(bogus) != 1 || bogus[0].Reachability != ra.Unreachable {
			errs = append(errs, fmt.Errorf("status page: the bogus router fe80::66:1 is %+v, want one, unreachable", bogus))
		}

		flood := command(ctx, l.wanNS, scapyPython, "-c", raAttacker, "flood", hostIf, "20")
		flood.Stdin = strings.NewReader("")
		var fout syncBuffer
		flood.Stdout, flood.Stderr = &fout, &fout
		if err := flood.Start(); err != nil {
			return err
		}
		failed, n = l.sampleIPv6(ctx, 30*time.Second, lanHost6.Addr(), far)
		if err := flood.Wait(); err != nil {
			return fmt.Errorf("RA flood: %w: %s", err, fout.String())
		}
		check("during and after a 20 s RA flood", failed, n)

		snap, err = l.statusSince(ctx, time.Time{})
		if err != nil {
			return err
		}
		c1 := wanRACounters(snap, wan)
		d := func(k string) uint64 { return c1[k] - c0[k] }
		if d("router_unreachable") < 2 || d("routers_full") == 0 || d("prefixes_full") == 0 {
			errs = append(errs, fmt.Errorf("counters router_unreachable +%d, routers_full +%d, prefixes_full +%d; want at least 2, 1, 1 (%v)",
				d("router_unreachable"), d("routers_full"), d("prefixes_full"), c1))
		}
		t.Logf("counters after the flood: %v", c1)
		return errors.Join(errs...)
	})
}
