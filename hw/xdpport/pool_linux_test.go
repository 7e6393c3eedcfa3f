package xdpport

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
)

// The forwarding lab: veth pairs a0/a1, b0/b1 and c0/c1 in one
// namespace. The router's ports sit on a1, b1 and c1; raw sockets on a0,
// b0 and c0 are the hosts. Frames a port's handler writes to another
// port leave that port's veth towards its host.

var macHost = []byte{0x02, 0, 0, 0, 0, 0x99}

func newForwardLab(tb testing.TB) *netnstest.Netns {
	tb.Helper()
	netnstest.Privileged(tb, "ip")
	ns := netnstest.New(tb, "xdpz", netnstest.WithoutIPv6())
	for _, n := range []string{"a", "b", "c"} {
		ns.IP(tb, "link", "add", n+"1", "type", "veth", "peer", "name", n+"0")
		ns.IP(tb, "link", "set", n+"0", "up")
		ns.IP(tb, "link", "set", n+"1", "up")
	}
	return ns
}

// openIn opens ifname in ns as an AF_XDP port on pool (nil: its own
// UMEM); closed when tb ends unless the test closes it first.
func openIn(tb testing.TB, ns *netnstest.Netns, ifname string, pool *Pool) *Port {
	tb.Helper()
	var p *Port
	var err error
	ns.Do(tb, func() { p, err = Open(Config{Name: ifname, Pool: pool}, nil) })
	if err != nil {
		if !netnstest.CI() && (errors.Is(err, xsk.ErrPermission) || errors.Is(err, xsk.ErrUnsupported)) {
			tb.Skipf("AF_XDP: %v", err)
		}
		tb.Fatalf("Open(%s) = %v", ifname, err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// forwarder is a handler that writes every frame it receives to out and
// counts what it forwarded.
type forwarder struct {
	out       atomic.Pointer[Port]
	forwarded atomic.Int64
	marker    []byte
	// hold, if set, is called after the batch was written, before the
	// handler returns (the batch still holds its frames).
	hold func()
}

func (f *forwarder) handle(_ int, frames []hw.Frame) {
	out := f.out.Load()
	if out == nil {
		return
	}
	var batch [BatchSize][]byte
	n := 0
	for _, fr := range frames {
		if f.marker == nil || bytes.Contains(fr.Data, f.marker) {
			batch[n] = fr.Data
			n++
		}
	}
	k, _ := out.WriteFrames(batch[:n])
	f.forwarded.Add(int64(k))
	if f.hold != nil {
		f.hold()
	}
}

// settled waits until no frame of u is held, lent, on a TX ring or a
// completion ring (reaping completions of socks meanwhile) and returns
// the counts.
func settled(u *xsk.Umem, d time.Duration, socks ...*xsk.Socket) xsk.Counts {
	var c xsk.Counts
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, s := range socks {
			s.Complete()
		}
		if c = u.Counts(); c.Held+c.Lent+c.TX+c.Completion+c.RX == 0 {
			break
		}
	}
	return c
}

// TestPoolShares: two ports on one Pool share a UMEM, a port without one
// has its own, and the last port to close unmaps the shared one.
func TestPoolShares(t *testing.T) {
	ns := newForwardLab(t)
	pool := NewPool(PoolConfig{Sockets: 2})
	pa := openIn(t, ns, "a1", pool)
	pb := openIn(t, ns, "b1", pool)
	pc := openIn(t, ns, "c1", nil)
	ia, ib, ic := pa.UmemInfo(), pb.UmemInfo(), pc.UmemInfo()
	if pa.Umem() != pb.Umem() || ia.ID == 0 || ia.ID != ib.ID || !slices.Equal(ia.Ports, []string{"a1", "b1"}) || !ia.Shared() {
		t.Errorf("UmemInfo of a1, b1 = %+v, %+v: want one shared UMEM with ports [a1 b1]", ia, ib)
	}
	if want := 2 * framesPerSocket; ia.Frames != want {
		t.Errorf("shared UMEM has %d frames, want %d (two sockets' worth)", ia.Frames, want)
	}
	if pc.Umem() == pa.Umem() || ic.ID != 0 || ic.Shared() {
		t.Errorf("UmemInfo of c1 (no pool) = %+v, want a UMEM of its own", ic)
	}
	if pa.Mode() != "copy, native" || pb.Mode() != "copy, native" {
		t.Errorf("modes %q, %q, want copy, native (veth)", pa.Mode(), pb.Mode())
	}
	if err := pa.Close(); err != nil {
		t.Fatal(err)
	}
	if ib := pb.UmemInfo(); !slices.Equal(ib.Ports, []string{"b1"}) || ib.Shared() {
		t.Errorf("after a1 closed, b1's UmemInfo = %+v, want b1 alone", ib)
	}
	// a1 comes back (a reload that removed and re-added it): it joins
	// b1's UMEM again, in the room a1 left.
	pa = openIn(t, ns, "a1", pool)
	if ia := pa.UmemInfo(); pa.Umem() != pb.Umem() || !slices.Equal(ia.Ports, []string{"b1", "a1"}) {
		t.Errorf("a1 reopened: UmemInfo = %+v, want it back on b1's UMEM", ia)
	}
	for _, p := range []*Port{pa, pb} {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(pool.umems) != 0 {
		t.Errorf("pool keeps %d UMEMs after its last port closed, want 0", len(pool.umems))
	}
}

// TestPoolFull: a UMEM made for one socket takes no second port, which
// gets a UMEM of its own in the pool.
func TestPoolFull(t *testing.T) {
	ns := newForwardLab(t)
	pool := NewPool(PoolConfig{Sockets: 1})
	pa := openIn(t, ns, "a1", pool)
	pb := openIn(t, ns, "b1", pool)
	ia, ib := pa.UmemInfo(), pb.UmemInfo()
	if pa.Umem() == pb.Umem() || ia.ID == ib.ID || ia.Shared() || ib.Shared() || len(pool.umems) != 2 {
		t.Errorf("UmemInfo = %+v, %+v with a one-socket pool: want two UMEMs", ia, ib)
	}
}

// peerCounter counts frames with a marker arriving at a host's veth end.
func peerCounter(t *testing.T, ns *netnstest.Netns, ifname string, marker []byte, want int, d time.Duration) chan int {
	t.Helper()
	fd := ns.PacketSocket(t, ifname, unix.ETH_P_ALL)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
		t.Fatalf("SO_RCVBUFFORCE: %v", err)
	}
	got := make(chan int, 1)
	go func() {
		defer unix.Close(fd)
		got <- countPeer(fd, marker, want, d)
	}()
	return got
}

// TestZeroCopyForward forwards frames from a0's host through a1 to b1 and
// out to b0, in copy mode on veth: with a1 and b1 on one UMEM every frame
// leaves b1 from the buffer it arrived in on a1 (b1's zero-copy count),
// with c1 on a UMEM of its own every frame is copied; the hosts get the
// same bytes either way, and the UMEMs get every frame back.
func TestZeroCopyForward(t *testing.T) {
	const n = 1000
	ns := newForwardLab(t)
	pool := NewPool(PoolConfig{Sockets: 2})
	pa := openIn(t, ns, "a1", pool)
	pb := openIn(t, ns, "b1", pool)
	pc := openIn(t, ns, "c1", nil)
	fwd := &forwarder{marker: []byte("fwd ")}
	run(t, pa, fwd.handle)
	host := ns.RawSocket(t, "a0")
	for _, tc := range []struct {
		out        *Port
		peer       string
		zeroCopy   bool
		wantShared bool
	}{
		{pb, "b0", true, true},
		{pc, "c0", false, false},
	} {
		t.Run(tc.out.Name(), func(t *testing.T) {
			fwd.out.Store(tc.out)
			before := fwd.forwarded.Load()
			marker := fmt.Sprintf("fwd to %s ", tc.out.Name())
			got := peerCounter(t, ns, tc.peer, []byte(marker), n, 10*time.Second)
			for i := range n {
				host.Send(t, netnstest.Frame(netnstest.Broadcast, macHost, fmt.Sprintf("%s%04d", marker, i)))
				if i%64 == 63 {
					// The host's veth queue holds a few hundred frames.
					time.Sleep(time.Millisecond)
				}
			}
			g := <-got
			// The handler counts after WriteFrames returns, which may be
			// after the host has the frames.
			for end := time.Now().Add(time.Second); fwd.forwarded.Load()-before < int64(g) && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			fwdN := fwd.forwarded.Load() - before
			st := tc.out.Stats()
			t.Logf("%s: host got %d of %d, forwarded %d; stats tx %d (zero-copy %d, copied %d), drops %v", tc.out.Name(), g, n, fwdN, st.TxPackets, st.TxZeroCopy, st.TxCopied, st.Drops)
			if g < n*9/10 || int64(g) > fwdN {
				t.Errorf("host %s got %d frames (%d forwarded), want nearly all of %d", tc.peer, g, fwdN, n)
			}
			if st.TxZeroCopy+st.TxCopied != st.TxPackets || st.TxPackets != uint64(fwdN) {
				t.Errorf("stats: tx %d, zero-copy %d + copied %d, want the sum and %d forwarded", st.TxPackets, st.TxZeroCopy, st.TxCopied, fwdN)
			}
			if tc.zeroCopy && st.TxCopied != 0 || !tc.zeroCopy && st.TxZeroCopy != 0 {
				t.Errorf("%s: zero-copy %d, copied %d: want every frame %s", tc.out.Name(), st.TxZeroCopy, st.TxCopied, map[bool]string{true: "zero-copy", false: "copied"}[tc.zeroCopy])
			}
			if info := tc.out.UmemInfo(); info.Shared() != tc.wantShared {
				t.Errorf("UmemInfo = %+v, want shared %v", info, tc.wantShared)
			}
		})
	}
	fwd.out.Store(nil)
	for _, p := range []*Port{pa, pc} {
		c := settled(p.Umem(), 2*time.Second, p.socks...)
		if c.Free+c.Fill != p.Umem().Frames() || c.Total() != p.Umem().Frames() || p.Umem().BadDescs() != 0 {
			t.Errorf("%s: Umem.Counts() = %+v (bad %d), want all %d frames free or on fill rings", p.Name(), c, p.Umem().BadDescs(), p.Umem().Frames())
		}
	}
}

// TestZeroCopyAccounting circulates frames between two ports on one UMEM
// (the two ends of one veth), each port's handler writing what it
// receives to the other, until 10^6 frames were forwarded: every
// forward leaves from the buffer it arrived in (zero-copy), only the
// frames injected are copied, nothing allocates, and afterwards every
// frame is free or on a fill ring.
func TestZeroCopyAccounting(t *testing.T) {
	total := int64(1_000_000)
	if testing.Short() {
		total = 50_000
	}
	ns := newLab(t)
	pool := NewPool(PoolConfig{Sockets: 2})
	var pa, pb *Port
	pa = openIn(t, ns, "va", pool)
	pb = openIn(t, ns, "vb", pool)
	u := pa.Umem()
	fa, fb := &forwarder{}, &forwarder{}
	fa.out.Store(pb)
	fb.out.Store(pa)
	run(t, pa, fa.handle)
	run(t, pb, fb.handle)
	forwarded := func() int64 { return fa.forwarded.Load() + fb.forwarded.Load() }
	const inflight = 128
	injected := uint64(0)
	inject := func() {
		batch := make([][]byte, inflight/2)
		for i := range batch {
			batch[i] = netnstest.Frame(netnstest.Broadcast, macA, "circulate")
		}
		a, _ := pa.WriteFrames(batch)
		b, _ := pb.WriteFrames(batch)
		injected += uint64(a + b)
	}
	inject()
	start := time.Now()
	last, stall := int64(0), 0
	for deadline := start.Add(3 * time.Minute); forwarded() < total; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames forwarded in 3 min; counts %+v", forwarded(), total, u.Counts())
		}
		// veth drops what its NAPI ring cannot take; put frames back
		// into circulation when it stalls.
		if f := forwarded(); f == last {
			if stall++; stall == 20 {
				inject()
				stall = 0
			}
		} else {
			last, stall = f, 0
		}
	}
	el, done := time.Since(start), forwarded()
	// Nothing allocates per frame: measure whole runs of 1000 forwards,
	// on every goroutine of the process.
	allocs := testing.AllocsPerRun(20, func() {
		target := forwarded() + 1000
		for forwarded() < target {
			time.Sleep(100 * time.Microsecond)
		}
	})
	fa.out.Store(nil)
	fb.out.Store(nil)
	c := settled(u, 5*time.Second, append(pa.socks, pb.socks...)...)
	sa, sb := pa.Stats(), pb.Stats()
	t.Logf("%d frames forwarded in %v (%.0f/s), %d in all, %d injected; a: tx %d zero-copy %d copied %d; b: tx %d zero-copy %d copied %d; counts %+v", done, el, float64(done)/el.Seconds(), forwarded(), injected, sa.TxPackets, sa.TxZeroCopy, sa.TxCopied, sb.TxPackets, sb.TxZeroCopy, sb.TxCopied, c)
	if c.Free+c.Fill != u.Frames() || c.Total() != u.Frames() {
		t.Errorf("Umem.Counts() = %+v after %d forwards, want all %d frames free (%d) or on fill rings", c, forwarded(), u.Frames(), c.Free)
	}
	if n := u.BadDescs(); n != 0 {
		t.Errorf("Umem.BadDescs() = %d, want 0", n)
	}
	if copied := sa.TxCopied + sb.TxCopied; copied != injected {
		t.Errorf("copied transmits %d, want only the %d injected frames", copied, injected)
	}
	if zc := sa.TxZeroCopy + sb.TxZeroCopy; zc < uint64(total) {
		t.Errorf("zero-copy transmits %d, want every one of >= %d forwards", zc, total)
	}
	if allocs != 0 {
		t.Errorf("forwarding allocates %v times per 1000 frames, want 0", allocs)
	}
}

// TestZeroCopyTxRingFull forwards into a port whose link is down, so its
// TX ring fills (the kernel sends nothing): the frames past its room are
// counted (tx_nobufs) and go back to the free list with their batch; the
// ring's own frames stay in flight until the port closes, when they go
// back to the shared UMEM, and the other port goes on receiving.
func TestZeroCopyTxRingFull(t *testing.T) {
	ns := newForwardLab(t)
	pool := NewPool(PoolConfig{Sockets: 2})
	pa := openIn(t, ns, "a1", pool)
	pb := openIn(t, ns, "b1", pool)
	u := pa.Umem()
	ns.IP(t, "link", "set", "b1", "down")
	fwd := &forwarder{marker: []byte("full")}
	fwd.out.Store(pb)
	run(t, pa, fwd.handle)
	host := ns.RawSocket(t, "a0")
	const n = ringSize + 1000
	for i := range n {
		host.Send(t, netnstest.Frame(netnstest.Broadcast, macHost, "full"))
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
	// Settled: most frames arrived, every one received was sent or
	// counted, and no more arrived for 50 ms (no batch holds frames).
	want := uint64(n)
	var st hw.Stats
	for end, lastRx, quiet := time.Now().Add(5*time.Second), uint64(0), 0; time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		st = pb.Stats()
		rx := pa.Stats().RxPackets
		if rx == lastRx {
			quiet++
		} else {
			lastRx, quiet = rx, 0
		}
		if st.TxPackets+st.Drops[hw.DropTxNoBufs] >= want*9/10 && rx == st.TxPackets+st.Drops[hw.DropTxNoBufs] && quiet >= 5 {
			break
		}
	}
	c := u.Counts()
	t.Logf("b1 down: tx %d (zero-copy %d), tx_nobufs %d; counts %+v", st.TxPackets, st.TxZeroCopy, st.Drops[hw.DropTxNoBufs], c)
	if st.TxPackets != ringSize || st.TxZeroCopy != ringSize || st.Drops[hw.DropTxNoBufs] == 0 {
		t.Errorf("into a full TX ring: tx %d (zero-copy %d), tx_nobufs %d; want the ring's %d lent and the rest counted", st.TxPackets, st.TxZeroCopy, st.Drops[hw.DropTxNoBufs], ringSize)
	}
	if c.TX != ringSize || c.Lent != 0 || c.Held != 0 || c.Total() != u.Frames() {
		t.Errorf("Umem.Counts() = %+v, want the %d frames on b1's ring in TX and nothing else held", c, ringSize)
	}
	// Closing b1 takes its ring's frames back; a1 still receives.
	fwd.out.Store(nil)
	if err := pb.Close(); err != nil {
		t.Fatal(err)
	}
	c = settled(u, 2*time.Second, pa.socks...)
	if c.TX != 0 || c.Free+c.Fill != u.Frames() || u.BadDescs() != 0 {
		t.Errorf("after b1 closed: Umem.Counts() = %+v (bad %d), want every frame free or on a1's fill ring", c, u.BadDescs())
	}
	before := pa.Stats().RxPackets
	host.Send(t, netnstest.Frame(netnstest.Broadcast, macHost, "after"))
	for end := time.Now().Add(2 * time.Second); pa.Stats().RxPackets == before && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if pa.Stats().RxPackets == before {
		t.Error("a1 received nothing after b1 closed")
	}
}

// TestZeroCopyCloseWhileHeld closes the egress port while the ingress
// port's handler still holds the frames it lent to the egress's TX ring
// (b1 down, so they stay there): the frames go back to their batch and
// are freed when it ends.
func TestZeroCopyCloseWhileHeld(t *testing.T) {
	ns := newForwardLab(t)
	pool := NewPool(PoolConfig{Sockets: 2})
	pa := openIn(t, ns, "a1", pool)
	pb := openIn(t, ns, "b1", pool)
	u := pa.Umem()
	ns.IP(t, "link", "set", "b1", "down")
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fwd := &forwarder{marker: []byte("held"), hold: func() {
		once.Do(func() {
			close(held)
			<-release
		})
	}}
	fwd.out.Store(pb)
	run(t, pa, fwd.handle)
	ns.RawSocket(t, "a0").Send(t, netnstest.Frame(netnstest.Broadcast, macHost, "held"))
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("a1's handler saw no frame")
	}
	if c := u.Counts(); c.Lent != 1 {
		t.Errorf("handler holding a frame lent to b1: Counts() = %+v, want Lent 1", c)
	}
	fwd.out.Store(nil)
	if err := pb.Close(); err != nil {
		t.Fatal(err)
	}
	if c := u.Counts(); c.Lent != 0 || c.Held != 1 {
		t.Errorf("b1 closed, handler still holding: Counts() = %+v, want the frame back as Held", c)
	}
	close(release)
	c := settled(u, 2*time.Second, pa.socks...)
	if c.Free+c.Fill != u.Frames() || u.BadDescs() != 0 {
		t.Errorf("after the batch ended: Counts() = %+v (bad %d), want every frame free or on a fill ring", c, u.BadDescs())
	}
}

// TestZeroCopyTwoWriters writes every received frame to two ports of the
// same UMEM: the first takes it without a copy, the second copies it (a
// frame is lent to one TX ring at most), both hosts get it intact, and
// the UMEM gets every frame back.
func TestZeroCopyTwoWriters(t *testing.T) {
	const n = 300
	ns := newForwardLab(t)
	pool := NewPool(PoolConfig{Sockets: 3})
	pa := openIn(t, ns, "a1", pool)
	pb := openIn(t, ns, "b1", pool)
	pc := openIn(t, ns, "c1", pool)
	var both atomic.Int64
	run(t, pa, func(_ int, frames []hw.Frame) {
		var batch [BatchSize][]byte
		k := 0
		for _, f := range frames {
			if bytes.Contains(f.Data, []byte("twice")) {
				batch[k] = f.Data
				k++
			}
		}
		pb.WriteFrames(batch[:k])
		pc.WriteFrames(batch[:k])
		both.Add(int64(k))
	})
	gb := peerCounter(t, ns, "b0", []byte("twice"), n, 10*time.Second)
	gc := peerCounter(t, ns, "c0", []byte("twice"), n, 10*time.Second)
	host := ns.RawSocket(t, "a0")
	for i := range n {
		host.Send(t, netnstest.Frame(netnstest.Broadcast, macHost, fmt.Sprintf("twice %04d", i)))
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
	b, c := <-gb, <-gc
	// The handler counts a batch after both writes return, and the hosts
	// may have it before that: wait for the count to catch up.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if st := pb.Stats(); uint64(both.Load()) >= st.TxZeroCopy+st.TxCopied {
			break
		}
	}
	sb, sc := pb.Stats(), pc.Stats()
	t.Logf("hosts got %d, %d of %d (%d received); b1 zero-copy %d copied %d, c1 zero-copy %d copied %d", b, c, n, both.Load(), sb.TxZeroCopy, sb.TxCopied, sc.TxZeroCopy, sc.TxCopied)
	if b < n*9/10 || c < n*9/10 {
		t.Errorf("hosts got %d and %d frames, want nearly all of %d each", b, c, n)
	}
	if sb.TxCopied != 0 || sc.TxZeroCopy != 0 || sb.TxZeroCopy != sc.TxCopied || sb.TxZeroCopy != uint64(both.Load()) {
		t.Errorf("b1 zero-copy %d copied %d, c1 zero-copy %d copied %d: want every frame lent to b1 and copied for c1 (%d)", sb.TxZeroCopy, sb.TxCopied, sc.TxZeroCopy, sc.TxCopied, both.Load())
	}
	u := pa.Umem()
	c2 := settled(u, 2*time.Second, append(pb.socks, pc.socks...)...)
	if c2.Free+c2.Fill != u.Frames() || u.BadDescs() != 0 {
		t.Errorf("Umem.Counts() = %+v (bad %d), want every frame free or on a fill ring", c2, u.BadDescs())
	}
}
