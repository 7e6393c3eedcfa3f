package linuxpeer

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// StartT boots a guest for job in a namespace of its own (deleted when t
// ends, failed or not) and stops it when t ends, logging its console. It
// is Start for tests: the interop tests here and the whole-router ones in
// package lab share it.
func StartT(t *testing.T, ctx context.Context, job string, env map[string]string) (*Peer, *netnstest.Netns) {
	t.Helper()
	netnstest.Privileged(t, "ip", "cpio")
	ns := netnstest.New(t, "lpr", netnstest.WithoutIPv6())
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		// Prepare installs it (as root, from Debian); outside CI a
		// machine without apt-get cannot.
		if _, err := exec.LookPath("apt-get"); err != nil {
			netnstest.SkipOrFail(t, "needs qemu-system-x86_64 or apt-get to install it")
		}
	}
	p, err := Start(ctx, Options{Job: job, Env: env, Netns: ns.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := p.Stop()
		if t.Failed() || testing.Verbose() {
			t.Logf("guest console:\n%s", c)
		}
	})
	t.Logf("%s guest ready after %v", job, p.Boot.Round(100*time.Millisecond))
	return p, ns
}

// MustRun runs line in the guest and fails t if it fails.
func (p *Peer) MustRun(t *testing.T, ctx context.Context, line string, d time.Duration) string {
	t.Helper()
	out, err := p.Run(ctx, line, d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
