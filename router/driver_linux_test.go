package router

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestPortDriver starts a router on a veth with each driver setting and
// checks the backend it chose and what the status snapshot says: af_xdp
// binds in copy mode on veth's native XDP; auto wants zero-copy, which
// veth lacks, so it falls back to af_packet, as the generic profile's
// default does.
func TestPortDriver(t *testing.T) {
	netnstest.Privileged(t, "ip", "ping")
	for _, tc := range []struct {
		driver, wantDriver, wantMode string
	}{
		{config.DriverAFXDP, config.DriverAFXDP, "copy, native"},
		{config.DriverAuto, config.DriverAFPacket, ""},
		{"", config.DriverAFPacket, ""},
	} {
		t.Run("driver="+tc.driver, func(t *testing.T) {
			ns := netnstest.New(t, "drv", netnstest.WithoutIPv6())
			ns.IP(t, "link", "add", "va", "type", "veth", "peer", "name", "vb")
			ns.IP(t, "link", "set", "va", "up")
			ns.IP(t, "link", "set", "vb", "up")
			drv := ""
			if tc.driver != "" {
				drv = ", driver: " + tc.driver
			}
			src := fmt.Sprintf("ports:\n  - {name: va%s}\ninterfaces:\n  - {name: lan, port: va, role: lan, addresses: [192.168.77.1/24]}\nstate_dir: %s\n", drv, t.TempDir())
			cfg, err := config.Parse("driver.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var r *Router
			ns.Do(t, func() { r, err = New(cfg, Build{}, slog.New(slog.DiscardHandler)) })
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer r.Close()
			snap := r.Snapshot()
			if len(snap.Ports) != 1 {
				t.Fatalf("Snapshot().Ports = %+v, want one port", snap.Ports)
			}
			if p := snap.Ports[0]; p.Driver != tc.wantDriver || p.Mode != tc.wantMode {
				t.Errorf("port va: driver %q, mode %q, want %q, %q", p.Driver, p.Mode, tc.wantDriver, tc.wantMode)
			}
			// The lan interface's groups are on va's list, on either
			// driver (portGroups): all-nodes and all-routers.
			maddr := ns.Run(t, "ip", "-n", ns.Name(), "maddr", "show", "dev", "va")
			for _, g := range []string{"33:33:00:00:00:01", "33:33:00:00:00:02"} {
				if !strings.Contains(maddr, "link  "+g) {
					t.Errorf("ip maddr show dev va on %s lacks %s:\n%s", tc.wantDriver, g, maddr)
				}
			}
			// The router answers through the port: ARP, then ICMP echo.
			ns.IP(t, "addr", "add", "192.168.77.2/24", "dev", "vb")
			if out, err := exec.Command("ip", "netns", "exec", ns.Name(), "ping", "-c", "3", "-i", "0.2", "-W", "2", "192.168.77.1").CombinedOutput(); err != nil {
				t.Errorf("ping the router over %s: %v\n%s", tc.wantDriver, err, out)
			}
			if st := r.Snapshot().Ports[0]; st.RxPackets == 0 || st.TxPackets == 0 {
				t.Errorf("port va after ping: rx %d, tx %d frames, want both > 0", st.RxPackets, st.TxPackets)
			}
		})
	}
}

// routerChildEnv makes the re-executed test binary start a router on
// the config in its value, print its ports' drivers and wait to be
// killed.
const routerChildEnv = "GVROUTER_ROUTER_CHILD_CONFIG"

func TestMain(m *testing.M) {
	if src := os.Getenv(routerChildEnv); src != "" {
		os.Exit(routerChild(src))
	}
	os.Exit(m.Run())
}

func routerChild(src string) int {
	cfg, err := config.Parse("child.yaml", []byte(src))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	r, err := New(cfg, Build{}, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	p := r.Snapshot().Ports[0]
	fmt.Println("started", p.Driver, p.Mode)
	time.Sleep(time.Minute)
	return 2
}

// TestSIGKILLRouterAFXDP SIGKILLs a router running a port on af_xdp:
// no XDP program may be left on the interface, and a new router starts
// on it, on af_xdp again. RX VLAN stripping, which the port turned off,
// stays off and recorded after the kill, and is back on once the new
// router has stopped.
func TestSIGKILLRouterAFXDP(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool")
	ns := netnstest.New(t, "drvk", netnstest.WithoutIPv6())
	ns.IP(t, "link", "add", "va", "type", "veth", "peer", "name", "vb")
	ns.IP(t, "link", "set", "va", "up")
	ns.IP(t, "link", "set", "vb", "up")
	stateDir := t.TempDir()
	record := filepath.Join(stateDir, "ports", "va.json")
	src := fmt.Sprintf("ports:\n  - {name: va, driver: af_xdp}\ninterfaces:\n  - {name: lan, port: va, role: lan, addresses: [192.168.78.1/24]}\nstate_dir: %s\n", stateDir)
	rxVLAN := func() string {
		for _, l := range strings.Split(ns.Run(t, "ethtool", "-k", "va"), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rx-vlan-offload: "); ok {
				return strings.Fields(v)[0]
			}
		}
		t.Fatal("ethtool -k va shows no rx-vlan-offload")
		return ""
	}
	if got := rxVLAN(); got != "on" {
		t.Fatalf("va rx-vlan-offload before = %s, want veth's default on", got)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), self)
	cmd.Env = append(os.Environ(), routerChildEnv+"="+src)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s != "started af_xdp copy, native" {
			t.Fatalf("child router said %q, want \"started af_xdp copy, native\"", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("child router did not start within 20 s")
	}
	if !ns.HasXDP(t, "va") {
		t.Fatal("no XDP program on va while the child router runs")
	}
	// ip netns exec execs the binary in place: cmd's process is the router.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	for end := time.Now().Add(2 * time.Second); ns.HasXDP(t, "va"); {
		if time.Now().After(end) {
			t.Fatal("the XDP program outlived the SIGKILLed router")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := rxVLAN(); got != "off" {
		t.Errorf("va rx-vlan-offload after SIGKILL = %s, want left off", got)
	}
	if _, err := os.Stat(record); err != nil {
		t.Errorf("takeover record after SIGKILL: %v", err)
	}
	cfg, err := config.Parse("again.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var r *Router
	ns.Do(t, func() { r, err = New(cfg, Build{}, slog.New(slog.DiscardHandler)) })
	if err != nil {
		t.Fatalf("New after SIGKILL: %v", err)
	}
	if p := r.Snapshot().Ports[0]; p.Driver != config.DriverAFXDP {
		t.Errorf("router after SIGKILL: port va on %q (%s), want af_xdp", p.Driver, p.Mode)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close of the router after SIGKILL: %v", err)
	}
	if got := rxVLAN(); got != "on" {
		t.Errorf("va rx-vlan-offload after the new router stopped = %s, want on again", got)
	}
	if _, err := os.Stat(record); !os.IsNotExist(err) {
		t.Errorf("takeover record after the new router stopped: stat error %v, want it removed", err)
	}
}
