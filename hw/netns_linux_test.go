package hw

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// privileged needs what the port tests need: root, ip, nft and tc.
func privileged(t testing.TB) {
	t.Helper()
	netnstest.Privileged(t, "ip", "nft", "tc")
}

// newNetns makes a namespace hwt-PID-N, deleted when t ends.
func newNetns(t testing.TB) *netnstest.Netns {
	t.Helper()
	return netnstest.New(t, "hwt")
}

// collector is a BatchHandler that copies what it gets.
type collector struct {
	mu     sync.Mutex
	frames []Frame
}

func (c *collector) handle(queue int, frames []Frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range frames {
		f.Data = bytes.Clone(f.Data)
		c.frames = append(c.frames, f)
	}
}

// find waits until a frame containing marker arrives.
func (c *collector) find(marker []byte, d time.Duration) (Frame, bool) {
	end := time.Now().Add(d)
	for {
		c.mu.Lock()
		for _, f := range c.frames {
			if bytes.Contains(f.Data, marker) {
				c.mu.Unlock()
				return f, true
			}
		}
		c.mu.Unlock()
		if time.Now().After(end) {
			return Frame{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openIn opens a port inside n.
func openIn(t testing.TB, n *netnstest.Netns, cfg Config) *Port {
	t.Helper()
	var p *Port
	var err error
	n.Do(t, func() { p, err = Open(cfg, nil) })
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "Open: %v", err)
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
