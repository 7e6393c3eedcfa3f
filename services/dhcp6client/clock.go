package dhcp6client

import "time"

// Clock is the client's source of time: every timer of RFC 8415 (the
// initial delay, retransmissions, T1, T2, lifetimes) is an AfterFunc on
// it, so that tests run on a fake clock and the lab can run faster than
// real time.
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
