package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	logPath := filepath.Join(l.dir, "udhcpc-dns.events")
	script := filepath.Join(l.dir, "udhcpc-dns.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(udhcpcScript, logPath)), 0o700); err != nil {
		return err
	}
	cmd := command(ctx, l.lanNS, "udhcpc", "-f", "-i", hostIf, "-s", script, "-x", "hostname:"+host, "-t", "10", "-T", "1")
	out, err := os.Create(filepath.Join(l.dir, "udhcpc-dns.log"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
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
