package lab

import (
	"bytes"
	"context"
	"github.com/gvrouter/gvrouter/hw"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// startTestLab builds the lab's topology without a router, as Run would,
// and tears it down when the test ends.
func startTestLab(t *testing.T, opt Options) *lab {
	t.Helper()
	if opt.Log == nil {
		opt.Log = testLogger(t)
	}
	l := newLab(opt, os.Getpid())
	var err error
	if l.dir, err = writeOwner(l.prefix, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.teardown(); err != nil {
			t.Errorf("teardown() error: %v", err)
		}
		for _, ns := range []string{l.lanNS, l.rtrNS, l.wanNS} {
			if netnsExists(ns) {
				t.Errorf("namespace %s still exists after teardown", ns)
			}
		}
		if _, err := os.Stat(l.dir); !os.IsNotExist(err) {
			t.Errorf("run directory %s: stat error %v, want not exist", l.dir, err)
		}
	})
	if err := l.build(context.Background()); err != nil {
		t.Fatalf("build() error: %v", err)
	}
	return l
}

// TestTopology checks the lab without a router: wire-like hosts, a silent
// router namespace, and that the checks the proofs rely on do see kernel
// forwarding and kernel bridging when they happen.
func TestTopology(t *testing.T) {
	requirePrivileged(t)
	ctx := context.Background()
	l := startTestLab(t, Options{})

	for _, e := range []struct{ ns, ifname string }{
		{l.lanNS, hostIf}, {l.wanNS, hostIf}, {l.rtrNS, lanPort}, {l.rtrNS, wanPort},
	} {
		var got hw.Offloads
		err := inNetns(e.ns, func() (err error) {
			got, err = hw.GetOffloads(e.ifname)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.TSO || got.GSO || got.GRO || got.TxCsum {
			t.Errorf("%s %s: offloads %+v, want TSO, GSO, GRO and TX checksum off", e.ns, e.ifname, got)
		}
	}
	checkSilent := func(when string) {
		t.Helper()
		k, err := readKernelState(l.rtrNS)
		if err != nil {
			t.Fatal(err)
		}
		if k.IPForward != "0" || k.IP6Forward != "0" {
			t.Errorf("%s: router namespace forwarding = %s/%s, want 0/0", when, k.IPForward, k.IP6Forward)
		}
		for _, dev := range []string{lanPort, wanPort} {
			if a, err := ifAddrs(ctx, l.rtrNS, dev); err != nil || len(a) != 0 {
				t.Errorf("%s: ifAddrs(%s) = %v, %v; want none", when, dev, a, err)
			}
		}
	}
	checkSilent("after build")

	// No router: nothing crosses.
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	if d, err := ping(short, l.lanNS, wanHost4.Addr()); err == nil {
		t.Errorf("ping LAN→WAN without a router = %s, want failure", d)
	}
	cancel()

	t.Run("kernel forwarding", func(t *testing.T) {
		before, err := readKernelState(l.rtrNS)
		if err != nil {
			t.Fatal(err)
		}
		to, undo, err := l.benchSetup(ctx, 'b')
		defer func() {
			if undo != nil {
				undo()
			}
			checkSilent("after (b)")
		}()
		if err != nil {
			t.Fatalf("benchSetup(b) error: %v", err)
		}
		if d, err := tcpEcho(ctx, l.lanNS, l.wanNS, to); err != nil {
			t.Errorf("tcpEcho LAN→WAN = %s, %v", d, err)
		}
		after, err := readKernelState(l.rtrNS)
		if err != nil {
			t.Fatal(err)
		}
		// The forwarded-nothing proof must notice forwarding.
		if kernelSilent(before, after) == nil {
			t.Errorf("kernelSilent(%+v, %+v) = nil while the kernel forwarded", before, after)
		}

		// The status proxy, with a stand-in status page on 10.77.1.1:80.
		ln, err := listenIn(l.rtrNS, lanRouter4.Addr().String()+":80")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"interfaces":[{"name":"lan","rx_packets":1}]}`))
		})}
		go srv.Serve(ln)
		defer srv.Close()
		if err := l.startProxy(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + l.proxy.Addr().String() + "/api/status")
		if err != nil {
			t.Fatalf("GET through proxy: %v", err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		body.ReadFrom(resp.Body)
		if c, err := parseStatus(body.Bytes()); err != nil || c["lan"].RxPackets != 1 {
			t.Errorf("status through proxy = %v, %v; want lan rx 1", c, err)
		}
		if !l.proxy.Addr().IP.IsLoopback() {
			t.Errorf("proxy listens on %s, want 127.0.0.1", l.proxy.Addr())
		}
		l.proxy.close()
		l.proxy = nil
	})

	t.Run("kernel bridge", func(t *testing.T) {
		_, undo, err := l.benchSetup(ctx, 'd')
		if err != nil {
			if undo != nil {
				undo()
			}
			t.Fatalf("benchSetup(d) error: %v", err)
		}
		if d, err := tcpEcho(ctx, l.wanNS, l.lanNS, l2LAN.Addr()); err != nil {
			t.Errorf("tcpEcho WAN→LAN over br0 = %s, %v", d, err)
		}
		undo()
		if out, err := output(ctx, l.rtrNS, "ip", "-o", "link", "show"); err != nil || strings.Contains(string(out), "br0") || strings.Contains(string(out), "master") {
			t.Errorf("router namespace links after (d):\n%s (%v)\nwant no br0, no master", out, err)
		}
		checkSilent("after (d)")
	})
}

// TestBenchKernel runs bench modes (b) and (d), which need no router, with
// short iperf3 runs; GVL_BENCH=1 uses the full settings.
func TestBenchKernel(t *testing.T) {
	if testing.Short() && !netnstest.CI() {
		t.Skip("iperf3 runs take a while")
	}
	requirePrivileged(t, "iperf3")
	opt := Options{Bench: true, BenchModes: "bd", BenchSeconds: 1, BenchRuns: 1}
	if os.Getenv("GVL_BENCH") == "1" {
		opt.BenchSeconds, opt.BenchRuns = 0, 0
	}
	var out bytes.Buffer
	opt.Stdout = &out
	opt.Log = testLogger(t)
	err := Run(context.Background(), opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run(bench bd) error: %v", err)
	}
	for _, want := range []string{"(b) kernel forwarding", "(d) kernel bridge", "ratio (a)/(b) -P 1 LAN→WAN: n/a", "ratio (c)/(d) -P 4 WAN→LAN: n/a"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "(b)") || strings.HasPrefix(line, "(d)") {
			if strings.Contains(line, "n/a") {
				t.Errorf("no figure in %q", line)
			}
		}
	}
	if ns := labNamespaces(t, os.Getpid()); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
}

// labNamespaces lists the namespaces of the run of process pid (not
// those of its tagged runs: Options.runTag).
func labNamespaces(t *testing.T, pid int) []string { return runNamespaces(t, runPrefix(pid)) }

// runNamespaces lists the namespaces of the run with prefix prefix.
func runNamespaces(t *testing.T, prefix string) []string {
	var ns []string
	for _, n := range listNetns(t) {
		if strings.HasPrefix(n, prefix+"-") {
			ns = append(ns, n)
		}
	}
	return ns
}

// TestBenchGRO runs bench mode (g) against the real router binary with
// short runs: every GRO mode must give both figures. The acceptance
// ratios need the full settings (GVL_BENCH=1) and are printed, not
// asserted: 1-second runs on a shared VM are too noisy to gate CI on.
func TestBenchGRO(t *testing.T) {
	if testing.Short() && !netnstest.CI() {
		t.Skip("iperf3 runs take a while")
	}
	requirePrivileged(t, "iperf3")
	opt := Options{RouterBinary: buildRouter(t), Bench: true, BenchModes: "g", BenchSeconds: 1, BenchRuns: 1}
	if os.Getenv("GVL_BENCH") == "1" {
		opt.BenchSeconds, opt.BenchRuns = 0, 0
	}
	var out bytes.Buffer
	opt.Stdout = &out
	opt.Log = testLogger(t)
	err := Run(context.Background(), opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run(bench g) error: %v", err)
	}
	for _, mode := range groBenchModes {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == mode {
				found = true
				if f[1] == "n/a" || f[2] == "n/a" {
					t.Errorf("gro %s: no figure in %q", mode, line)
				}
			}
		}
		if !found {
			t.Errorf("output has no row for gro %s", mode)
		}
	}
	if !strings.Contains(out.String(), "ratio local selective/off") {
		t.Error("output lacks the ratios")
	}
	if ns := labNamespaces(t, os.Getpid()); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
}
