//go:build labclock

package main

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gvrouter/gvrouter/portmap"
	"github.com/gvrouter/gvrouter/router"
)

// A build with -tags labclock, and never the appliance's, runs the port
// mapping table on a clock that SIGUSR2 moves forward by the smallest
// lifetime (portmap.DefaultMinLifetime, 120 s) each time
// (router.WithPortMapClock): the lab's port mapping test sees a mapping
// of that lifetime expire, and a longer one stay, without waiting two
// minutes.
func init() {
	labOptions = append(labOptions, func() []router.Option {
		var skew atomic.Int64 // nanoseconds the clock is ahead of time.Now
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGUSR2)
		go func() { // for the process's life
			for range sigs {
				skew.Add(int64(portmap.DefaultMinLifetime))
			}
		}()
		return []router.Option{router.WithPortMapClock(func() time.Time {
			return time.Now().Add(time.Duration(skew.Load()))
		})}
	})
}
