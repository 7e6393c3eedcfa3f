package hw

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
)

// maxRxAllocsPerFrame bounds the heap allocations per received frame on a
// real socket, over the whole process (the receive goroutine, the ring
// waits, the runtime): the frames themselves must cost none; what is left
// is per wait on the ring (a deadline, the poller), shared by a block.
const maxRxAllocsPerFrame = 0.05

// TestReceiveAllocs sends frames from a peer socket (one write(2) each,
// no allocation) to a running port and counts the process's heap
// allocations while the port receives them.
func TestReceiveAllocs(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	// With vnet headers (the generic profile's): each frame's header is
	// decoded on the way.
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true, VnetHdr: VnetOn})
	var got atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx, func(_ int, frames []Frame) { got.Add(int64(len(frames))) }); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Run() = %v", err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	fd := n.PacketSocket(t, "p0", netnstest.EtherTypeExperimental)
	defer unix.Close(fd)
	frame := netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, "allocs")
	send := func(k int) int64 {
		want := got.Load() + int64(k)
		for range k {
			for {
				if _, err := unix.Write(fd, frame); err == nil {
					break
				} else if err != unix.ENOBUFS && err != unix.EAGAIN {
					t.Fatalf("write: %v", err)
				}
				runtime.Gosched()
			}
		}
		for end := time.Now().Add(5 * time.Second); got.Load() < want && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		return want - got.Load()
	}
	send(1000) // warm up: the ring, the poller, the goroutines
	const frames = 20000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := got.Load()
	missing := send(frames)
	runtime.ReadMemStats(&m1)
	received := got.Load() - start
	if received < frames/2 {
		t.Fatalf("received %d of %d frames (missing %d)", received, frames, missing)
	}
	per := float64(m1.Mallocs-m0.Mallocs) / float64(received)
	t.Logf("%d frames received, %d allocations: %.4f per frame", received, m1.Mallocs-m0.Mallocs, per)
	if per > maxRxAllocsPerFrame {
		t.Errorf("%.4f allocations per received frame, want at most %v", per, maxRxAllocsPerFrame)
	}
}
