package lab_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// The user-space AC's addresses: its own (IPCP's peer, the plain wan's
// gateway), the router's, and the iperf3 server's on the AC's TUN.
const (
	userACLocal  = "100.64.0.1"
	userACPeer   = "100.64.0.10"
	userACServer = "10.77.9.1"
)

// TestPPPoEThroughputUserAC measures router NAT over PPPoE against router
// NAT over plain Ethernet on the same veths, with no guest: the far side
// is package pppoeac's access concentrator in its own process (a helper
// mode of this test binary), relaying to a TUN device in its namespace
// where iperf3 -s listens. The plain runs cross the same relay without
// the PPPoE framing, so the runs differ only in the router's PPPoE work.
// Per backend (af_packet, af_xdp) it runs plain, PPPoE and plain again
// (the A/A control), each way, and reports the median rate, the router
// process's CPU per bit and the AC's CPU share, and the ratios. One 2 s
// run each by default (a smoke: figures printed, not gated); GVL_BENCH=1
// takes the median of 5 rounds of 5 s runs, each round running the three
// modes in turn (a fresh AC and router for each). Not parallel: the router runs in
// this process and its CPU is this process's.
func TestPPPoEThroughputUserAC(t *testing.T) {
	netnstest.Privileged(t, "iperf3", "ping", "sysctl")
	runs, secs := 1, 2
	if os.Getenv("GVL_BENCH") == "1" {
		runs, secs = 5, 5
	}
	for _, driver := range []string{"af_packet", "af_xdp"} {
		t.Run(driver, func(t *testing.T) {
			ns := netnstest.New(t, "lpr", netnstest.WithoutIPv6())
			host := hostBehind(t, ns)
			acNS := netnstest.New(t, "lpa", netnstest.WithoutIPv6())
			ns.IP(t, "link", "add", "lpac0", "type", "veth", "peer", "name", "lpac1", "netns", acNS.Name())
			ns.IP(t, "link", "set", "lpac0", "up")
			acNS.IP(t, "link", "set", "lpac1", "up")
			acNS.IP(t, "tuntap", "add", "dev", "actun", "mode", "tun")
			acNS.IP(t, "link", "set", "actun", "up")
			acNS.IP(t, "addr", "add", userACServer+"/32", "dev", "actun")
			acNS.IP(t, "route", "add", "100.64.0.0/24", "dev", "actun")
			// The AC's kernel must not take the plain runs' IPv4 on lpac1
			// itself (10.77.9.1 is local to it, and a second copy of each
			// segment would be a duplicate): strict reverse-path filtering
			// drops them there (the way back to 100.64.0.10 is actun), the
			// AC's packet socket having its copy.
			acNS.Run(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.lpac1.rp_filter=1")
			var err error
			acNS.Do(t, func() { err = hw.SetOffloads("lpac1", hw.Offloads{RxCsum: true}) })
			if err != nil {
				t.Fatalf("offloads of lpac1: %v", err)
			}

			// Rounds interleave the modes, so a drift of the machine's
			// load lands on all three alike.
			var samples [3]userACSamples
			for range runs {
				for i, mode := range []string{"plain", "pppoe", "plain"} {
					userACRun(t, ns, host, acNS, driver, mode, secs, &samples[i])
					if t.Failed() {
						return
					}
				}
			}
			p, q, a := samples[0].medians(), samples[1].medians(), samples[2].medians()
			t.Logf("%s, median of %d × %d s (up / down): plain %.0f / %.0f Mbit/s, PPPoE %.0f / %.0f, plain again %.0f / %.0f",
				driver, runs, secs, p.rate[0], p.rate[1], q.rate[0], q.rate[1], a.rate[0], a.rate[1])
			t.Logf("%s router CPU ns/kbit (up / down): plain %.1f / %.1f, PPPoE %.1f / %.1f, plain again %.1f / %.1f",
				driver, p.cpu[0], p.cpu[1], q.cpu[0], q.cpu[1], a.cpu[0], a.cpu[1])
			t.Logf("%s AC CPU share of one core (up / down): plain %.0f%% / %.0f%%, PPPoE %.0f%% / %.0f%%, plain again %.0f%% / %.0f%%",
				driver, p.ac[0], p.ac[1], q.ac[0], q.ac[1], a.ac[0], a.ac[1])
			t.Logf("%s PPPoE/plain throughput %.2f× / %.2f×, CPU per bit %.2f× / %.2f×; A/A plain again/plain throughput %.2f× / %.2f×, CPU per bit %.2f× / %.2f×",
				driver, q.rate[0]/p.rate[0], q.rate[1]/p.rate[1], q.cpu[0]/p.cpu[0], q.cpu[1]/p.cpu[1],
				a.rate[0]/p.rate[0], a.rate[1]/p.rate[1], a.cpu[0]/p.cpu[0], a.cpu[1]/p.cpu[1])
		})
	}
}

// userACResult holds one mode's medians, [0] upload (host → AC), [1]
// download: rate in Mbit/s, router CPU in ns per kbit, AC CPU in % of
// one core.
type userACResult struct{ rate, cpu, ac [2]float64 }

// userACSamples collects one mode's runs, [0] upload, [1] download.
type userACSamples struct{ rate, cpu, ac [2][]float64 }

func (s *userACSamples) medians() (r userACResult) {
	for d := range 2 {
		r.rate[d], r.cpu[d], r.ac[d] = medianOf(s.rate[d]), medianOf(s.cpu[d]), medianOf(s.ac[d])
	}
	return r
}

// userACRun starts the AC helper in mode and the router on driver, waits
// until the host reaches the AC's iperf3 server, and adds one run each
// way to acc.
func userACRun(t *testing.T, ns, host, acNS *netnstest.Netns, driver, mode string, secs int, acc *userACSamples) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	acPID, stopAC := startACHelper(t, acNS, mode)
	defer stopAC()
	// An iperf3 server of its own on a port of its own: the AC of the
	// run before was stopped right after its last test, which can leave
	// that run's server waiting for a control connection's end that never
	// comes, telling every later client "the server is busy" (the
	// clean-clone run's af_xdp round, and the pppoe run after a plain one).
	port := strconv.Itoa(int(userACPorts.Add(1)))
	stopServer := startProc(t, "iperf3 -s", "ip", "netns", "exec", acNS.Name(), "iperf3", "-s", "-B", userACServer, "-p", port)
	defer stopServer()
	wan := "  - {name: wan, port: lpac0, role: wan, addresses: [" + userACPeer + "/24]}\n"
	routes := "routes:\n  - {to: default, via: " + userACLocal + "}\n"
	if mode == "pppoe" {
		pw := filepath.Join(t.TempDir(), "pppoe.password")
		if err := os.WriteFile(pw, []byte("bench\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wan = "  - {name: wan, port: lpac0, role: wan, addresses: [pppoe], pppoe: {user: bench, password_file: " + pw + ", lcp_echo: {interval: 1s, failures: 3}}}\n"
		routes = ""
	}
	r := startRouter(t, ns, fmt.Sprintf("ports:\n  - {name: lpac0, driver: %s}\n  - {name: lph0, driver: %s}\ninterfaces:\n%s%s%snat:\n  masquerade: [wan]\n",
		driver, driver, wan, hostInterface, routes))
	defer r.Close()
	if mode == "pppoe" {
		s := waitPPPoE(t, r, 30*time.Second, "up", sessionUp)
		if got := s.IPv4.Local.String(); got != userACPeer {
			t.Fatalf("IPCP address %s, want the AC's %s", got, userACPeer)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := hostRun(ctx, host, "ping", "-c", "1", "-W", "1", userACServer)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: host cannot reach %s through the router: %s", driver, mode, userACServer, out)
		}
	}
	for d, dir := range []string{"", "-R"} {
		{
			args := []string{"iperf3", "-c", userACServer, "-p", port, "-t", strconv.Itoa(secs), "-J", "--connect-timeout", "3000"}
			if dir != "" {
				args = append(args, dir)
			}
			var out string
			var bps []string
			var cpu0, ac0 float64 // seconds
			t0 := time.Now()
			for try := 0; try < 8; try++ {
				cpu0, ac0, t0 = selfCPU(t), peerCPU(acPID), time.Now()
				out, _ = hostRun(ctx, host, args...)
				if bps = iperfRE.FindStringSubmatch(out); bps != nil {
					break
				}
				t.Logf("%s %s: iperf3 %s try %d: %.300s", driver, mode, dir, try+1, out)
				time.Sleep(time.Second)
			}
			if bps == nil {
				t.Fatalf("%s %s: iperf3 %s: %.600s\nPPPoE status: %+v", driver, mode, dir, out, r.Snapshot().PPPoE)
			}
			wall, cpu, acCPU := time.Since(t0), selfCPU(t)-cpu0, peerCPU(acPID)-ac0
			v, _ := strconv.ParseFloat(bps[1], 64)
			acc.rate[d] = append(acc.rate[d], v/1e6)
			acc.cpu[d] = append(acc.cpu[d], cpu*1e9/(v*float64(secs)/1e3))
			acc.ac[d] = append(acc.ac[d], 100*acCPU/wall.Seconds())
		}
	}
}

// medianOf is the median of v (sorted in place).
func medianOf(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// startACHelper runs this test binary's pppoeac helper mode in acNS on
// lpac1 and actun, waits for its "ready" and returns its pid (ip netns
// exec execs it, so the pid is the AC's) and a stop that kills it (the
// next AC needs the TUN); t's end kills it too.
func startACHelper(t *testing.T, acNS *netnstest.Netns, mode string) (int, func()) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", acNS.Name(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GVL_LAB_HELPER=pppoeac",
		"GVL_PPPOEAC=lpac1,actun,"+userACLocal+","+userACPeer+","+mode)
	errPath := filepath.Join(t.TempDir(), "ac.stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd.Stderr = errFile
	stderr := func() string { b, _ := os.ReadFile(errPath); return string(b) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("AC helper: %v", err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("AC helper %s: %q, stderr: %s", mode, line, stderr())
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			select {
			case <-exited:
				t.Errorf("AC helper %s exited early: %s", mode, stderr())
			default:
				cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(stop)
	return cmd.Process.Pid, stop
}

// startProc runs a background command until t ends.
func startProc(t *testing.T, what string, name string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) }
	t.Cleanup(stop)
	time.Sleep(200 * time.Millisecond)
	return stop
}

// userACPorts numbers the iperf3 servers of TestPPPoEThroughputUserAC's
// runs, one port each.
var userACPorts atomic.Int32

func init() { userACPorts.Store(15200) }
