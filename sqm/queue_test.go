package sqm

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// udp4 builds an Ethernet/IPv4/UDP frame of size bytes.
func udp4(src, dst netip.Addr, sport, dport uint16, size int) []byte {
	f := make([]byte, size)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64
	ip[9] = 17
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], dport)
	return f
}

// sink records what a Queue sends, with the time.
type sink struct {
	mu     sync.Mutex
	frames [][]byte
	times  []time.Time
}

func (s *sink) WriteFrames(frames [][]byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for _, f := range frames {
		s.frames = append(s.frames, append([]byte(nil), f...))
		s.times = append(s.times, now)
	}
	return len(frames), nil
}

var (
	wanAddr = netip.MustParseAddr("203.0.113.2")
	remote  = netip.MustParseAddr("198.51.100.7")
	hostA   = netip.MustParseAddr("192.168.1.10")
	hostB   = netip.MustParseAddr("192.168.1.20")
)

// TestQueueRate: a backlog leaves at the shaped rate, counted on IP bytes
// plus overhead.
func TestQueueRate(t *testing.T) {
	var out sink
	const rate, overhead, size = 8_000_000, 24, 1014 // 1000 IP bytes + 24 = 1024 wire bytes
	q, err := New(Upload, Params{Rate: rate, Overhead: overhead, ECN: true}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// 100 frames of distinct flows (no CoDel drop at 100 ms of queue in
	// flows of one packet) = 102,400 wire bytes = 102.4 ms at 8 Mbit/s.
	frames := make([][]byte, 100)
	for i := range frames {
		frames[i] = udp4(wanAddr, remote, uint16(1000+i), 80, size)
	}
	start := time.Now()
	q.WriteFrames(frames)
	deadline := time.Now().Add(2 * time.Second)
	for {
		out.mu.Lock()
		n := len(out.frames)
		out.mu.Unlock()
		if n == len(frames) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.frames) != len(frames) {
		t.Fatalf("sent %d of %d frames; stats %+v", len(out.frames), len(frames), q.Stats())
	}
	took := out.times[len(out.times)-1].Sub(start)
	want := time.Duration(float64(len(frames)*(size-14+overhead)*8) / rate * float64(time.Second))
	// The first frame leaves at once, so the last leaves one frame early.
	if took < want*85/100 || took > want*130/100 {
		t.Errorf("100 frames took %v, want about %v (%d bit/s)", took, want, rate)
	}
	st := q.Stats()
	if st.Queue.Tins[0].SentPackets != uint64(len(frames)) || st.Rate != rate || st.Direction != "upload" {
		t.Errorf("stats %+v", st)
	}
}

// TestQueueHostFairness: a host with 16 flows and a host with one share
// the rate half and half when HostFunc names the inside hosts of frames
// that all show the WAN address (after SNAT); without it, by flows.
func TestQueueHostFairness(t *testing.T) {
	// Source ports 2000.. are hostA's 16 flows, 3000 is hostB's one.
	host := func(ip []byte, egress bool) (netip.Addr, bool) {
		if !egress {
			t.Error("upload queue asked for a download host")
		}
		if binary.BigEndian.Uint16(ip[20:]) >= 3000 {
			return hostB, true
		}
		return hostA, true
	}
	for _, tc := range []struct {
		name   string
		host   HostFunc
		lo, hi float64 // hostB's share
	}{
		{"by inside host", host, 0.45, 0.55},
		{"no host lookup", nil, 0.02, 0.12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out sink
			q, err := New(Upload, Params{Rate: 20_000_000}, tc.host, &out)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			// Offer 4x the rate for 300 ms: every ms 16 frames of A's
			// flows and 4 of B's flow.
			var batch [][]byte
			for i := range 16 {
				batch = append(batch, udp4(wanAddr, remote, uint16(2000+i), 80, 1514))
			}
			for range 4 {
				batch = append(batch, udp4(wanAddr, remote, 3000, 80, 1514))
			}
			stop := time.Now().Add(300 * time.Millisecond)
			for time.Now().Before(stop) {
				q.WriteFrames(batch)
				time.Sleep(time.Millisecond)
			}
			q.Close()
			out.mu.Lock()
			defer out.mu.Unlock()
			var a, b int
			for _, f := range out.frames {
				if binary.BigEndian.Uint16(f[34:]) >= 3000 {
					b++
				} else {
					a++
				}
			}
			share := float64(b) / float64(a+b)
			t.Logf("hostA %d frames, hostB %d frames: B's share %.2f", a, b, share)
			if a+b < 200 || share < tc.lo || share > tc.hi {
				t.Errorf("B's share %.2f of %d frames, want %.2f..%.2f", share, a+b, tc.lo, tc.hi)
			}
		})
	}
}

// TestQueueReconfigureKeepsBacklog: a new rate applies to what is queued.
func TestQueueReconfigureKeepsBacklog(t *testing.T) {
	var out sink
	q, err := New(Upload, Params{Rate: 8000}, nil, &out) // 1 kB/s: nothing drains
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var frames [][]byte
	for i := range 50 {
		frames = append(frames, udp4(wanAddr, remote, uint16(1000+i), 80, 1014))
	}
	q.WriteFrames(frames)
	time.Sleep(20 * time.Millisecond)
	if err := q.Reconfigure(Params{Rate: 100_000_000}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	out.mu.Lock()
	n := len(out.frames)
	out.mu.Unlock()
	if n != len(frames) {
		t.Errorf("after raising the rate %d of %d queued frames left; stats %+v", n, len(frames), q.Stats().Queue)
	}
	if got := q.Params().Rate; got != 100_000_000 {
		t.Errorf("rate %d", got)
	}
}

// lendSink is a sink that lends the 8 octets before frames of mem, as a
// port does before a frame of its receive ring.
type lendSink struct {
	sink
	mem []byte
}

func (s *lendSink) ExtendFrame(f []byte, head int) []byte {
	if len(f) == 0 || head > 8 || &f[0] != &s.mem[8] {
		return nil
	}
	return s.mem[8-head : 8+len(f)]
}

// TestQueueExtendFrame: the queue lends what its output lends, so the
// stack can push a header in front of a received frame where it lies;
// the frame as extended is what leaves. An output that lends nothing
// makes the queue lend nothing.
func TestQueueExtendFrame(t *testing.T) {
	frame := udp4(wanAddr, remote, 1000, 80, 200)
	out := &lendSink{mem: make([]byte, 8+len(frame))}
	q, err := New(Upload, Params{Rate: 100_000_000}, nil, out)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	f := out.mem[8 : 8+copy(out.mem[8:], frame)]
	x := q.ExtendFrame(f, 8)
	if x == nil || len(x) != 8+len(f) || &x[8] != &f[0] {
		t.Fatalf("ExtendFrame(frame, 8) = %d bytes, want the output's room before the frame", len(x))
	}
	copy(x, x[8:20]) // the MAC addresses move forward, as the stack pushes
	copy(x[12:20], "\x88\x64\x11\x00\x00\x01\x00\x00")
	want := bytes.Clone(x)
	q.WriteFrames([][]byte{x})
	clear(out.mem) // the receive memory is reused after the batch
	deadline := time.Now().Add(2 * time.Second)
	for {
		out.mu.Lock()
		n := len(out.frames)
		var got []byte
		if n > 0 {
			got = out.frames[0]
		}
		out.mu.Unlock()
		if n > 0 {
			if !bytes.Equal(got, want) {
				t.Errorf("sent\n% x\nwant\n% x", got[:24], want[:24])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the extended frame never left")
		}
		time.Sleep(time.Millisecond)
	}
	var plain sink
	q2, err := New(Upload, Params{Rate: 100_000_000}, nil, &plain)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if q2.ExtendFrame(f, 8) != nil {
		t.Error("ExtendFrame with an output that lends nothing returned room")
	}
}
