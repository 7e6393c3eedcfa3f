package macsec

import (
	"runtime"
	"testing"
	"time"
)

// newAutoSecY returns a SecY with one helper, parallel: auto and a TX SA,
// closed when t ends.
func newAutoSecY(t *testing.T) *SecY {
	t.Helper()
	cfg := testConfig(GCMAES128, true, func([][]byte) {}, func([][]byte) {})
	cfg.Workers, cfg.AlwaysParallel = 2, false
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.InstallTXSA(SAConfig{AN: 0, Key: testKey(GCMAES128)}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHelpPolicy checks when a call wakes helpers without AlwaysParallel:
// while no wakeup was measured (every call), when wakeups are far
// costlier than the call's crypto (only a probe, which measures the
// wakeup again, at most once per probeInterval) and when the call's crypto
// outweighs them.
func TestHelpPolicy(t *testing.T) {
	s := newAutoSecY(t)
	if s.help.nsPerKiB <= 1 {
		t.Fatalf("calibrated crypto cost %d ns/KiB", s.help.nsPerKiB)
	}
	// The cases below depend on the crypto's cost, not on this machine's:
	// under qemu-arm the calibration read tens of µs per KiB, which made
	// a 64-octet call worth offering to a polling helper.
	s.help.nsPerKiB = 1000
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = testFrame(1400, uint32(i))
	}
	helped := func(calls int) (yes int) {
		for range calls {
			s.help.load.Store(0) // each call alone, not a burst (TestHelpPolicyLoad)
			if help, _ := s.help.worth(octets(frames)); help {
				yes++
			}
		}
		return yes
	}
	if got := helped(10); got != 10 {
		t.Errorf("no wakeup measured yet: %d of 10 calls offered to helpers, want 10", got)
	}
	s.help.wakeNs.Store(1 << 40) // wakeups far costlier than any call
	s.help.skipped.Store(0)
	s.help.probed.Store(nanotime() - int64(probeInterval))
	if got := helped(4 * probeEvery); got != 1 {
		t.Errorf("costly wakeups: %d of %d calls offered to helpers, want 1 (a probe; the next one only after %v)", got, 4*probeEvery, probeInterval)
	}
	s.help.probed.Store(nanotime() - int64(probeInterval))
	if got := helped(probeEvery); got != 1 {
		t.Errorf("costly wakeups, %v after the last probe: %d of %d calls offered to helpers, want 1", probeInterval, got, probeEvery)
	}
	s.help.probed.Store(1 << 62)
	s.help.load.Store(0)
	if help, spin := s.help.worth(octets(frames)); help || spin {
		t.Errorf("costly wakeups: worth (help, spin) = %v, %v, want false, false", help, spin)
	}
	s.help.spinning.Store(1) // a helper polls: a large call is offered to it, a tiny one is not
	s.help.load.Store(0)
	if help, spin := s.help.worth(1 << 17); !help || spin { // 128 us of crypto: below loadHelp
		t.Errorf("costly wakeups, a helper polling, 128 KiB call: worth (help, spin) = %v, %v, want true, false", help, spin)
	}
	s.help.load.Store(0)
	if help, _ := s.help.worth(64); help {
		t.Errorf("costly wakeups, a helper polling, 64-octet call: offered to helpers")
	}
	s.help.spinning.Store(0)
	s.help.wakeNs.Store(1) // free wakeups
	if got := helped(10); got != 10 {
		t.Errorf("cheap wakeups: %d of 10 calls offered to helpers, want 10", got)
	}
	s.help.load.Store(0)
	if _, spin := s.help.worth(octets(frames)); !spin {
		t.Errorf("cheap wakeups: helpers would not poll after the call")
	}

	// The real path: with costly wakeups the caller seals everything
	// (probes aside), and a probe's wakeup updates the measurement. The
	// calls are spaced out (loadWindow apart) so that they are no load.
	spaced := func() { time.Sleep(time.Duration(loadWindow)) }
	s.help.wakeNs.Store(1 << 40)
	s.help.probed.Store(1 << 62) // no probe among the next calls, however slow they are (qemu)
	before := s.WorkerFrames()
	for range 4 * probeEvery {
		spaced()
		s.Protect(frames)
	}
	after := s.WorkerFrames()
	if after[0] != before[0] {
		t.Errorf("helper sealed %d frames while wakeups cost more than the crypto", after[0]-before[0])
	}
	s.help.probed.Store(nanotime() - int64(probeInterval))
	for range 4 * probeEvery {
		spaced()
		s.Protect(frames)
		if s.help.wakeNs.Load() != 1<<40 {
			break
		}
	}
	if w := s.help.wakeNs.Load(); w == 1<<40 {
		t.Errorf("no probe measured a wakeup in %d calls", 4*probeEvery)
	}
}

// TestHelpPolicyLoad checks that calls too small to be worth a wakeup
// alone are offered to helpers (who then poll for more) once they follow
// each other closely enough to keep half a core busy with crypto, and no
// longer once the load has decayed.
func TestHelpPolicyLoad(t *testing.T) {
	s := newAutoSecY(t)
	s.help.nsPerKiB = 1000
	s.help.wakeNs.Store(1 << 40) // no call is worth a wakeup alone
	s.help.probed.Store(1 << 62) // and no probe
	const call = 100 << 10       // 100 us of crypto
	s.help.load.Store(0)
	if help, spin := s.help.worth(call); help || spin {
		t.Errorf("one call alone: worth (help, spin) = %v, %v, want false, false", help, spin)
	}
	// Calls arriving back to back: the load passes loadHelp within
	// loadWindow.
	n := 1
	for ; n < 100; n++ {
		if help, spin := s.help.worth(call); help {
			if !spin {
				t.Errorf("loaded: helpers would not poll after the call")
			}
			break
		}
	}
	// The call that brings the load to loadHelp, less what decayed
	// meanwhile (the calls take no time here), is offered, or one or two
	// after it on a slow machine.
	first := int((loadHelp + call - 1) / call) // 1-based: the 3rd
	if n+1 < first || n+1 > first+2 {
		t.Errorf("calls of 100 us of crypto back to back: call %d was the first offered to helpers, want the %dth to %dth", n+1, first, first+2)
	}
	time.Sleep(3 * time.Duration(loadWindow)) // the load decays
	if help, _ := s.help.worth(call); help {
		t.Errorf("a call %v after the burst was offered to helpers", 3*time.Duration(loadWindow))
	}
}

// TestHelperSpins checks that a helper that joined a call worth a wakeup
// polls for the next one for a while, and then parks again.
func TestHelperSpins(t *testing.T) {
	s := newAutoSecY(t)
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = testFrame(1400, uint32(i))
	}
	s.help.nsPerKiB = 1 << 40 // every call is worth a wakeup
	seen := false
	for range 100 {
		s.help.wakeNs.Store(int64(maxSpin)) // poll as long as allowed
		s.Protect(frames)
		deadline := time.Now().Add(time.Second)
		for !seen && time.Now().Before(deadline) {
			seen = s.help.spinning.Load() > 0
		}
		if seen {
			break
		}
	}
	if !seen {
		t.Fatal("no helper polled for work after 100 calls worth a wakeup")
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.help.spinning.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := s.help.spinning.Load(); n != 0 {
		t.Errorf("%d helpers still polling 5 s after the last call", n)
	}
}

// TestYieldBetweenRuns: with YieldBetweenRuns the helper takes a share of
// calls spaced far apart, each too small to outlast a wakeup on its own
// (GOMAXPROCS 1: no second core to wake it on), and the frames still
// leave in PN order; without it the caller seals them all.
func TestYieldBetweenRuns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, yield := range []bool{false, true} {
		var got [][]byte
		cfg := testConfig(GCMAES128, true, func(fs [][]byte) {
			for _, f := range fs {
				got = append(got, append([]byte(nil), f...))
			}
		}, func([][]byte) {})
		cfg.Workers, cfg.AlwaysParallel, cfg.YieldBetweenRuns = 2, true, yield
		s, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.InstallTXSA(SAConfig{AN: 0, Key: testKey(GCMAES128)}); err != nil {
			t.Fatal(err)
		}
		frames := make([][]byte, 32)
		for i := range frames {
			frames[i] = testFrame(1400, uint32(i))
		}
		const calls = 20
		for range calls {
			time.Sleep(time.Millisecond) // the helper parks between calls
			s.Protect(frames)
		}
		wf := s.WorkerFrames()
		s.Close()
		if len(got) != calls*len(frames) {
			t.Fatalf("YieldBetweenRuns %v: %d frames out, want %d", yield, len(got), calls*len(frames))
		}
		for i, f := range got {
			if pn := SecTAG(f[addrsLen:]).PN(); pn != uint32(i+1) {
				t.Fatalf("YieldBetweenRuns %v: frame %d has PN %d, want %d", yield, i, pn, i+1)
			}
		}
		helper := wf[0]
		t.Logf("YieldBetweenRuns %v: worker frames %v", yield, wf)
		if yield && helper*20 < uint64(len(got)) {
			t.Errorf("YieldBetweenRuns: helper sealed %d of %d frames, want >= 5%%", helper, len(got))
		}
		if !yield && helper != 0 {
			t.Errorf("without YieldBetweenRuns on one core: helper sealed %d frames, want 0", helper)
		}
	}
}
