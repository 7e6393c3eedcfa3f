package hw

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestAfterFuncWait checks that stop waits for an f the context's end
// already started, and that f never runs after stop returned.
func TestAfterFuncWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	stop := AfterFuncWait(ctx, func() {
		close(started)
		<-release
		finished.Store(true)
	})
	cancel()
	<-started
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while f was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if !finished.Load() {
		t.Fatal("stop returned before f finished")
	}

	// Stopped first: f never runs, even when the context ends after.
	ctx, cancel = context.WithCancel(context.Background())
	var ran atomic.Bool
	stop = AfterFuncWait(ctx, func() { ran.Store(true) })
	stop()
	cancel()
	time.Sleep(20 * time.Millisecond)
	if ran.Load() {
		t.Fatal("f ran after stop")
	}
}
