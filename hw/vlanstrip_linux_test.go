package hw

import (
	"os"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/hw/takeover"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
)

// TestTakeoverRxVLAN turns RX VLAN stripping off with TakeOver, drops
// the Takeover as a crash would, and checks that both roads back restore
// it: Restore (`router restore`), and an AF_PACKET Open that adopts the
// record and its Close (a router switched from af_xdp to af_packet after
// the crash). ethtool -k reads the feature independently of the ioctl.
func TestTakeoverRxVLAN(t *testing.T) {
	privileged(t)
	netnstest.Privileged(t, "ethtool")
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	show := func() string {
		for _, l := range strings.Split(n.Run(t, "ethtool", "-k", "p1"), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "rx-vlan-offload: "); ok {
				return strings.Fields(v)[0]
			}
		}
		t.Fatal("ethtool -k p1 shows no rx-vlan-offload")
		return ""
	}
	if got := show(); got != "on" {
		t.Fatalf("rx-vlan-offload before = %s, want veth's default on", got)
	}
	dir := t.TempDir()
	crashed := func() {
		t.Helper()
		var tk *Takeover
		var err error
		n.Do(t, func() { tk, err = TakeOver(TakeoverConfig{Name: "p1", StateDir: dir, RxVLANOff: true}, nil) })
		if err != nil {
			t.Fatalf("TakeOver: %v", err)
		}
		if got := show(); got != "off" {
			t.Errorf("rx-vlan-offload after TakeOver = %s, want off", got)
		}
		// A crash: the process and its sockets go, the record stays.
		unix.Close(tk.ctl)
		tk.ns.close()
		rec, err := os.ReadFile(takeover.Dir(dir) + "/p1.json")
		if err != nil || !strings.Contains(string(rec), `"rx-vlan-hw-parse": true`) {
			t.Fatalf("record after the crash = %s, %v; want rx-vlan-hw-parse: true", rec, err)
		}
	}
	restored := func(how string) {
		t.Helper()
		if got := show(); got != "on" {
			t.Errorf("rx-vlan-offload after %s = %s, want on", how, got)
		}
		if _, err := os.Stat(takeover.Dir(dir) + "/p1.json"); !os.IsNotExist(err) {
			t.Errorf("record after %s: stat error %v, want it removed", how, err)
		}
	}

	crashed()
	var err error
	n.Do(t, func() { err = Restore(dir, "p1", nil) })
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	restored("Restore")

	crashed()
	p := openIn(t, n, Config{Name: "p1", StateDir: dir})
	if got := show(); got != "off" {
		t.Errorf("rx-vlan-offload while an adopting Port is open = %s, want it left off", got)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	restored("the adopting Port's Close")
}
