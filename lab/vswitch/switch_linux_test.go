package vswitch

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// newNetns makes a namespace vsw-PID-N without IPv6 (no DAD, router or
// listener messages to disturb the counters), deleted when t ends.
func newNetns(t testing.TB) *netnstest.Netns {
	t.Helper()
	return netnstest.New(t, "vsw", netnstest.WithoutIPv6())
}

// privileged needs what the lab needs: root, ip, and nft or tc for
// hw.Open's ingress drop.
func privileged(t testing.TB) {
	t.Helper()
	netnstest.Privileged(t, "ip", "nft|tc")
}

// link connects switch port sw:port to host:eth0 with a veth pair.
func link(t testing.TB, sw *netnstest.Netns, port string, host *netnstest.Netns) {
	t.Helper()
	sw.IP(t, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host.Name())
	sw.IP(t, "link", "set", port, "up")
	host.IP(t, "link", "set", "eth0", "up")
}

// lab is the BCM47094 lab switch in namespaces: host namespaces lan, wan,
// cpu (the router's side of the CPU port) and wan2 (a second WAN-side
// host that shows what is flooded), each with eth0 linked to the switch
// port of the same name in sw.
type lab struct {
	sw                  *netnstest.Netns
	ns                  map[string]*netnstest.Netns // host namespaces by port name
	s                   *Switch
	lan, wan, cpu, wan2 *netnstest.RawSocket
}

func newLab(t testing.TB) *lab {
	t.Helper()
	privileged(t)
	sw := newNetns(t)
	l := &lab{sw: sw, ns: map[string]*netnstest.Netns{}}
	hosts := map[string]*netnstest.RawSocket{}
	for _, name := range []string{"lan", "wan", "cpu", "wan2"} {
		h := newNetns(t)
		link(t, sw, name, h)
		hosts[name] = h.RawSocket(t, "eth0")
		l.ns[name] = h
	}
	l.lan, l.wan, l.cpu, l.wan2 = hosts["lan"], hosts["wan"], hosts["cpu"], hosts["wan2"]
	var err error
	sw.Do(t, func() { l.s, err = New(labConfig, nil) })
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "New: %v", err)
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := l.s.Run(ctx); err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := l.s.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return l
}

// quiet fails t if marker shows up on any of socks within d.
func quiet(t testing.TB, marker string, d time.Duration, socks ...*netnstest.RawSocket) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Go(func() {
			if f, ok := s.WaitFor(marker, d); ok {
				t.Errorf("%q reached %s (VLAN %v %#x): % x", marker, s.Netns, f.VLANValid, f.TCI, f.Data)
			}
		})
	}
	wg.Wait()
}

// waitStats polls the switch's stats until ok holds.
func (l *lab) waitStats(t testing.TB, what string, ok func(Stats) bool) Stats {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); ; {
		st := l.s.Stats()
		if ok(st) {
			return st
		}
		if time.Now().After(end) {
			t.Fatalf("%s: stats %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func vlanOf(st Stats, vid uint16) VLANStats {
	for _, v := range st.VLANs {
		if v.VID == vid {
			return v
		}
	}
	return VLANStats{}
}

func TestLab(t *testing.T) {
	l := newLab(t)
	const settle = 300 * time.Millisecond
	macW := []byte{0x02, 0x57, 0, 0, 0, 0x02} // the WAN host

	t.Run("LAN broadcast reaches CPU tagged VID 1, never WAN", func(t *testing.T) {
		f := netnstest.Frame(macBcast, []byte{0x02, 0x4c, 0, 0, 0, 0x01}, "lan-bcast")
		l.lan.Send(t, f)
		got, ok := l.cpu.WaitFor("lan-bcast", 2*time.Second)
		if !ok {
			t.Fatal("LAN broadcast did not reach cpu")
		}
		if !got.VLANValid || got.TCI != 1 || got.TPID != 0x8100 || !bytes.Equal(got.Data, f) {
			t.Errorf("cpu got VLAN %v TCI %#x TPID %#x data % x; want 0x8100 TCI 1 (PCP 0) and % x", got.VLANValid, got.TCI, got.TPID, got.Data, f)
		}
		quiet(t, "lan-bcast", settle, l.wan, l.wan2, l.lan)
	})

	t.Run("CPU frame tagged VID 2 arrives untagged at WAN, not LAN", func(t *testing.T) {
		f := netnstest.Frame(macBcast, []byte{0x02, 0x43, 0, 0, 0, 0x03}, "cpu-vid2")
		l.cpu.Send(t, netnstest.Tag(f, 0x8100, 0xa002)) // PCP 5, VID 2
		got, ok := l.wan.WaitFor("cpu-vid2", 2*time.Second)
		if !ok {
			t.Fatal("frame tagged VID 2 from cpu did not reach wan")
		}
		if got.VLANValid || !bytes.Equal(got.Data, f) {
			t.Errorf("wan got VLAN %v TCI %#x data % x; want untagged % x", got.VLANValid, got.TCI, got.Data, f)
		}
		quiet(t, "cpu-vid2", settle, l.lan, l.cpu)
	})

	t.Run("priority-tagged frame from WAN keeps its PCP on the CPU port", func(t *testing.T) {
		l.wan.Send(t, netnstest.Tag(netnstest.Frame(macBcast, macW, "wan-prio"), 0x8100, 0xc000)) // PCP 6, VID 0
		got, ok := l.cpu.WaitFor("wan-prio", 2*time.Second)
		if !ok {
			t.Fatal("priority-tagged frame from wan did not reach cpu")
		}
		if !got.VLANValid || got.TCI != 0xc002 {
			t.Errorf("cpu got VLAN %v TCI %#x; want TCI 0xc002 (PCP 6, VID 2)", got.VLANValid, got.TCI)
		}
	})

	t.Run("full-size frame gains its tag towards the CPU", func(t *testing.T) {
		f := append(netnstest.Frame(macBcast, []byte{0x02, 0x4c, 0, 0, 0, 0x01}, "lan-full-size"), make([]byte, 1514-60)...)
		l.lan.Send(t, f)
		got, ok := l.cpu.WaitFor("lan-full-size", 2*time.Second)
		if !ok {
			t.Fatal("1514-byte frame from lan did not reach cpu as a 1518-byte tagged frame")
		}
		if !got.VLANValid || got.TCI != 1 || !bytes.Equal(got.Data, f) {
			t.Errorf("cpu got VLAN %v TCI %#x, %d bytes; want TCI 1 and the %d-byte frame", got.VLANValid, got.TCI, len(got.Data), len(f))
		}
	})

	t.Run("unknown unicast floods the VLAN", func(t *testing.T) {
		f := netnstest.Frame([]byte{0x02, 0x99, 0, 0, 0, 0x99}, []byte{0x02, 0x43, 0, 0, 0, 0x03}, "unknown-uc")
		l.cpu.Send(t, netnstest.Tag(f, 0x8100, 2))
		for _, s := range []*netnstest.RawSocket{l.wan, l.wan2} {
			if _, ok := s.WaitFor("unknown-uc", 2*time.Second); !ok {
				t.Errorf("unknown unicast did not reach %s", s.Netns)
			}
		}
		quiet(t, "unknown-uc", settle, l.lan)
	})

	t.Run("learned unicast goes to WAN only", func(t *testing.T) {
		// WAN host's address was learned from "wan-prio"; send one more
		// so the subtest stands on its own.
		l.wan.Send(t, netnstest.Frame(macBcast, macW, "wan-hello"))
		if _, ok := l.cpu.WaitFor("wan-hello", 2*time.Second); !ok {
			t.Fatal("frame from the WAN host did not reach cpu")
		}
		before := l.s.Stats()
		f := netnstest.Frame(macW, []byte{0x02, 0x43, 0, 0, 0, 0x03}, "to-wan-host")
		l.cpu.Send(t, netnstest.Tag(f, 0x8100, 2))
		got, ok := l.wan.WaitFor("to-wan-host", 2*time.Second)
		if !ok {
			t.Fatal("unicast to the WAN host did not reach wan")
		}
		if got.VLANValid || !bytes.Equal(got.Data, f) {
			t.Errorf("wan got VLAN %v data % x; want untagged % x", got.VLANValid, got.Data, f)
		}
		quiet(t, "to-wan-host", settle, l.wan2, l.lan)
		after := l.s.Stats()
		b2, a2 := vlanOf(before, 2), vlanOf(after, 2)
		if a2.Forwarded != b2.Forwarded+1 || a2.Flooded != b2.Flooded {
			t.Errorf("VLAN 2 forwarded, flooded went %d, %d -> %d, %d; want +1, +0", b2.Forwarded, b2.Flooded, a2.Forwarded, a2.Flooded)
		}
	})

	t.Run("non-member VIDs are counted drops", func(t *testing.T) {
		before := l.s.Stats()
		f := netnstest.Frame(macBcast, []byte{0x02, 0x4c, 0, 0, 0, 0x01}, "bad-vid")
		l.lan.Send(t, netnstest.Tag(f, 0x8100, 2)) // lan is not in VLAN 2
		l.cpu.Send(t, netnstest.Tag(f, 0x8100, 3)) // nobody is in VLAN 3
		l.cpu.Send(t, f)                           // cpu has no PVID
		after := l.waitStats(t, "drops not counted", func(st Stats) bool {
			return st.Ports[portLAN].Drops[DropVLANNotMember] == before.Ports[portLAN].Drops[DropVLANNotMember]+1 &&
				st.Ports[portCPU].Drops[DropVLANNotMember] == before.Ports[portCPU].Drops[DropVLANNotMember]+1 &&
				st.Ports[portCPU].Drops[DropUntaggedNoPVID] == before.Ports[portCPU].Drops[DropUntaggedNoPVID]+1
		})
		if b, a := vlanOf(before, 2).Drops[DropVLANNotMember], vlanOf(after, 2).Drops[DropVLANNotMember]; a != b+1 {
			t.Errorf("VLAN 2 vlan_not_member went %d -> %d, want +1", b, a)
		}
		quiet(t, "bad-vid", settle, l.lan, l.wan, l.cpu, l.wan2)
	})

	st := l.s.Stats()
	if st.Ports[portLAN].Name != "lan" || st.Ports[portCPU].TxFrames == 0 || st.Ports[portCPU].HW.TxPackets != st.Ports[portCPU].TxFrames {
		t.Errorf("Stats().Ports = %+v; want lan first and cpu TxFrames = HW.TxPackets > 0", st.Ports)
	}
	if st.FDBEntries == 0 {
		t.Error("Stats().FDBEntries = 0, want learned addresses")
	}
}

func TestLifecycle(t *testing.T) {
	privileged(t)
	goroutines := runtime.NumGoroutine()
	sw := newNetns(t)
	link(t, sw, "sa", newNetns(t))
	link(t, sw, "sb", newNetns(t))
	open := func(cfg Config) (*Switch, error) {
		var s *Switch
		var err error
		sw.Do(t, func() { s, err = New(cfg, nil) })
		return s, err
	}
	if _, err := open(Config{Ports: []PortConfig{{Name: "sa", PVID: 1}, {Name: "nope0", PVID: 1}}}); !errors.Is(err, hw.ErrNotFound) || !strings.Contains(err.Error(), "nope0") {
		t.Errorf("New(nope0) = %v, want hw.ErrNotFound naming nope0", err)
	}
	if _, err := open(Config{Ports: []PortConfig{{Name: "sa"}}}); err == nil || !strings.Contains(err.Error(), "member of no VLAN") {
		t.Errorf("New(port in no VLAN) = %v, want a config error", err)
	}
	// The failed New closed "sa" again: it opens now.
	s, err := open(Config{Ports: []PortConfig{{Name: "sa", PVID: 1}, {Name: "sb", PVID: 1}}})
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "New: %v", err)
		t.Fatalf("New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	time.Sleep(100 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, hw.ErrClosed) {
			t.Errorf("Run() after Close = %v, want hw.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if err := s.Close(); !errors.Is(err, hw.ErrClosed) {
		t.Errorf("second Close() = %v, want hw.ErrClosed", err)
	}
	if err := s.Run(context.Background()); !errors.Is(err, hw.ErrClosed) {
		t.Errorf("Run() on a closed switch = %v, want hw.ErrClosed", err)
	}
	// Every goroutine of the switch and its ports is gone.
	for end := time.Now().Add(3 * time.Second); runtime.NumGoroutine() > goroutines; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before New:\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
		}
	}
}

// hostPort opens the host side (eth0) of a lab port as an hw.Port, kernel
// settings untouched, closed when the test ends.
func (l *lab) hostPort(t testing.TB, name string) *hw.Port {
	t.Helper()
	var p *hw.Port
	var err error
	l.ns[name].Do(t, func() { p, err = hw.Open(hw.Config{Name: "eth0", KeepKernel: true}, nil) })
	if err != nil {
		t.Fatalf("hw.Open(eth0 in %s): %v", name, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkLabThroughput sends minimum-size untagged frames from the LAN
// host with sendmmsg batches and counts those that reach the CPU host
// tagged VID 1: the switch's throughput on veths, one frame per b.N.
// The figure depends on what else runs on the machine's cores.
func BenchmarkLabThroughput(b *testing.B) {
	l := newLab(b)
	tx := l.hostPort(b, "lan")
	rx := l.hostPort(b, "cpu")
	var got atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		rx.Run(ctx, func(_ int, frames []hw.Frame) {
			n := 0
			for i := range frames {
				if frames[i].VLANValid && frames[i].VLANTCI&vidMask == 1 {
					n++
				}
			}
			got.Add(uint64(n))
		})
	})
	defer func() { cancel(); wg.Wait() }()
	batch := make([][]byte, hw.TxBatchSize)
	for i := range batch {
		// Unicast to the CPU host, learned below: forwarded, not flooded.
		batch[i] = netnstest.Frame(macCPU, macLAN, "bench")
	}
	// Teach the switch where macCPU is.
	l.cpu.Send(b, netnstest.Tag(netnstest.Frame(macBcast, macCPU, "learn-cpu"), 0x8100, 1))
	if _, ok := l.lan.WaitFor("learn-cpu", 2*time.Second); !ok {
		b.Fatal("learning frame from cpu did not reach lan")
	}
	got.Store(0)
	before := l.s.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	start := time.Now()
	for sent < b.N {
		n := min(len(batch), b.N-sent)
		k, err := tx.WriteFrames(batch[:n])
		if err != nil {
			b.Fatalf("WriteFrames: %v", err)
		}
		sent += k
		if k < n {
			time.Sleep(50 * time.Microsecond) // the veth queue is full
		}
	}
	// Wait until the last frames are through.
	for last := uint64(0); ; last = got.Load() {
		time.Sleep(20 * time.Millisecond)
		if got.Load() == last {
			break
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	after := l.s.Stats()
	b.ReportMetric(float64(got.Load())/elapsed.Seconds(), "frames/s")
	b.ReportMetric(100*(1-float64(got.Load())/float64(sent)), "loss%")
	if d := after.Ports[portLAN].Forwarded - before.Ports[portLAN].Forwarded; d == 0 && sent > 0 {
		b.Errorf("lan Forwarded did not move; frames were flooded or lost")
	}
}
