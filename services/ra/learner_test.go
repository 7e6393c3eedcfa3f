package ra

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

var isp = netip.MustParseAddr("fe80::1")

// raFrame builds an RA from src (hop limit hl) with router lifetime rl
// and opts, checksum right.
func raFrame(t testing.TB, src netip.Addr, hl uint8, rl time.Duration, opts ...ndp.Option) []byte {
	t.Helper()
	m := &ndp.RouterAdvertisement{RouterLifetime: rl, Options: opts}
	icmp, err := ndp.MarshalMessageChecksum(m, src, allNodes)
	if err != nil {
		t.Fatal(err)
	}
	f := buildFrame(allNodesMAC, net.HardwareAddr{2, 0, 0, 0, 0, 0x99}, src, allNodes, icmp)
	f[14+7] = hl
	return f
}

// TestRFC4861_6_1_2_RAValidation: RAs failing §6.1.2 are counted and
// change nothing; every RA is left to netstack (Deliver false).
func TestRFC4861_6_1_2_RAValidation(t *testing.T) {
	l := NewLearner(LearnerConfig{})
	onlink := &ndp.PrefixInformation{PrefixLength: 64, OnLink: true, ValidLifetime: time.Hour, Prefix: netip.MustParseAddr("2001:db8:1::")}
	zeroOpt := raFrame(t, isp, 255, time.Minute)
	zeroOpt = append(zeroOpt, 1, 0, 0, 0, 0, 0, 0, 0)
	zeroOpt[14+5] += 8 // payload length
	for name, f := range map[string][]byte{
		"global source": raFrame(t, netip.MustParseAddr("2001:db8::1"), 255, time.Minute, onlink),
		"hop limit 64":  raFrame(t, isp, 64, time.Minute, onlink),
		"option zero":   zeroOpt,
	} {
		if l.Deliver(f) {
			t.Errorf("%s: consumed", name)
		}
	}
	st := l.Stats()
	if st.DropsSource.Load() != 1 || st.DropsHop.Load() != 1 || st.DropsSum.Load()+st.DropsOption.Load() != 1 || st.RAs.Load() != 0 {
		t.Errorf("drops source %d hop %d option %d sum %d, ras %d", st.DropsSource.Load(), st.DropsHop.Load(),
			st.DropsOption.Load(), st.DropsSum.Load(), st.RAs.Load())
	}
	if s := l.State(); len(s.Routers) != 0 || len(s.OnLink) != 0 {
		t.Errorf("state after bad RAs = %+v", s)
	}
	l.Deliver(raFrame(t, isp, 255, time.Minute, onlink, ndp.NewMTU(1000)))
	s := l.State()
	if len(s.Routers) != 1 || s.Routers[0].Addr != isp || len(s.OnLink) != 1 || s.MTU != 0 || st.MTUIgnored.Load() != 1 {
		t.Errorf("state after a good RA = %+v (mtu ignored %d)", s, st.MTUIgnored.Load())
	}
}

// TestRFC4861_6_3_4_Lifetimes: a router and a prefix leave at the end of
// their lifetimes (OnChange reports it); router lifetime 0 removes the
// router at once; more than maxRouters routers are counted, not kept.
func TestRFC4861_6_3_4_Lifetimes(t *testing.T) {
	var mu sync.Mutex
	var states []State
	l := NewLearner(LearnerConfig{OnChange: func(s State) { mu.Lock(); states = append(states, s); mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	pfx := &ndp.PrefixInformation{PrefixLength: 64, OnLink: true, ValidLifetime: 2 * time.Second, Prefix: netip.MustParseAddr("2001:db8:2::")}
	l.Deliver(raFrame(t, isp, 255, time.Second, pfx))
	last := func() State {
		mu.Lock()
		defer mu.Unlock()
		if len(states) == 0 {
			return State{}
		}
		return states[len(states)-1]
	}
	waitFor(t, time.Second, func() string {
		if s := last(); len(s.Routers) != 1 || len(s.OnLink) != 1 {
			return "router and prefix not reported"
		}
		return ""
	})
	waitFor(t, 3*time.Second, func() string {
		if s := last(); len(s.Routers) != 0 || len(s.OnLink) != 0 {
			return "router and prefix did not expire"
		}
		return ""
	})
	if l.Stats().Expired.Load() != 2 {
		t.Errorf("expired = %d, want 2", l.Stats().Expired.Load())
	}
	l.Deliver(raFrame(t, isp, 255, time.Hour))
	l.Deliver(raFrame(t, isp, 255, 0))
	if s := l.State(); len(s.Routers) != 0 {
		t.Errorf("router lifetime 0 left %+v", s.Routers)
	}
	for i := range maxRouters + 3 {
		l.Deliver(raFrame(t, netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(i + 1)}), 255, time.Hour))
	}
	if s := l.State(); len(s.Routers) != maxRouters || l.Stats().TooMany.Load() != 3 {
		t.Errorf("%d routers kept, too_many %d; want %d and 3", len(s.Routers), l.Stats().TooMany.Load(), maxRouters)
	}
}

// TestInteropRadvd: radvd, as the ISP's router, is learned — its
// link-local address as default router, its on-link prefix, its RDNSS —
// and its final RA on stop (router lifetime 0) removes the router.
func TestInteropRadvd(t *testing.T) {
	netnstest.Privileged(t, "ip", "radvd")
	lab := newSLAACLab(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "radvd.conf")
	os.WriteFile(conf, []byte(`interface h0 {
  AdvSendAdvert on;
  MinRtrAdvInterval 3;
  MaxRtrAdvInterval 4;
  AdvDefaultLifetime 60;
  prefix 2001:db8:99::/64 { AdvOnLink on; AdvAutonomous on; };
  RDNSS 2001:db8:99::53 { };
};
`), 0o600)
	lab.host.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	var mu sync.Mutex
	var last State
	l := NewLearner(LearnerConfig{OnChange: func(s State) { mu.Lock(); last = s; mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go lab.link.run(ctx, l.Deliver)
	go l.Run(ctx)
	cmd := exec.Command("ip", "netns", "exec", lab.host.Name(), "radvd", "--nodaemon", "--config="+conf,
		"--pidfile="+filepath.Join(dir, "pid"), "--logmethod=stderr")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	hostLL := linkLocal(net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x02})
	get := func() State { mu.Lock(); defer mu.Unlock(); return last }
	waitFor(t, 10*time.Second, func() string {
		s := get()
		if len(s.Routers) != 1 || s.Routers[0].Addr != hostLL || len(s.OnLink) != 1 ||
			s.OnLink[0] != netip.MustParsePrefix("2001:db8:99::/64") || len(s.RDNSS) != 1 {
			return "radvd not learned: " + stateString(s)
		}
		return ""
	})
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	waitFor(t, 5*time.Second, func() string {
		if s := get(); len(s.Routers) != 0 {
			return "radvd's final RA did not remove the router: " + stateString(s)
		}
		return ""
	})
	t.Logf("ras %d, drops source %d hop %d sum %d", l.Stats().RAs.Load(), l.Stats().DropsSource.Load(),
		l.Stats().DropsHop.Load(), l.Stats().DropsSum.Load())
}

func stateString(s State) string {
	out := ""
	for _, r := range s.Routers {
		out += "router " + r.Addr.String() + " "
	}
	for _, p := range s.OnLink {
		out += "prefix " + p.String() + " "
	}
	for _, a := range s.RDNSS {
		out += "rdnss " + a.String() + " "
	}
	return out
}

// FuzzLearner: any frame, no panic, never consumed, bounded state.
func FuzzLearner(f *testing.F) {
	f.Add(raFrame(f, isp, 255, time.Minute, &ndp.PrefixInformation{PrefixLength: 64, OnLink: true, ValidLifetime: time.Hour, Prefix: netip.MustParseAddr("2001:db8:1::")}))
	f.Add(raFrame(f, isp, 255, 0, ndp.NewMTU(1500), &ndp.RecursiveDNSServer{Lifetime: time.Minute, Servers: []netip.Addr{netip.MustParseAddr("2001:db8::53")}}))
	l := NewLearner(LearnerConfig{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		if l.Deliver(frame) {
			t.Fatal("the learner consumed a frame")
		}
		s := l.State()
		if len(s.Routers) > maxRouters || len(s.OnLink) > maxPrefixes || len(s.RDNSS) > maxRDNSS {
			t.Fatalf("state over its bounds: %d routers %d prefixes %d servers", len(s.Routers), len(s.OnLink), len(s.RDNSS))
		}
	})
}
