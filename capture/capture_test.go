package capture

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// tshark returns tshark's fields (one line per frame, fields split by
// tabs) for the pcapng in file; "-" reads stdin from in.
func tshark(t *testing.T, file string, in []byte, fields ...string) [][]string {
	t.Helper()
	path, err := exec.LookPath("tshark")
	if err != nil {
		netnstest.SkipOrFail(t, "tshark: %v", err)
	}
	args := []string{"-r", file, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v: %s", args, err, stderr.String())
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" {
			rows = append(rows, strings.Split(l, "\t"))
		}
	}
	return rows
}

// startCapture starts r on a new point through a Manager and waits until
// the point is active; wait returns the result.
func startCapture(t *testing.T, r Request, out *bytes.Buffer) (p *Point, cancel func(), wait func() Result) {
	t.Helper()
	p = NewPoint(r.Iface, nil)
	m := NewManager(func(string) (*Point, error) { return p, nil })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	start, _, err := m.Prepare(r)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() {
		res, err := start(ctx, out)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for !p.Active() {
		time.Sleep(time.Millisecond)
	}
	return p, cancel, func() Result {
		select {
		case res := <-done:
			return res
		case <-time.After(10 * time.Second):
			t.Fatal("capture did not end")
			return Result{}
		}
	}
}

// TestCaptureTshark writes a port's frames (a ring-header tag, MACsec,
// IPv6) and an interface's (its tag stripped) and checks what tshark
// decodes: 802.1Q, the SecTAG, IPv4/IPv6, TCP and each direction.
func TestCaptureTshark(t *testing.T) {
	var out bytes.Buffer
	p, cancel, wait := startCapture(t, Request{Iface: "eth0"}, &out)
	tcp4 := tcp4Frame(t, "192.0.2.1", "198.51.100.7", 40000, 443)
	tcp6 := tcp6Frame(t, "fd00:1::9", "2001:db8::1", 40000, 22)
	p.CaptureRx([]hw.Frame{
		{Data: tcp4, WireLen: len(tcp4), VLANValid: true, VLANTCI: 2}, // the kernel stripped VLAN 2
		{Data: macsecFrame(), WireLen: len(macsecFrame())},
	})
	p.CaptureTx([][]byte{tcp6, tagged(tcp4, 0x8100, 1)}, 0)
	p.CaptureTx([][]byte{tagged(tcp4, 0x8100, 7)}, 4) // an interface's own tag left out
	cancel()
	res := wait()
	if res.Captured != 5 || res.Received != 2 || res.Sent != 3 || res.Dropped != 0 {
		t.Fatalf("result %+v, want 5 captured (2 in, 3 out), 0 dropped", res)
	}
	file := filepath.Join(t.TempDir(), "c.pcapng")
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rows := tshark(t, file, nil, "frame.protocols", "vlan.id", "frame.packet_flags_direction", "tcp.dstport", "macsec.PN", "frame.interface_name")
	want := [][]string{
		{"eth:ethertype:vlan:ethertype:ip:tcp", "2", "0x00000001", "443", "", "eth0"},
		{"eth:ethertype:macsec", "", "0x00000001", "", "1", "eth0"},
		{"eth:ethertype:ipv6:tcp", "", "0x00000002", "22", "", "eth0"},
		{"eth:ethertype:vlan:ethertype:ip:tcp", "1", "0x00000002", "443", "", "eth0"},
		{"eth:ethertype:ip:tcp", "", "0x00000002", "443", "", "eth0"},
	}
	if len(rows) != len(want) {
		t.Fatalf("tshark read %d frames, want %d: %q", len(rows), len(want), rows)
	}
	for i := range want {
		// frame.protocols may go on past TCP (a payload dissector).
		if len(rows[i]) != len(want[i]) || !strings.HasPrefix(rows[i][0], want[i][0]) ||
			strings.Join(rows[i][1:], "|") != strings.Join(want[i][1:], "|") {
			t.Errorf("frame %d: tshark %q, want %q", i+1, rows[i], want[i])
		}
	}
}

// TestCaptureCountAndSnaplen checks the count limit ends the capture by
// itself and frames are cut at snaplen, keeping their wire length.
func TestCaptureCountAndSnaplen(t *testing.T) {
	var out bytes.Buffer
	p, _, wait := startCapture(t, Request{Iface: "eth0.2", Count: 3, Snaplen: 64, Filter: "tcp and port 22"}, &out)
	tcp4 := tcp4Frame(t, "192.0.2.1", "198.51.100.7", 40000, 443)
	big := tcp6Frame(t, "fd00:1::9", "2001:db8::1", 40000, 22)
	for range 10 {
		p.CaptureRx([]hw.Frame{{Data: tcp4, WireLen: len(tcp4)}, {Data: big, WireLen: len(big)}})
	}
	res := wait()
	if res.Captured != 3 {
		t.Fatalf("captured %d, want 3", res.Captured)
	}
	file := filepath.Join(t.TempDir(), "c.pcapng")
	os.WriteFile(file, out.Bytes(), 0o600)
	rows := tshark(t, file, nil, "frame.cap_len", "frame.len", "tcp.dstport")
	if len(rows) != 3 {
		t.Fatalf("tshark read %d frames, want 3", len(rows))
	}
	for _, r := range rows {
		if r[0] != "64" || r[1] != "79" || r[2] != "22" {
			t.Errorf("frame %q, want cap_len 64, len 79, port 22", r)
		}
	}
}

// TestCaptureDrops checks that a full queue drops and counts instead of
// waiting; run reports the count (and writes it as isb_ifdrop).
func TestCaptureDrops(t *testing.T) {
	r := Request{Iface: "eth0"}
	if err := r.normalize(); err != nil {
		t.Fatal(err)
	}
	s := newSession(r, nil)
	f := tcp4Frame(t, "192.0.2.1", "198.51.100.7", 1, 2)
	for range queueLen + 10 {
		s.add(In, f, nil, 0, len(f)) // nobody writes: the queue fills
	}
	if got := s.dropped.Load(); got != 10 {
		t.Fatalf("dropped %d, want 10", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	res, err := s.run(ctx, "eth0", 60, &out)
	if err != nil || res.Captured != queueLen || res.Dropped != 10 {
		t.Fatalf("run = %+v, %v; want %d captured, 10 dropped", res, err, queueLen)
	}
	file := filepath.Join(t.TempDir(), "c.pcapng")
	os.WriteFile(file, out.Bytes(), 0o600)
	if rows := tshark(t, file, nil, "frame.number"); len(rows) != queueLen {
		t.Errorf("tshark read %d frames, want %d", len(rows), queueLen)
	}
}

func TestManagerBounds(t *testing.T) {
	p := NewPoint("eth0", nil)
	m := NewManager(func(name string) (*Point, error) {
		if name != "eth0" {
			return nil, errors.New("no port or interface " + name)
		}
		return p, nil
	})
	var cancels []func()
	for range MaxSessions {
		_, c, err := m.Prepare(Request{Iface: "eth0"})
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, c)
	}
	if _, _, err := m.Prepare(Request{Iface: "eth0"}); !errors.Is(err, ErrBusy) {
		t.Errorf("capture %d: %v, want ErrBusy", MaxSessions+1, err)
	}
	cancels[0]()
	cancels[0]() // twice is harmless
	if _, c, err := m.Prepare(Request{Iface: "eth0"}); err != nil {
		t.Errorf("after one ended: %v", err)
	} else {
		c()
	}
	for _, r := range []Request{
		{Iface: "eth9"}, {}, {Iface: "eth0", Count: -1}, {Iface: "eth0", Seconds: MaxSeconds + 1},
		{Iface: "eth0", Snaplen: -1}, {Iface: "eth0", Filter: "tcp or udp"},
	} {
		if _, c, err := m.Prepare(r); err == nil {
			c()
			t.Errorf("Prepare(%+v) = nil error", r)
		}
	}
}

// TestCaptureOffCost checks that with no capture a point and its writer
// add no allocation and hand frames on untouched.
func TestCaptureOffCost(t *testing.T) {
	p := NewPoint("eth0", nil)
	var w countingWriter
	cw := &Writer{FrameWriter: &w, P: p}
	frames := []hw.Frame{{Data: make([]byte, 60)}}
	tx := [][]byte{make([]byte, 60)}
	if a := testing.AllocsPerRun(100, func() { cw.WriteFrames(tx); p.CaptureRx(frames); p.CaptureTx(tx, 0) }); a != 0 {
		t.Errorf("capture off: %v allocations, want 0", a)
	}
	if w.n == 0 {
		t.Error("writer not called")
	}
}

type countingWriter struct{ n int }

func (w *countingWriter) WriteFrames(f [][]byte) (int, error) { w.n += len(f); return len(f), nil }

func BenchmarkPointOff(b *testing.B) {
	p := NewPoint("eth0", nil)
	frames := make([]hw.Frame, 64)
	b.ReportAllocs()
	for b.Loop() {
		p.CaptureRx(frames)
	}
}

// TestCaptureCounted checks Result.Counted: how far the point's own
// counters moved over the window, beside what the capture holds, so a
// frame the data path counted but never showed the capture stands out.
func TestCaptureCounted(t *testing.T) {
	p := NewPoint("eth0.2", nil)
	var rx, tx atomic.Uint64
	rx.Store(1000) // counted before the capture: not in its window
	read := make(chan struct{}, 2)
	p.SetCounters(func() (uint64, uint64) {
		read <- struct{}{}
		return rx.Load(), tx.Load()
	})
	m := NewManager(func(string) (*Point, error) { return p, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		res, err := m.Run(ctx, Request{Iface: "eth0.2"}, io.Discard)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-read // the window starts
	f := tcp4Frame(t, "192.0.2.1", "198.51.100.7", 40000, 443)
	p.CaptureRx([]hw.Frame{{Data: f, WireLen: len(f)}, {Data: f, WireLen: len(f)}})
	rx.Add(2)
	p.CaptureTx([][]byte{f}, 0)
	tx.Add(1)
	tx.Add(1) // a frame sent past the capture
	cancel()
	<-read // the window ends
	res := <-done
	want := Counted{Received: 2, Sent: 2}
	if res.Received != 2 || res.Sent != 1 || res.Counted == nil || *res.Counted != want {
		t.Errorf("result %+v (counted %+v), want 2 received and 1 sent captured, 2 and 2 counted", res, res.Counted)
	}

	// A point without counters reports none.
	var out bytes.Buffer
	_, stop, wait := startCapture(t, Request{Iface: "eth0"}, &out)
	stop()
	if res := wait(); res.Counted != nil {
		t.Errorf("point without counters: Counted = %+v, want nil", *res.Counted)
	}
}
