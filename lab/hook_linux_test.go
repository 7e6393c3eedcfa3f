package lab

import (
	"bytes"
	"context"
	"testing"
	"time"
)

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
	requirePrivileged(t)
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		testHook:     hook,
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}
