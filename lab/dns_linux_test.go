package lab

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// dig asks server the question args from namespace ns with dig
// (bind9-dnsutils), one try over UDP unless args say otherwise, and
// returns its output; an error only when dig could not run at all.
func dig(ctx context.Context, ns string, server netip.Addr, args ...string) (string, error) {
	a := append([]string{"@" + server.String(), "+tries=1", "+time=3", "+nocookie"}, args...)
	out, err := output(ctx, ns, "dig", a...)
	if err != nil && !strings.Contains(err.Error(), "exit status 9") {
		return string(out), err
	}
	return string(out), nil
}

// digStatus returns the rcode in dig's header line ("NOERROR", ...), ""
// when there was no answer.
func digStatus(out string) string {
	_, rest, ok := strings.Cut(out, "status: ")
	if !ok {
		return ""
	}
	st, _, _ := strings.Cut(rest, ",")
	return st
}

// ispQueries counts the queries for name the lab ISP's dnsmasq logged.
func (l *lab) ispQueries(qtype, name string) int {
	log := l.ispLog()
	// dnsmasq logs its authoritative answers as auth[TYPE].
	return strings.Count(log, "query["+qtype+"] "+name+" from ") + strings.Count(log, "auth["+qtype+"] "+name+" from ")
}

// dnsStatus returns the forwarder's section of a fresh status snapshot.
func (l *lab) dnsStatus(ctx context.Context) (*status.DNS, error) {
	snap, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	if snap.DNS == nil {
		return nil, fmt.Errorf("status page: no DNS section")
	}
	return snap.DNS, nil
}

// TestLabDNSForwarder proves the router's DNS forwarder with dig from the
// LAN host against the router's LAN address, the lab ISP's dnsmasq as its
// upstream (learnt from the WAN DHCP lease, option 6): an upstream
// answer; the same question again answered from the cache (the upstream
// saw one query); an NXDOMAIN cached too (RFC 2308); an answer larger
// than the EDNS0 UDP size, truncated by the upstream and fetched over TCP
// (RFC 7766 §5); a DHCP client's hostname answered locally, by A and
// PTR; and no answer on the router's WAN address, from either side.
func TestLabDNSForwarder(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "dig", "udhcpc")
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		rtr := lanRouter4.Addr()

		d, err := l.dnsStatus(ctx)
		if err != nil {
			return err
		}
		if len(d.Upstreams) != 1 || d.Upstreams[0] != (status.DNSUpstream{Address: wanHost4.Addr().String() + ":53", Source: "dhcp"}) {
			return fmt.Errorf("status DNS upstreams = %+v, want the ISP %s from dhcp", d.Upstreams, wanHost4.Addr())
		}

		// The forwarder started before the lease and took its DNS server
		// with SetUpstreams, and the delegation's LAN address (the ::1
		// of its /64) with SetListen: neither restarts it.
		rlog, _ := os.ReadFile(filepath.Join(l.dir, "router.log"))
		delegations := strings.Count(string(rlog), "msg=\"IPv6 delegation\"")
		if n := strings.Count(string(rlog), "msg=\"DNS forwarder\""); n != 1 || delegations < 1 {
			return fmt.Errorf("router log: the forwarder started %d times with %d delegations, want once (a lease or a delegation only changes its upstreams and addresses in place)", n, delegations)
		}

		// Upstream answer, then the cache.
		for i := range 2 {
			out, err := dig(ctx, l.lanNS, rtr, ispWebName, "A", "+short")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != ispWebAddr.String() {
				return fmt.Errorf("dig %s (try %d) = %q, want %s", ispWebName, i+1, out, ispWebAddr)
			}
		}
		if n := l.ispQueries("A", ispWebName); n != 1 {
			return fmt.Errorf("the ISP saw %d queries for %s, want 1 (the second from the cache)", n, ispWebName)
		}

		// Over IPv6: the LAN's static address and the ::1 of its /64 of
		// the delegation (added in place, after the forwarder started),
		// both answered from the same cache.
		snap, err := l.statusSince(ctx, time.Time{})
		if err != nil {
			return err
		}
		lanName, _ := routerInterfaces(l.opt.Topology)
		over6 := []netip.Addr{lanRouter6.Addr()}
		if snap.IPv6 == nil || !snap.IPv6.LANPrefixes[lanName].IsValid() {
			return fmt.Errorf("no delegated LAN /64 on the status page")
		}
		over6 = append(over6, snap.IPv6.LANPrefixes[lanName].Addr().Next())
		for _, a := range over6 {
			out, err := dig(ctx, l.lanNS, a, ispWebName, "A", "+short")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != ispWebAddr.String() {
				return fmt.Errorf("dig @%s %s = %q, want %s", a, ispWebName, out, ispWebAddr)
			}
		}
		if n := l.ispQueries("A", ispWebName); n != 1 {
			return fmt.Errorf("after the IPv6 queries the ISP saw %d queries for %s, want still 1 (the cache survived the delegation's new address)", n, ispWebName)
		}

		// NXDOMAIN, cached by the SOA's minimum (RFC 2308 §5).
		nx := "nx-" + l.prefix + "." + ispZone
		for i := range 2 {
			out, err := dig(ctx, l.lanNS, rtr, nx, "A")
			if err != nil {
				return err
			}
			if st := digStatus(out); st != "NXDOMAIN" {
				return fmt.Errorf("dig %s (try %d): status %q, want NXDOMAIN:\n%s", nx, i+1, st, out)
			}
		}
		if n := l.ispQueries("A", nx); n != 1 {
			return fmt.Errorf("the ISP saw %d queries for %s, want 1 (NXDOMAIN cached)", n, nx)
		}

		// TC: the upstream's UDP answer is truncated at 1232 bytes, the
		// forwarder fetches it over TCP; dig follows the forwarder's own
		// TC (it answers UDP up to 1232 bytes too) over TCP.
		out, err := dig(ctx, l.lanNS, rtr, ispBigName, "TXT", "+short")
		if err != nil {
			return err
		}
		if got := strings.Count(out, strings.Repeat("a", ispBigLen)) + strings.Count(out, strings.Repeat("f", ispBigLen)); got != 2 {
			return fmt.Errorf("dig %s TXT: not the whole record (%d bytes):\n%s", ispBigName, len(out), out)
		}
		if n := l.ispQueries("TXT", ispBigName); n != 2 {
			return fmt.Errorf("the ISP saw %d queries for %s, want 2 (UDP truncated, then TCP)", n, ispBigName)
		}
		d, err = l.dnsStatus(ctx)
		if err != nil {
			return err
		}
		if d.Queries["tcp"] < 1 {
			return fmt.Errorf("status DNS queries = %v: dig never retried the truncated answer over TCP", d.Queries)
		}

		if err := l.dnsLocalHost(ctx, t); err != nil {
			return err
		}

		// The WAN address: nothing listens there (LAN side), and the WAN
		// input policy drops (WAN side).
		for _, ns := range []string{l.lanNS, l.wanNS} {
			out, err := dig(ctx, ns, wanRouter4.Addr(), ispWebName, "A")
			if err != nil {
				return err
			}
			if st := digStatus(out); st != "" {
				return fmt.Errorf("a query to the router's WAN address %s was answered (%s):\n%s", wanRouter4.Addr(), st, out)
			}
		}
		d, err = l.dnsStatus(ctx)
		if err != nil {
			return err
		}
		t.Logf("DNS status: queries %v, hits %d, misses %d, local %d, upstream %d, errors %v, drops %v",
			d.Queries, d.CacheHits, d.CacheMisses, d.LocalAnswers, d.UpstreamQueries, d.UpstreamErrors, d.Drops)
		if d.CacheHits < 2 || d.LocalAnswers < 2 {
			return fmt.Errorf("status DNS: %d cache hits, %d local answers; want at least 2 each", d.CacheHits, d.LocalAnswers)
		}
		return nil
	})
}

// dnsLocalHost runs busybox udhcpc with a hostname on the LAN host and
// resolves that name, and its address back, through the forwarder.
func (l *lab) dnsLocalHost(ctx context.Context, t *testing.T) error {
	const host = "dnshost"
	u, err := l.startUdhcpc(ctx, "udhcpc-dns", host)
	if err != nil {
		return err
	}
	defer u.stop()
	logPath := u.events
	bound, err := waitEvent(ctx, logPath, "bound", 20*time.Second)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(bound["ip"])
	if err != nil {
		return fmt.Errorf("udhcpc bound without an address: %v", bound)
	}
	fqdn := host + ".lan"
	var got string
	for deadline := time.Now().Add(5 * time.Second); ; {
		got, err = dig(ctx, l.lanNS, lanRouter4.Addr(), fqdn, "A", "+short")
		if err != nil {
			return err
		}
		if strings.TrimSpace(got) == ip.String() || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.TrimSpace(got) != ip.String() {
		return fmt.Errorf("dig %s = %q, want the lease's %s", fqdn, got, ip)
	}
	ptr, err := dig(ctx, l.lanNS, lanRouter4.Addr(), "-x", ip.String(), "+short")
	if err != nil {
		return err
	}
	if strings.TrimSpace(ptr) != fqdn+"." {
		return fmt.Errorf("dig -x %s = %q, want %s.", ip, ptr, fqdn)
	}
	if n := l.ispQueries("A", fqdn); n != 0 {
		return fmt.Errorf("the ISP saw %d queries for the local name %s, want 0", n, fqdn)
	}
	t.Logf("local host %s = %s, PTR %s", fqdn, ip, strings.TrimSpace(ptr))
	return nil
}

// dnsSpoofer runs on the WAN host: for every query from the router to the
// ISP for the name argv[4], it sends two forged answers from the ISP's
// address and port 53, one with the wrong ID and one with the right ID
// but another question, each saying spoofAddr; it prints "ready" once it
// listens and the number of forgeries when stdin closes.
const dnsSpoofer = `
import sys, threading
from scapy.all import AsyncSniffer, Ether, IP, UDP, DNS, DNSQR, DNSRR, sendp, conf
conf.verb = 0
iface, router, isp, name, spoof = sys.argv[1:6]
sent = 0
def forge(p):
    global sent
    if not p.haslayer(DNS) or p[DNS].qr != 0 or p[DNS].qd is None:
        return
    if p[DNS].qd.qname.decode().rstrip(".").lower() != name:
        return
    base = Ether(src=p[Ether].dst, dst=p[Ether].src)/IP(src=isp, dst=router)/UDP(sport=53, dport=p[UDP].sport)
    for id_, qn in ((p[DNS].id ^ 0x5a5a, name), (p[DNS].id, "www.isp.test")):
        sendp(base/DNS(id=id_, qr=1, aa=1, qd=DNSQR(qname=qn, qtype="A"), an=DNSRR(rrname=qn, type="A", ttl=3600, rdata=spoof)), iface=iface)
        sent += 1
s = AsyncSniffer(iface=iface, filter="udp dst port 53 and src host %s and dst host %s" % (router, isp), prn=forge, store=False)
s.start()
threading.Event().wait(0.5)
print("ready", flush=True)
sys.stdin.read()
s.stop()
print(sent, flush=True)
`

// dnsSpoofTable is the WAN host's nftables table that holds back the
// ISP's real answers while the spoofer forges its own.
const dnsSpoofTable = "gvrlabdnsspoof"

// TestLabDNSSpoofedAnswer forges upstream answers on the WAN (RFC 5452):
// while the ISP's real answers are held back, the WAN host answers each
// of the router's upstream queries with the wrong ID and with the wrong
// question. The forwarder drops both (counted as answer_mismatch), the
// client gets SERVFAIL, never the forged address, and once the ISP
// answers again the name resolves to its real address: nothing forged
// entered the cache.
func TestLabDNSSpoofedAnswer(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "dig", "nft")
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		const spoofAddr = "192.0.2.66"
		name := "isp-gw." + ispZone
		rtr := lanRouter4.Addr()

		cmd := command(ctx, l.wanNS, scapyPython, "-c", dnsSpoofer, hostIf, wanRouter4.Addr().String(), wanHost4.Addr().String(), name, spoofAddr)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		var stderr syncBuffer // read while the spoofer may still write
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		defer cmd.Wait()
		defer stdin.Close()
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() || lines.Text() != "ready" {
			return fmt.Errorf("WAN spoofer did not start: %q %s", lines.Text(), stderr.String())
		}

		nft := fmt.Sprintf("table inet %s { chain out { type filter hook output priority 0; ip daddr %s udp sport 53 drop; }; }",
			dnsSpoofTable, wanRouter4.Addr())
		hold := command(ctx, l.wanNS, "nft", "-f", "-")
		hold.Stdin = strings.NewReader(nft)
		if out, err := hold.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %v: %s", err, out)
		}
		held := true
		release := func() error {
			if !held {
				return nil
			}
			held = false
			return nsRun(context.Background(), l.wanNS, "nft", "delete", "table", "inet", dnsSpoofTable)
		}
		defer release()

		out, err := dig(ctx, l.lanNS, rtr, name, "A", "+time=12")
		if err != nil {
			return err
		}
		if strings.Contains(out, spoofAddr) {
			return fmt.Errorf("the forged answer reached the client:\n%s", out)
		}
		if st := digStatus(out); st != "SERVFAIL" {
			return fmt.Errorf("dig %s while the ISP is held back: status %q, want SERVFAIL:\n%s", name, st, out)
		}
		if err := release(); err != nil {
			return err
		}
		stdin.Close()
		var forged string
		if lines.Scan() {
			forged = lines.Text()
		}
		d, err := l.dnsStatus(ctx)
		if err != nil {
			return err
		}
		t.Logf("forged answers sent: %s; drops %v", forged, d.Drops)
		if forged == "" || forged == "0" {
			return fmt.Errorf("the spoofer forged nothing (%q): it never saw the router's query; %s", forged, stderr.String())
		}
		if d.Drops["answer_mismatch"] < 2 {
			return fmt.Errorf("status DNS drops = %v, want answer_mismatch >= 2", d.Drops)
		}
		for i := range 2 {
			out, err := dig(ctx, l.lanNS, rtr, name, "A", "+short")
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != wanHost4.Addr().String() {
				return fmt.Errorf("dig %s after the forgeries (try %d) = %q, want the ISP's %s", name, i+1, out, wanHost4.Addr())
			}
		}
		return nil
	})
}
