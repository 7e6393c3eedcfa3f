package ra

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// daemon is a peer process in a namespace, in its own process group.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// startDaemon runs name args in n; the cleanup kills what is left of it.
func startDaemon(t *testing.T, n *netnstest.Netns, dir, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, log: filepath.Join(dir, name+".log"), done: make(chan error, 1)}
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command("ip", append([]string{"netns", "exec", n.Name(), name}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { d.done <- d.cmd.Wait(); logf.Close() }()
	t.Cleanup(func() { d.stop(syscall.SIGKILL) })
	return d
}

// stop sends sig to the daemon's process group and waits for it to end.
func (d *daemon) stop(sig syscall.Signal) {
	if d.done == nil {
		return
	}
	syscall.Kill(-d.cmd.Process.Pid, sig)
	<-d.done
	d.done = nil
}

func (d *daemon) output() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// startRadvd writes conf and runs radvd on it in n.
func startRadvd(t *testing.T, n *netnstest.Netns, conf string) *daemon {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "radvd.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, n, dir, "radvd", "-n", "-d", "1", "-m", "stderr", "-C", path, "-p", filepath.Join(dir, "radvd.pid"))
}

const radvdISP = `interface p0 {
	AdvSendAdvert on;
	MinRtrAdvInterval 3;
	MaxRtrAdvInterval 4;
	AdvDefaultLifetime 60;
	AdvDefaultPreference high;
	AdvCurHopLimit 61;
	AdvLinkMTU 1492;
	AdvManagedFlag on;
	AdvOtherConfigFlag off;
	prefix 2001:db8:aa::/64 { AdvOnLink on; AdvAutonomous on; AdvValidLifetime 120; AdvPreferredLifetime 60; };
	prefix 2001:db8:bb::/64 { AdvOnLink on; AdvAutonomous off; AdvValidLifetime 300; AdvPreferredLifetime 200; };
	RDNSS 2001:db8:aa::53 { AdvRDNSSLifetime 8; };
	DNSSL isp.example { AdvDNSSLLifetime 8; };
};
`

const radvdShort = `interface p0 {
	AdvSendAdvert on;
	MinRtrAdvInterval 3;
	MaxRtrAdvInterval 4;
	AdvDefaultLifetime 4;
	prefix 2001:db8:cc::/64 { AdvOnLink on; AdvAutonomous off; AdvValidLifetime 6; AdvPreferredLifetime 3; };
};
`

// within reports whether t lies in [from+lo, from+hi].
func within(t, from time.Time, lo, hi time.Duration) bool {
	return !t.Before(from.Add(lo)) && !t.After(from.Add(hi))
}

// TestInteropRadvd has radvd 2.19 in a namespace play the ISP's router
// for a Learner that solicits. The Learner learns radvd's link-local
// address and MAC as a high-preference default router for 60 s, both
// prefixes with their flags and lifetimes, RDNSS, DNSSL, MTU, hop limit
// and flags. radvd stopped cleanly sends its final RA (router lifetime
// 0), and the router is gone at once, long before its 60 s. Then a
// radvd with a 4 s router lifetime and a 6 s prefix is killed (no final
// RA): both expire on their own timers.
func TestInteropRadvd(t *testing.T) {
	t.Parallel()
	netnstest.Privileged(t, "ip", "sysctl", "radvd")
	n := newTwoNS(t, "rar", "accept_dad=0", "forwarding=1")
	n.peer.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	ispLL := LinkLocal(mustMAC(n.peerMAC))
	l, err := NewLearner(LearnerConfig{Link: n.link, Solicit: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.link.run(ctx, l.Deliver)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	rd := startRadvd(t, n.peer, radvdISP)
	var st State
	var learnt time.Time
	waitFor(t, 8*time.Second, func() string {
		st, learnt = l.State(), time.Now()
		if len(st.Routers) != 1 || len(st.Prefixes) != 2 || len(st.RDNSS) != 1 || len(st.DNSSL) != 1 {
			return fmt.Sprintf("learnt %v from radvd (stats: received %d, drops %v); radvd said:\n%s",
				st, l.Stats().Received.Load(), dropMap(l.Stats().Drops[:]), rd.output())
		}
		return ""
	})
	r := st.Routers[0]
	if r.Addr != ispLL || r.MAC.String() != n.peerMAC || r.Preference != PreferenceHigh || !within(r.Expires, learnt, 55*time.Second, 61*time.Second) {
		t.Errorf("router %+v, want %v at %v, high, expiring in 60 s", r, ispLL, n.peerMAC)
	}
	aa, bb := st.Prefixes[0], st.Prefixes[1]
	if aa.Prefix != netip.MustParsePrefix("2001:db8:aa::/64") || !aa.OnLink || !aa.Autonomous ||
		!within(aa.ValidUntil, learnt, 115*time.Second, 121*time.Second) || !within(aa.PreferredUntil, learnt, 55*time.Second, 61*time.Second) {
		t.Errorf("prefix %+v, want 2001:db8:aa::/64 L A valid 120 s preferred 60 s", aa)
	}
	if bb.Prefix != netip.MustParsePrefix("2001:db8:bb::/64") || !bb.OnLink || bb.Autonomous ||
		!within(bb.ValidUntil, learnt, 295*time.Second, 301*time.Second) || !within(bb.PreferredUntil, learnt, 195*time.Second, 201*time.Second) {
		t.Errorf("prefix %+v, want 2001:db8:bb::/64 L valid 300 s preferred 200 s", bb)
	}
	if st.RDNSS[0].Addr != netip.MustParseAddr("2001:db8:aa::53") || st.DNSSL[0].Domain != "isp.example" ||
		st.MTU != 1492 || st.HopLimit != 61 || !st.Managed || st.Other {
		t.Errorf("RDNSS %v DNSSL %v MTU %d hop limit %d M %v O %v; want radvd's", st.RDNSS, st.DNSSL, st.MTU, st.HopLimit, st.Managed, st.Other)
	}
	if l.Stats().RSSent.Load() == 0 {
		t.Error("no RS sent")
	}

	rd.stop(syscall.SIGTERM)
	stopped := time.Now()
	waitFor(t, 3*time.Second, func() string {
		if st := l.State(); len(st.Routers) != 0 {
			return fmt.Sprintf("routers %v after radvd stopped, want none (its final RA has router lifetime 0):\n%s", st.Routers, rd.output())
		}
		return ""
	})
	t.Logf("router withdrawn %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))

	// Short lifetimes, no final RA.
	rd = startRadvd(t, n.peer, radvdShort)
	cc := netip.MustParsePrefix("2001:db8:cc::/64")
	waitFor(t, 8*time.Second, func() string {
		st := l.State()
		if len(st.Routers) != 1 || !hasPrefix(st, cc) {
			return fmt.Sprintf("learnt %v from the short-lived radvd:\n%s", st, rd.output())
		}
		return ""
	})
	expired := l.Stats().Expired.Load()
	rd.stop(syscall.SIGKILL)
	killed := time.Now()
	waitFor(t, 8*time.Second, func() string {
		if st := l.State(); len(st.Routers) != 0 || hasPrefix(st, cc) {
			return fmt.Sprintf("state %v %v after radvd was killed: want the router gone in 4 s, %v in 6 s", st, time.Since(killed), cc)
		}
		return ""
	})
	if got := l.Stats().Expired.Load() - expired; got < 2 {
		t.Errorf("expired moved by %d, want the router and the prefix", got)
	}
	t.Logf("router and prefix expired %v after SIGKILL; changes %d, received %d, drops %v",
		time.Since(killed).Round(time.Millisecond), l.Stats().Changes.Load(), l.Stats().Received.Load(), dropMap(l.Stats().Drops[:]))
}

func hasPrefix(st State, p netip.Prefix) bool {
	for _, x := range st.Prefixes {
		if x.Prefix == p {
			return true
		}
	}
	return false
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}
