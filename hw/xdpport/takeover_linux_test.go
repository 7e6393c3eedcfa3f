package xdpport

import (
	"bufio"
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

// rxVLANOffload returns ifname's rx-vlan-offload as ethtool -k shows it,
// "on" or "off".
func rxVLANOffload(t *testing.T, ns *netnstest.Netns, ifname string) string {
	t.Helper()
	for _, l := range strings.Split(ns.Run(t, "ethtool", "-k", ifname), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rx-vlan-offload: "); ok {
			return strings.Fields(v)[0]
		}
	}
	t.Fatalf("ethtool -k %s shows no rx-vlan-offload", ifname)
	return ""
}

// killedChild opens ifname in a child process with stateDir, waits for
// the port to be open and SIGKILLs it: a router that crashed.
func killedChild(t *testing.T, ns *netnstest.Netns, ifname, stateDir string, whileOpen func()) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), self)
	cmd.Env = append(os.Environ(), childEnv+"="+ifname, stateDirEnv+"="+stateDir)
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

// TestTakeoverCrash checks that RX VLAN stripping is off while the port
// is open, recorded before it changes, and back on after a clean Close,
// after a SIGKILLed router's successor closes cleanly, and after
// hw.Restore (`router restore`) of a SIGKILLed router's record.
func TestTakeoverCrash(t *testing.T) {
	netnstest.Privileged(t, "ethtool")
	ns := newLab(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "ports", "vb.json")
	if got := rxVLANOffload(t, ns, "vb"); got != "on" {
		t.Fatalf("veth rx-vlan-offload before = %s, want the default on", got)
	}
	open := func() *Port {
		var p *Port
		var err error
		ns.Do(t, func() { p, err = Open(Config{Name: "vb", StateDir: dir}, nil) })
		if err != nil {
			t.Fatalf("Open(vb) = %v", err)
		}
		return p
	}
	checkRestored := func(when string) {
		t.Helper()
		if got := rxVLANOffload(t, ns, "vb"); got != "on" {
			t.Errorf("%s: rx-vlan-offload = %s, want on again", when, got)
		}
		if _, err := os.Stat(record); !os.IsNotExist(err) {
			t.Errorf("%s: record %s: stat error %v, want it removed", when, record, err)
		}
	}

	p := open()
	if got := rxVLANOffload(t, ns, "vb"); got != "off" {
		t.Errorf("while open: rx-vlan-offload = %s, want off", got)
	}
	if b, err := os.ReadFile(record); err != nil || !strings.Contains(string(b), `"rx-vlan-hw-parse": true`) {
		t.Errorf("while open: record = %s, %v; want rx-vlan-hw-parse recorded as on", b, err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	checkRestored("after Close")

	killedChild(t, ns, "vb", dir, func() {
		if got := rxVLANOffload(t, ns, "vb"); got != "off" {
			t.Errorf("child holds the port: rx-vlan-offload = %s, want off", got)
		}
	})
	if got := rxVLANOffload(t, ns, "vb"); got != "off" {
		t.Errorf("after SIGKILL: rx-vlan-offload = %s, want it left off", got)
	}
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

	killedChild(t, ns, "vb", dir, func() {})
	var err error
	ns.Do(t, func() { err = hw.Restore(dir, "vb", nil) })
	if err != nil {
		t.Fatalf("hw.Restore = %v", err)
	}
	checkRestored("after hw.Restore")
}
