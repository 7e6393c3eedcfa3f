package ra

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// twoNS is two namespaces joined by a veth: ours (the interface the
// service runs on through a packetLink, its kernel IPv6 off, as the
// router keeps its ports) and peer's.
type twoNS struct {
	ours, peer      *netnstest.Netns
	ourIf, peerIf   string
	ourMAC, peerMAC string
	link            *packetLink
	ourLL           netip.Addr
}

// newTwoNS makes the namespaces; peerSysctls (names under
// net.ipv6.conf.IF) are set on the peer's interface before it comes up.
func newTwoNS(t *testing.T, prefix string, peerSysctls ...string) *twoNS {
	t.Helper()
	n := &twoNS{
		ours: netnstest.New(t, prefix+"o"), peer: netnstest.New(t, prefix+"p"),
		ourIf: "o0", peerIf: "p0", ourMAC: "02:00:5e:10:00:01", peerMAC: "02:00:5e:10:00:02",
	}
	n.ours.IP(t, "link", "add", n.ourIf, "address", n.ourMAC, "type", "veth", "peer", "name", n.peerIf, "address", n.peerMAC, "netns", n.peer.Name())
	n.ours.Run(t, "sysctl", "-qw", "net.ipv6.conf."+n.ourIf+".disable_ipv6=1")
	for _, kv := range peerSysctls {
		n.peer.Run(t, "sysctl", "-qw", "net.ipv6.conf."+n.peerIf+"."+kv)
	}
	n.ours.IP(t, "link", "set", n.ourIf, "up")
	n.link = openPacketLink(t, n.ours, n.ourIf)
	n.ourLL = LinkLocal(n.link.HardwareAddr())
	n.peer.IP(t, "link", "set", n.peerIf, "up")
	return n
}

// waitFor polls f until it returns "" or d passes, then fails t with the
// last message.
func waitFor(t *testing.T, d time.Duration, f func() string) {
	t.Helper()
	var msg string
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if msg = f(); msg == "" {
			return
		}
	}
	t.Fatal(msg)
}

// ipAddr is an address as `ip -j addr` prints it.
type ipAddr struct {
	Local      string `json:"local"`
	PrefixLen  int    `json:"prefixlen"`
	Dynamic    bool   `json:"dynamic"`
	Deprecated bool   `json:"deprecated"`
	Valid      int64  `json:"valid_life_time"`
	Preferred  int64  `json:"preferred_life_time"`
}

// hostAddrs returns the addresses of ifname in n that lie in p.
func hostAddrs(t *testing.T, n *netnstest.Netns, ifname string, p netip.Prefix) []ipAddr {
	t.Helper()
	out := n.Run(t, "ip", "-n", n.Name(), "-6", "-j", "addr", "show", "dev", ifname)
	var links []struct {
		AddrInfo []ipAddr `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		t.Fatalf("ip -j addr: %v: %s", err, out)
	}
	var in []ipAddr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ad, err := netip.ParseAddr(a.Local); err == nil && p.Contains(ad) {
				in = append(in, a)
			}
		}
	}
	return in
}

// defaultRoutes returns the gateways of ifname's default routes in n.
func defaultRoutes(t *testing.T, n *netnstest.Netns, ifname string) []string {
	t.Helper()
	out := n.Run(t, "ip", "-n", n.Name(), "-6", "-j", "route", "show", "default", "dev", ifname)
	var rs []struct {
		Gateway string `json:"gateway"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("ip -j route: %v: %s", err, out)
	}
	var gws []string
	for _, r := range rs {
		gws = append(gws, r.Gateway)
	}
	return gws
}

// testLogger sends a service's log to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestInteropKernelSLAAC runs the Advertiser against a LAN host's own
// Linux kernel (accept_ra 1, autoconf 1, not forwarding), and rdisc6
// from ndisc6 on that host. The kernel forms an address in the prefix
// with our lifetimes, takes the default route through our link-local
// address, and our MTU and hop limit; rdisc6, soliciting, decodes every
// field: flags, router lifetime, prefix and its lifetimes counting down,
// MTU, SLLA, RDNSS, DNSSL. SetPrefixes renumbers: the kernel forms an
// address in the new prefix and deprecates the old one (preferred 0,
// still valid). On stop the final RA removes the default route and
// deprecates the new prefix too.
func TestInteropKernelSLAAC(t *testing.T) {
	t.Parallel()
	netnstest.Privileged(t, "ip", "sysctl", "rdisc6")
	n := newTwoNS(t, "ras", "accept_ra=1", "autoconf=1", "forwarding=0", "accept_dad=0")
	pOld := netip.MustParsePrefix("2001:db8:77:1::/64")
	pNew := netip.MustParsePrefix("2001:db8:88:1::/64")
	start := time.Now()
	a, err := New(Config{
		Link: n.link, SrcAddr: n.ourLL, MTU: 1480, HopLimit: 61, Managed: true,
		RDNSS: []netip.Addr{netip.MustParseAddr("2001:db8:77:1::53")}, DNSSL: []string{"lan", "example.org"},
		MaxInterval: 4 * time.Second, RouterLifetime: 90 * time.Second, DNSLifetime: 120 * time.Second,
		Prefixes: []Prefix{{Prefix: pOld, ValidUntil: start.Add(3600 * time.Second), PreferredUntil: start.Add(1800 * time.Second)}},
		Logger:   testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.link.run(ctx, a.Deliver)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	waitFor(t, 10*time.Second, func() string {
		as := hostAddrs(t, n.peer, n.peerIf, pOld)
		if len(as) != 1 || !as[0].Dynamic {
			return fmt.Sprintf("no dynamic SLAAC address in %v on the host: %+v", pOld, as)
		}
		if as[0].Valid > 3600 || as[0].Valid < 3590 || as[0].Preferred > 1800 || as[0].Preferred < 1790 {
			return fmt.Sprintf("SLAAC address lifetimes %d/%d s, want ours: ~3600/1800", as[0].Valid, as[0].Preferred)
		}
		if gws := defaultRoutes(t, n.peer, n.peerIf); len(gws) != 1 || gws[0] != n.ourLL.String() {
			return fmt.Sprintf("default routes via %v, want via %v", gws, n.ourLL)
		}
		return ""
	})
	for path, want := range map[string]string{
		"/proc/sys/net/ipv6/conf/" + n.peerIf + "/mtu":       "1480",
		"/proc/sys/net/ipv6/conf/" + n.peerIf + "/hop_limit": "61",
	} {
		if got := n.peer.Sysctl(t, path); got != want {
			t.Errorf("host's %s = %s, want %s from our RA", path, got, want)
		}
	}

	// rdisc6 solicits (our solicited path) and prints the RA it gets.
	out := n.peer.Run(t, "rdisc6", "-1", "-w", "4000", n.peerIf)
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"Hop limit : 61 ",
		"Stateful address conf. : Yes", "Stateful other conf. : No",
		"Router preference : medium",
		"Router lifetime : 90 (0x0000005a) seconds",
		"Prefix : 2001:db8:77:1::/64 On-link : Yes Autonomous address conf.: Yes Valid time : 35",
		"Pref. time : 17",
		"MTU : 1480 bytes (valid)",
		"Source link-layer address: " + strings.ToUpper(n.ourMAC),
		"Recursive DNS server : 2001:db8:77:1::53 DNS server lifetime : 120 ",
		"DNS search list : lan example.org DNS search list lifetime: 120 ",
		"from " + n.ourLL.String(),
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("rdisc6 output lacks %q:\n%s", want, out)
		}
	}
	if st := a.Stats(); st.RSReceived.Load() == 0 || st.SolicitedSent.Load() == 0 {
		t.Errorf("rs_received %d, solicited_sent %d after rdisc6, want both > 0", st.RSReceived.Load(), st.SolicitedSent.Load())
	}

	// Renumbered: pNew comes, pOld stays valid but deprecated.
	if err := a.SetPrefixes([]Prefix{{Prefix: pNew, Valid: 600 * time.Second, Preferred: 300 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 8*time.Second, func() string {
		if as := hostAddrs(t, n.peer, n.peerIf, pNew); len(as) != 1 || as[0].Preferred < 290 {
			return fmt.Sprintf("no preferred address in the new prefix: %+v", as)
		}
		if as := hostAddrs(t, n.peer, n.peerIf, pOld); len(as) != 1 || as[0].Preferred != 0 || !as[0].Deprecated || as[0].Valid <= 0 || as[0].Valid > 3600 {
			return fmt.Sprintf("the old prefix's address %+v, want deprecated, preferred_lft 0, still valid", as)
		}
		return ""
	})
	if st := a.Status(); len(st.Prefixes) != 2 || st.Prefixes[1].Prefix != pOld || !st.Prefixes[1].Withdrawn {
		t.Errorf("Status prefixes %+v, want %v and %v withdrawn", st.Prefixes, pNew, pOld)
	}

	// Stop: the final RA has router lifetime 0 and deprecates pNew.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() string {
		if gws := defaultRoutes(t, n.peer, n.peerIf); len(gws) != 0 {
			return fmt.Sprintf("default routes via %v after the final RA, want none", gws)
		}
		if as := hostAddrs(t, n.peer, n.peerIf, pNew); len(as) != 1 || as[0].Preferred != 0 {
			return fmt.Sprintf("new prefix's address %+v after the final RA, want deprecated", as)
		}
		return ""
	})
	st := a.Stats()
	t.Logf("sent %d (solicited %d), rs %d, coalesced %d, drops %v", st.Sent.Load(), st.SolicitedSent.Load(),
		st.RSReceived.Load(), st.RSCoalesced.Load(), dropMap(st.Drops[:]))
}

// dropMap returns the non-zero drop counters by name.
func dropMap(drops []atomic.Uint64) map[string]uint64 {
	out := map[string]uint64{}
	for i := range drops {
		if v := drops[i].Load(); v > 0 {
			out[DropReason(i).String()] = v
		}
	}
	return out
}
