package pppoelink

import (
	"testing"
)

// idleLink is a Link whose goroutine never runs, so its queue fills.
func idleLink() *Link {
	l := &Link{rx: make(chan rxFrame, rxQueue), free: make(chan *[maxFrame]byte, rxQueue)}
	for range rxQueue {
		l.free <- new([maxFrame]byte)
	}
	return l
}

// TestTapDrops: the receive path never blocks on a session that is
// behind: past rxQueue frames each is dropped and counted; an oversized
// frame is counted and never copied; every PPPoE frame is consumed.
func TestTapDrops(t *testing.T) {
	l := idleLink()
	tp := tap{l}
	frame := make([]byte, 60)
	for range rxQueue + 3 {
		if !tp.Deliver(frame) {
			t.Fatal("Deliver left a PPPoE frame to netstack")
		}
	}
	if got := l.stats.RxQueueFull.Load(); got != 3 {
		t.Errorf("RxQueueFull = %d, want 3", got)
	}
	if !tp.Deliver(make([]byte, maxFrame+1)) || l.stats.RxTooLong.Load() != 1 {
		t.Errorf("RxTooLong = %d, want 1", l.stats.RxTooLong.Load())
	}
	if f := <-l.rx; f.n != 60 {
		t.Errorf("queued frame length %d, want 60", f.n)
	}
}

// TestTapAllocs: taking a frame off the receive path allocates nothing.
func TestTapAllocs(t *testing.T) {
	l := idleLink()
	tp := tap{l}
	frame := make([]byte, 1514)
	if n := testing.AllocsPerRun(1000, func() {
		tp.Deliver(frame)
		f := <-l.rx
		l.free <- f.buf
	}); n != 0 {
		t.Errorf("Deliver allocates %.1f times per frame, want 0", n)
	}
}
