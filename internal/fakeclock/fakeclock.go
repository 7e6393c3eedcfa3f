// Package fakeclock is the clock the tests run on: its time moves only
// when a test says so. Advance fires every timer due on the way at its
// own time, inside a testing/synctest bubble; Forward only moves the
// time, for code that reads Now and sets no timers (the servers, the DNS
// forwarder, the NAT engine).
//
// It is for tests only. It is an ordinary package, not a _test.go file,
// only because test files cannot be shared between packages; it lives
// under the module's internal/ so that every package of the module, and
// nothing outside it, can import it. Each service's Clock interface names its
// own Timer type, so a test wraps Clock in a one-method adapter whose
// AfterFunc returns that type.
package fakeclock

import (
	"slices"
	"sync"
	"testing/synctest"
	"time"
)

// Epoch is where New starts the time.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a clock whose time moves only by Advance, AdvanceTo, Forward
// and Set.
// It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex // protects now, timers and each Timer's done
	now    time.Time
	timers []*Timer
}

// Timer is a pending AfterFunc of a Clock.
type Timer struct {
	clk  *Clock
	when time.Time
	f    func()
	done bool // fired or stopped
}

// New returns a Clock at Epoch.
func New() *Clock { return NewAt(Epoch) }

// NewAt returns a Clock at t.
func NewAt(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc arranges for f to be called, on the goroutine that advances
// the clock, once the time has moved d past now.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &Timer{clk: c, when: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop prevents the call if it has not happened yet, and reports whether
// it did.
func (t *Timer) Stop() bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	was := !t.done
	t.done = true
	return was
}

// step fires the earliest pending timer due at or before target, moving
// the time to it, and reports whether there was one.
func (c *Clock) step(target time.Time) bool {
	c.mu.Lock()
	c.timers = slices.DeleteFunc(c.timers, func(t *Timer) bool { return t.done })
	var first *Timer
	for _, t := range c.timers {
		if !t.when.After(target) && (first == nil || t.when.Before(first.when)) {
			first = t
		}
	}
	if first == nil {
		c.mu.Unlock()
		return false
	}
	if first.when.After(c.now) {
		c.now = first.when
	}
	first.done = true
	c.mu.Unlock()
	first.f()
	return true
}

// Advance moves the clock by d, firing every timer on the way at its own
// time and letting the bubble's goroutines act on each before the next
// (synctest.Wait). It must run inside a synctest bubble.
func (c *Clock) Advance(d time.Duration) {
	target := c.Now().Add(d)
	synctest.Wait()
	for c.step(target) {
		synctest.Wait()
	}
	c.mu.Lock()
	c.now = target
	c.mu.Unlock()
	synctest.Wait()
}

// AdvanceTo is Advance to an absolute time.
func (c *Clock) AdvanceTo(t time.Time) { c.Advance(t.Sub(c.Now())) }

// Forward moves the time by d and fires nothing, like Set. Unlike
// Advance it needs no synctest bubble: it is for code that only reads
// Now.
func (c *Clock) Forward(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set jumps the time to t and fires nothing, as a suspended machine's
// clock does; the timers now overdue fire at the next Advance.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Counting is a rand.Source (math/rand/v2) that returns its start value
// plus the number of earlier calls, so a test knows every draw: the
// timers' jitter, drawn from the high bits, stays where the start puts
// it, and each transaction id, from the low bits, differs. It is safe for
// concurrent use.
type Counting struct {
	mu sync.Mutex
	v  uint64
}

// NewCounting returns a Counting whose first draw is v.
func NewCounting(v uint64) *Counting { return &Counting{v: v} }

// Uint64 implements rand.Source.
func (s *Counting) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.v++
	return s.v - 1
}
