package fakeclock

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestAdvance checks that Advance fires the due timers in time order,
// each at its own time, including one a callback sets inside the window,
// and none that was stopped or is due later.
func TestAdvance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		var fired []time.Duration
		record := func() { fired = append(fired, c.Now().Sub(Epoch)) }
		c.AfterFunc(3*time.Second, record)
		c.AfterFunc(time.Second, func() {
			record()
			c.AfterFunc(time.Second, record) // due at 2 s, inside the window
		})
		stopped := c.AfterFunc(2500*time.Millisecond, record)
		c.AfterFunc(10*time.Second, record)
		if !stopped.Stop() {
			t.Error("Stop() of a pending timer = false, want true")
		}
		if stopped.Stop() {
			t.Error("second Stop() = true, want false")
		}
		c.Advance(5 * time.Second)
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(fired, want) {
			t.Errorf("fired at %v, want %v", fired, want)
		}
		if got, want := c.Now(), Epoch.Add(5*time.Second); !got.Equal(want) {
			t.Errorf("Now() after Advance(5s) = %v, want %v", got, want)
		}
		c.AdvanceTo(Epoch.Add(10 * time.Second))
		if len(fired) != 4 || fired[3] != 10*time.Second {
			t.Errorf("fired at %v after AdvanceTo(10s), want the 10 s timer last", fired)
		}
	})
}

// TestSet checks that Set moves the time without firing, and that the
// next Advance fires what became overdue, at the time it finds.
func TestSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewAt(Epoch.Add(time.Hour))
		var at []time.Time
		c.AfterFunc(time.Minute, func() { at = append(at, c.Now()) })
		jump := Epoch.Add(2 * time.Hour)
		c.Set(jump)
		if len(at) != 0 || !c.Now().Equal(jump) {
			t.Fatalf("after Set: fired %v, Now() = %v, want nothing fired and %v", at, c.Now(), jump)
		}
		c.Advance(0)
		if len(at) != 1 || !at[0].Equal(jump) {
			t.Errorf("Advance(0) after the jump fired at %v, want once at %v", at, jump)
		}
	})
}

// TestForward checks that Forward moves the time by d, adding up, fires
// nothing, and works outside a synctest bubble (where Advance panics).
func TestForward(t *testing.T) {
	c := New()
	fired := false
	c.AfterFunc(time.Second, func() { fired = true })
	c.Forward(time.Second)
	c.Forward(2 * time.Second)
	if got, want := c.Now(), Epoch.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("Now() after Forward(1s), Forward(2s) = %v, want %v", got, want)
	}
	if fired {
		t.Error("Forward fired a timer, want none fired")
	}
}

func TestCounting(t *testing.T) {
	s := NewCounting(1 << 63)
	for i := range uint64(3) {
		if got, want := s.Uint64(), uint64(1<<63)+i; got != want {
			t.Errorf("draw %d = %#x, want %#x", i, got, want)
		}
	}
}
