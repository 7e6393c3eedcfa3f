package lab_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/linuxpeer"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/ra"
)

// pppoeStatusPort is the router's status listener in its namespace.
const pppoeStatusPort = 18039

// pppoeBehindAC and pppoeBehindAC6 are the guest's addresses behind its
// access concentrator (on its lo): the "Internet" the LAN host reaches
// over PPPoE.
const (
	pppoeBehindAC  = "10.77.9.1"
	pppoeBehindAC6 = "fd77:9::1"
)

// waitPPPoE polls the router's status until its one PPPoE session
// satisfies ok, and returns it; it fails t after d.
func waitPPPoE(t *testing.T, r *router.Router, d time.Duration, what string, ok func(status.PPPoE) bool) status.PPPoE {
	t.Helper()
	deadline := time.Now().Add(d)
	var last status.PPPoE
	for {
		if s := r.Snapshot().PPPoE; len(s) == 1 {
			last = s[0]
			if ok(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("PPPoE session not %s after %v: %+v", what, d, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func sessionUp(s status.PPPoE) bool { return s.State == "up" && s.IPv4 != nil }

// grepLines returns the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// vlanEnv and vlanKey put the AC and the router's wan on VLAN vid (0:
// untagged).
func vlanEnv(vid int) string {
	if vid == 0 {
		return ""
	}
	return strconv.Itoa(vid)
}

func vlanKey(vid int) string {
	if vid == 0 {
		return ""
	}
	return fmt.Sprintf("\n    vlan: %d", vid)
}

// hostRun runs a command in the host namespace and returns its output.
// mtuSaid reports whether ping's output says the path's MTU is mtu: the
// router's ICMP "fragmentation needed" / ICMPv6 "packet too big" ("mtu =
// 1492", "mtu=1492"), or the kernel's own refusal once it learnt it.
func mtuSaid(out string, mtu int) bool {
	return strings.Contains(out, fmt.Sprintf("mtu = %d", mtu)) || strings.Contains(out, fmt.Sprintf("mtu=%d", mtu))
}

func hostRun(ctx context.Context, host *netnstest.Netns, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", host.Name()}, args...)...).CombinedOutput()
	return string(out), err
}

// startTshark starts tshark with args in namespace ns, its field output
// into out, and returns once it says it is capturing (stderr "Capturing
// on"), so that a busy machine's slow start loses no packet; the
// returned func stops it and waits for it.
func startTshark(t *testing.T, ctx context.Context, ns *netnstest.Netns, out *strings.Builder, args ...string) (stop func()) {
	t.Helper()
	tsCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	ts := exec.CommandContext(tsCtx, "ip", append([]string{"netns", "exec", ns.Name(), "tshark"}, args...)...)
	ts.Stdout = out
	stderr, err := ts.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(); err != nil {
		t.Fatalf("tshark: %v", err)
	}
	ready := make(chan struct{})
	go func() {
		b := make([]byte, 4096)
		var seen strings.Builder
		told := false
		for {
			n, err := stderr.Read(b)
			seen.Write(b[:n])
			if !told && strings.Contains(seen.String(), "Capturing on") {
				close(ready)
				told = true
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Logf("tshark did not say it was capturing within 20 s")
	}
	time.Sleep(500 * time.Millisecond) // its filter compiled, the socket open
	return func() {
		time.Sleep(time.Second)
		cancel()
		ts.Wait()
	}
}

// pppdLLRE reads pppd's log of IPv6CP's result: "local  LL address
// fe80::..." and "remote LL address fe80::...".
var pppdLLRE = regexp.MustCompile(`(local|remote) +LL address (fe80:[0-9a-f:]+)`)

// mssRE reads tshark's fields: source address and MSS of each SYN.
var mssRE = regexp.MustCompile(`(?m)^(\S+)\t(\d+)$`)

// pppoeLab boots the guest as the access concentrator (job pppoe, CHAP
// with password for alice; its Ethernet MTU guestMTU, 0 for 1500) and
// starts the router with a PPPoE wan on its tap (in ns), masquerading,
// and the hostBehind host on its lan.
func pppoeLab(t *testing.T, ctx context.Context, password string, vlan, guestMTU int) (p *linuxpeer.Peer, ns, host *netnstest.Netns, r *router.Router) {
	t.Helper()
	netnstest.Privileged(t, "iperf3", "tshark", "curl")
	env := map[string]string{
		"ADDR": pppoeBehindAC + "/32", "PPP_USER": "alice", "PPP_PASSWORD": password,
		"ADDR6":     pppoeBehindAC6 + "/128",
		"GUEST_CMD": "iperf3 -s -D -B " + pppoeBehindAC + " && iperf3 -s -D -p 5202 -B " + pppoeBehindAC6, "PPP_VLAN": vlanEnv(vlan),
	}
	if guestMTU != 0 {
		env["PPP_MTU"] = strconv.Itoa(guestMTU)
	}
	p, ns = linuxpeer.StartT(t, ctx, "pppoe", env)
	host = hostBehind(t, ns)
	r = startRouter(t, ns, pppoeConfig(t, p.Tap, password, vlan, 0))
	return p, ns, host, r
}

// pppoeConfig is the router's config of pppoeLab with pppoe mtu (0: the
// default, 1492; above it RFC 4638, the port's mtu 8 more).
func pppoeConfig(t *testing.T, tap, password string, vlan, mtu int) string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pppoe.password")
	if err := os.WriteFile(pw, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, mtuKey := "  - name: "+tap+"\n", ""
	if mtu != 0 {
		port = fmt.Sprintf("  - {name: %s, mtu: %d}\n", tap, mtu+8)
		mtuKey = fmt.Sprintf(", mtu: %d", mtu)
	}
	return fmt.Sprintf(`ports:
`+port+hostPort+`interfaces:
  - name: wan
    port: %s
    role: wan%s
    addresses: [pppoe]
    pppoe: {user: alice, password_file: %s, service: internet, lcp_echo: {interval: 1s, failures: 3}%s}
    ipv6: {pd: 56}
`+hostInterface+`nat:
  masquerade: [wan]
dns: {domain: lan}
status:
  listen: ["127.0.0.1:%d"]
`, tap, vlanKey(vlan), pw, mtuKey, pppoeStatusPort)
}

// TestPPPoEAgainstLinux runs the router's PPPoE client against Linux as
// the ISP's access concentrator in the QEMU guest: rp-pppoe's
// pppoe-server for discovery and pppd on the guest kernel's PPPoE
// (pppoe.ko and ppp_generic.ko; Debian builds pppoe-server without -k,
// so the guest's init attaches pppd to the session itself, as -k does).
// This machine's kernel has no PPP, hence the guest. It checks that the
// session comes up with CHAP-MD5, IPCP's address, peer, DNS and MTU
// 1492, IPCP's DNS server as the DNS forwarder's upstream; that a host
// behind the router pings and runs iperf3 both ways to
// an address behind the AC, masqueraded to the IPCP address; that the
// router's capture of wan (/api/capture) holds the session frames both
// ways and tshark decodes PPPoE and PPP in them; and that
// the SYNs on the wire (tshark on the tap, decoding PPPoE) carry an MSS
// of at most 1452.
func TestPPPoEAgainstLinux(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p, ns, host, r := pppoeLab(t, ctx, "s3cret-pppoe", 0, 0)
	t0 := time.Now()
	s := waitPPPoE(t, r, 30*time.Second, "up", sessionUp)
	t.Logf("session up after %v: id %d, AC %s (%s), auth %s, MTU %d, IPv4 %+v", time.Since(t0).Round(10*time.Millisecond),
		s.SessionID, s.ACName, s.ACMAC, s.Auth, s.MTU, *s.IPv4)
	if s.Auth != "chap-md5" || s.MTU != 1492 || s.ACName != "lpeer-ac" || s.ACMAC != linuxpeer.GuestMAC ||
		s.IPv4.Local.String() != "10.64.0.10" || s.IPv4.Peer.String() != "10.64.0.1" ||
		len(s.IPv4.DNS) == 0 || s.IPv4.DNS[0].String() != "10.64.0.53" {
		t.Errorf("session = %+v, want CHAP-MD5, MTU 1492, AC lpeer-ac at %s, 10.64.0.10 peer 10.64.0.1 DNS 10.64.0.53", s, linuxpeer.GuestMAC)
	}

	// IPCP's DNS server is the forwarder's upstream (dns: names none).
	if d := r.Snapshot().DNS; d == nil || len(d.Upstreams) == 0 || d.Upstreams[0].Address != "10.64.0.53:53" {
		t.Errorf("DNS forwarder status = %+v, want IPCP's 10.64.0.53:53 as its upstream", d)
	}

	// The status page's metrics say the same, once it sampled the
	// session up (it samples every second).
	wants := []string{`gvrouter_pppoe_up{interface="wan"} 1`, `gvrouter_pppoe_mtu{interface="wan"} 1492`,
		`gvrouter_pppoe_state{interface="wan",state="up"} 1`,
		`gvrouter_pppoe_counter_total{counter="auth_failures",interface="wan"} 0`}
	var metrics string
	for try := 0; try < 20; try++ {
		metrics = ns.Run(t, "curl", "-sS", "--max-time", "5", fmt.Sprintf("http://127.0.0.1:%d/metrics", pppoeStatusPort))
		if strings.Contains(metrics, wants[0]) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q; its pppoe lines:\n%s", want, grepLines(metrics, "gvrouter_pppoe_"))
		}
	}

	// The router's capture of wan shows the session's frames as they
	// are on the wire, both ways, and tshark decodes PPPoE and PPP in
	// them.
	pcap := filepath.Join(t.TempDir(), "wan.pcapng")
	capDone := make(chan error, 1)
	go func() {
		capDone <- exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name(), "curl", "-sS", "--max-time", "20", "-o", pcap,
			fmt.Sprintf("http://127.0.0.1:%d/api/capture?iface=wan&count=40&seconds=6", pppoeStatusPort)).Run()
	}()
	time.Sleep(time.Second)
	if out, err := hostRun(ctx, host, "ping", "-c", "2", "-W", "2", pppoeBehindAC); err != nil {
		t.Fatalf("host ping %s over PPPoE: %v\n%s", pppoeBehindAC, err, out)
	}
	if err := <-capDone; err != nil {
		t.Fatalf("GET /api/capture?iface=wan: %v", err)
	}
	protos, err := exec.CommandContext(ctx, "tshark", "-r", pcap, "-T", "fields", "-e", "frame.protocols", "-e", "pppoe.session_id", "-e", "ip.src").CombinedOutput()
	if got := strings.Count(string(protos), "pppoes:ppp:ip:icmp"); err != nil || got != 4 || !strings.Contains(string(protos), "10.64.0.10") || !strings.Contains(string(protos), pppoeBehindAC) {
		head, _ := os.ReadFile(pcap)
		t.Errorf("router capture of wan through tshark: %v\n%s\nwant 4 frames eth:ethertype:pppoes:ppp:ip:icmp (2 pings), from 10.64.0.10 and from %s; the capture starts %.200q", err, protos, pppoeBehindAC, head)
	} else {
		t.Logf("router capture of wan, as tshark reads it:\n%s", protos)
	}

	// The LAN host's ping and TCP through NAT over the session; tshark
	// on the tap (the wire between router and AC) reads the SYNs' MSS.
	tsCtx, tsCancel := context.WithTimeout(ctx, 60*time.Second)
	defer tsCancel()
	ts := exec.CommandContext(tsCtx, "ip", "netns", "exec", ns.Name(), "tshark", "-n", "-l", "-i", p.Tap, "-f", "pppoes",
		"-Y", "tcp.flags.syn == 1", "-T", "fields", "-e", "ip.src", "-e", "tcp.options.mss_val")
	var tsOut strings.Builder
	ts.Stdout = &tsOut
	if err := ts.Start(); err != nil {
		t.Fatalf("tshark: %v", err)
	}
	time.Sleep(3 * time.Second) // tshark takes a while to capture
	if out, err := hostRun(ctx, host, "ping", "-c", "3", "-W", "2", pppoeBehindAC); err != nil {
		t.Fatalf("host ping %s over PPPoE: %v\n%s", pppoeBehindAC, err, out)
	}
	// Path MTU (RFC 1191): a 1500-byte packet with DF does not fit the
	// 1492-byte session; the router answers "fragmentation needed" with
	// the session's MTU, which the LAN host's kernel then uses.
	if out, _ := hostRun(ctx, host, "ping", "-M", "do", "-s", "1472", "-c", "1", "-W", "2", pppoeBehindAC); !mtuSaid(out, 1492) {
		t.Errorf("host ping of 1500 bytes with DF over the 1492-byte session: want fragmentation needed with mtu 1492, got:\n%s", out)
	}
	for _, dir := range [][]string{nil, {"-R"}} {
		var out string
		var err error
		var bps []string
		for try := 0; try < 5; try++ {
			out, err = hostRun(ctx, host, append([]string{"iperf3", "-c", pppoeBehindAC, "-t", "3", "-J"}, dir...)...)
			// The guest's iperf3 server may still be closing the last
			// test (a reset control connection, "busy") or not yet
			// listening: those are the guest's, not the path's; try again.
			if bps = iperfRE.FindStringSubmatch(out); bps != nil || !strings.Contains(out, "Connection refused") &&
				!strings.Contains(out, "Connection reset by peer") && !strings.Contains(out, "server is busy") {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil || bps == nil {
			t.Fatalf("iperf3 %v host→router→PPPoE→AC: %v\n%.2000s", dir, err, out)
		}
		t.Logf("iperf3 %v host→router→PPPoE→AC: %s bit/s received", dir, bps[1])
	}
	time.Sleep(time.Second)
	tsCancel()
	ts.Wait()
	syns := mssRE.FindAllStringSubmatch(tsOut.String(), -1)
	fromRouter := 0
	for _, m := range syns {
		mss, _ := strconv.Atoi(m[2])
		if mss > 1492-40 {
			t.Errorf("SYN from %s on the wire with MSS %d, want <= 1452", m[1], mss)
		}
		if m[1] == "10.64.0.10" {
			fromRouter++
		}
	}
	t.Logf("SYNs on the wire (source, MSS): %q", syns)
	if fromRouter == 0 {
		t.Errorf("tshark saw no SYN from the router's IPCP address in the session; output:\n%s", tsOut.String())
	}
	if c := r.Snapshot().PPPoE[0].Counters; c["path_decapsulated"] < 1000 || c["path_encapsulated"] < 1000 {
		t.Errorf("data path counters after iperf3 both ways: decapsulated %d, encapsulated %d, want >= 1000 each",
			c["path_decapsulated"], c["path_encapsulated"])
	} else {
		t.Logf("data path: %d decapsulated, %d encapsulated, %d SYNs clamped on receive", c["path_decapsulated"], c["path_encapsulated"], c["path_mss_clamped_in"])
	}
	if st := r.Snapshot(); st.Interfaces != nil {
		for _, ifc := range st.Interfaces {
			if ifc.Name == "wan" {
				t.Logf("wan drops %v", ifc.Drops)
			}
		}
	}

	pppoeIPv6(t, ctx, p, ns, host, r)
}

// pppoeIPv6 is TestPPPoEAgainstLinux's IPv6 part, on the same session:
// IPv6CP gave both ends their link-local addresses (the guest's ppp0
// holds the AC's, with the router's as its peer); the guest's radvd
// gives the wan its IPv6 default router (the AC's link-local address)
// and the guest's kea-dhcp6 delegates a /56 over the session (its lease
// file holds it); the delegation numbers the LAN, whose host takes an
// address by SLAAC from the router's RA, pings and runs TCP (iperf3
// both ways) to the guest's address behind the AC over the session,
// which tshark on the tap decodes as pppoes:ppp:ipv6 both ways with
// every SYN's MSS at most 1492 - 60.
func pppoeIPv6(t *testing.T, ctx context.Context, p *linuxpeer.Peer, ns, host *netnstest.Netns, r *router.Router) {
	s := waitPPPoE(t, r, 10*time.Second, "up with IPv6CP", func(s status.PPPoE) bool { return sessionUp(s) && s.IPv6 != nil })
	local, peer := s.IPv6.Local, s.IPv6.Peer
	t.Logf("IPv6CP: local %s, peer %s", local, peer)
	if !local.IsLinkLocalUnicast() || !peer.IsLinkLocalUnicast() || local == peer {
		t.Fatalf("IPv6CP result local %s peer %s, want two different link-local addresses", local, peer)
	}
	// pppd's view of IPv6CP: its own link-local address is the router's
	// peer, its remote one the router's.
	plog := p.MustRun(t, ctx, "grep 'LL address' /var/log/pppd.log | tail -2; ip -6 addr show dev $(cd /sys/class/net && ls -d ppp* | head -1)", 10*time.Second)
	if m := pppdLLRE.FindAllStringSubmatch(plog, -1); len(m) != 2 || netip.MustParseAddr(m[0][2]) != peer || netip.MustParseAddr(m[1][2]) != local {
		t.Errorf("pppd on the guest:\n%s\nwant local LL address %s (the router's peer) and remote %s (the router's)", plog, peer, local)
	} else {
		t.Logf("pppd on the guest:\n%s", plog)
	}
	var metrics string
	want := fmt.Sprintf(`gvrouter_pppoe_ipv6cp_info{interface="wan",local="%s",peer="%s"} 1`, local, peer)
	for try := 0; try < 20 && !strings.Contains(metrics, want); try++ {
		time.Sleep(250 * time.Millisecond)
		metrics = ns.Run(t, "curl", "-sS", "--max-time", "5", fmt.Sprintf("http://127.0.0.1:%d/metrics", pppoeStatusPort))
	}
	if !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s; its pppoe lines:\n%s", want, grepLines(metrics, "gvrouter_pppoe_"))
	}

	// The delegation over the session, and the RA learner's router.
	var pd, lan netip.Prefix
	var v6 *status.IPv6
	deadline := time.Now().Add(30 * time.Second)
	for {
		v6 = r.Snapshot().IPv6
		if v6 != nil && v6.Delegation != nil && v6.Delegation.Lease != nil && len(v6.Delegation.Lease.Prefixes) > 0 && v6.LANPrefixes["hostlan"].IsValid() &&
			len(v6.WANRA) == 1 && len(v6.WANRA[0].Routers) > 0 {
			pd, lan = v6.Delegation.Lease.Prefixes[0].Prefix, v6.LANPrefixes["hostlan"]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delegation, LAN prefix and RA router after 30 s over PPPoE: %+v\nguest's logs:\n%s", v6,
				p.MustRun(t, ctx, "cat /var/log/ipv6-up.log /var/log/kea.out /var/log/radvd.log; tail -5 /var/log/kea.log", 10*time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("delegated %s over PPPoE, LAN %s, wan's RA router %s (%s)", pd, lan, v6.WANRA[0].Routers[0].Addr, v6.WANRA[0].Routers[0].Reachability)
	if got := v6.WANRA[0].Routers[0]; got.Addr != peer || got.Reachability != ra.Reachable {
		t.Errorf("wan's default router from the RA = %s (%s), want the AC's link-local address %s, reachable (a PPP link: no NUD)", got.Addr, got.Reachability, peer)
	}
	if pd.Bits() != 56 || !netip.MustParsePrefix("fd77:8000::/48").Contains(pd.Addr()) {
		t.Errorf("delegated prefix %s, want a /56 of the guest's pool fd77:8000::/48", pd)
	}
	// The server's side: kea's lease file holds the same prefix.
	leases := p.MustRun(t, ctx, "cat /tmp/kea/leases6.csv", 10*time.Second)
	if !strings.Contains(leases, pd.Addr().String()+",") {
		t.Errorf("guest's kea lease file lacks %s:\n%s", pd, leases)
	}
	// The ISP's edge routes what it delegated to the router (kea does
	// not): over the PPP link, no next hop needed.
	p.MustRun(t, ctx, "ip -6 route replace "+pd.String()+" dev $(cd /sys/class/net && ls -d ppp* | head -1)", 10*time.Second)

	// The LAN host takes an address of the LAN /64 by SLAAC from the
	// router's RA.
	host.Run(t, "sysctl", "-qw", "net.ipv6.conf.lph1.disable_ipv6=0")
	var hostAddr netip.Addr
	deadline = time.Now().Add(20 * time.Second)
	for !hostAddr.IsValid() {
		out := host.Run(t, "ip", "-n", host.Name(), "-6", "-o", "addr", "show", "dev", "lph1", "scope", "global")
		for _, f := range strings.Fields(out) {
			if pf, err := netip.ParsePrefix(f); err == nil && lan.Contains(pf.Addr()) && !strings.Contains(out, "tentative") {
				hostAddr = pf.Addr()
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("LAN host has no SLAAC address in %s after 20 s: %s", lan, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("LAN host's SLAAC address %s", hostAddr)

	var tsOut strings.Builder
	stopTshark := startTshark(t, ctx, ns, &tsOut, "-n", "-l", "-i", p.Tap, "-f", "pppoes",
		"-Y", "ipv6", "-T", "fields", "-e", "frame.protocols", "-e", "ipv6.src", "-e", "ipv6.dst", "-e", "tcp.options.mss_val")
	if out, err := hostRun(ctx, host, "ping", "-6", "-c", "3", "-W", "2", pppoeBehindAC6); err != nil || !strings.Contains(out, " 3 received") {
		t.Fatalf("host ping %s over PPPoE (IPv6): %v\n%s", pppoeBehindAC6, err, out)
	}
	// Path MTU (RFC 8201): a 1500-byte IPv6 packet gets Packet Too Big
	// with the session's 1492.
	if out, _ := hostRun(ctx, host, "ping", "-6", "-M", "do", "-s", "1452", "-c", "1", "-W", "2", pppoeBehindAC6); !mtuSaid(out, 1492) {
		t.Errorf("host ping of 1500 bytes over the 1492-byte session (IPv6): want packet too big with mtu 1492, got:\n%s", out)
	}
	for _, dir := range [][]string{nil, {"-R"}} {
		var out string
		var err error
		var bps []string
		for try := 0; try < 5; try++ {
			out, err = hostRun(ctx, host, append([]string{"iperf3", "-6", "-c", pppoeBehindAC6, "-p", "5202", "-t", "2", "-J"}, dir...)...)
			if bps = iperfRE.FindStringSubmatch(out); bps != nil || !strings.Contains(out, "Connection refused") &&
				!strings.Contains(out, "Connection reset by peer") && !strings.Contains(out, "server is busy") {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil || bps == nil {
			t.Fatalf("iperf3 -6 %v host→router→PPPoE→AC: %v\n%.2000s", dir, err, out)
		}
		t.Logf("iperf3 -6 %v host→router→PPPoE→AC: %s bit/s received", dir, bps[1])
	}
	stopTshark()
	var echoOut, echoBack, syns int
	for _, l := range strings.Split(tsOut.String(), "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 4 || !strings.HasPrefix(f[0], "eth:ethertype:pppoes:ppp:ipv6") {
			continue
		}
		switch {
		case strings.HasPrefix(f[0], "eth:ethertype:pppoes:ppp:ipv6:icmpv6") && f[1] == hostAddr.String() && f[2] == pppoeBehindAC6:
			echoOut++
		case strings.HasPrefix(f[0], "eth:ethertype:pppoes:ppp:ipv6:icmpv6") && f[1] == pppoeBehindAC6 && f[2] == hostAddr.String():
			echoBack++
		}
		if f[3] != "" {
			syns++
			if mss, _ := strconv.Atoi(f[3]); mss > 1492-60 {
				t.Errorf("IPv6 SYN %s → %s in the session with MSS %d, want <= 1432", f[1], f[2], mss)
			}
		}
	}
	t.Logf("tshark on the tap, IPv6 in the session: %d echo requests out, %d replies back, %d SYNs", echoOut, echoBack, syns)
	if echoOut < 3 || echoBack < 3 || syns < 2 {
		t.Errorf("tshark saw %d echo requests %s → %s and %d replies as pppoes:ppp:ipv6:icmpv6, %d SYNs; want 3, 3, >= 2:\n%.3000s",
			echoOut, hostAddr, pppoeBehindAC6, echoBack, syns, tsOut.String())
	}
}

// TestPPPoEReconnectAgainstLinux: against the same access concentrator,
// pppd ended on the AC (its LCP Terminate-Request, then pppoe-server's
// PADT) brings the session back within 10 s; an AC gone silent is
// declared dead within interval × failures + 1 s and the session comes
// back when it answers again; a changed password on the
// AC gives a counted authentication failure, a status that says so and
// a backoff (few PADIs); with PAP and the right password the session
// comes back.
func TestPPPoEReconnectAgainstLinux(t *testing.T) {
	// Its time goes to the AC's and the client's timers (an 8 s silence,
	// echo failures, the backoff after a refused password), so it runs
	// beside the other lab tests with a guest of its own (lab_test cannot
	// take the lab package's slots).
	t.Parallel() // as the lab package's parallelLongLab: no slot
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const password = "s3cret-pppoe"
	p, _, host, r := pppoeLab(t, ctx, password, 0, 0)
	s := waitPPPoE(t, r, 30*time.Second, "up", sessionUp)
	t.Logf("session up: id %d, auth %s", s.SessionID, s.Auth)
	// The AC ends the session (pppd's LCP Terminate-Request, then
	// pppoe-server's PADT): back within 10 s.
	before := waitPPPoE(t, r, time.Second, "up", sessionUp)
	t1 := time.Now()
	p.MustRun(t, ctx, "kill $(pidof pppd)", 10*time.Second)
	s = waitPPPoE(t, r, 10*time.Second, "reconnected", func(s status.PPPoE) bool {
		return sessionUp(s) && s.Reconnects > before.Reconnects
	})
	t.Logf("reconnected %v after pppd was killed on the AC (last down: %q; padt_rx %d, lcp_term_req_rx %d)",
		time.Since(t1).Round(10*time.Millisecond), s.LastDownReason, s.Counters["padt_rx"], s.Counters["lcp_term_req_rx"])
	if out, err := hostRun(ctx, host, "ping", "-c", "2", "-W", "2", pppoeBehindAC); err != nil {
		t.Fatalf("host ping after the reconnect: %v\n%s", err, out)
	}

	// The AC goes silent (pppoe-server and pppd stopped): the session is
	// declared dead within lcp_echo interval × failures + 1 s (4 s), and
	// comes back once the AC answers again.
	before = waitPPPoE(t, r, 5*time.Second, "up", sessionUp)
	t2 := time.Now()
	p.MustRun(t, ctx, "kill -STOP $(pidof pppoe-server) $(pidof pppd)", 10*time.Second)
	s = waitPPPoE(t, r, 15*time.Second, "declared dead", func(s status.PPPoE) bool { return s.State != "up" })
	dead := time.Since(t2)
	p.MustRun(t, ctx, "kill -CONT $(pidof pppoe-server) $(pidof pppd)", 10*time.Second)
	t.Logf("silent AC: declared dead after %v (%q, echo_missed %d)", dead.Round(10*time.Millisecond), s.LastDownReason, s.Counters["echo_missed"])
	if dead > 4*time.Second+500*time.Millisecond { // + the status poll (100 ms) and the stop command's trip into the TCG guest, timed from before it
		t.Errorf("silent AC declared dead after %v, want within 1 s × 3 + 1 s", dead)
	}
	s = waitPPPoE(t, r, 30*time.Second, "back after the AC returned", func(s status.PPPoE) bool {
		return sessionUp(s) && s.Reconnects > before.Reconnects
	})
	t.Logf("back %v after the AC returned", time.Since(t2.Add(dead)).Round(10*time.Millisecond))

	// A changed password on the AC: authentication fails, is counted,
	// the status says so and the retries back off.
	p.MustRun(t, ctx, "echo 'alice * wrong-password *' >/etc/ppp/chap-secrets && kill $(pidof pppd)", 10*time.Second)
	s = waitPPPoE(t, r, 15*time.Second, "failing authentication", func(s status.PPPoE) bool {
		return s.Counters["auth_failures"] > 0
	})
	padi0 := s.Counters["padi_tx"]
	time.Sleep(8 * time.Second)
	s = r.Snapshot().PPPoE[0]
	padis := s.Counters["padi_tx"] - padi0
	t.Logf("wrong password: state %s, last down %q, AC's message %q, %d auth failures, %d PADIs in 8 s",
		s.State, s.LastDownReason, s.AuthMessage, s.Counters["auth_failures"], padis)
	if s.State == "up" || !strings.Contains(strings.ToLower(s.LastDownReason), "auth") {
		t.Errorf("status after a wrong password = state %q, last down %q; want not up and a reason naming authentication", s.State, s.LastDownReason)
	}
	if padis > 5 {
		t.Errorf("%d PADIs in 8 s of failing authentication, want a backoff (1, 2, 4 s: <= 5)", padis)
	}

	// PAP with the right password: back up.
	p.MustRun(t, ctx, "echo 'alice * "+password+" *' >/etc/ppp/pap-secrets && sed -i s/require-chap/require-pap/ /etc/ppp/pppoe-server-options", 10*time.Second)
	s = waitPPPoE(t, r, 80*time.Second, "up with PAP", func(s status.PPPoE) bool { return sessionUp(s) && s.Auth == "pap" })
	t.Logf("up again with %s, reconnects %d", s.Auth, s.Reconnects)
	if out, err := hostRun(ctx, host, "ping", "-c", "2", "-W", "2", pppoeBehindAC); err != nil {
		t.Fatalf("host ping over the PAP session: %v\n%s", err, out)
	}
}

// TestPPPoEVLANAgainstLinux: PPPoE on VLAN 7 (as many ISPs deliver it),
// the guest's AC on eth0.7 and the router's wan with vlan: [7] on the
// same port: the session comes up, the host behind the router pings
// and runs iperf3 to the address behind the AC, and tshark on the port
// sees the session's frames tagged 7 and none untagged.
func TestPPPoEVLANAgainstLinux(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	p, ns, host, r := pppoeLab(t, ctx, "s3cret-pppoe", 7, 1508)
	s := waitPPPoE(t, r, 30*time.Second, "up", sessionUp)
	t.Logf("session up on VLAN 7: id %d, auth %s, IPv4 %+v", s.SessionID, s.Auth, *s.IPv4)
	tsCtx, tsCancel := context.WithTimeout(ctx, 60*time.Second)
	defer tsCancel()
	ts := exec.CommandContext(tsCtx, "ip", "netns", "exec", ns.Name(), "tshark", "-n", "-l", "-i", p.Tap,
		"-Y", "pppoes", "-T", "fields", "-e", "vlan.id", "-e", "ip.src")
	var tsOut strings.Builder
	ts.Stdout = &tsOut
	if err := ts.Start(); err != nil {
		t.Fatalf("tshark: %v", err)
	}
	time.Sleep(3 * time.Second)
	if out, err := hostRun(ctx, host, "ping", "-c", "3", "-W", "2", pppoeBehindAC); err != nil {
		t.Fatalf("host ping %s over PPPoE on VLAN 7: %v\n%s", pppoeBehindAC, err, out)
	}
	out, err := hostRun(ctx, host, "iperf3", "-c", pppoeBehindAC, "-t", "2", "-J")
	bps := iperfRE.FindStringSubmatch(out)
	if err != nil || bps == nil {
		t.Fatalf("iperf3 over PPPoE on VLAN 7: %v\n%.2000s", err, out)
	}
	t.Logf("iperf3 host→router→PPPoE on VLAN 7→AC: %s bit/s received", bps[1])
	time.Sleep(time.Second)
	tsCancel()
	ts.Wait()
	tagged, untagged := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(tsOut.String()), "\n") {
		switch f := strings.Split(l, "\t"); {
		case f[0] == "7":
			tagged++
		case l != "":
			untagged++
		}
	}
	t.Logf("session frames on the port: %d tagged 7, %d otherwise", tagged, untagged)
	if tagged < 100 || untagged != 0 {
		t.Errorf("session frames on the port: %d tagged 7 (want >= 100), %d otherwise (want 0)", tagged, untagged)
	}
	// The guest's link carries 1508 bytes, but the router asked for no
	// more than RFC 2516's 1492: that is what it got.
	if s.MTU != 1492 || s.MaxPayload != 0 {
		t.Errorf("session without pppoe mtu: MTU %d, PPP-Max-Payload %d; want 1492, none", s.MTU, s.MaxPayload)
	}
	pppoeBabyJumbo(t, ctx, p, ns, host, r)
}

// pppoeBabyJumbo is TestPPPoEVLANAgainstLinux's RFC 4638 part, on the
// same guest (its VLAN link carries 1508-byte payloads): the router
// restarted with pppoe mtu 1500 and its port's mtu 1508 asks for
// PPP-Max-Payload 1500, which pppoe-server grants (it echoes the tag
// and runs pppd with mtu and mru 1500); the session's MTU and MRU are
// 1500 on the router and the guest's ppp link has MTU 1500; a
// 1500-byte ping with DF set from the LAN host reaches the guest and
// comes back, and tshark on the port sees both as 1500-byte IPv4
// packets in 1502-byte PPPoE payloads tagged 7.
func pppoeBabyJumbo(t *testing.T, ctx context.Context, p *linuxpeer.Peer, ns, host *netnstest.Netns, r *router.Router) {
	r.Close() // its PADT ends the guest's session
	r = startRouter(t, ns, pppoeConfig(t, p.Tap, "s3cret-pppoe", 7, 1500))
	s := waitPPPoE(t, r, 30*time.Second, "up with RFC 4638", sessionUp)
	t.Logf("session up with pppoe mtu 1500: MTU %d, MRU %d, PPP-Max-Payload %d, IPv4 %s", s.MTU, s.MRU, s.MaxPayload, s.IPv4.Local)
	if s.MTU != 1500 || s.MRU != 1500 || s.MaxPayload != 1500 {
		t.Errorf("session = MTU %d, MRU %d, PPP-Max-Payload %d; want 1500 each (RFC 4638)", s.MTU, s.MRU, s.MaxPayload)
	}
	if out := p.MustRun(t, ctx, "cat /sys/class/net/ppp*/mtu", 10*time.Second); strings.TrimSpace(out) != "1500" {
		t.Errorf("guest's ppp link MTU = %q, want 1500", out)
	}
	var tsOut strings.Builder
	stopTshark := startTshark(t, ctx, ns, &tsOut, "-n", "-l", "-i", p.Tap,
		"-Y", "pppoes && ip.len == 1500", "-T", "fields", "-e", "vlan.id", "-e", "pppoe.payload_length", "-e", "ip.src", "-e", "ip.flags.df")
	if out, err := hostRun(ctx, host, "ping", "-M", "do", "-s", "1472", "-c", "3", "-W", "2", pppoeBehindAC); err != nil || !strings.Contains(out, " 3 received") {
		var drops []string
		for _, ifc := range r.Snapshot().Interfaces {
			drops = append(drops, fmt.Sprintf("%s MTU %d drops %v", ifc.Name, ifc.MTU, ifc.Drops))
		}
		t.Fatalf("host ping -M do -s 1472 (1500 bytes, DF) %s over PPPoE with RFC 4638: %v\n%s\nrouter: %s\nguest: %s", pppoeBehindAC, err, out,
			strings.Join(drops, "; "), p.MustRun(t, ctx, "ip -s link show ppp0; ip -s link show eth0", 10*time.Second))
	}
	stopTshark()
	out, back := 0, 0
	for _, l := range strings.Split(strings.TrimSpace(tsOut.String()), "\n") {
		f := strings.Split(l, "\t")
		if len(f) != 4 || f[0] != "7" || f[1] != "1502" {
			continue
		}
		switch f[2] {
		case s.IPv4.Local.String(): // the host's ping, masqueraded to the IPCP address
			if f[3] == "1" || f[3] == "True" {
				out++
			}
		case pppoeBehindAC:
			back++
		}
	}
	t.Logf("1500-byte IPv4 packets in 1502-byte PPPoE payloads on VLAN 7: %d out (DF), %d back", out, back)
	if out != 3 || back != 3 {
		t.Errorf("tshark saw %d pings out with DF and %d replies as 1500-byte packets in the session on VLAN 7, want 3 each:\n%s", out, back, tsOut.String())
	}
}

// TestPPPoEThroughputAgainstLinux measures iperf3 from the host behind
// the router to the guest, both ways, through NAT over a plain Ethernet
// wan (the guest's plain job, MTU 1500) and over PPPoE (the pppoe job,
// MTU 1492), with one 2 s run each by default and, with GVL_BENCH=1, the
// median of 5 runs of 5 s. The guest runs under TCG here, so both are
// bounded by it: this checks that PPPoE costs the path no more than the
// guest's own PPP does, not the router's ceiling (BenchmarkPPPoEFastPath
// in package stack is the router's own per-packet cost).
func TestPPPoEThroughputAgainstLinux(t *testing.T) {
	runs, secs := 1, "2"
	if os.Getenv("GVL_BENCH") == "1" {
		runs, secs = 5, "5"
	}
	measure := func(t *testing.T, ctx context.Context, host *netnstest.Netns, addr string) (up, down float64) {
		for _, dir := range []string{"", "-R"} {
			var rates []float64
			for range runs {
				args := []string{"iperf3", "-c", addr, "-t", secs, "-J"}
				if dir != "" {
					args = append(args, dir)
				}
				var out string
				var bps []string
				for try := 0; try < 5; try++ {
					out, _ = hostRun(ctx, host, args...)
					if bps = iperfRE.FindStringSubmatch(out); bps != nil {
						break
					}
					time.Sleep(time.Second)
				}
				if bps == nil {
					t.Fatalf("iperf3 %s to %s: %.2000s", dir, addr, out)
				}
				v, _ := strconv.ParseFloat(bps[1], 64)
				rates = append(rates, v/1e6)
			}
			slices.Sort(rates)
			if dir == "" {
				up = rates[len(rates)/2]
			} else {
				down = rates[len(rates)/2]
			}
		}
		return up, down
	}
	var plainUp, plainDown, pppUp, pppDown float64
	t.Run("plain", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
		defer cancel()
		netnstest.Privileged(t, "iperf3")
		p, ns := linuxpeer.StartT(t, ctx, "plain", map[string]string{"ADDR": "10.77.0.2/24", "GUEST_CMD": "iperf3 -s -D"})
		host := hostBehind(t, ns)
		startRouter(t, ns, fmt.Sprintf(`ports:
  - name: %s
`+hostPort+`interfaces:
  - {name: wan, port: %s, role: wan, addresses: [10.77.0.1/24]}
`+hostInterface+`nat:
  masquerade: [wan]
`, p.Tap, p.Tap))
		plainUp, plainDown = measure(t, ctx, host, "10.77.0.2")
	})
	t.Run("pppoe", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
		defer cancel()
		_, _, host, r := pppoeLab(t, ctx, "s3cret-pppoe", 0, 0)
		waitPPPoE(t, r, 30*time.Second, "up", sessionUp)
		pppUp, pppDown = measure(t, ctx, host, pppoeBehindAC)
	})
	if plainUp == 0 || pppUp == 0 {
		return
	}
	t.Logf("host→router→guest, median of %d × %s s: plain %.0f / %.0f Mbit/s (up / down), PPPoE %.0f / %.0f Mbit/s: %.2f× / %.2f×",
		runs, secs, plainUp, plainDown, pppUp, pppDown, pppUp/plainUp, pppDown/plainDown)
}
