package hw

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// vethPair makes veth a<->b inside n, both up.
func vethPair(t testing.TB, n *netnstest.Netns, a, b string) {
	t.Helper()
	n.IP(t, "link", "add", a, "type", "veth", "peer", "name", b)
	n.IP(t, "link", "set", a, "up")
	n.IP(t, "link", "set", b, "up")
}

// runPort runs p.Run with c until the test ends.
func runPort(t *testing.T, p *Port, c *collector) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx, c.handle); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Run() = %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestPortReceiveTransmit(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	// p0 sends raw frames into the port; the kernel strips tags into metadata.
	n.IP(t, "link", "set", "p0", "mtu", "1500")

	p := openIn(t, n, Config{Name: "p1"})
	if p.Name() != "p1" || p.MTU() != 1500 || len(p.HardwareAddr()) != 6 {
		t.Errorf("Name, MTU, HardwareAddr = %q, %d, %v; want p1, 1500, a MAC", p.Name(), p.MTU(), p.HardwareAddr())
	}
	var c collector
	runPort(t, p, &c)
	peer := n.RawSocket(t, "p0")
	src := []byte{0x02, 0, 0, 0, 0, 0x10}

	t.Run("untagged", func(t *testing.T) {
		want := netnstest.Frame(netnstest.Broadcast, src, "hello-untagged")
		sent := time.Now()
		peer.Send(t, want)
		f, ok := c.find([]byte("hello-untagged"), 2*time.Second)
		if !ok {
			t.Fatal("frame sent on p0 did not reach the port")
		}
		// The ring header's timestamp is the kernel's receive time,
		// on the wall clock: between the send and now.
		if rx := time.Unix(0, f.RxTime); rx.Before(sent.Add(-time.Millisecond)) || rx.After(time.Now()) {
			t.Errorf("RxTime = %v, want between the send at %v and now", rx, sent)
		}
		if string(f.Data) != string(want) || f.WireLen != len(want) || f.VLANValid {
			t.Errorf("got frame % x (WireLen %d, VLANValid %v), want % x untagged", f.Data, f.WireLen, f.VLANValid, want)
		}
	})

	t.Run("vlan", func(t *testing.T) {
		untagged := netnstest.Frame(netnstest.Broadcast, src, "hello-vid-10")
		peer.Send(t, netnstest.Tag(untagged, 0x8100, 0x600a)) // PCP 3, VID 10
		f, ok := c.find([]byte("hello-vid-10"), 2*time.Second)
		if !ok {
			t.Fatal("tagged frame did not reach the port")
		}
		if !f.VLANValid || f.VLANTCI != 0x600a || f.VLANTPID != 0x8100 {
			t.Errorf("VLANValid, VLANTCI, VLANTPID = %v, %#x, %#x; want true, 0x600a, 0x8100", f.VLANValid, f.VLANTCI, f.VLANTPID)
		}
		if string(f.Data) != string(untagged) {
			t.Errorf("data = % x, want the frame without its tag % x", f.Data, untagged)
		}
	})

	t.Run("qinq", func(t *testing.T) {
		inner := netnstest.Tag(netnstest.Frame(netnstest.Broadcast, src, "hello-qinq"), 0x8100, 20)
		peer.Send(t, netnstest.Tag(inner, 0x88a8, 100))
		f, ok := c.find([]byte("hello-qinq"), 2*time.Second)
		if !ok {
			t.Fatal("QinQ frame did not reach the port")
		}
		if !f.VLANValid || f.VLANTCI != 100 || f.VLANTPID != 0x88a8 || string(f.Data) != string(inner) {
			t.Errorf("got VLAN %v %#x/%#x data % x; want outer 100/0x88a8 stripped, inner tag in-band", f.VLANValid, f.VLANTCI, f.VLANTPID, f.Data)
		}
	})

	t.Run("outgoing filtered", func(t *testing.T) {
		// Our own output reaches the peer but not our ring.
		out := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "from-port")
		if n, err := p.WriteFrames([][]byte{out, out}); n != 2 || err != nil {
			t.Fatalf("WriteFrames() = %d, %v; want 2, nil", n, err)
		}
		if _, ok := peer.WaitFor("from-port", 2*time.Second); !ok {
			t.Fatal("frame written on the port did not reach p0")
		}
		// Another socket sending on p1 (as the kernel would) is filtered too.
		other := n.RawSocket(t, "p1")
		other.Send(t, netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "from-other"))
		if _, ok := peer.WaitFor("from-other", 2*time.Second); !ok {
			t.Fatal("frame sent by another socket on p1 did not reach p0")
		}
		peer.Send(t, netnstest.Frame(netnstest.Broadcast, src, "after-outgoing"))
		if _, ok := c.find([]byte("after-outgoing"), 2*time.Second); !ok {
			t.Fatal("frame after the outgoing ones did not arrive")
		}
		for _, m := range []string{"from-port", "from-other"} {
			if _, ok := c.find([]byte(m), 0); ok {
				t.Errorf("receive ring saw outgoing frame %q", m)
			}
		}
	})

	t.Run("oversize", func(t *testing.T) {
		n.IP(t, "link", "set", "p0", "mtu", "3000")
		n.IP(t, "link", "set", "p1", "mtu", "3000")
		before := p.Stats().Drops[DropOversize]
		big := netnstest.Frame(netnstest.Broadcast, src, "too-big")
		big = append(big, make([]byte, 2000)...)
		peer.Send(t, big)
		peer.Send(t, netnstest.Frame(netnstest.Broadcast, src, "after-big"))
		if _, ok := c.find([]byte("after-big"), 2*time.Second); !ok {
			t.Fatal("frame after the oversize one did not arrive")
		}
		if _, ok := c.find([]byte("too-big"), 0); ok {
			t.Error("oversize frame delivered")
		}
		if got := p.Stats().Drops[DropOversize]; got != before+1 {
			t.Errorf("Drops[oversize] = %d, want %d", got, before+1)
		}
	})

	s := p.Stats()
	if s.RxPackets < 5 || s.RxBytes < 5*60 || s.TxPackets != 2 || s.TxBytes != 120 {
		t.Errorf("Stats() = %+v, want >= 5 rx frames, 2 tx frames of 60 bytes", s)
	}
	for _, r := range []string{DropTruncated, DropOversize, DropMalformed, DropRing, DropTxError, DropTxNoBufs} {
		if _, ok := s.Drops[r]; !ok {
			t.Errorf("Stats().Drops has no %q", r)
		}
	}
}

func TestPortKernelSettings(t *testing.T) {
	privileged(t)
	for _, tt := range []struct {
		with      string
		ownClsact bool // the interface has a clsact qdisc before Open
	}{{"nft", false}, {"tc", false}, {"tc", true}} {
		name := tt.with
		if tt.ownClsact {
			name += " existing clsact"
		}
		t.Run(name, func(t *testing.T) {
			defer func(v string) { ingressDropWith = v }(ingressDropWith)
			ingressDropWith = tt.with
			testKernelSettings(t, tt.with, tt.ownClsact)
		})
	}
}

func testKernelSettings(t *testing.T, with string, ownClsact bool) {
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	if ownClsact {
		n.Run(t, "tc", "qdisc", "add", "dev", "p1", "clsact")
	}
	n.IP(t, "addr", "add", "10.99.0.1/24", "dev", "p1")
	n.IP(t, "addr", "add", "fd00:99::1/64", "dev", "p1", "nodad")
	n.Do(t, func() {
		if err := SetOffloads("p1", Offloads{GRO: true, TSO: true, GSO: true, TxCsum: true, RxCsum: true}); err != nil {
			t.Errorf("SetOffloads: %v", err)
		}
	})
	const ipv6 = "/proc/sys/net/ipv6/conf/p1/disable_ipv6"
	offloads := func() Offloads {
		var o Offloads
		var err error
		n.Do(t, func() { o, err = GetOffloads("p1") })
		if err != nil {
			t.Fatalf("GetOffloads(p1): %v", err)
		}
		return o
	}
	before := offloads()
	if !before.GRO {
		t.Fatalf("GetOffloads(p1) = %+v after SetOffloads with GRO on", before)
	}
	addrs := func() string { return n.Run(t, "ip", "-n", n.Name(), "addr", "show", "dev", "p1") }

	p := openIn(t, n, Config{Name: "p1"})
	if o := offloads(); o.GRO || o.LRO {
		t.Errorf("offloads while open = %+v, want GRO and LRO off", o)
	}
	if v := n.Sysctl(t, ipv6); v != "1" {
		t.Errorf("%s while open = %s, want 1", ipv6, v)
	}
	if a := addrs(); strings.Contains(a, "10.99.0.1") || strings.Contains(a, "fd00:99::1") || strings.Contains(a, "inet6") {
		t.Errorf("addresses while open:\n%s\nwant none", a)
	}
	// The ingress drop is installed, and AF_PACKET still sees frames
	// because taps run before the ingress hook.
	switch with {
	case "nft":
		if table := n.Run(t, "nft", "list", "tables", "netdev"); !strings.Contains(table, "gvrouter_hw_") {
			t.Fatalf("nft tables while open:\n%s\nwant gvrouter_hw_*", table)
		}
	case "tc":
		if f := n.Run(t, "tc", "filter", "show", "dev", "p1", "ingress"); !strings.Contains(f, fmt.Sprint("pref ", tcDropPref)) || !strings.Contains(f, "direct-action") {
			t.Fatalf("tc ingress filters while open:\n%s\nwant ours", f)
		}
	}
	var c collector
	runPort(t, p, &c)
	peer := n.RawSocket(t, "p0")
	for range 3 {
		peer.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "under-ingress-drop"))
	}
	if _, ok := c.find([]byte("under-ingress-drop"), 2*time.Second); !ok {
		t.Fatal("frame did not reach the ring with the ingress drop installed")
	}
	switch with {
	case "nft":
		list := n.Run(t, "nft", "list", "table", "netdev", "gvrouter_hw_"+ifindexOf(t, n, "p1"))
		if !strings.Contains(list, "counter packets") || strings.Contains(list, "counter packets 0 ") {
			t.Errorf("ingress drop counted nothing:\n%s", list)
		}
	case "tc":
		q := n.Run(t, "tc", "-s", "qdisc", "show", "dev", "p1")
		i := strings.Index(q, "clsact")
		if i < 0 || strings.Contains(q[i:], "dropped 0,") {
			t.Errorf("tc ingress drop dropped nothing:\n%s", q)
		}
	}

	if err := p.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if err := p.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close() = %v, want ErrClosed", err)
	}
	if o := offloads(); o != before {
		t.Errorf("offloads after Close = %+v, want %+v", o, before)
	}
	if v := n.Sysctl(t, ipv6); v != "0" {
		t.Errorf("%s after Close = %s, want 0", ipv6, v)
	}
	if a := addrs(); !strings.Contains(a, "10.99.0.1/24") || !strings.Contains(a, "fd00:99::1/64") {
		t.Errorf("addresses after Close:\n%s\nwant 10.99.0.1/24 and fd00:99::1/64 back", a)
	}
	if table := n.Run(t, "nft", "list", "tables", "netdev"); strings.Contains(table, "gvrouter_hw_") {
		t.Errorf("nft tables after Close:\n%s\nwant none of ours", table)
	}
	if f := n.Run(t, "tc", "filter", "show", "dev", "p1", "ingress"); strings.Contains(f, fmt.Sprint("pref ", tcDropPref)) {
		t.Errorf("tc ingress filters after Close:\n%s\nwant none of ours", f)
	}
	if q := n.Run(t, "tc", "qdisc", "show", "dev", "p1"); strings.Contains(q, "clsact") != ownClsact {
		t.Errorf("qdiscs after Close:\n%s\nwant clsact only if it was there before Open", q)
	}
}

func ifindexOf(t *testing.T, n *netnstest.Netns, name string) string {
	t.Helper()
	out := n.Run(t, "cat", "/sys/class/net/"+name+"/ifindex")
	return strings.TrimSpace(out)
}

func TestOpenErrors(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	n.IP(t, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	open := func(cfg Config) error {
		var err error
		n.Do(t, func() {
			var p *Port
			if p, err = Open(cfg, nil); err == nil {
				p.Close()
			}
		})
		return err
	}
	if err := open(Config{Name: "nope0"}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nope0") {
		t.Errorf("Open(nope0) = %v, want ErrNotFound naming nope0", err)
	}
	if err := open(Config{Name: "p1"}); !errors.Is(err, ErrDown) || !strings.Contains(err.Error(), "p1") {
		t.Errorf("Open(p1 down) = %v, want ErrDown naming p1", err)
	}
	if err := open(Config{Name: "lo"}); !errors.Is(err, ErrNotEthernet) {
		t.Errorf("Open(lo) = %v, want ErrNotEthernet", err)
	}
	if err := open(Config{Name: ""}); err == nil {
		t.Error("Open(\"\") = nil, want an error")
	}
	if err := open(Config{Name: "p1", Profile: "nosuch"}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("Open(profile nosuch) = %v, want unknown profile error", err)
	}
	// Nothing was changed by the failed opens.
	if v := n.Sysctl(t, "/proc/sys/net/ipv6/conf/p1/disable_ipv6"); v != "0" {
		t.Errorf("disable_ipv6 after failed Open = %s, want 0", v)
	}
}

func TestFanoutQueues(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", Queues: 2, KeepKernel: true})
	if p.Queues() != 2 {
		t.Fatalf("Queues() = %d, want 2", p.Queues())
	}
	var c collector
	runPort(t, p, &c)
	peer := n.RawSocket(t, "p0")
	peer.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "fanout"))
	if _, ok := c.find([]byte("fanout"), 2*time.Second); !ok {
		t.Fatal("frame did not arrive on a fanout queue")
	}
}

func TestBridge(t *testing.T) {
	privileged(t)
	a, r, b := newNetns(t), newNetns(t), newNetns(t)
	r.IP(t, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	r.IP(t, "link", "add", "q0", "type", "veth", "peer", "name", "q1")
	r.IP(t, "link", "set", "p0", "netns", a.Name())
	r.IP(t, "link", "set", "q0", "netns", b.Name())
	for _, x := range []struct {
		ns  *netnstest.Netns
		dev string
	}{{a, "p0"}, {r, "p1"}, {r, "q1"}, {b, "q0"}} {
		x.ns.IP(t, "link", "set", x.dev, "up")
	}
	pa := openIn(t, r, Config{Name: "p1"})
	pb := openIn(t, r, Config{Name: "q1"})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := Bridge(ctx, pa, pb); err != nil {
			t.Errorf("Bridge() = %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	// Receive on q0 with a port too, to see the re-inserted tag as metadata.
	recv := openIn(t, b, Config{Name: "q0", KeepKernel: true})
	var c collector
	runPort(t, recv, &c)
	send := a.RawSocket(t, "p0")
	src := []byte{2, 0, 0, 0, 0, 0xa}
	send.Send(t, netnstest.Frame(netnstest.Broadcast, src, "across-bridge"))
	if _, ok := c.find([]byte("across-bridge"), 2*time.Second); !ok {
		t.Fatal("frame sent on p0 did not arrive on q0")
	}
	untagged := netnstest.Frame(netnstest.Broadcast, src, "tagged-across")
	send.Send(t, netnstest.Tag(untagged, 0x8100, 42))
	f, ok := c.find([]byte("tagged-across"), 2*time.Second)
	if !ok {
		t.Fatal("tagged frame sent on p0 did not arrive on q0")
	}
	if !f.VLANValid || f.VLANTCI != 42 || string(f.Data) != string(untagged) {
		t.Errorf("tagged frame on q0: VLAN %v %d data % x; want VID 42 and the untagged data", f.VLANValid, f.VLANTCI, f.Data)
	}
	// And back.
	back := b.RawSocket(t, "q0")
	back.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 0xb}, "and-back"))
	if _, ok := send.WaitFor("and-back", 2*time.Second); !ok {
		t.Fatal("frame sent on q0 did not arrive on p0")
	}
	// Counters are added after sendmmsg returns, which may be after the
	// peer saw the frame.
	for end := time.Now().Add(time.Second); pa.Stats().TxPackets == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if s := pa.Stats(); s.RxPackets < 2 || s.TxPackets < 1 {
		t.Errorf("p1 Stats() = %+v, want >= 2 rx, >= 1 tx", s)
	}
}

// privilegedB is privileged for benchmarks: they skip without root.
func privilegedB(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
}

func TestWriteFramesAllocs(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	frame := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "allocs")
	batch := make([][]byte, 2*TxBatchSize+3) // three sendmmsg calls
	for i := range batch {
		batch[i] = frame
	}
	if a := testing.AllocsPerRun(20, func() { p.WriteFrames(batch) }); a != 0 {
		t.Errorf("WriteFrames allocs = %v, want 0", a)
	}
	if s := p.Stats(); s.TxPackets+s.Drops[DropTxNoBufs] != 21*uint64(len(batch)) {
		t.Errorf("TxPackets + tx_nobufs = %d + %d, want %d", s.TxPackets, s.Drops[DropTxNoBufs], 21*len(batch))
	}
}

// BenchmarkWriteFrames sends 60-byte frames in batches of TxBatchSize
// into a veth whose peer drops them.
func BenchmarkWriteFrames(b *testing.B) {
	privilegedB(b)
	n := netnstest.New(b, "hwb")
	vethPair(b, n, "p0", "p1")
	p := openIn(b, n, Config{Name: "p1", KeepKernel: true})
	frame := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "bench")
	batch := make([][]byte, TxBatchSize)
	for i := range batch {
		batch[i] = frame
	}
	b.ReportAllocs()
	for b.Loop() {
		p.WriteFrames(batch)
	}
	s := p.Stats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*TxBatchSize), "ns/frame")
	b.ReportMetric(float64(s.Drops[DropTxNoBufs])/float64(b.N*TxBatchSize), "nobufs/frame")
}

func TestRunLifecycle(t *testing.T) {
	privileged(t)
	goroutines := runtime.NumGoroutine()
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})

	// ctx cancellation ends Run with nil, promptly. This first Run takes
	// one block, so the next Run must go on from the second (regression:
	// a Run that restarted at block 0 waited for the ring to wrap).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, func(int, []Frame) {}) }()
	peer := n.RawSocket(t, "p0")
	peer.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "first-run"))
	for end := time.Now().Add(2 * time.Second); p.Stats().RxPackets == 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if p.Stats().RxPackets == 0 {
		t.Fatal("first Run received nothing")
	}
	if err := p.Run(context.Background(), func(int, []Frame) {}); !errors.Is(err, ErrRunning) {
		t.Errorf("second concurrent Run() = %v, want ErrRunning", err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() after cancel = %v, want nil", err)
		}
		if d := time.Since(start); d > PollTimeout/2 {
			t.Errorf("Run took %v to see cancellation", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}

	// The interface going down and up does not stop or spin the queue.
	var c collector
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- p.Run(ctx, c.handle) }()
	n.IP(t, "link", "set", "p1", "down")
	time.Sleep(100 * time.Millisecond)
	n.IP(t, "link", "set", "p1", "up")
	time.Sleep(100 * time.Millisecond)
	peer.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "after-flap"))
	if _, ok := c.find([]byte("after-flap"), 2*time.Second); !ok {
		t.Error("no frame after the interface went down and up")
	}

	// Close stops Run with ErrClosed.
	if err := p.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Run() after Close = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	cancel()
	if err := p.Run(context.Background(), c.handle); !errors.Is(err, ErrClosed) {
		t.Errorf("Run() on a closed port = %v, want ErrClosed", err)
	}
	if n, err := p.WriteFrames([][]byte{{1}}); n != 0 || !errors.Is(err, ErrClosed) {
		t.Errorf("WriteFrames() on a closed port = %d, %v; want 0, ErrClosed", n, err)
	}
	// No goroutine of the port outlives Close.
	for end := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines {
		t.Errorf("%d goroutines after Close, %d before Open", g, goroutines)
	}
}

func TestRingDrops(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	// A handler that stalls lets the ring fill: 60-byte frames take 128
	// bytes of ring each, so 4 MiB hold 32768 of them.
	release := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		p.Run(ctx, func(int, []Frame) { once.Do(func() { <-release }) })
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	peer := n.RawSocket(t, "p0")
	f := netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "flood")
	for range 40000 {
		peer.Send(t, f)
	}
	close(release)
	if d := p.Stats().Drops[DropRing]; d == 0 {
		t.Errorf("Drops[ring] = 0 after overfilling the ring")
	} else {
		t.Logf("Drops[ring] = %d", d)
	}
}

func TestWriteFramesConcurrent(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true})
	frame := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "concurrent")
	const writers, batches, size = 4, 50, 40
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			batch := make([][]byte, size)
			for i := range batch {
				batch[i] = frame
			}
			for range batches {
				if _, err := p.WriteFrames(batch); err != nil {
					t.Errorf("WriteFrames() = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if s := p.Stats(); s.TxPackets+s.Drops[DropTxNoBufs] != writers*batches*size {
		t.Errorf("TxPackets + tx_nobufs = %d + %d, want %d", s.TxPackets, s.Drops[DropTxNoBufs], writers*batches*size)
	}
}

// TestBacklogged: frames of a block handed over while RingBacklogBlocks
// or more full blocks wait behind it are marked Backlogged; once the
// consumer has caught up, frames are not.
func TestBacklogged(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	// Backlogged is the block ring's: the light ring, which would take
	// these frames, hands each over as it lands.
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true, BlockRingOnly: true})
	release := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var flags []bool // per batch after the stall: its frames' Backlogged
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		p.Run(ctx, func(_ int, frames []Frame) {
			stalled := false
			once.Do(func() { <-release; stalled = true })
			if stalled {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range frames[1:] {
				if f.Backlogged != frames[0].Backlogged {
					t.Errorf("frames of one batch differ in Backlogged")
				}
			}
			flags = append(flags, frames[0].Backlogged)
		})
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	peer := n.RawSocket(t, "p0")
	f := netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "backlog")
	// One frame per retire timeout: each fills a block of its own while
	// the handler stalls on the first.
	for range 2 * RingBacklogBlocks {
		peer.Send(t, f)
		time.Sleep(3 * RingRetireTimeout)
	}
	close(release)
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			got := len(flags)
			mu.Unlock()
			if got >= n {
				return
			}
		}
		t.Fatalf("fewer than %d batches arrived", n)
	}
	waitFor(RingBacklogBlocks)
	time.Sleep(10 * RingRetireTimeout) // the rest drains
	mu.Lock()
	drained := len(flags)
	if !flags[0] {
		t.Errorf("first batch after the stall (%d more blocks behind) not Backlogged; batches %v", 2*RingBacklogBlocks-2, flags)
	}
	mu.Unlock()
	peer.Send(t, f)
	waitFor(drained + 1)
	mu.Lock()
	defer mu.Unlock()
	if flags[len(flags)-1] {
		t.Errorf("a frame sent to an empty ring is Backlogged; batches %v", flags)
	}
	t.Logf("Backlogged per batch: %v", flags)
}

// TestIngressDropWithoutTools checks that the default ingress drop needs
// no userland tool: with no PATH, Open still installs the nftables table
// (through netlink) and Close removes it.
func TestIngressDropWithoutTools(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	defer func(v string) { ingressDropWith = v }(ingressDropWith)
	ingressDropWith = ""
	path := os.Getenv("PATH")
	t.Setenv("PATH", "")
	var p *Port
	var err error
	n.Do(t, func() { p, err = Open(Config{Name: "p1"}, nil) })
	os.Setenv("PATH", path)
	if err != nil {
		t.Fatalf("Open without PATH: %v", err)
	}
	if table := n.Run(t, "nft", "list", "table", "netdev", fmt.Sprintf("gvrouter_hw_%d", p.ifidx)); !strings.Contains(table, `hook ingress device "p1" priority -500`) || !strings.Contains(table, "drop") {
		t.Errorf("nft table while open:\n%s\nwant an ingress drop on p1", table)
	}
	if f := n.Run(t, "tc", "qdisc", "show", "dev", "p1"); strings.Contains(f, "clsact") {
		t.Errorf("tc qdiscs while open:\n%s\nwant no clsact (nftables is the default)", f)
	}
	os.Setenv("PATH", "")
	err = p.Close()
	os.Setenv("PATH", path)
	if err != nil {
		t.Fatalf("Close without PATH: %v", err)
	}
	if tables := n.Run(t, "nft", "list", "tables"); strings.Contains(tables, "gvrouter_hw_") {
		t.Errorf("nft tables after Close:\n%s\nwant ours gone", tables)
	}
}
