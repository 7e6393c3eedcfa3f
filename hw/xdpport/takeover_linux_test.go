package xdpport

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// rxVLANOffload returns ifname's rx-vlan-offload and
// rx-vlan-stag-hw-parse (802.1Q and 802.1ad tag stripping) as ethtool -k
// shows them, e.g. "on/on".
func rxVLANOffload(t *testing.T, ns *netnstest.Netns, ifname string) string {
	t.Helper()
	var ctag, stag string
	for _, l := range strings.Split(ns.Run(t, "ethtool", "-k", ifname), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rx-vlan-offload: "); ok {
			ctag = strings.Fields(v)[0]
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rx-vlan-stag-hw-parse: "); ok {
			stag = strings.Fields(v)[0]
		}
	}
	if ctag == "" || stag == "" {
		t.Fatalf("ethtool -k %s shows no rx-vlan-offload or rx-vlan-stag-hw-parse", ifname)
	}
	return ctag + "/" + stag
}

// killedChild opens ifname in a child process with stateDir and the
// extra environment env, waits for the port to be open, runs whileOpen
// and SIGKILLs it: a router that crashed.
func killedChild(t *testing.T, ns *netnstest.Netns, ifname, stateDir string, whileOpen func(), env ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), self)
	cmd.Env = append(append(os.Environ(), childEnv+"="+ifname, stateDirEnv+"="+stateDir), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, "open ") {
			t.Fatalf("child said %q, want \"open MODE\"", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("child did not open the port within 10 s")
	}
	whileOpen()
}

// kernelMTU returns ifname's kernel MTU in ns.
func kernelMTU(t *testing.T, ns *netnstest.Netns, ifname string) int {
	t.Helper()
	var mtu int
	ns.Do(t, func() {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			t.Fatal(err)
		}
		mtu = ifi.MTU
	})
	return mtu
}

// TestTakeoverCrash checks that RX VLAN stripping (802.1Q and 802.1ad) is off, the
// interface's addresses gone, IPv6 off and the kernel MTU raised for an
// extra VLAN tag (ExtraTags 1: 1504) while the port is open, each
// recorded before it changes, and all back after a clean Close, after a
// SIGKILLed router's successor closes cleanly, and after hw.Restore
// (`router restore`) of a SIGKILLed router's record.
func TestTakeoverCrash(t *testing.T) {
	netnstest.Privileged(t, "ethtool", "nft", "tc")
	ns := newLab(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "ports", "vb.json")
	if got := rxVLANOffload(t, ns, "vb"); got != "on/on" {
		t.Fatalf("veth rx-vlan-offload/rx-vlan-stag-hw-parse before = %s, want the defaults on/on", got)
	}
	// newLab turns IPv6 off namespace-wide; vb gets it back, with an
	// address of each family.
	ns.Do(t, func() {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/vb/disable_ipv6", []byte("0"), 0); err != nil {
			t.Errorf("enable IPv6 on vb: %v", err)
		}
	})
	ns.IP(t, "addr", "add", "10.98.0.1/24", "dev", "vb")
	ns.IP(t, "addr", "add", "fd00:98::1/64", "dev", "vb", "nodad")
	before := ns.PortStateOf(t, "vb")
	if before.DisableIPv6 != "0" || len(before.Addrs) != 3 {
		t.Fatalf("vb before: %s\nwant IPv6 on and three addresses (with the link-local)", before)
	}
	checkSilenced := func(when string) {
		t.Helper()
		if st := ns.PortStateOf(t, "vb"); st.DisableIPv6 != "1" || len(st.Addrs) != 0 {
			t.Errorf("%s: disable_ipv6=%s, addresses %v; want 1 and none", when, st.DisableIPv6, st.Addrs)
		}
		if mtu := kernelMTU(t, ns, "vb"); mtu != 1504 {
			t.Errorf("%s: kernel MTU %d, want 1504 (raised for one extra tag)", when, mtu)
		}
	}
	open := func() *Port {
		var p *Port
		var err error
		ns.Do(t, func() { p, err = Open(Config{Name: "vb", StateDir: dir, ExtraTags: 1}, nil) })
		if err != nil {
			t.Fatalf("Open(vb) = %v", err)
		}
		return p
	}
	checkRestored := func(when string) {
		t.Helper()
		if got := rxVLANOffload(t, ns, "vb"); got != "on/on" {
			t.Errorf("%s: rx-vlan-offload/rx-vlan-stag-hw-parse = %s, want on/on again", when, got)
		}
		if _, err := os.Stat(record); !os.IsNotExist(err) {
			t.Errorf("%s: record %s: stat error %v, want it removed", when, record, err)
		}
		if st := ns.PortStateOf(t, "vb"); !st.Equal(before) {
			t.Errorf("%s: vb is\n%s\nwant as before:\n%s", when, st, before)
		}
		if mtu := kernelMTU(t, ns, "vb"); mtu != 1500 {
			t.Errorf("%s: kernel MTU %d, want 1500 again", when, mtu)
		}
	}

	p := open()
	if got := rxVLANOffload(t, ns, "vb"); got != "off/off" {
		t.Errorf("while open: rx-vlan-offload/rx-vlan-stag-hw-parse = %s, want off/off", got)
	}
	checkSilenced("while open")
	if b, err := os.ReadFile(record); err != nil || !strings.Contains(string(b), `"rx-vlan-hw-parse": true`) ||
		!strings.Contains(string(b), `"disable_ipv6": "0"`) || !strings.Contains(string(b), `"10.98.0.1/24"`) || !strings.Contains(string(b), `"fd00:98::1/64"`) || !strings.Contains(string(b), `"mtu": 1500`) || !strings.Contains(string(b), `"rx-vlan-stag-hw-parse": true`) {
		t.Errorf("while open: record = %s, %v; want rx-vlan-hw-parse and rx-vlan-stag-hw-parse on, disable_ipv6 0, both addresses and mtu 1500 recorded", b, err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	checkRestored("after Close")

	killedChild(t, ns, "vb", dir, func() {
		if got := rxVLANOffload(t, ns, "vb"); got != "off/off" {
			t.Errorf("child holds the port: rx-vlan-offload/rx-vlan-stag-hw-parse = %s, want off/off", got)
		}
		checkSilenced("child holds the port")
	}, extraTagsEnv+"=1")
	if got := rxVLANOffload(t, ns, "vb"); got != "off/off" {
		t.Errorf("after SIGKILL: rx-vlan-offload/rx-vlan-stag-hw-parse = %s, want them left off", got)
	}
	checkSilenced("after SIGKILL")
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("after SIGKILL: no record: %v", err)
	}
	// The next router adopts the record: what it finds (off) is not the
	// value from before.
	p = open()
	if err := p.Close(); err != nil {
		t.Fatalf("Close after adopting = %v", err)
	}
	checkRestored("after the successor's Close")

	killedChild(t, ns, "vb", dir, func() {}, extraTagsEnv+"=1")
	var err error
	ns.Do(t, func() { err = hw.Restore(dir, "vb", nil) })
	if err != nil {
		t.Fatalf("hw.Restore = %v", err)
	}
	checkRestored("after hw.Restore")
}
