package sqm

import (
	"testing"
	"time"
)

// TestSleeper: a sleep ends at its deadline, at a kick that came after
// arm (even one before the sleep began), and a kick after close is
// harmless.
func TestSleeper(t *testing.T) {
	var s sleeper
	s.init()
	done := make(chan time.Duration)
	run := func(f func()) time.Duration {
		go func() {
			t0 := time.Now()
			f()
			done <- time.Since(t0)
		}()
		return <-done
	}
	if d := run(func() { s.arm(); s.sleep(20e6) }); d < 19*time.Millisecond || d > time.Second {
		t.Errorf("sleep(20 ms) took %v", d)
	}
	if d := run(func() { s.arm(); s.kick(); s.sleep(int64(5 * time.Second)) }); d > time.Second {
		t.Errorf("a kick after arm did not end the sleep: %v", d)
	}
	s.arm() // before the kick below can come
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.kick()
	}()
	if d := run(func() { s.sleep(-1) }); d > 2*time.Second {
		t.Errorf("a kick during an idle sleep ended it after %v", d)
	}
	s.close()
	s.arm()
	s.kick()
	s.wake()
}

// TestSleeperAllocs: a sleep and the kick that ends it, once per packet
// at worst, allocate nothing.
func TestSleeperAllocs(t *testing.T) {
	var s sleeper
	s.init()
	defer s.close()
	if n := testing.AllocsPerRun(200, func() {
		s.arm()
		s.kick()
		s.sleep(1000)
		s.arm()
		s.sleep(1000)
	}); n != 0 {
		t.Errorf("%.1f allocations per sleep, want 0", n)
	}
}
