package hw

import (
	"context"
	"sync"
)

// AfterFuncWait is context.AfterFunc whose stop also waits for f when
// ctx's end has already started it, and keeps it from starting after
// stop returns. A receive loop's waker touches the port's sockets: with
// context.AfterFunc's own stop, a waker started by a cancelled context
// can still run after Run returned and Close released them.
func AfterFuncWait(ctx context.Context, f func()) (stop func()) {
	var (
		mu   sync.Mutex
		done bool
	)
	cancel := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			f()
		}
	})
	return func() {
		cancel()
		mu.Lock()
		done = true
		mu.Unlock()
	}
}
