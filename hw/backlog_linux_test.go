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
