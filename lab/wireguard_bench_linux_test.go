package lab_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/lab"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/wireguard"
)

// iperfBytesRE reads the bytes received from iperf3 -J's end summary.
var iperfBytesRE = regexp.MustCompile(`"sum_received":\s*{[^}]*"bytes":\s*(\d+)`)

// wgPath is one path TestWireGuardThroughput measures.
type wgPath struct {
	name string
	to   string // the iperf3 server's address as the LAN host dials it
}

// wgFigure is one iperf3 run: the rate and what it cost the router (the
// test process) and, through the tunnel, the peer.
type wgFigure struct {
	bps                float64
	routerCPU, peerCPU float64 // seconds
	bits               float64
	// pingAvg and pingLoss are a 20 Hz ping's average RTT (ms) and
	// loss (%) to the same server beside the iperf3 run.
	pingAvg, pingLoss float64
}

// TestWireGuardThroughput is TCP through the router's WireGuard tunnel
// against TCP through its plain NAT on the same lab, with no QEMU guest:
// a LAN host (hostBehind) runs iperf3 -c to a WAN host (wanHost, which
// knows no way back: the plain path is masqueraded) and, through wg0, to
// the same WAN host's tunnel address, where a wireguard-go peer (this
// binary as lab's "wgpeer" helper, a process of its own) runs on a kernel
// TUN. Both ways (-R: the WAN host sends). The paths take turns run by
// run; each figure is the median. Beside the rate it gives the router's
// CPU per Gbit (the test process's user+system time, which is the
// router's: iperf3 and the peer are other processes, and no other test
// runs meanwhile) and the peer's.
//
// By default one run of 2 s per path and way, printed, not gated (CI
// smoke-runs it alone in its bench step; in the lab's run it is parallel
// to the others and only the tunnel's carrying counts); GVL_BENCH=1 gives
// the median of 5 runs of 5 s for docs/performance.md, alone.
func TestWireGuardThroughput(t *testing.T) {
	netnstest.Privileged(t, "iperf3")
	runs, secs := 1, 2
	if os.Getenv("GVL_BENCH") == "1" {
		runs, secs = 5, 5
	} else {
		// Beside the other lab tests in the lab's run (their routers
		// share this process, so the CPU figures are only right when it
		// runs alone, as CI's bench smoke and GVL_BENCH=1 run it).
		t.Parallel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(runs*4*(secs+6)+60)*time.Second)
	defer cancel()
	r, host, wan, peer := wgLab(t, ctx, "nat: {masquerade: [wan]}\n")

	server := exec.Command("ip", "netns", "exec", wan.Name(), "iperf3", "-s")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	// The first packet into the tunnel starts the handshake; iperf3's
	// server needs a moment to listen.
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", host.Name(), "ping", "-c", "3", "-W", "2", "10.8.0.2").CombinedOutput(); err != nil {
		t.Fatalf("host: ping 10.8.0.2 through the tunnel: %v\n%s", err, out)
	}

	paths := []wgPath{{"plain NAT", "10.79.0.10"}, {"WireGuard", "10.8.0.2"}}
	for _, p := range paths {
		avg, loss := wgPing(t, ctx, host, p.to, 20)
		t.Logf("idle ping to %s by %s: avg %.3f ms, loss %.1f %%", p.to, p.name, avg, loss)
	}
	figures := map[string][]wgFigure{} // path name + way → runs
	for run := range runs {
		for _, way := range []string{"", "-R"} {
			for _, p := range paths {
				f := wgIperf(t, ctx, host, p.to, secs, way, peer.Process.Pid, p.name == "WireGuard")
				t.Logf("run %d %s %s: %.0f Mbit/s, router %.2f s CPU, peer %.2f s, ping beside it avg %.2f ms loss %.1f %%",
					run+1, p.name, wayName(way), f.bps/1e6, f.routerCPU, f.peerCPU, f.pingAvg, f.pingLoss)
				figures[p.name+way] = append(figures[p.name+way], f)
			}
		}
	}
	st := r.WireGuard()["wg0"]
	var load [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &load[0], &load[1], &load[2])
	}
	t.Logf("WireGuard against plain NAT, median of %d × %d s, load %.2f %.2f %.2f (router CPU per Gbit: its seconds of CPU time per 10^9 bits received):", runs, secs, load[0], load[1], load[2])
	for _, way := range []string{"", "-R"} {
		plain, tunnel := median(figures["plain NAT"+way]), median(figures["WireGuard"+way])
		t.Logf("  %s: plain NAT %.0f Mbit/s (%.2f s/Gbit), WireGuard %.0f Mbit/s (%.2f s/Gbit router, %.2f s/Gbit peer): %.2f×; ping beside the load (the median run's) plain %.2f ms %.1f %%, WireGuard %.2f ms %.1f %%",
			wayName(way), plain.bps/1e6, plain.routerCPU/(plain.bits/1e9), tunnel.bps/1e6, tunnel.routerCPU/(tunnel.bits/1e9),
			tunnel.peerCPU/(tunnel.bits/1e9), tunnel.bps/plain.bps, plain.pingAvg, plain.pingLoss, tunnel.pingAvg, tunnel.pingLoss)
	}
	t.Logf("  router wg0 counters: %v", st.Counters)
	snap := r.Snapshot()
	for _, i := range snap.Interfaces {
		t.Logf("  interface %s: tx %d frames, superframes received %d, sent whole %d, segmented %d, drops %v",
			i.Name, i.TxPackets, i.GSO.Received, i.GSO.SentWhole, i.GSO.Segmented, i.Drops)
	}
	for _, p := range snap.Ports {
		t.Logf("  port %s: drops %v", p.Name, p.Drops)
	}
	// The decrypted packets of the established flows (the WAN→LAN
	// data, the LAN→WAN ACKs) take the fast path, not netstack: all
	// but each flow's first few.
	if fast, slow := st.Counters["inside"]["fast_path"], st.Counters["inside"]["from_tunnel"]; fast < 9*slow || fast == 0 {
		t.Errorf("decrypted packets: %d by the fast path, %d through netstack; want over 90 %% by the fast path", fast, slow)
	}
	// And so do those into the tunnel (the LAN→WAN data, the WAN→LAN
	// ACKs): to_tunnel counts all that the device took.
	if fast, all := st.Counters["inside"]["fast_path_to_tunnel"], st.Counters["inside"]["to_tunnel"]; fast < all*9/10 || fast == 0 {
		t.Errorf("packets into the tunnel: %d by the fast path of %d; want over 90 %%", fast, all)
	}
	if len(st.Peers) != 1 || st.Peers[0].RxBytes < 1<<20 || st.Peers[0].TxBytes < 1<<20 {
		t.Errorf("router status of the peer after iperf3 both ways: %+v, want over 1 MiB each way", st.Peers)
	}
}

func wayName(way string) string {
	if way == "-R" {
		return "WAN→LAN"
	}
	return "LAN→WAN"
}

// median is the run with the median rate (its own CPU figures with it).
func median(fs []wgFigure) wgFigure {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b wgFigure) int {
		switch {
		case a.bps < b.bps:
			return -1
		case a.bps > b.bps:
			return 1
		}
		return 0
	})
	return fs[len(fs)/2]
}

// wgIperf runs iperf3 -c to from host for secs (way: "-R" for the
// other way) and returns its received rate and bits, and the CPU time the
// router and (if tunnel) the peer used meanwhile.
func wgIperf(t *testing.T, ctx context.Context, host *netnstest.Netns, to string, secs int, way string, peerPid int, tunnel bool) wgFigure {
	t.Helper()
	args := []string{"netns", "exec", host.Name(), "iperf3", "-c", to, "-t", strconv.Itoa(secs), "-J"}
	if way != "" {
		args = append(args, way)
	}
	for try := 0; ; try++ {
		type pinged struct{ avg, loss float64 }
		pc := make(chan pinged, 1)
		go func() { // beside the load: from its second 1 to its end
			time.Sleep(time.Second)
			avg, loss := wgPing(t, ctx, host, to, max(secs-1, 1)*20)
			pc <- pinged{avg, loss}
		}()
		r0, p0 := selfCPU(t), peerCPU(peerPid)
		out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		r1, p1 := selfCPU(t), peerCPU(peerPid)
		pg := <-pc
		bps, bytes := iperfRE.FindSubmatch(out), iperfBytesRE.FindSubmatch(out)
		if err == nil && bps != nil && bytes != nil {
			f := wgFigure{routerCPU: r1 - r0, pingAvg: pg.avg, pingLoss: pg.loss}
			f.bps, _ = strconv.ParseFloat(string(bps[1]), 64)
			n, _ := strconv.ParseFloat(string(bytes[1]), 64)
			f.bits = 8 * n
			if tunnel {
				f.peerCPU = p1 - p0
			}
			return f
		}
		if try == 3 {
			t.Fatalf("iperf3 %s to %s: %v\n%.2000s", way, to, err, out)
		}
		time.Sleep(time.Second) // the server refuses for a moment after a test
	}
}

// wgPing sends count pings 50 ms apart from host to to and returns their
// average RTT in ms (NaN if none came back) and the loss in percent.
func wgPing(t *testing.T, ctx context.Context, host *netnstest.Netns, to string, count int) (avg, loss float64) {
	out, _ := exec.CommandContext(ctx, "ip", "netns", "exec", host.Name(), "ping", "-n", "-i", "0.05", "-W", "1",
		"-c", strconv.Itoa(count), to).CombinedOutput()
	rtts, sent, err := lab.ParsePing(out)
	if err != nil {
		t.Logf("ping %s: %v\n%.500s", to, err, out)
		return math.NaN(), 100
	}
	sum := 0.0
	for _, r := range rtts {
		sum += r
	}
	avg = math.NaN()
	if len(rtts) > 0 {
		avg = sum / float64(len(rtts))
	}
	return avg, 100 * float64(sent-len(rtts)) / float64(sent)
}

// selfCPU is the test process's user+system CPU time in seconds: the
// router's, since it runs in this process.
func selfCPU(t *testing.T) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func peerCPU(pid int) float64 {
	s, _ := lab.ProcCPUSeconds(pid)
	return s
}

// startWGPeer starts the wgpeer helper in ns with TUN tunName and
// configuration c and waits until its device is up; it is stopped when
// t ends.
func startWGPeer(t *testing.T, ns *netnstest.Netns, tunName string, c wireguard.Config) *exec.Cmd {
	t.Helper()
	cmd := lab.WGPeerCommand(ns.Name(), tunName)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close() // the helper ends when its stdin does
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if _, err := in.Write([]byte(strings.TrimSuffix(c.UAPI(), "\n") + "\n\n")); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		ready <- s.Scan() && s.Text() == "ready"
		for s.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("wgpeer helper ended before it was ready")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wgpeer helper: not ready after 10 s")
	}
	return cmd
}

// wgLab is the no-guest WireGuard lab: the router in its own namespace
// with a LAN host (hostBehind: 10.78.0.10 and .20) on hostlan, a WAN host
// (wanHost: 10.79.0.10, no route back) on wan, and wg0 (10.8.0.1/24,
// role lan) whose one peer, wan-host (10.8.0.2), is the wgpeer helper in
// the WAN host's namespace on TUN wgp0, allowed 10.8.0.0/24 and
// 10.78.0.0/24 and routing 10.78.0.0/24 into it. extra is the config's
// firewall:/nat: part. The peer's first packet has made the handshake.
func wgLab(t *testing.T, ctx context.Context, extra string) (r *router.Router, host, wan *netnstest.Netns, peer *exec.Cmd) {
	return wgLabOn(t, ctx, extra, false)
}

// wgLabOn is wgLab, over IPv6 if v6: the WAN host also has fd00:79::10/64
// (the router fd00:79::1/64) and the router knows the peer's endpoint as
// [fd00:79::10]:51820, so the tunnel's UDP runs over IPv6.
func wgLabOn(t *testing.T, ctx context.Context, extra string, v6 bool) (r *router.Router, host, wan *netnstest.Netns, peer *exec.Cmd) {
	t.Helper()
	ns := netnstest.New(t, "lwr", netnstest.WithoutIPv6())
	host = hostBehind(t, ns)
	host.IP(t, "route", "add", "10.79.0.0/24", "via", "10.78.0.1")
	host.IP(t, "route", "add", "10.8.0.0/24", "via", "10.78.0.1")
	wanAddrs, endpoint := "[10.79.0.1/24]", "10.79.0.10:51820"
	if v6 {
		wan = wanHost6(t, ns)
		wanAddrs, endpoint = "[10.79.0.1/24, fd00:79::1/64]", "[fd00:79::10]:51820"
	} else {
		wan = wanHost(t, ns)
	}

	routerKey, peerKey := mustWGKey(t), mustWGKey(t)
	peer = startWGPeer(t, wan, "wgp0", wireguard.Config{PrivateKey: peerKey, ListenPort: 51820, Peers: []wireguard.Peer{{
		PublicKey:  routerKey.PublicKey(),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.0/24"), netip.MustParsePrefix("10.78.0.0/24")},
	}}})
	wan.IP(t, "addr", "add", "10.8.0.2/24", "dev", "wgp0")
	wan.IP(t, "link", "set", "wgp0", "up")
	wan.IP(t, "route", "add", "10.78.0.0/24", "dev", "wgp0")
	r = startRouter(t, ns, fmt.Sprintf(`ports:
  - name: lpw0
`+hostPort+`interfaces:
  - {name: wan, port: lpw0, role: wan, addresses: %s}
`+hostInterface+`  - name: wg0
    role: lan
    addresses: [10.8.0.1/24]
    wireguard:
      private_key_file: %s
      listen_port: 51820
      peers:
        - {name: wan-host, public_key: %s, allowed_ips: [10.8.0.2/32], endpoint: "%s"}
%s`, wanAddrs, wgKeyFile(t, t.TempDir(), routerKey), peerKey.PublicKey(), endpoint, extra))
	// The router starts the handshake on the first packet into the
	// tunnel (it knows the peer's endpoint).
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", host.Name(), "ping", "-c", "3", "-W", "2", "10.8.0.2").CombinedOutput(); err != nil {
		t.Fatalf("host: ping 10.8.0.2 through the tunnel: %v\n%s", err, out)
	}
	return r, host, wan, peer
}

// TestWireGuardZone: wg0 in a zone of its own whose forward policy is
// drop: a peer reaches no LAN host without a rule (its pings to
// 10.78.0.10 go unanswered, counted as the NAT engine's firewall drops
// and the vpn zone's forward policy), the one a rule opens (ICMP to 10.78.0.20)
// answers, the LAN host still reaches the peer (lan forwards to every
// zone, and the replies are that flow's), and the router answers the
// peer (vpn input accept).
func TestWireGuardZone(t *testing.T) {
	netnstest.Privileged(t, "ping")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, _, wan, _ := wgLab(t, ctx, `firewall:
  zones:
    - {name: lan, interfaces: [hostlan], input: accept, forward: accept}
    - {name: wan, interfaces: [wan], input: drop, forward: drop, masquerade: on}
    - {name: vpn, interfaces: [wg0], input: accept, forward: drop}
  rules:
    - {name: vpn-to-one-host, src: vpn, dest: lan, proto: icmp, dest_ip: 10.78.0.20, target: accept}
`)
	peerPing := func(to string) error {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", wan.Name(), "ping", "-c", "3", "-W", "1", "-I", "10.8.0.2", to).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	fw := func() (drops, vpnForward, rule uint64) {
		c := r.Snapshot().Conntrack
		if c == nil {
			t.Fatal("the status snapshot has no conntrack section")
		}
		return c.Drops["firewall"], c.Firewall["zone vpn forward"], c.Firewall["rule vpn-to-one-host hits"]
	}
	d0, f0, _ := fw()
	if err := peerPing("10.78.0.10"); err == nil {
		t.Error("the peer reached LAN host 10.78.0.10, which no rule opens to the vpn zone")
	}
	if d1, f1, _ := fw(); d1-d0 < 3 || f1-f0 < 3 {
		t.Errorf("after 3 refused pings: the engine's firewall drops rose by %d, zone vpn forward by %d; want >= 3 each", d1-d0, f1-f0)
	}
	if err := peerPing("10.78.0.20"); err != nil {
		t.Errorf("the peer's ping to 10.78.0.20, which a rule opens: %v", err)
	}
	if _, _, hits := fw(); hits == 0 {
		t.Error("rule vpn-to-one-host: no hits after the peer's ping it admits")
	}
	if err := peerPing("10.8.0.1"); err != nil {
		t.Errorf("the peer's ping to the router's tunnel address (vpn input accept): %v", err)
	}
}

// wanHost6 is wanHost with IPv6 as well: fd00:79::10/64 beside
// 10.79.0.10/24 (no duplicate address detection, so it is usable at once).
func wanHost6(t *testing.T, ns *netnstest.Netns) *netnstest.Netns {
	t.Helper()
	w := netnstest.New(t, "lpw")
	ns.IP(t, "link", "add", "lpw0", "type", "veth", "peer", "name", "lpw1", "netns", w.Name())
	ns.IP(t, "link", "set", "lpw0", "up")
	w.IP(t, "link", "set", "lpw1", "up")
	w.IP(t, "addr", "add", "10.79.0.10/24", "dev", "lpw1")
	w.IP(t, "addr", "add", "fd00:79::10/64", "dev", "lpw1", "nodad")
	var err error
	w.Do(t, func() { err = hw.SetOffloads("lpw1", hw.Offloads{RxCsum: true}) })
	if err != nil {
		t.Fatalf("offloads of lpw1: %v", err)
	}
	return w
}

// TestWireGuardIPv6Underlay: the tunnel's UDP over IPv6 (the router's
// V6ONLY socket on [::]:51820, its wan's fd00:79::1): the router starts
// the handshake to [fd00:79::10]:51820, the LAN host and the peer reach
// each other both ways, the router's status has the IPv6 endpoint and a
// handshake, and the peer's packets came over IPv6 (the wan interface's
// IPv6 receive counters rose with the tunnel's bytes).
func TestWireGuardIPv6Underlay(t *testing.T) {
	netnstest.Privileged(t, "ping")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, host, wan, _ := wgLabOn(t, ctx, "nat: {masquerade: [wan]}\n", true)
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", wan.Name(), "ping", "-c", "3", "-W", "2", "-I", "10.8.0.2", "10.78.0.10").CombinedOutput(); err != nil {
		t.Errorf("peer: ping the LAN host through the tunnel: %v\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", host.Name(), "ping", "-c", "3", "-W", "2", "-s", "1392", "10.8.0.2").CombinedOutput(); err != nil {
		t.Errorf("host: full-size ping (1420 bytes) to the peer: %v\n%s", err, out)
	}
	st := r.WireGuard()["wg0"]
	if len(st.Peers) != 1 || st.Peers[0].Endpoint != "[fd00:79::10]:51820" || st.Peers[0].HandshakeAge < 0 || st.Peers[0].RxBytes == 0 {
		t.Fatalf("router status of the peer: %+v, want a handshake with [fd00:79::10]:51820 and bytes", st.Peers)
	}
	// The kernel's view from the peer's side: its IPv6 UDP socket
	// received datagrams (Udp6InDatagrams), and its IPv4 one none from
	// the router.
	snmp6 := wan.Run(t, "cat", "/proc/net/snmp6")
	m := regexp.MustCompile(`Udp6InDatagrams\s+(\d+)`).FindStringSubmatch(snmp6)
	if m == nil {
		t.Fatalf("no Udp6InDatagrams in the WAN host's /proc/net/snmp6:\n%s", snmp6)
	}
	if n, _ := strconv.Atoi(m[1]); n < 6 {
		t.Errorf("the WAN host received %d UDP datagrams over IPv6, want the tunnel's (>= 6: handshake and pings)", n)
	}
}
