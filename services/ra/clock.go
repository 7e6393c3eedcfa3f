package ra

import (
	crand "crypto/rand"
	"math/rand/v2"
	"time"
)

// Clock is the services' source of time: every timer (the Advertiser's
// unsolicited and solicited RAs, the Learner's solicitations and the
// lifetimes it keeps) is an AfterFunc on it, so that tests run on a fake
// clock.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened yet, and reports
	// whether it did.
	Stop() bool
}

// SystemClock is the real clock: time.Now and time.AfterFunc.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// newSource is the default rand.Source: ChaCha8 seeded from crypto/rand,
// so that two routers on a link draw different intervals.
func newSource() rand.Source {
	var seed [32]byte
	crand.Read(seed[:])
	return rand.NewChaCha8(seed)
}
