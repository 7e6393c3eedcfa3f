package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// buildRouter returns cmd/gvrouter built for this test process.
func buildRouter(t *testing.T) string {
	t.Helper()
	return buildRouterTags(t, "")
}

// routerBuilds holds this test process's builds of cmd/gvrouter, one per
// set of build tags: every lab test runs the router, and a build (its
// link above all) takes seconds of CPU that the tests would otherwise
// repeat one after another. TestMain removes dir.
var routerBuilds struct {
	mu   sync.Mutex // held while building, so that a second caller waits for the build
	dir  string
	bins map[string]string // build tags → binary
}

// labProbeTag is the build tag of the lab tests' routers
// (cmd/gvrouter/labprobe.go): their WAN DHCP client's RFC 5227 probe of
// the offered address takes about 0.55 s, not 5.5, and every lab start
// waits for it. The lab's proofs see no other difference; gvlab's router
// (the appliance's build) keeps the RFC's timing.
const labProbeTag = "labprobe"

// buildRouterTags is buildRouter with build tags, e.g. "labmka". Every
// build also has labProbeTag.
func buildRouterTags(t *testing.T, tags string) string {
	t.Helper()
	skipOrFail := func(format string, args ...any) { t.Helper(); netnstest.SkipOrFail(t, format, args...) }
	routerBuilds.mu.Lock()
	defer routerBuilds.mu.Unlock()
	if bin, ok := routerBuilds.bins[tags]; ok {
		return bin
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		skipOrFail("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if m, _ := filepath.Glob(filepath.Join(root, "cmd", "gvrouter", "*.go")); len(m) == 0 {
		skipOrFail("no cmd/gvrouter in %s", root)
	}
	if routerBuilds.dir == "" {
		if routerBuilds.dir, err = os.MkdirTemp("", "gvlab-router-"); err != nil {
			t.Fatal(err)
		}
		routerBuilds.bins = map[string]string{}
	}
	bin := filepath.Join(routerBuilds.dir, fmt.Sprintf("router%d", len(routerBuilds.bins)))
	cmd := exec.Command("go", "build", "-tags", strings.Trim(tags+","+labProbeTag, ","), "-o", bin, "./cmd/gvrouter")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gvrouter: %v\n%s", err, out)
	}
	routerBuilds.bins[tags] = bin
	return bin
}

// removeRouterBuilds removes the builds of buildRouterTags.
func removeRouterBuilds() {
	routerBuilds.mu.Lock()
	defer routerBuilds.mu.Unlock()
	if routerBuilds.dir != "" {
		os.RemoveAll(routerBuilds.dir)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRun runs the whole lab against the real router binary: ping and TCP
// cross it both ways in both families (IPv4 inbound through the port
// forward), masquerade, hairpin, fragments, traceroute and the fast path
// work, the status page answers in the LAN
// and at 127.0.0.1:PORT here, the router's counters rise while the kernel
// of the router namespace forwards nothing, and everything is gone after.
//
// It runs beside the parallel tests as the one untagged lab (gvl<pid>) of
// the process: theirs are all tagged, so its checks of the gvl<pid>
// namespaces and run directory see its own lab only.
func TestRun(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t)
	bin := buildRouter(t)
	port := freePort(t)
	var out bytes.Buffer
	var routerPID int
	hookRan := false
	opt := Options{
		RouterBinary: bin,
		StatusPort:   port,
		Log:          testLogger(t),
		Stdout:       &out,
		testHook: func(l *lab) error {
			hookRan = true
			routerPID = l.router.cmd.Process.Pid
			// Checked from outside the lab's own proofs.
			if got := labNamespaces(t, os.Getpid()); len(got) != 3 {
				return fmt.Errorf("lab namespaces = %v, want 3", got)
			}
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/status", port))
			if err != nil {
				return fmt.Errorf("status page at 127.0.0.1:%d: %w", port, err)
			}
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status page at 127.0.0.1:%d: %s", port, resp.Status)
			}
			c1, err := parseStatus(body.Bytes())
			if err != nil {
				return err
			}
			kBefore, err := readKernelState(l.rtrNS)
			if err != nil {
				return err
			}
			if _, err := tcpEcho(context.Background(), l.lanNS, l.wanNS, wanHost4.Addr()); err != nil {
				return fmt.Errorf("TCP LAN→WAN: %w", err)
			}
			if _, err := ping(context.Background(), l.wanNS, lanHost6.Addr()); err != nil {
				return err
			}
			kAfter, err := readKernelState(l.rtrNS)
			if err != nil {
				return err
			}
			if err := kernelSilent(kBefore, kAfter); err != nil {
				return err
			}
			c2, err := l.freshCounters(context.Background(), time.Now())
			if err != nil {
				return err
			}
			for _, name := range []string{"lan", "wan"} {
				if c2[name].RxPackets <= c1[name].RxPackets {
					return fmt.Errorf("router %s rx_packets %d → %d, want a rise", name, c1[name].RxPackets, c2[name].RxPackets)
				}
			}
			for _, dev := range []string{lanPort, wanPort} {
				if a, err := ifAddrs(context.Background(), l.rtrNS, dev); err != nil || len(a) != 0 {
					return fmt.Errorf("kernel addresses on %s: %v (%v)", dev, a, err)
				}
			}
			// The port's kernel IPv6 is off: only the router's own
			// memberships put all-routers and the solicited-node group
			// of fd77:1::1 on the LAN port's filter.
			maddr, err := output(context.Background(), l.rtrNS, "ip", "maddr", "show", "dev", lanPort)
			if err != nil {
				return err
			}
			for _, g := range []string{"33:33:00:00:00:02", "33:33:ff:00:00:01", "33:33:00:01:00:02"} {
				if !strings.Contains(string(maddr), g) {
					return fmt.Errorf("ip maddr show dev %s lacks %s:\n%s", lanPort, g, maddr)
				}
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	if !hookRan {
		t.Fatalf("test hook did not run")
	}
	for _, want := range []string{
		"ok   ping LAN→WAN IPv4", "ok   ping WAN→router WAN address IPv4", "ok   ping LAN→WAN IPv6", "ok   ping WAN→LAN IPv6",
		"ok   TCP LAN→WAN IPv6", "ok   TCP WAN→LAN IPv6",
		"ok   masquerade: TCP LAN→WAN", "ok   port forward: TCP WAN→LAN", "ok   hairpin", "ok   UDP 3000-byte datagram",
		"ok   traceroute", "ok   fast path",
		"ok   LAN host DNS by stateless DHCPv6 from the router (ISC dhclient -6 -S) DNS fd77:1::1",
		"ok   IPv6 prefix delegated by the ISP (kea-dhcp6) numbers the LAN fd77:80",
		"ok   IPv6 default route learned from the ISP's RAs (radvd)    ::/0 via fe80:",
		"ok   LAN host's lease name resolves to its IPv6 address (AAAA, over IPv6) lab-v6host.lan AAAA [fd77:1::2",
		"ok   LAN host autoconfigures by SLAAC from the router's RAs (its kernel) fd77:1::",
		"ok   status page from LAN host http://10.77.1.1/api/status",
		fmt.Sprintf("ok   status page from this machine http://127.0.0.1:%d/api/status", port),
		"ok   router counters rose",
		"ok   kernel in router namespace forwarded nothing",
		"ok   no kernel addresses on lan0, wan0",
		"proofs passed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if ns := labNamespaces(t, os.Getpid()); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
	if _, err := os.Stat(filepath.Join(runDir, runPrefix(os.Getpid()))); !os.IsNotExist(err) {
		t.Errorf("run directory left after Run (stat error %v)", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", routerPID)); !os.IsNotExist(err) {
		t.Errorf("router process %d still exists after Run", routerPID)
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Errorf("127.0.0.1:%d still accepts after Run", port)
	}
}

// TestRunBCM47094 runs the lab's appliance topology against the real
// router binary: LAN host — emulated BCM53012 (LAN untagged VLAN 1, WAN
// untagged VLAN 2, CPU port tagged) — router eth0 with eth0.1 and eth0.2
// — WAN host. Ping and TCP cross it both ways and the status page answers
// in the LAN; the router received the LAN's and WAN's frames tagged, and
// everything is gone after.
func TestRunBCM47094(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t)
	bin := buildRouter(t)
	port := freePort(t)
	var out bytes.Buffer
	tag := nextRunTag()
	opt := Options{
		RouterBinary: bin,
		StatusPort:   port,
		Topology:     TopologyBCM47094,
		Log:          testLogger(t),
		Stdout:       &out,
		runTag:       tag,
		testHook: func(l *lab) error {
			if got := runNamespaces(t, l.prefix); len(got) != 4 {
				return fmt.Errorf("lab namespaces = %v, want 4", got)
			}
			body, err := httpGet(context.Background(), l.lanNS, "http://10.77.1.1/api/status")
			if err != nil {
				return err
			}
			var st struct {
				Interfaces []struct {
					Name string `json:"name"`
					Port string `json:"port"`
					VLAN []int  `json:"vlan"`
				} `json:"interfaces"`
			}
			if err := json.Unmarshal(body, &st); err != nil {
				return fmt.Errorf("status page: %w", err)
			}
			got := map[string]string{}
			for _, i := range st.Interfaces {
				got[i.Name] = fmt.Sprint(i.Port, i.VLAN)
			}
			if got["eth0.1"] != "eth0[1]" || got["eth0.2"] != "eth0[2]" {
				return fmt.Errorf("status page interfaces %v, want eth0.1 on eth0 VLAN 1, eth0.2 on eth0 VLAN 2", got)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	for _, want := range []string{
		"BCM53012 switch",
		"ok   ping LAN→WAN IPv4", "ok   ping WAN→router WAN address IPv4", "ok   ping LAN→WAN IPv6", "ok   ping WAN→LAN IPv6",
		"ok   TCP LAN→WAN IPv6", "ok   TCP WAN→LAN IPv6",
		"ok   masquerade: TCP LAN→WAN", "ok   port forward: TCP WAN→LAN", "ok   hairpin", "ok   UDP 3000-byte datagram",
		"ok   traceroute", "ok   fast path",
		"ok   status page from LAN host http://10.77.1.1/api/status",
		"ok   router counters rose",
		"ok   no kernel addresses on eth0",
		"proofs passed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if ns := runNamespaces(t, runPrefix(os.Getpid())+tag); len(ns) != 0 {
		t.Errorf("namespaces left after Run: %v", ns)
	}
}
