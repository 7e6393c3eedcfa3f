package hw

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw/takeover"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/statedir"
)

// crash drops p as a killed process would: its sockets close with it, the
// kernel settings and the record stay.
func crash(t *testing.T, p *Port) {
	t.Helper()
	p.kernel = nil
	if err := p.Close(); err != nil {
		t.Fatalf("Close after crash: %v", err)
	}
}

// takenPort is p1 of a veth pair in its own namespace, with what an
// operator may have on a port: GRO on, IPv4 primary and secondary
// addresses, one with finite lifetimes, a peer address, a configured IPv6
// address and the kernel's own link-local one.
func takenPort(t *testing.T, ownClsact bool) (*netnstest.Netns, func() string) {
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	if ownClsact {
		n.Run(t, "tc", "qdisc", "add", "dev", "p1", "clsact")
	}
	n.IP(t, "addr", "add", "10.99.0.1/24", "brd", "+", "dev", "p1")
	n.IP(t, "addr", "add", "10.99.0.2/24", "dev", "p1", "label", "p1:sec")
	n.IP(t, "addr", "add", "10.99.1.1/24", "dev", "p1", "valid_lft", "3600", "preferred_lft", "1800")
	n.IP(t, "addr", "add", "10.98.0.1", "peer", "10.98.0.2", "dev", "p1")
	n.IP(t, "addr", "add", "fd00:99::1/64", "dev", "p1", "nodad", "noprefixroute")
	n.Do(t, func() {
		if err := SetOffloads("p1", Offloads{GRO: true, TSO: true, GSO: true, TxCsum: true, RxCsum: true}); err != nil {
			t.Errorf("SetOffloads: %v", err)
		}
	})
	state := func() string {
		var o Offloads
		var err error
		n.Do(t, func() { o, err = GetOffloads("p1") })
		if err != nil {
			t.Fatalf("GetOffloads: %v", err)
		}
		mtu := strings.TrimSpace(n.Run(t, "cat", "/sys/class/net/p1/mtu"))
		return "offloads " + strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(fmtOffloads(o), "\n", " ")), "  ", " ") +
			"\nmtu " + mtu + "\n" + n.PortStateOf(t, "p1").String()
	}
	if s := state(); !strings.Contains(s, "fe80::") || !strings.Contains(s, "10.99.0.2") {
		t.Fatalf("test port lacks its link-local or secondary address:\n%s", s)
	}
	return n, state
}

func fmtOffloads(o Offloads) string {
	var b bytes.Buffer
	for _, f := range []struct {
		n string
		v bool
	}{{"gro", o.GRO}, {"lro", o.LRO}, {"tso", o.TSO}, {"gso", o.GSO}} {
		b.WriteString(f.n)
		if f.v {
			b.WriteString("=on ")
		} else {
			b.WriteString("=off ")
		}
	}
	return b.String()
}

// TestTakeoverCrash takes a port over with a state directory, drops it as
// a crash would, takes it over again and stops cleanly: the port must be
// as it was before the first takeover, with either ingress drop, and with
// the VLAN MTU raise. Restore does the same without a second takeover.
func TestTakeoverCrash(t *testing.T) {
	privileged(t)
	for _, tt := range []struct {
		with      string
		ownClsact bool
		restore   bool // Restore after the crash instead of a new takeover
	}{
		{"nft", false, false}, {"tc", false, false}, {"tc", true, false},
		{"nft", false, true}, {"tc", false, true},
	} {
		name := tt.with
		if tt.ownClsact {
			name += " existing clsact"
		}
		if tt.restore {
			name += " restore"
		}
		t.Run(name, func(t *testing.T) {
			defer func(v string) { ingressDropWith = v }(ingressDropWith)
			ingressDropWith = tt.with
			n, state := takenPort(t, tt.ownClsact)
			dir := t.TempDir()
			before := state()
			t.Logf("before the first takeover:\n%s", before)
			cfg := Config{Name: "p1", StateDir: dir, ExtraTags: 1}

			p := openIn(t, n, cfg)
			silenced := state()
			if silenced == before || !strings.Contains(silenced, "mtu 1504") {
				t.Fatalf("state while open is the state before, or the MTU is not raised:\n%s", silenced)
			}
			if _, err := os.Stat(takeover.Dir(dir) + "/p1.json"); err != nil {
				t.Fatalf("no record while open: %v", err)
			}
			crash(t, p)
			rec, err := os.ReadFile(takeover.Dir(dir) + "/p1.json")
			if err != nil {
				t.Fatal(err)
			}
			if got := state(); got != silenced {
				t.Fatalf("state after the crash:\n%s\nwant it left silenced:\n%s", got, silenced)
			}
			if tt.restore {
				var err error
				n.Do(t, func() { err = Restore(dir, "p1", nil) })
				if err != nil {
					t.Fatalf("Restore: %v", err)
				}
			} else {
				// Twice: a crash of the adopting router must not lose the
				// original either.
				crash(t, openIn(t, n, cfg))
				p = openIn(t, n, cfg)
				if got := state(); got != silenced {
					t.Errorf("state after adopting:\n%s\nwant:\n%s", got, silenced)
				}
				if p.MTU() != 1500 {
					t.Errorf("MTU() after adopting a raised MTU = %d, want the one from before, 1500", p.MTU())
				}
				if err := p.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
			}
			if got := state(); got != before {
				t.Errorf("state after the clean stop:\n%s\nwant the state before the first takeover:\n%s", got, before)
			}
			if _, err := os.Stat(takeover.Dir(dir) + "/p1.json"); !os.IsNotExist(err) {
				t.Errorf("record after the clean stop: stat error %v, want it removed", err)
			}
			// Restoring is idempotent: the same record again (a crash
			// after the restore, before the record was removed) is harmless.
			if err := os.WriteFile(takeover.Dir(dir)+"/p1.json", rec, 0o600); err != nil {
				t.Fatal(err)
			}
			n.Do(t, func() { err = Restore(dir, "p1", nil) })
			if err != nil {
				t.Errorf("second Restore of the same record: %v", err)
			}
			if got := state(); got != before {
				t.Errorf("state after restoring twice:\n%s\nwant:\n%s", got, before)
			}
			n.Do(t, func() { err = Restore(dir, "p1", nil) })
			if err == nil || !strings.Contains(err.Error(), ErrNoRecord.Error()) {
				t.Errorf("Restore with no record = %v, want ErrNoRecord", err)
			}
		})
	}
}

// TestTakeoverCorruptRecord checks that an unreadable record is reported,
// set aside and replaced, never fatal, and that a record of an unknown
// version is refused before anything changes.
func TestTakeoverCorruptRecord(t *testing.T) {
	privileged(t)
	n, state := takenPort(t, false)
	dir := t.TempDir()
	before := state()
	s, err := takeover.NewStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path("p1"), []byte(`{"version": 1, "port": "p1", "addre`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var p *Port
	n.Do(t, func() { p, err = Open(Config{Name: "p1", StateDir: dir}, slog.New(slog.NewTextHandler(&logs, nil))) })
	if err != nil {
		t.Fatalf("Open with a truncated record = %v, want it replaced", err)
	}
	if !strings.Contains(logs.String(), "state record unreadable") {
		t.Errorf("log does not report the truncated record:\n%s", logs.String())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := state(); got != before {
		t.Errorf("state after Close:\n%s\nwant:\n%s", got, before)
	}
	if m, _ := os.ReadDir(takeover.Dir(dir)); len(m) != 1 || !strings.Contains(m[0].Name(), ".bad-") {
		t.Errorf("state directory holds %v, want only the set-aside record", m)
	}

	// A record of an earlier boot: the kernel forgot what it lists, so it
	// is discarded and the port as it is now is what Close restores.
	stale := &takeover.Record{Port: "p1", BootID: "an-earlier-boot", Ifindex: 1, DisableIPv6: "1",
		NFTables: []takeover.NFTable{{Family: "netdev", Name: "gvrouter_hw_1"}}}
	if err := s.Save(stale); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	n.Do(t, func() { p, err = Open(Config{Name: "p1", StateDir: dir}, slog.New(slog.NewTextHandler(&logs, nil))) })
	if err != nil {
		t.Fatalf("Open with a stale record = %v", err)
	}
	if !strings.Contains(logs.String(), "another boot") {
		t.Errorf("log does not report the stale record:\n%s", logs.String())
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := state(); got != before {
		t.Errorf("state after Close over a stale record:\n%s\nwant:\n%s", got, before)
	}
	if err := s.Save(stale); err != nil {
		t.Fatal(err)
	}
	n.Do(t, func() { err = Restore(dir, "p1", nil) })
	if err != nil {
		t.Errorf("Restore of a stale record = %v, want it discarded", err)
	}
	if r, err := s.Load("p1"); r != nil || err != nil {
		t.Errorf("record after restoring a stale one = %v, %v; want none", r, err)
	}
	if got := state(); got != before {
		t.Errorf("state after Restore of a stale record:\n%s\nwant it untouched:\n%s", got, before)
	}

	// A record of this boot from another namespace (a router there
	// crashed on a port of the same name, sharing this state_dir): the
	// only copy of that port's settings, so Open refuses and keeps it.
	boot, _, err := kernelIdentity()
	if err != nil {
		t.Fatal(err)
	}
	foreign := &takeover.Record{Port: "p1", BootID: boot, Netns: 1, Ifindex: 1, DisableIPv6: "0"}
	if err := s.Save(foreign); err != nil {
		t.Fatal(err)
	}
	n.Do(t, func() { p, err = Open(Config{Name: "p1", StateDir: dir}, nil) })
	if err == nil || !strings.Contains(err.Error(), "router restore") {
		p.Close()
		t.Errorf("Open over another namespace's record = %v, want it refused", err)
	}
	if r, err := s.Load("p1"); r == nil || err != nil || r.Netns != 1 {
		t.Errorf("other namespace's record after the refused Open = %v, %v; want it kept", r, err)
	}
	if got := state(); got != before {
		t.Errorf("state after the refused Open:\n%s\nwant it untouched:\n%s", got, before)
	}
	if err := s.Remove("p1"); err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(s.Path("p1"), []byte(`{"version": 9, "port": "p1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n.Do(t, func() { p, err = Open(Config{Name: "p1", StateDir: dir}, nil) })
	if err == nil {
		p.Close()
		t.Fatal("Open with a version 9 record = nil error, want it refused")
	}
	if !strings.Contains(err.Error(), "version 9") {
		t.Errorf("Open with a version 9 record = %v, want the version named", err)
	}
	if got := state(); got != before {
		t.Errorf("state after a refused Open:\n%s\nwant it untouched:\n%s", got, before)
	}
	n.Do(t, func() { err = Restore(dir, "p1", nil) })
	if err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("Restore of a version 9 record = %v, want it refused", err)
	}
}

// TestLockPort checks that a port's lock is per namespace: the same name in
// two namespaces gives two locks, the same port twice one.
func TestLockPort(t *testing.T) {
	privileged(t)
	a, b := newNetns(t), newNetns(t)
	dir := t.TempDir()
	var la, lb, again *statedir.Lock
	var errA, errB, errAgain error
	a.Do(t, func() { la, errA = LockPort(dir, "eth0") })
	b.Do(t, func() { lb, errB = LockPort(dir, "eth0") })
	a.Do(t, func() { again, errAgain = LockPort(dir, "eth0") })
	defer la.Unlock()
	defer lb.Unlock()
	defer again.Unlock()
	if errA != nil || errB != nil {
		t.Fatalf("LockPort(eth0) in two namespaces = %v, %v; want both locks", errA, errB)
	}
	if errAgain == nil || !strings.Contains(errAgain.Error(), "port eth0 is in use by router pid ") {
		t.Errorf("second LockPort(eth0) in one namespace = %v, want \"port eth0 is in use by router pid N\"", errAgain)
	}
	// Another run directory does not get around it (a second router
	// started with another -run-dir), and the holder is named.
	var other *statedir.Lock
	var errOther error
	a.Do(t, func() { other, errOther = LockPort(t.TempDir(), "eth0") })
	defer other.Unlock()
	want := fmt.Sprintf("port eth0 is in use by router pid %d", os.Getpid())
	if errOther == nil || !strings.Contains(errOther.Error(), want) {
		t.Errorf("LockPort(eth0) with another run directory = %v, want %q", errOther, want)
	}
	// Released with Unlock: the port can be taken again.
	la.Unlock()
	var after *statedir.Lock
	var errAfter error
	a.Do(t, func() { after, errAfter = LockPort(t.TempDir(), "eth0") })
	defer after.Unlock()
	if errAfter != nil {
		t.Errorf("LockPort(eth0) after Unlock = %v", errAfter)
	}
}

// TestOpenRaisesKernelMTU: a port MTU above the kernel's (1508 for RFC
// 4638 PPPoE on a 1500-byte NIC) raises the kernel MTU, since the
// kernel refuses AF_PACKET sends longer than its own, and a full-size
// frame goes out; Close restores the MTU from before.
func TestOpenRaisesKernelMTU(t *testing.T) {
	privileged(t)
	n, state := takenPort(t, false)
	n.IP(t, "link", "set", "p0", "mtu", "1508") // the far end: a baby-jumbo link (veth checks the peer's MTU)
	before := state()
	p := openIn(t, n, Config{Name: "p1", StateDir: t.TempDir(), MTU: 1508})
	if s := state(); !strings.Contains(s, "mtu 1508") || p.MTU() != 1508 {
		t.Errorf("port MTU 1508 over a kernel MTU of 1500: MTU() %d, kernel state\n%s\nwant 1508 both", p.MTU(), s)
	}
	frame := make([]byte, 14+1508)
	copy(frame, []byte{0x02, 0, 0, 0, 0, 0x99})
	copy(frame[6:], p.HardwareAddr())
	frame[12], frame[13] = 0x88, 0x64 // a PPPoE session frame of 1508 bytes
	if _, err := p.WriteFrames([][]byte{frame}); err != nil {
		t.Errorf("WriteFrames(1522-byte frame) with MTU 1508: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for p.Stats().TxPackets == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := p.Stats(); st.TxPackets != 1 || st.TxBytes != uint64(len(frame)) {
		t.Errorf("after a 1522-byte frame: tx %d packets, %d bytes, drops %v; want the kernel to take it", st.TxPackets, st.TxBytes, st.Drops)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != before {
		t.Errorf("state after Close:\n%s\nwant the state before:\n%s", got, before)
	}
}
