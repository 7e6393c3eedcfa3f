package xsk

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// The lab: one namespace xsk-PID-N per test with a veth pair va/vb in it.
// veth has native XDP (in its NAPI receive path, which attaching a program
// turns on) but no zero-copy, so a socket binds in copy mode. Frames the
// peer sends with an ordinary AF_PACKET socket reach the program through
// veth_xmit → the peer's NAPI ring, and XSK TX in copy mode builds an skb
// and hands it to veth_xmit: neither direction needs an XDP program (or
// GRO) on the other end. Only XDP_REDIRECT/XDP_TX *into* a veth from
// another device's program (ndo_xdp_xmit) needs the receiving veth's NAPI
// on, by a program or GRO on it; these tests do not do that.

type lab struct {
	ns         *netnstest.Netns
	idxA, idxB int
}

func newLab(t testing.TB) *lab {
	t.Helper()
	netnstest.Privileged(t, "ip")
	l := &lab{ns: netnstest.New(t, "xsk", netnstest.WithoutIPv6())}
	l.ns.IP(t, "link", "add", "va", "type", "veth", "peer", "name", "vb")
	l.ns.IP(t, "link", "set", "va", "up")
	l.ns.IP(t, "link", "set", "vb", "up")
	var err error
	l.ns.Do(t, func() {
		var a, b *net.Interface
		if a, err = net.InterfaceByName("va"); err != nil {
			return
		}
		if b, err = net.InterfaceByName("vb"); err != nil {
			return
		}
		l.idxA, l.idxB = a.Index, b.Index
	})
	if err != nil {
		t.Fatalf("veth indices: %v", err)
	}
	return l
}

// open makes a socket on queue 0 of ifindex on u and attaches a program
// that redirects to it, all inside the lab's namespace; both are closed
// when t ends.
func (l *lab) open(t testing.TB, u *Umem, ifindex int, bind BindMode) (*Socket, *Program) {
	t.Helper()
	return l.openMode(t, u, ifindex, bind, AttachAuto)
}

// openMode is open with the program attached in mode.
func (l *lab) openMode(t testing.TB, u *Umem, ifindex int, bind BindMode, mode AttachMode) (*Socket, *Program) {
	t.Helper()
	var s *Socket
	var p *Program
	var err error
	l.ns.Do(t, func() {
		if s, err = u.NewSocket(SocketConfig{Ifindex: ifindex, Queue: 0, Bind: bind}); err != nil {
			return
		}
		if p, err = NewProgram(ProgramConfig{Queues: 1}); err != nil {
			return
		}
		if err = p.Register(s); err != nil {
			return
		}
		_, err = p.Attach(ifindex, mode)
	})
	if s != nil {
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Socket.Close: %v", err)
			}
		})
	}
	if p != nil {
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Errorf("Program.Close: %v", err)
			}
		})
	}
	if err != nil {
		if !netnstest.CI() && (errors.Is(err, ErrPermission) || errors.Is(err, ErrUnsupported)) {
			t.Skipf("AF_XDP: %v", err)
		}
		t.Fatalf("open ifindex %d: %v", ifindex, err)
	}
	return s, p
}

var (
	macA = []byte{0x02, 0, 0, 0, 0, 0x0a}
	macB = []byte{0x02, 0, 0, 0, 0, 0x0b}
)

// receive waits until a frame containing marker arrives on s and
// returns a copy of it; every frame received is released.
func receive(t *testing.T, s *Socket, marker []byte, d time.Duration) ([]byte, bool) {
	t.Helper()
	descs := make([]Desc, 64)
	for end := time.Now().Add(d); time.Now().Before(end); {
		s.Refill()
		n := s.Receive(descs)
		var found []byte
		for _, dd := range descs[:n] {
			if b := s.Umem().Data(dd); found == nil && bytes.Contains(b, marker) {
				found = bytes.Clone(b)
			}
		}
		s.Umem().Release(descs[:n])
		if found != nil {
			return found, true
		}
		if n == 0 {
			s.Wait(20 * time.Millisecond)
		}
	}
	return nil, false
}

func TestReceive(t *testing.T) {
	for _, tc := range []struct {
		attach AttachMode
		want   XDPMode
	}{
		{AttachAuto, XDPNative},
		{AttachGeneric, XDPGeneric},
	} {
		t.Run(tc.want.String(), func(t *testing.T) { testReceive(t, tc.attach, tc.want) })
	}
}

func testReceive(t *testing.T, attach AttachMode, want XDPMode) {
	l := newLab(t)
	u := newTestUmem(t, UmemConfig{})
	s, p := l.openMode(t, u, l.idxB, BindAuto, attach)
	if s.Mode() != ModeCopy {
		t.Errorf("Mode() on veth = %v, want copy (veth has no zero-copy)", s.Mode())
	}
	if p.Mode() != want {
		t.Errorf("Program.Mode() on veth = %v, want %v", p.Mode(), want)
	}
	peer := l.ns.RawSocket(t, "va")
	// Frames that find the fill ring empty are dropped (RxFillEmpty).
	s.Refill()
	for i, size := range []int{60, 1514} {
		marker := fmt.Sprintf("xsk-rx-%d", i)
		f := netnstest.Frame(macB, macA, marker)
		for len(f) < size {
			f = append(f, byte(len(f)))
		}
		peer.Send(t, f)
		got, ok := receive(t, s, []byte(marker), 2*time.Second)
		if !ok {
			t.Fatalf("frame %q (%d bytes) from the peer never reached the XSK; stats %+v", marker, size, s.Stats())
		}
		if !bytes.Equal(got, f) {
			t.Errorf("XSK received % x\nwant % x", got, f)
		}
	}
	if c := u.Counts(); c.Held != 0 || c.Total() != u.Frames() {
		t.Errorf("Counts() = %+v, want nothing held and %d in all", c, u.Frames())
	}
	st := s.Stats()
	if st.RxPackets < 2 || st.RxInvalid != 0 || st.RxDropped != 0 {
		t.Errorf("Stats() = %+v, want at least 2 received and no drops or invalid descriptors", st)
	}
}

// TestZeroCopyRefused checks that insisting on zero-copy where the
// driver has none (veth) fails clearly, and leaves the UMEM usable for a
// copy-mode socket.
func TestZeroCopyRefused(t *testing.T) {
	l := newLab(t)
	u := newTestUmem(t, UmemConfig{})
	var err error
	l.ns.Do(t, func() {
		var s *Socket
		if s, err = u.NewSocket(SocketConfig{Ifindex: l.idxB, Bind: BindZeroCopy}); err == nil {
			s.Close()
		}
	})
	if err == nil || !strings.Contains(err.Error(), "bind (zero-copy)") || !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("NewSocket(BindZeroCopy) on veth = %v, want a zero-copy bind error wrapping EOPNOTSUPP", err)
	}
	if s, _ := l.open(t, u, l.idxB, BindCopy); s.Mode() != ModeCopy {
		t.Errorf("Mode() = %v after BindCopy, want copy", s.Mode())
	}
}

func TestTransmit(t *testing.T) {
	l := newLab(t)
	u := newTestUmem(t, UmemConfig{FrameSize: 4096, Frames: 4096})
	s, _ := l.open(t, u, l.idxB, BindAuto)
	peer := l.ns.RawSocket(t, "va")
	var frames [][]byte
	descs := make([]Desc, 40)
	if n := u.Alloc(descs); n != len(descs) {
		t.Fatalf("Alloc = %d", n)
	}
	for i := range descs {
		f := netnstest.Frame(netnstest.Broadcast, macB, fmt.Sprintf("xsk-tx-%02d", i))
		for len(f) < 60+i*37 {
			f = append(f, byte(i))
		}
		copy(u.Frame(descs[i].Addr, len(f)), f)
		descs[i].Len = uint32(len(f))
		frames = append(frames, f)
	}
	if n := s.Transmit(descs); n != len(descs) {
		t.Fatalf("Transmit(%d) = %d", len(descs), n)
	}
	for i, f := range frames {
		got, ok := peer.WaitFor(fmt.Sprintf("xsk-tx-%02d", i), 2*time.Second)
		if !ok {
			t.Fatalf("frame %d never reached the peer; stats %+v", i, s.Stats())
		}
		if !bytes.Equal(got.Data, f) {
			t.Errorf("peer got % x\nwant % x", got.Data, f)
		}
	}
	// All were sent, so all complete and go back to the free list.
	deadline := time.Now().Add(2 * time.Second)
	for s.Complete(); u.Counts().TX+u.Counts().Completion > 0 && time.Now().Before(deadline); s.Complete() {
		time.Sleep(time.Millisecond)
	}
	if c := u.Counts(); c.TX != 0 || c.Completion != 0 || c.Held != 0 || c.Total() != u.Frames() {
		t.Errorf("Counts() after completion = %+v, want no TX, Completion or Held", c)
	}
	// Bad descriptors are dropped and counted, never sent, and a held
	// frame among them goes back to the free list.
	var d [1]Desc
	u.Alloc(d[:])
	bad := []Desc{{Addr: d[0].Addr, Len: 5000}, {Addr: 1 << 40, Len: 60}}
	if n := s.Transmit(bad); n != 2 {
		t.Errorf("Transmit(2 bad) = %d, want 2 taken", n)
	}
	if st := s.Stats(); st.TxDropped != 2 || st.TxPackets != uint64(len(descs)) {
		t.Errorf("Stats() = %+v, want TxDropped 2 and TxPackets %d", st, len(descs))
	}
	if c := u.Counts(); c.Held != 0 || c.Total() != u.Frames() {
		t.Errorf("Counts() after bad descriptors = %+v, want nothing held", c)
	}
}

// TestTransmitConcurrent sends from several goroutines on one socket
// (Transmit is safe for concurrent use) and checks that every frame is
// sent once and comes back to the free list.
func TestTransmitConcurrent(t *testing.T) {
	const senders, each = 4, 5000
	l := newLab(t)
	u := newTestUmem(t, UmemConfig{Frames: 2 * DefaultRingSize})
	s, _ := l.open(t, u, l.idxB, BindAuto)
	f := netnstest.Frame(netnstest.Broadcast, macB, "xsk-concurrent")
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			descs := make([]Desc, 32)
			for sent := 0; sent < each; {
				n := u.Alloc(descs[:min(len(descs), each-sent)])
				for i := range descs[:n] {
					copy(u.Frame(descs[i].Addr, len(f)), f)
					descs[i].Len = uint32(len(f))
				}
				k := s.Transmit(descs[:n])
				u.Release(descs[k:n])
				sent += k
				if k == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	for end := time.Now().Add(2 * time.Second); u.Counts().Free != u.Frames()-u.Counts().Fill && time.Now().Before(end); {
		s.Complete()
		time.Sleep(time.Millisecond)
	}
	if c := u.Counts(); c.Free+c.Fill != u.Frames() || c.Total() != u.Frames() {
		t.Errorf("Counts() after %d concurrent sends = %+v, want every frame back", senders*each, c)
	}
	if st := s.Stats(); st.TxPackets != senders*each || st.TxDropped != 0 || st.TxInvalid != 0 || st.WakeErrors != 0 {
		t.Errorf("Stats() = %+v, want %d sent and nothing dropped", st, senders*each)
	}
}

// TestWaitWake checks that Wait ends on Wake at once and on its timeout
// otherwise.
func TestWaitWake(t *testing.T) {
	l := newLab(t)
	u := newTestUmem(t, UmemConfig{})
	s, _ := l.open(t, u, l.idxB, BindAuto)
	start := time.Now()
	if err := s.Wait(50 * time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < 40*time.Millisecond {
		t.Errorf("idle Wait(50ms) = %v after %v, want a deadline error after ~50ms", err, time.Since(start))
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.Wake()
	}()
	start = time.Now()
	s.Wait(10 * time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Wait ended %v after Wake, want at once", d)
	}
}

// pingPong runs frames between two sockets sharing one UMEM, on the two
// ends of the veth, until total frames were received. Every other batch
// a socket sends what it received back out of itself (to the other end)
// or hands it to the other socket (XDP_SHARED_UMEM across devices: the
// frame leaves from the buffer it arrived in, and comes back to the same
// end), so every ring of both sockets carries traffic. It keeps inflight
// frames circulating, re-injecting if the kernel dropped some.
type pingPong struct {
	u        *Umem
	a, b     *Socket
	template []byte
	descs    []Desc
	received int
	bad      int
	cross    bool // hand the next batch to the other socket
}

func newPingPong(u *Umem, a, b *Socket) *pingPong {
	return &pingPong{u: u, a: a, b: b, template: netnstest.Frame(netnstest.Broadcast, macA, "xsk-pingpong"), descs: make([]Desc, 64)}
}

// inject sends n fresh frames out of a.
func (pp *pingPong) inject(n int) {
	d := pp.descs[:min(n, len(pp.descs))]
	n = pp.u.Alloc(d)
	for i := range d[:n] {
		copy(pp.u.Frame(d[i].Addr, len(pp.template)), pp.template)
		d[i].Len = uint32(len(pp.template))
	}
	sent := pp.a.Transmit(d[:n])
	pp.u.Release(d[sent:n])
}

// step moves one batch each way and reports how many frames it received.
func (pp *pingPong) step() int {
	got := 0
	for _, dir := range [2][2]*Socket{{pp.a, pp.b}, {pp.b, pp.a}} {
		rx, tx := dir[0], dir[0]
		rx.Refill()
		n := rx.Receive(pp.descs)
		if n == 0 {
			continue
		}
		if pp.cross {
			tx = dir[1]
		}
		pp.cross = !pp.cross
		for _, d := range pp.descs[:n] {
			if !bytes.Equal(pp.u.Data(d), pp.template) {
				pp.bad++
			}
		}
		sent := tx.Transmit(pp.descs[:n])
		pp.u.Release(pp.descs[sent:n])
		got += n
	}
	pp.received += got
	return got
}

// run circulates until total frames were received or d passed.
func (pp *pingPong) run(total int, inflight int, d time.Duration) error {
	pp.a.Refill()
	pp.b.Refill()
	pp.inject(inflight)
	idle := 0
	for end := time.Now().Add(d); pp.received < total; {
		if pp.step() > 0 {
			idle = 0
			continue
		}
		if idle++; idle%64 == 0 {
			if time.Now().After(end) {
				return fmt.Errorf("%d of %d frames after %v", pp.received, total, d)
			}
			// Frames were lost in the kernel (fill ring empty, RX ring
			// full): put some back into circulation.
			c := pp.u.Counts()
			if c.TX+c.Completion+c.Held < inflight/2 {
				pp.inject(inflight / 2)
			}
			pp.a.Wait(time.Millisecond)
		}
	}
	return nil
}

// drain stops circulating: it recycles what was sent and releases what
// arrives until nothing has moved for quiet.
func (pp *pingPong) drain(quiet time.Duration) {
	last := time.Now()
	for time.Since(last) < quiet {
		moved := pp.a.Complete() + pp.b.Complete()
		for _, s := range []*Socket{pp.a, pp.b} {
			n := s.Receive(pp.descs)
			pp.u.Release(pp.descs[:n])
			moved += n
		}
		if moved > 0 {
			last = time.Now()
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFrameAccounting(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 50_000
	}
	l := newLab(t)
	u := newTestUmem(t, UmemConfig{Frames: 4 * DefaultRingSize})
	// One UMEM across two devices: XDP_SHARED_UMEM with each socket's
	// own fill and completion rings.
	a, _ := l.open(t, u, l.idxA, BindAuto)
	b, _ := l.open(t, u, l.idxB, BindAuto)
	pp := newPingPong(u, a, b)
	start := time.Now()
	if err := pp.run(total, 256, 120*time.Second); err != nil {
		t.Fatalf("ping-pong: %v; counts %+v; stats a %+v b %+v", err, u.Counts(), a.Stats(), b.Stats())
	}
	el := time.Since(start)
	t.Logf("%d frames in %v (%.0f frames/s); stats a %+v b %+v", pp.received, el, float64(pp.received)/el.Seconds(), a.Stats(), b.Stats())
	if pp.bad != 0 {
		t.Errorf("%d frames arrived changed", pp.bad)
	}

	// Once a batch is warm the data path allocates nothing.
	if allocs := testing.AllocsPerRun(1000, func() { pp.step() }); allocs != 0 {
		t.Errorf("one ping-pong step allocates %v times, want 0", allocs)
	}

	pp.drain(200 * time.Millisecond)
	c := u.Counts()
	if c.Held != 0 || c.TX != 0 || c.Completion != 0 || c.Free+c.Fill != u.Frames() || c.Total() != u.Frames() {
		t.Errorf("Counts() after %d frames and a drain = %+v, want only Free and Fill, %d in all", pp.received, c, u.Frames())
	}
	if c.Fill > 2*DefaultRingSize {
		t.Errorf("Counts().Fill = %d, more than the two fill rings hold", c.Fill)
	}
	if n := u.BadDescs(); n != 0 {
		t.Errorf("BadDescs() = %d, want 0", n)
	}
	for _, s := range []*Socket{a, b} {
		// With 256 frames in flight, 2048-entry rings refilled every
		// batch never run dry or full: the kernel drops nothing.
		if st := s.Stats(); st.RxInvalid != 0 || st.TxInvalid != 0 || st.TxDropped != 0 || st.WakeErrors != 0 || st.RxDropped != 0 || st.RxFillEmpty != 0 || st.RxRingFull != 0 {
			t.Errorf("queue stats %+v: want no invalid descriptors, drops or wake errors", st)
		}
		if st := s.Stats(); st.RxPackets < uint64(total)/4 || st.TxPackets < uint64(total)/4 {
			t.Errorf("queue stats %+v: want each socket to have received and sent at least a quarter of %d", st, total)
		}
	}
	// Closing a socket takes back every frame on its rings and in the
	// driver; closing both leaves every frame free.
	a.Close()
	b.Close()
	if c := u.Counts(); c != (Counts{Free: u.Frames()}) {
		t.Errorf("Counts() after closing both sockets = %+v, want all %d free", c, u.Frames())
	}
}

// BenchmarkPingPong forwards frames between the two ends of a veth from
// one shared UMEM: per op, one frame received and sent again from the
// buffer it arrived in.
func BenchmarkPingPong(b *testing.B) {
	l := newLab(b)
	u := newTestUmem(b, UmemConfig{Frames: 4 * DefaultRingSize})
	a, _ := l.open(b, u, l.idxA, BindAuto)
	bs, _ := l.open(b, u, l.idxB, BindAuto)
	pp := newPingPong(u, a, bs)
	pp.run(10_000, 256, 30*time.Second) // warm up
	pp.received = 0
	b.ReportAllocs()
	b.ResetTimer()
	if err := pp.run(b.N, 256, 5*time.Minute); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	pp.drain(100 * time.Millisecond)
}

// childEnv makes the test binary, re-executed, attach a program to the
// interface it names and wait to be killed (TestMain).
const childEnv = "GVROUTER_XSK_CHILD_IF"

// permEnv makes the re-executed test binary, run without privileges,
// try to load the program and print the error.
const permEnv = "GVROUTER_XSK_CHILD_PERM"

func TestMain(m *testing.M) {
	if ifname := os.Getenv(childEnv); ifname != "" {
		os.Exit(child(ifname))
	}
	if os.Getenv(permEnv) != "" {
		if _, err := NewProgram(ProgramConfig{Queues: 1}); err != nil {
			fmt.Printf("%v\nErrPermission %v\n", err, errors.Is(err, ErrPermission))
			os.Exit(0)
		}
		fmt.Println("loaded")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProgramPermission runs the test binary as nobody, with no
// capabilities: loading the program must fail with ErrPermission naming
// what is missing.
func TestProgramPermission(t *testing.T) {
	netnstest.Privileged(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// nobody must be able to reach and run the binary.
	dir, err := os.MkdirTemp("", "xskperm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := dir + "/xsk.test"
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), permEnv+"=1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unprivileged child: %v: %s", err, out)
	}
	got := string(out)
	t.Logf("unprivileged: %s", got)
	if !strings.Contains(got, "needs CAP_BPF and CAP_NET_ADMIN") || !strings.Contains(got, "ErrPermission true") {
		t.Errorf("unprivileged NewProgram said %q, want ErrPermission naming CAP_BPF and CAP_NET_ADMIN", got)
	}
}

// child is the re-executed test binary: inside the lab's namespace (ip
// netns exec), it opens a socket and attaches a program to ifname, says
// so on stdout and waits to be killed.
func child(ifname string) int {
	fail := func(err error) int { fmt.Println("error:", err); return 1 }
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fail(err)
	}
	u, err := NewUmem(UmemConfig{})
	if err != nil {
		return fail(err)
	}
	s, err := u.NewSocket(SocketConfig{Ifindex: ifi.Index})
	if err != nil {
		return fail(err)
	}
	p, err := NewProgram(ProgramConfig{Queues: 1})
	if err != nil {
		return fail(err)
	}
	if err := p.Register(s); err != nil {
		return fail(err)
	}
	mode, err := p.Attach(ifi.Index, AttachAuto)
	if err != nil {
		return fail(err)
	}
	fmt.Println("attached", mode)
	time.Sleep(time.Minute)
	return 2
}

func TestProgramDiesWithProcess(t *testing.T) {
	l := newLab(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", l.ns.Name(), self)
	cmd.Env = append(os.Environ(), childEnv+"=vb")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s != "attached native" {
			if !netnstest.CI() && strings.Contains(s, ErrPermission.Error()) {
				t.Skipf("child: %s", s)
			}
			t.Fatalf("child said %q, want \"attached native\"", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("child did not attach within 10 s")
	}
	if !l.ns.HasXDP(t, "vb") {
		t.Fatal("ip link shows no XDP program on vb while the child runs")
	}
	// ip netns exec execs the binary in place, so the child is cmd's
	// process itself.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	if st := cmd.ProcessState.Sys().(syscall.WaitStatus); !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL", cmd.ProcessState)
	}
	for end := time.Now().Add(2 * time.Second); l.ns.HasXDP(t, "vb"); {
		if time.Now().After(end) {
			t.Fatal("the XDP program outlived the SIGKILLed process that attached it")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
