package xdpport

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// holdingBacklog keeps every frame HandleRing gets that holds marker and
// lets one go per ServeBacklog, so that frames are served only if the
// queue loop serves it while its RX ring is idle.
type holdingBacklog struct {
	marker       []byte
	mu           sync.Mutex
	held, served int
}

func (b *holdingBacklog) HandleRing(_ int, frames []hw.Frame, _ bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range frames {
		if bytes.Contains(f.Data, b.marker) {
			b.held++
		}
	}
}

func (b *holdingBacklog) ServeBacklog(int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == 0 {
		return false
	}
	b.held--
	b.served++
	return true
}

// TestRunBacklog: RunBacklog hands frames to the Backlog and serves it
// from the queue loop when the RX ring has nothing more, with no new
// traffic to wake it.
func TestRunBacklog(t *testing.T) {
	const n = 20
	ns := newLab(t)
	p := open(t, ns, "va")
	b := &holdingBacklog{marker: []byte("held")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.RunBacklog(ctx, b) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunBacklog = %v, want nil after cancel", err)
		}
	}()
	peer := ns.RawSocket(t, "vb")
	for range n {
		peer.Send(t, netnstest.Frame(macA, macB, "held"))
	}
	served := 0
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b.mu.Lock()
		served = b.served
		b.mu.Unlock()
		if served == n {
			break
		}
	}
	if served != n {
		t.Errorf("Backlog served %d frames, want %d (the loop did not serve it while idle)", served, n)
	}
}
