package lab

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// labRuns numbers the labs this test process builds with a run tag.
var labRuns atomic.Int64

// nextRunTag returns a run tag (Options.runTag) no other lab of this
// process has: its lab gets namespaces and a run directory of its own,
// gvl<pid>t<n>, and may run beside other labs.
func nextRunTag() string { return "t" + strconv.FormatInt(labRuns.Add(1), 10) }

// parallelLab marks t as a lab test that runs beside others: one whose
// time goes to waiting on its peers' timers (leases, lifetimes, RAs,
// retransmissions, proof timeouts), not to the CPU, and which checks only
// its own lab (a run tag, as runWithHook gives, not the process's
// gvl<pid> namespaces). It takes one of labParallel slots for the rest of
// the test. CPU-bound tests (benches, floods, iperf3, the MACsec order
// and rekey tests, the QEMU peer, chromium) and those that look at every
// lab of the process stay serial: go test runs them first, one at a time,
// and the parallel ones only after.
func parallelLab(t *testing.T) {
	t.Helper()
	t.Parallel()
	start := time.Now()
	labSlots <- struct{}{}
	t.Cleanup(func() { <-labSlots })
	// go test counts the wait in the test's time.
	t.Logf("waited %v for a lab slot", time.Since(start).Round(time.Millisecond))
}

// parallelLongLab is parallelLab for a test that waits out a whole lease
// or lifetime, minutes: it takes no slot, so it starts as soon as the
// serial tests are done and its wait overlaps all the shorter tests
// (which go test would otherwise start in no set order, the longest
// perhaps last).
func parallelLongLab(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// labSlots holds a token for each parallelLab test that runs.
var labSlots = make(chan struct{}, labParallel)

// labParallel is how many parallelLab tests run at once, beside the
// parallelLongLab ones. A lab test uses a few seconds of CPU in a minute
// (its namespaces, the router, the ISP's daemons, the proofs), so more
// of them than the 2 cores of CI fit.
const labParallel = 4

// runWithHook runs the whole lab against the real router binary with hook
// as its test hook (called once the lab's own proofs passed) and fails t
// if any step, proof or the hook failed.
func runWithHook(t *testing.T, hook func(l *lab) error) {
	t.Helper()
	runWithHookTimeout(t, 3*time.Minute, hook)
}

// runWithHookTimeout is runWithHook for a hook that needs longer (a whole
// DHCP lease life).
func runWithHookTimeout(t *testing.T, d time.Duration, hook func(l *lab) error) {
	t.Helper()
	runLabWithHook(t, d, nil, hook)
}

// runWithHookFewProofs is runWithHookTimeout with Options.fewProofs: for
// a hook that needs none of the state the NAT and service proofs set up.
func runWithHookFewProofs(t *testing.T, d time.Duration, hook func(l *lab) error) {
	t.Helper()
	runLabWithHook(t, d, func(o *Options) { o.fewProofs = true }, hook)
}

// runLabWithHook runs the lab with hook; edit, if not nil, changes the
// lab's Options first.
func runLabWithHook(t *testing.T, d time.Duration, edit func(*Options), hook func(l *lab) error) {
	t.Helper()
	requirePrivileged(t)
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		testHook:     hook,
		runTag:       nextRunTag(),
	}
	if edit != nil {
		edit(&opt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}
