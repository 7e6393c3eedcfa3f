package xdpport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/refs"
)

// The lab: a namespace with a veth pair va/vb. veth has native XDP and
// no zero-copy, so a port binds in copy mode on the native hook; frames
// an AF_PACKET socket sends on vb reach va's program, and va's XSK
// transmit reaches vb like any frame (hw/xsk/doc.go, "veth").

var (
	macA = []byte{0x02, 0, 0, 0, 0, 0x0a}
	macB = []byte{0x02, 0, 0, 0, 0, 0x0b}
)

func newLab(tb testing.TB) *netnstest.Netns {
	tb.Helper()
	netnstest.Privileged(tb, "ip")
	ns := netnstest.New(tb, "xdpp", netnstest.WithoutIPv6())
	ns.IP(tb, "link", "add", "va", "address", "02:00:00:00:00:0a", "type", "veth", "peer", "name", "vb", "address", "02:00:00:00:00:0b")
	ns.IP(tb, "link", "set", "va", "up")
	ns.IP(tb, "link", "set", "vb", "up")
	return ns
}

// open opens ifname in ns as an AF_XDP port, closed when tb ends.
func open(tb testing.TB, ns *netnstest.Netns, ifname string) *Port {
	tb.Helper()
	var p *Port
	var err error
	ns.Do(tb, func() { p, err = Open(Config{Name: ifname}, nil) })
	if err != nil {
		if !netnstest.CI() && (errors.Is(err, xsk.ErrPermission) || errors.Is(err, xsk.ErrUnsupported)) {
			tb.Skipf("AF_XDP: %v", err)
		}
		tb.Fatalf("Open(%s) = %v", ifname, err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("Close(%s) = %v", ifname, err)
		}
	})
	return p
}

// run runs p with h until tb ends.
func run(tb testing.TB, p *Port, h hw.BatchHandler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, h) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run = %v, want nil after cancel", err)
		}
	})
}

// counter counts received frames that contain a marker.
type counter struct {
	marker []byte
	n      atomic.Int64
}

func (c *counter) handle(_ int, frames []hw.Frame) {
	for _, f := range frames {
		if bytes.Contains(f.Data, c.marker) {
			c.n.Add(1)
		}
	}
}

func waitCount(c *counter, want int64, d time.Duration) int64 {
	for end := time.Now().Add(d); time.Now().Before(end) && c.n.Load() < want; {
		time.Sleep(10 * time.Millisecond)
	}
	return c.n.Load()
}

// countPeer counts frames containing marker arriving on fd (a
// PacketSocket) until want or d.
func countPeer(fd int, marker []byte, want int, d time.Duration) int {
	buf := make([]byte, 2048)
	got := 0
	for end := time.Now().Add(d); got < want && time.Now().Before(end); {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if bytes.Contains(buf[:n], marker) {
			got++
		}
	}
	return got
}

func TestOpenMode(t *testing.T) {
	ns := newLab(t)
	p := open(t, ns, "va")
	if got, want := p.Mode(), "copy, native"; got != want {
		t.Errorf("Mode() = %q, want %q (veth: native XDP, no zero-copy)", got, want)
	}
	if p.Queues() != 1 {
		t.Errorf("Queues() = %d, want 1 (veth reports one channel)", p.Queues())
	}
	if !bytes.Equal(p.HardwareAddr(), macA) || p.MTU() != 1500 || p.Driver() != "af_xdp" {
		t.Errorf("HardwareAddr, MTU, Driver = %v, %d, %q, want %v, 1500, af_xdp", p.HardwareAddr(), p.MTU(), p.Driver(), macA)
	}
	if !p.LinkUp() {
		t.Error("LinkUp() = false on an up veth pair")
	}
	st := p.Stats()
	for _, k := range []string{hw.DropTruncated, hw.DropOversize, hw.DropMalformed, hw.DropRing, hw.DropTxError, hw.DropTxNoBufs, DropFillEmpty, DropUmemEmpty, DropInvalid} {
		if _, ok := st.Drops[k]; !ok {
			t.Errorf("Stats().Drops has no %q", k)
		}
	}
}

// TestBothWays sends frames from the peer to the port and from the port
// to the peer, and checks both counts and the port's counters.
func TestBothWays(t *testing.T) {
	const n = 500
	ns := newLab(t)
	p := open(t, ns, "va")
	in := &counter{marker: []byte("to-va")}
	run(t, p, in.handle)
	peer := ns.RawSocket(t, "vb")
	fd := ns.PacketSocket(t, "vb", unix.ETH_P_ALL)
	defer unix.Close(fd)
	// Room for every frame at once: the default buffer holds ~270 small
	// skbs, fewer than a test burst.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20); err != nil {
		t.Fatalf("SO_RCVBUFFORCE: %v", err)
	}

	f := netnstest.Frame(macA, macB, "to-va")
	for range n {
		peer.Send(t, f)
	}
	if got := waitCount(in, n, 5*time.Second); got != n {
		t.Errorf("port received %d frames from the peer, want %d", got, n)
	}

	out := make([][]byte, n)
	for i := range out {
		out[i] = netnstest.Frame(macB, macA, fmt.Sprintf("to-vb %d", i))
	}
	got := make(chan int, 1)
	go func() { got <- countPeer(fd, []byte("to-vb"), n, 5*time.Second) }()
	sent := 0
	for sent < n {
		k, err := p.WriteFrames(out[sent:min(n, sent+64)])
		if err != nil {
			t.Fatalf("WriteFrames = %v", err)
		}
		sent += k
		if k == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if g := <-got; g != n {
		t.Errorf("peer received %d frames from the port, want %d", g, n)
	}
	st := p.Stats()
	if st.RxPackets < n || st.TxPackets != n || st.TxBytes != uint64(n*len(out[0])) {
		t.Errorf("Stats() = rx %d, tx %d (%d bytes), want rx >= %d, tx %d (%d bytes)", st.RxPackets, st.TxPackets, st.TxBytes, n, n, n*len(out[0]))
	}
}

// TestBadFrames checks that frames WriteFrames cannot send are counted,
// not sent, and that their Umem frames come back.
func TestBadFrames(t *testing.T) {
	ns := newLab(t)
	p := open(t, ns, "va")
	short := make([]byte, 10)
	long := make([]byte, p.umem.FrameSize())
	good := netnstest.Frame(macB, macA, "good")
	n, err := p.WriteFrames([][]byte{short, good, long})
	if err != nil || n != 1 {
		t.Errorf("WriteFrames(short, good, long) = %d, %v, want 1, nil", n, err)
	}
	if got := p.Stats().Drops[DropInvalid]; got != 2 {
		t.Errorf("Drops[%s] = %d, want 2", DropInvalid, got)
	}
	p.socks[0].Complete()
	if c := p.umem.Counts(); c.Held != 0 || c.Total() != p.umem.Frames() {
		t.Errorf("Umem.Counts() = %+v after bad frames, want none held of %d", c, p.umem.Frames())
	}
}

// TestFrameAccounting moves 10^6 frames out and 5000 in, with the TX ring
// overrun on purpose, and checks that every Umem frame is back on the
// free list or the fill ring afterwards.
func TestFrameAccounting(t *testing.T) {
	total := 1_000_000
	if testing.Short() {
		total = 20_000
	}
	ns := newLab(t)
	p := open(t, ns, "va")
	in := &counter{marker: []byte("acct")}
	run(t, p, in.handle)
	peer := ns.RawSocket(t, "vb")
	f := netnstest.Frame(macA, macB, "acct")
	batch := make([][]byte, BatchSize)
	for i := range batch {
		batch[i] = netnstest.Frame(macB, macA, "acct-out")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5000 {
			peer.Send(t, f)
		}
	}()
	sent := 0
	for i := 0; i < total; i += BatchSize {
		k, err := p.WriteFrames(batch)
		if err != nil {
			t.Fatalf("WriteFrames = %v", err)
		}
		sent += k
	}
	wg.Wait()
	waitCount(in, 5000, 5*time.Second)
	// Reap what the kernel has sent; copy-mode transmit is synchronous
	// with the wakeup, so a few rounds empty the TX ring.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		p.WriteFrames(nil)
		p.socks[0].Complete()
		if c := p.umem.Counts(); c.TX == 0 && c.Completion == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := p.umem.Counts()
	st := p.Stats()
	t.Logf("wrote %d of %d (tx_nobufs %d, umem_empty %d), received %d; counts %+v", sent, total, st.Drops[hw.DropTxNoBufs], st.Drops[DropUmemEmpty], in.n.Load(), c)
	if c.Held != 0 || c.TX != 0 || c.Completion != 0 || c.Total() != p.umem.Frames() {
		t.Errorf("Umem.Counts() = %+v, want every one of %d frames free or on the fill ring", c, p.umem.Frames())
	}
	if got := uint64(sent) + st.Drops[hw.DropTxNoBufs] + st.Drops[DropUmemEmpty]; got != uint64(total+BatchSize-1)/BatchSize*BatchSize {
		t.Errorf("sent + tx drops = %d, want every frame offered (%d)", got, (total+BatchSize-1)/BatchSize*BatchSize)
	}
	if bd := p.umem.BadDescs(); bd != 0 {
		t.Errorf("Umem.BadDescs() = %d, want 0", bd)
	}
	// While the port floods the pair, veth itself drops some of the
	// peer's frames (its NAPI ring is full; counted by veth, not here):
	// the count is logged above, only a total loss is a failure.
	if in.n.Load() == 0 {
		t.Errorf("port received none of 5000 frames")
	}
}

func TestWriteFramesAllocs(t *testing.T) {
	ns := newLab(t)
	p := open(t, ns, "va")
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = netnstest.Frame(macB, macA, "alloc")
	}
	if a := testing.AllocsPerRun(200, func() { p.WriteFrames(batch) }); a != 0 {
		t.Errorf("WriteFrames allocates %v times per batch, want 0", a)
	}
}

// TestLinkState takes the peer down and up again: veth's carrier follows
// its peer.
func TestLinkState(t *testing.T) {
	ns := newLab(t)
	p := open(t, ns, "va")
	in := &counter{marker: []byte("after-up")}
	run(t, p, in.handle)
	changes := make(chan bool, 4)
	p.SetLinkHandler(func(up bool) { changes <- up })
	for _, want := range []bool{false, true} {
		state := "down"
		if want {
			state = "up"
		}
		ns.IP(t, "link", "set", "vb", state)
		select {
		case up := <-changes:
			if up != want || p.LinkUp() != want {
				t.Errorf("after vb %s: handler said %v, LinkUp() = %v, want %v", state, up, p.LinkUp(), want)
			}
		case <-time.After(3 * hw.LinkPollInterval):
			t.Fatalf("no link change within %v of vb %s", 3*hw.LinkPollInterval, state)
		}
	}
	// The sockets and the program survive the flap.
	ns.RawSocket(t, "vb").Send(t, netnstest.Frame(macA, macB, "after-up"))
	if got := waitCount(in, 1, 2*time.Second); got != 1 {
		t.Errorf("port received %d frames after the link came back, want 1", got)
	}
}

// TestRxRingFull stalls the handler while the peer floods the port: the
// kernel drops what the RX ring has no room for and counts it (ring),
// nothing leaks, and the port goes on receiving when the handler does.
func TestRxRingFull(t *testing.T) {
	const flood = 3 * ringSize
	ns := newLab(t)
	p := open(t, ns, "va")
	release := make(chan struct{})
	var once sync.Once
	in := &counter{marker: []byte("flood")}
	run(t, p, func(q int, fs []hw.Frame) {
		once.Do(func() { <-release })
		in.handle(q, fs)
	})
	peer := ns.RawSocket(t, "vb")
	f := netnstest.Frame(macA, macB, "flood")
	for range flood {
		peer.Send(t, f)
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	waitCount(in, flood, time.Second)
	st := p.Stats()
	t.Logf("received %d of %d, ring %d, fill_empty %d", in.n.Load(), flood, st.Drops[hw.DropRing], st.Drops[DropFillEmpty])
	if st.Drops[hw.DropRing]+st.Drops[DropFillEmpty] == 0 {
		t.Errorf("Drops = %v after %d frames into a stalled port, want ring or fill drops counted", st.Drops, flood)
	}
	// Each frame is received or counted once at most (veth may drop
	// more of the flood uncounted here).
	if got, drops := uint64(in.n.Load()), st.Drops[hw.DropRing]+st.Drops[DropFillEmpty]; got == 0 || got+drops > flood {
		t.Errorf("received %d of %d frames, %d counted as dropped: want some received and no frame counted twice", got, flood, drops)
	}
	c := p.umem.Counts()
	if c.Held != 0 || c.Total() != p.umem.Frames() {
		t.Errorf("Umem.Counts() = %+v, want none held of %d", c, p.umem.Frames())
	}
}

// BenchmarkForward sends frames from one AF_XDP port to another across
// the veth pair: WriteFrames on vb, Run's receive on va.
func BenchmarkForward(b *testing.B) {
	ns := newLab(b)
	pa := open(b, ns, "va")
	pb := open(b, ns, "vb")
	in := &counter{marker: []byte("bench")}
	run(b, pa, in.handle)
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = netnstest.Frame(macA, macB, "bench")
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i += len(batch) {
		pb.WriteFrames(batch)
	}
	// Until the count stops growing: veth drops what its NAPI ring (256
	// frames) cannot take while the writer runs ahead, so not every
	// frame arrives.
	got := in.n.Load()
	for prev := int64(-1); got != prev && got < int64(b.N); got = in.n.Load() {
		prev = got
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(got)/time.Since(start).Seconds(), "rx_frames/s")
	b.ReportMetric(float64(got)/float64(b.N), "delivered")
}

// childEnv makes the re-executed test binary open the port named by its
// value and wait to be killed.
const childEnv = "GVROUTER_XDPPORT_CHILD_IF"

// stateDirEnv is the child's Config.StateDir.
const stateDirEnv = "GVROUTER_XDPPORT_CHILD_STATE_DIR"

// memlockEnv makes the child lower its RLIMIT_MEMLOCK to 64 KiB first.
const memlockEnv = "GVROUTER_XDPPORT_CHILD_MEMLOCK"

// extraTagsEnv is the child's Config.ExtraTags.
const extraTagsEnv = "GVROUTER_XDPPORT_CHILD_EXTRA_TAGS"

// groupEnv makes the child join the multicast group in its value.
const groupEnv = "GVROUTER_XDPPORT_CHILD_GROUP"

func TestMain(m *testing.M) {
	if ifname := os.Getenv(childEnv); ifname != "" {
		if os.Getenv(memlockEnv) != "" {
			// Lowering a limit needs no privilege.
			lim := unix.Rlimit{Cur: 64 << 10, Max: 64 << 10}
			if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
				fmt.Println("error: setrlimit:", err)
				os.Exit(1)
			}
		}
		extra, _ := strconv.Atoi(os.Getenv(extraTagsEnv))
		p, err := Open(Config{Name: ifname, StateDir: os.Getenv(stateDirEnv), ExtraTags: extra}, nil)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if g := os.Getenv(groupEnv); g != "" {
			mac, err := net.ParseMAC(g)
			if err == nil {
				err = p.SetMulticast([]net.HardwareAddr{mac})
			}
			if err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		fmt.Println("open", p.Mode())
		time.Sleep(time.Minute)
		os.Exit(2)
	}
	// TestStackChecksum runs the stack on a port: check its packet
	// buffers as stack's own tests do, except when benchmarking.
	flag.Parse()
	check := flag.Lookup("test.bench").Value.String() == ""
	if check {
		refs.SetLeakMode(refs.LeaksPanic)
	}
	code := m.Run()
	if check {
		refs.DoLeakCheck()
	}
	os.Exit(code)
}

// TestSIGKILLLeavesNoProgram SIGKILLs a process holding an AF_XDP port
// and checks that its XDP program is gone and that a new port opens on
// the interface.
func TestSIGKILLLeavesNoProgram(t *testing.T) {
	ns := newLab(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), self)
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
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		if s != "open copy, native" {
			if !netnstest.CI() && strings.Contains(s, xsk.ErrPermission.Error()) {
				t.Skipf("child: %s", s)
			}
			t.Fatalf("child said %q, want \"open copy, native\"", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("child did not open the port within 10 s")
	}
	if !ns.HasXDP(t, "vb") {
		t.Fatal("ip link shows no XDP program on vb while the child holds it")
	}
	// ip netns exec execs the binary in place: cmd's process is the child.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	if st := cmd.ProcessState.Sys().(syscall.WaitStatus); !st.Signaled() || st.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL", cmd.ProcessState)
	}
	for end := time.Now().Add(2 * time.Second); ns.HasXDP(t, "vb"); {
		if time.Now().After(end) {
			t.Fatal("the XDP program outlived the SIGKILLed process that held the port")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := open(t, ns, "vb")
	if p.Mode() != "copy, native" {
		t.Errorf("reopened port: Mode() = %q, want \"copy, native\"", p.Mode())
	}
}

// BenchmarkWriteFrames is hw's BenchmarkWriteFrames on AF_XDP: 60-byte
// frames in batches of BatchSize into a veth whose peer drops them.
func BenchmarkWriteFrames(b *testing.B) {
	ns := newLab(b)
	p := open(b, ns, "va")
	frame := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "bench")
	batch := make([][]byte, BatchSize)
	for i := range batch {
		batch[i] = frame
	}
	b.ReportAllocs()
	for b.Loop() {
		p.WriteFrames(batch)
	}
	s := p.Stats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*BatchSize), "ns/frame")
	b.ReportMetric(float64(s.Drops[hw.DropTxNoBufs]+s.Drops[DropUmemEmpty])/float64(b.N*BatchSize), "nobufs/frame")
}

// TestMemlockLimit opens a port in a process without CAP_IPC_LOCK whose
// RLIMIT_MEMLOCK is below the UMEM's size, as a systemd DynamicUser gets
// by default: the kernel refuses the UMEM (ENOBUFS) and the error says
// which limit to raise.
func TestMemlockLimit(t *testing.T) {
	netnstest.Privileged(t, "capsh")
	ns := newLab(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), "capsh", "--drop=cap_ipc_lock", "--", "-c", `exec "$0"`, self)
	cmd.Env = append(os.Environ(), childEnv+"=vb", memlockEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("child opened the port with 64 KiB of RLIMIT_MEMLOCK and no CAP_IPC_LOCK: %s", out)
	}
	if !strings.Contains(string(out), "no buffer space available") || !strings.Contains(string(out), "LimitMEMLOCK") {
		t.Errorf("child said %q, want ENOBUFS naming RLIMIT_MEMLOCK and LimitMEMLOCK", out)
	}
}

// TestVLANInBand: a tagged frame reaches the handler with its tag still
// in Data and no ring-header tag (native XDP runs before the kernel's
// VLAN untagging), which stack.Trunk reads in-band.
func TestVLANInBand(t *testing.T) {
	ns := newLab(t)
	p := open(t, ns, "va")
	got := make(chan hw.Frame, 1)
	run(t, p, func(_ int, fs []hw.Frame) {
		for _, f := range fs {
			if bytes.Contains(f.Data, []byte("tagged")) {
				f.Data = bytes.Clone(f.Data)
				select {
				case got <- f:
				default:
				}
			}
		}
	})
	ns.RawSocket(t, "vb").Send(t, netnstest.Tag(netnstest.Frame(macA, macB, "tagged"), 0x8100, 10))
	select {
	case f := <-got:
		if f.VLANValid || binary.BigEndian.Uint16(f.Data[12:]) != 0x8100 || binary.BigEndian.Uint16(f.Data[14:]) != 10 {
			t.Errorf("tagged frame: VLANValid %v, bytes 12..16 % x, want false and 81 00 00 0a", f.VLANValid, f.Data[12:16])
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the tagged frame did not arrive")
	}
}

// TestExtraTagsMTU: a full-size QinQ frame (1500-byte payload, two
// tags: 1522 bytes) exceeds what veth delivers to a 1500-MTU interface
// (MTU + 18, is_skb_forwardable). With ExtraTags 1 Open raises the
// kernel MTU to 1504 while the port is open, recorded first, so the
// frames arrive, and Close puts 1500 back. Without it the kernel drops
// them before XDP sees them (logged as the control, not asserted: that
// is the kernel's rule, not ours).
func TestExtraTagsMTU(t *testing.T) {
	ns := newLab(t)
	// The sender's own MTU must let the frame out (packet_snd).
	ns.IP(t, "link", "set", "vb", "mtu", "1508")
	payload := "qinq" + string(bytes.Repeat([]byte{'x'}, 1500-4))
	frame := netnstest.Tag(netnstest.Tag(netnstest.Frame(macA, macB, payload), 0x8100, 20), 0x88a8, 10)
	if len(frame) != 1522 {
		t.Fatalf("test frame is %d bytes, want 1522", len(frame))
	}
	kernelMTU := func() int {
		var mtu int
		ns.Do(t, func() {
			ifi, err := net.InterfaceByName("va")
			if err != nil {
				t.Fatal(err)
			}
			mtu = ifi.MTU
		})
		return mtu
	}
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("extra=%d", extra), func(t *testing.T) {
			var p *Port
			var err error
			ns.Do(t, func() { p, err = Open(Config{Name: "va", ExtraTags: extra}, nil) })
			if err != nil {
				if !netnstest.CI() && (errors.Is(err, xsk.ErrPermission) || errors.Is(err, xsk.ErrUnsupported)) {
					t.Skipf("AF_XDP: %v", err)
				}
				t.Fatalf("Open(va, ExtraTags %d) = %v", extra, err)
			}
			// Cleanups run last first: Run stops, then Close.
			t.Cleanup(func() {
				if err := p.Close(); err != nil {
					t.Errorf("Close = %v", err)
				}
				if got := kernelMTU(); got != 1500 {
					t.Errorf("kernel MTU after Close = %d, want 1500 back", got)
				}
			})
			if got, want := kernelMTU(), 1500+4*extra; got != want {
				t.Errorf("kernel MTU while open = %d, want %d", got, want)
			}
			if p.MTU() != 1500 {
				t.Errorf("port MTU = %d, want 1500 (the L3 MTU, not the raised one)", p.MTU())
			}
			var got atomic.Int64
			run(t, p, func(_ int, fs []hw.Frame) {
				for _, f := range fs {
					if len(f.Data) == len(frame) && bytes.Contains(f.Data, []byte("qinq")) {
						got.Add(1)
					}
				}
			})
			const sent = 20
			fd := ns.PacketSocket(t, "vb", unix.ETH_P_ALL)
			defer unix.Close(fd)
			refused := 0 // ENOBUFS: veth dropped it (the control)
			for range sent {
				if _, err := unix.Write(fd, frame); err != nil {
					if extra > 0 || !errors.Is(err, unix.ENOBUFS) {
						t.Fatalf("send the QinQ frame: %v", err)
					}
					refused++
				}
			}
			deadline := time.Now().Add(2 * time.Second)
			for extra > 0 && got.Load() < sent && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if extra == 0 {
				time.Sleep(300 * time.Millisecond)
				t.Logf("control, kernel MTU 1500: %d of %d full-size QinQ frames reached the port, %d refused by veth (ENOBUFS)", got.Load(), sent, refused)
			} else if n := got.Load(); n != sent {
				t.Errorf("%d of %d full-size QinQ frames reached the port, want all", n, sent)
			}
		})
	}
}
