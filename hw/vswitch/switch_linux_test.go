package vswitch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/hw"
)

// privileged skips t outside CI when it cannot build namespaces; under
// CI=true it fails instead, so a green CI means the lab tests ran.
func privileged(t testing.TB) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("needs ip: %v", err)
	}
	_, errNft := exec.LookPath("nft")
	_, errTC := exec.LookPath("tc")
	if errNft != nil && errTC != nil {
		skip("needs nft or tc for hw.Open's ingress drop")
	}
}

var nsCounter atomic.Int32

// testNetns is a network namespace made by one test (named
// vsw-PID-N) and deleted by its cleanup.
type testNetns struct {
	name string
	fd   int
}

func newNetns(t testing.TB) *testNetns {
	t.Helper()
	name := fmt.Sprintf("vsw-%d-%d", os.Getpid(), nsCounter.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "true" && bytes.Contains(out, []byte("Operation not permitted")) {
			t.Skipf("ip netns add: %v: %s", err, out)
		}
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	n := &testNetns{name: name, fd: -1}
	t.Cleanup(func() {
		if n.fd >= 0 {
			unix.Close(n.fd)
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	n.fd = fd
	// No IPv6 on the interfaces made from now on: no DAD, router or
	// listener messages to disturb the counters.
	n.do(t, func() {
		for _, f := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("1"), 0); err != nil {
				t.Errorf("disable IPv6 in %s: %v", name, err)
			}
		}
	})
	n.ip(t, "link", "set", "lo", "up")
	return n
}

// ip runs `ip -n NS args...`.
func (n *testNetns) ip(t testing.TB, args ...string) {
	t.Helper()
	args = append([]string{"-n", n.name}, args...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// do runs f on a thread inside the namespace.
func (n *testNetns) do(t testing.TB, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("open own netns: %v", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			t.Errorf("setns %s: %v", n.name, err)
			return
		}
		f()
		// Unlock only when back home; otherwise the thread dies with
		// the goroutine.
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// link connects switch port sw:port to host:eth0 with a veth pair.
func link(t testing.TB, sw *testNetns, port string, host *testNetns) {
	t.Helper()
	sw.ip(t, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host.name)
	sw.ip(t, "link", "set", port, "up")
	host.ip(t, "link", "set", "eth0", "up")
}

// rawSocket is a plain AF_PACKET socket on a host's eth0 that reports the
// tag the kernel stripped through PACKET_AUXDATA.
type rawSocket struct {
	fd      int
	ifindex int
	name    string
}

// rxFrame is a frame a rawSocket received.
type rxFrame struct {
	data      []byte
	vlanValid bool
	tci, tpid uint16
}

func (n *testNetns) rawSocket(t testing.TB) *rawSocket {
	t.Helper()
	s := &rawSocket{fd: -1, name: n.name}
	var err error
	n.do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName("eth0"); err != nil {
			return
		}
		s.ifindex = ifi.Index
		proto := int(htons(unix.ETH_P_ALL))
		if s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto); err != nil {
			return
		}
		if err = unix.SetsockoptInt(s.fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return
		}
		err = unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if s.fd >= 0 {
		t.Cleanup(func() { unix.Close(s.fd) })
	}
	if err != nil {
		if os.Getenv("CI") != "true" && errors.Is(err, unix.EPERM) {
			t.Skipf("raw socket in %s: %v", n.name, err)
		}
		t.Fatalf("raw socket in %s: %v", n.name, err)
	}
	tv := unix.NsecToTimeval(int64(50 * time.Millisecond))
	unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	return s
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (s *rawSocket) send(t testing.TB, frame []byte) {
	t.Helper()
	if err := unix.Sendto(s.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: s.ifindex}); err != nil {
		t.Fatalf("send on %s: %v", s.name, err)
	}
}

// waitFor reads frames until one contains marker or d passes.
func (s *rawSocket) waitFor(marker string, d time.Duration) (rxFrame, bool) {
	buf := make([]byte, 65536)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.TpacketAuxdata{}))))
	for end := time.Now().Add(d); time.Now().Before(end); {
		n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if !bytes.Contains(buf[:n], []byte(marker)) {
			continue
		}
		f := rxFrame{data: bytes.Clone(buf[:n])}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				continue
			}
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
			f.vlanValid = aux.Status&unix.TP_STATUS_VLAN_VALID != 0
			f.tci, f.tpid = aux.Vlan_tci, aux.Vlan_tpid
		}
		return f, true
	}
	return rxFrame{}, false
}

// lab is the BCM47094 lab switch in namespaces: host namespaces lan, wan,
// cpu (the router's side of the CPU port) and wan2 (a second WAN-side
// host that shows what is flooded), each with eth0 linked to the switch
// port of the same name in sw.
type lab struct {
	sw                  *testNetns
	ns                  map[string]*testNetns // host namespaces by port name
	s                   *Switch
	lan, wan, cpu, wan2 *rawSocket
}

func newLab(t testing.TB) *lab {
	t.Helper()
	privileged(t)
	sw := newNetns(t)
	l := &lab{sw: sw, ns: map[string]*testNetns{}}
	hosts := map[string]*rawSocket{}
	for _, name := range []string{"lan", "wan", "cpu", "wan2"} {
		h := newNetns(t)
		link(t, sw, name, h)
		hosts[name] = h.rawSocket(t)
		l.ns[name] = h
	}
	l.lan, l.wan, l.cpu, l.wan2 = hosts["lan"], hosts["wan"], hosts["cpu"], hosts["wan2"]
	var err error
	sw.do(t, func() { l.s, err = New(labConfig, nil) })
	if err != nil {
		if os.Getenv("CI") != "true" && errors.Is(err, unix.EPERM) {
			t.Skipf("New: %v", err)
		}
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
func quiet(t testing.TB, marker string, d time.Duration, socks ...*rawSocket) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range socks {
		wg.Go(func() {
			if f, ok := s.waitFor(marker, d); ok {
				t.Errorf("%q reached %s (VLAN %v %#x): % x", marker, s.name, f.vlanValid, f.tci, f.data)
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
		f := ethFrame(macBcast, []byte{0x02, 0x4c, 0, 0, 0, 0x01}, "lan-bcast")
		l.lan.send(t, f)
		got, ok := l.cpu.waitFor("lan-bcast", 2*time.Second)
		if !ok {
			t.Fatal("LAN broadcast did not reach cpu")
		}
		if !got.vlanValid || got.tci != 1 || got.tpid != 0x8100 || !bytes.Equal(got.data, f) {
			t.Errorf("cpu got VLAN %v TCI %#x TPID %#x data % x; want 0x8100 TCI 1 (PCP 0) and % x", got.vlanValid, got.tci, got.tpid, got.data, f)
		}
		quiet(t, "lan-bcast", settle, l.wan, l.wan2, l.lan)
	})

	t.Run("CPU frame tagged VID 2 arrives untagged at WAN, not LAN", func(t *testing.T) {
		f := ethFrame(macBcast, []byte{0x02, 0x43, 0, 0, 0, 0x03}, "cpu-vid2")
		l.cpu.send(t, withTag(f, 0x8100, 0xa002)) // PCP 5, VID 2
		got, ok := l.wan.waitFor("cpu-vid2", 2*time.Second)
		if !ok {
			t.Fatal("frame tagged VID 2 from cpu did not reach wan")
		}
		if got.vlanValid || !bytes.Equal(got.data, f) {
			t.Errorf("wan got VLAN %v TCI %#x data % x; want untagged % x", got.vlanValid, got.tci, got.data, f)
		}
		quiet(t, "cpu-vid2", settle, l.lan, l.cpu)
	})

	t.Run("priority-tagged frame from WAN keeps its PCP on the CPU port", func(t *testing.T) {
		l.wan.send(t, withTag(ethFrame(macBcast, macW, "wan-prio"), 0x8100, 0xc000)) // PCP 6, VID 0
		got, ok := l.cpu.waitFor("wan-prio", 2*time.Second)
		if !ok {
			t.Fatal("priority-tagged frame from wan did not reach cpu")
		}
		if !got.vlanValid || got.tci != 0xc002 {
			t.Errorf("cpu got VLAN %v TCI %#x; want TCI 0xc002 (PCP 6, VID 2)", got.vlanValid, got.tci)
		}
	})

	t.Run("full-size frame gains its tag towards the CPU", func(t *testing.T) {
		f := append(ethFrame(macBcast, []byte{0x02, 0x4c, 0, 0, 0, 0x01}, "lan-full-size"), make([]byte, 1514-60)...)
		l.lan.send(t, f)
		got, ok := l.cpu.waitFor("lan-full-size", 2*time.Second)
		if !ok {
			t.Fatal("1514-byte frame from lan did not reach cpu as a 1518-byte tagged frame")
		}
		if !got.vlanValid || got.tci != 1 || !bytes.Equal(got.data, f) {
			t.Errorf("cpu got VLAN %v TCI %#x, %d bytes; want TCI 1 and the %d-byte frame", got.vlanValid, got.tci, len(got.data), len(f))
		}
	})

	t.Run("unknown unicast floods the VLAN", func(t *testing.T) {
		f := ethFrame([]byte{0x02, 0x99, 0, 0, 0, 0x99}, []byte{0x02, 0x43, 0, 0, 0, 0x03}, "unknown-uc")
		l.cpu.send(t, withTag(f, 0x8100, 2))
		for _, s := range []*rawSocket{l.wan, l.wan2} {
			if _, ok := s.waitFor("unknown-uc", 2*time.Second); !ok {
				t.Errorf("unknown unicast did not reach %s", s.name)
			}
		}
		quiet(t, "unknown-uc", settle, l.lan)
	})

	t.Run("learned unicast goes to WAN only", func(t *testing.T) {
		// WAN host's address was learned from "wan-prio"; send one more
		// so the subtest stands on its own.
		l.wan.send(t, ethFrame(macBcast, macW, "wan-hello"))
		if _, ok := l.cpu.waitFor("wan-hello", 2*time.Second); !ok {
			t.Fatal("frame from the WAN host did not reach cpu")
		}
		before := l.s.Stats()
		f := ethFrame(macW, []byte{0x02, 0x43, 0, 0, 0, 0x03}, "to-wan-host")
		l.cpu.send(t, withTag(f, 0x8100, 2))
		got, ok := l.wan.waitFor("to-wan-host", 2*time.Second)
		if !ok {
			t.Fatal("unicast to the WAN host did not reach wan")
		}
		if got.vlanValid || !bytes.Equal(got.data, f) {
			t.Errorf("wan got VLAN %v data % x; want untagged % x", got.vlanValid, got.data, f)
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
		f := ethFrame(macBcast, []byte{0x02, 0x4c, 0, 0, 0, 0x01}, "bad-vid")
		l.lan.send(t, withTag(f, 0x8100, 2)) // lan is not in VLAN 2
		l.cpu.send(t, withTag(f, 0x8100, 3)) // nobody is in VLAN 3
		l.cpu.send(t, f)                     // cpu has no PVID
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
		sw.do(t, func() { s, err = New(cfg, nil) })
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
		if os.Getenv("CI") != "true" && errors.Is(err, unix.EPERM) {
			t.Skipf("New: %v", err)
		}
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
	l.ns[name].do(t, func() { p, err = hw.Open(hw.Config{Name: "eth0", KeepKernel: true}, nil) })
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
		batch[i] = ethFrame(macCPU, macLAN, "bench")
	}
	// Teach the switch where macCPU is.
	l.cpu.send(b, withTag(ethFrame(macBcast, macCPU, "learn-cpu"), 0x8100, 1))
	if _, ok := l.lan.waitFor("learn-cpu", 2*time.Second); !ok {
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
