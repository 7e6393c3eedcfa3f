package hw

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// holdingBacklog is a Backlog that keeps every frame HandleRing gets and
// lets one go per ServeBacklog, so that frames reach served only if the
// port's loop serves it while its ring is idle.
type holdingBacklog struct {
	mu      sync.Mutex
	held    [][]byte
	served  [][]byte
	overlap bool
	inside  bool
}

func (b *holdingBacklog) enter() {
	b.mu.Lock()
	if b.inside {
		b.overlap = true
	}
	b.inside = true
}

func (b *holdingBacklog) leave() {
	b.inside = false
	b.mu.Unlock()
}

func (b *holdingBacklog) HandleRing(queue int, frames []Frame, more bool) {
	b.enter()
	defer b.leave()
	for _, f := range frames {
		b.held = append(b.held, bytes.Clone(f.Data))
	}
}

func (b *holdingBacklog) ServeBacklog(queue int) bool {
	b.enter()
	defer b.leave()
	if len(b.held) == 0 {
		return false
	}
	b.served = append(b.served, b.held[0])
	b.held = b.held[1:]
	return true
}

// TestRunBacklog: RunBacklog hands frames to the Backlog and serves it
// from the receive loop when the ring has nothing more, without new
// traffic to wake it, on the V3 ring and on the light ring alike.
func TestRunBacklog(t *testing.T) {
	privileged(t)
	for _, blockOnly := range []bool{true, false} {
		t.Run(fmt.Sprintf("BlockRingOnly=%v", blockOnly), func(t *testing.T) {
			n := newNetns(t)
			vethPair(t, n, "p0", "p1")
			p := openIn(t, n, Config{Name: "p1", KeepKernel: true, BlockRingOnly: blockOnly})
			var b holdingBacklog
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.RunBacklog(ctx, &b) }()
			defer func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("RunBacklog() = %v", err)
				}
			}()
			peer := n.RawSocket(t, "p0")
			const frames = 5
			for i := range frames {
				peer.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, fmt.Sprintf("backlog-%d", i)))
			}
			var got []string
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				b.mu.Lock()
				got = got[:0]
				for _, f := range b.served {
					if i := bytes.Index(f, []byte("backlog-")); i >= 0 {
						got = append(got, string(f[i:i+len("backlog-")+1]))
					}
				}
				b.mu.Unlock()
				if len(got) == frames {
					break
				}
			}
			if len(got) != frames {
				t.Fatalf("served %v, want backlog-0..%d (the loop did not serve its Backlog while idle)", got, frames-1)
			}
			for i, s := range got {
				if want := fmt.Sprintf("backlog-%d", i); s != want {
					t.Errorf("served[%d] = %s, want %s", i, s, want)
				}
			}
			b.mu.Lock()
			if b.overlap {
				t.Error("HandleRing and ServeBacklog overlapped")
			}
			b.mu.Unlock()
		})
	}
}

// ringHoldingBacklog is a RingHolder that keeps views of the ring's
// frames (no copy) and serves one frame per ServeBacklog, reading it
// only then; while paused it serves none.
type ringHoldingBacklog struct {
	mu     sync.Mutex
	paused bool
	held   []heldFrame
	served [][]byte
	// letGo counts the LetGo calls that found frames to copy; handled
	// counts HandleRing's frames (not from a V3 block).
	letGo, handled int
}

type heldFrame struct {
	data []byte
	blk  int // -1 once copied
}

func (b *ringHoldingBacklog) HandleRing(queue int, frames []Frame, more bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range frames {
		b.held = append(b.held, heldFrame{bytes.Clone(f.Data), -1})
		b.handled++
	}
}

func (b *ringHoldingBacklog) HoldRing(queue int, frames []Frame, more bool, blk int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range frames {
		b.held = append(b.held, heldFrame{f.Data, blk})
	}
}

func (b *ringHoldingBacklog) Holding(queue, blk int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, f := range b.held {
		if f.blk == blk {
			n++
		}
	}
	return n
}

func (b *ringHoldingBacklog) LetGo(queue, blk int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for i, f := range b.held {
		if f.blk == blk {
			b.held[i] = heldFrame{bytes.Clone(f.data), -1}
			n++
		}
	}
	if n > 0 {
		b.letGo++
	}
}

func (b *ringHoldingBacklog) ServeBacklog(queue int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused || len(b.held) == 0 {
		return false
	}
	b.served = append(b.served, bytes.Clone(b.held[0].data))
	b.held = b.held[1:]
	return true
}

// TestRunBacklogHoldsRing: with a RingHolder the V3 ring's frames stay
// where they lie until served: a block goes back to the kernel once its
// frames are served, and past RingHeldBlocks the oldest is let go (its
// frames copied) first, so every frame is served intact and in order,
// and the ring keeps taking frames.
func TestRunBacklogHoldsRing(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true, BlockRingOnly: true})
	b := &ringHoldingBacklog{paused: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.RunBacklog(ctx, b) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("RunBacklog() = %v", err)
		}
	}()
	peer := n.RawSocket(t, "p0")
	// One frame a block: each waits out the 1 ms retire timeout.
	const paused = RingHeldBlocks + 4
	const total = paused + 2*RingBlocks
	for i := range total {
		if i == paused {
			b.mu.Lock()
			b.paused = false
			b.mu.Unlock()
		}
		peer.Send(t, netnstest.Frame(netnstest.Broadcast, []byte{2, 0, 0, 0, 0, 1}, fmt.Sprintf("hold-%03d", i)))
		time.Sleep(4 * RingRetireTimeout)
	}
	var got []string
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b.mu.Lock()
		got = got[:0]
		for _, f := range b.served {
			if i := bytes.Index(f, []byte("hold-")); i >= 0 && i+len("hold-000") <= len(f) {
				got = append(got, string(f[i:i+len("hold-000")]))
			}
		}
		b.mu.Unlock()
		if len(got) >= total {
			break
		}
	}
	if len(got) != total {
		t.Fatalf("served %d frames %v, want %d", len(got), got, total)
	}
	for i, s := range got {
		if want := fmt.Sprintf("hold-%03d", i); s != want {
			t.Errorf("served[%d] = %s, want %s", i, s, want)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.handled != 0 {
		t.Errorf("%d frames came through HandleRing, want all through HoldRing", b.handled)
	}
	if b.letGo < paused-RingHeldBlocks-1 {
		t.Errorf("LetGo copied %d blocks, want at least %d: the loop held more than RingHeldBlocks", b.letGo, paused-RingHeldBlocks-1)
	}
	// The first block after the pause may come before the loop has
	// served the held ones: one more.
	if b.letGo > paused-RingHeldBlocks+2 {
		t.Errorf("LetGo copied %d blocks, want at most %d: blocks were let go though their frames were served", b.letGo, paused-RingHeldBlocks+2)
	}
	t.Logf("%d frames, %d blocks let go", total, b.letGo)
	if st := p.Stats(); st.Drops[DropRing] != 0 {
		t.Errorf("ring drops %d, want 0", st.Drops[DropRing])
	}
}
