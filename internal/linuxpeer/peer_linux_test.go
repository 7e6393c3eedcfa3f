package linuxpeer

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

func TestStartUnknownJob(t *testing.T) {
	if _, err := Start(context.Background(), Options{Job: "bogus"}); err == nil || !strings.Contains(err.Error(), `unknown job "bogus"`) {
		t.Errorf(`Start(Job: "bogus") = %v, want an unknown job error`, err)
	}
}

// TestPeerRun boots a plain guest in a namespace Start makes itself and
// checks the command channel and that Stop removes the namespace, the
// run directory and the QEMU process.
func TestPeerRun(t *testing.T) {
	netnstest.Privileged(t, "ip", "cpio")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := Start(ctx, Options{Job: "plain", Env: map[string]string{"ADDR": "10.79.0.2/24"}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	t.Logf("guest ready after %v", p.Boot)
	if !strings.HasPrefix(p.Netns, "lpeer-") {
		t.Errorf("Netns = %q, want lpeer-PID-N", p.Netns)
	}
	for _, tc := range []struct {
		line, want, err string
	}{
		{line: "echo hello; echo world", want: "hello\nworld\n"},
		{line: "ip -br addr show eth0 | grep -o 10.79.0.2/24", want: "10.79.0.2/24\n"},
		{line: "echo oops; exit 3", want: "oops\n", err: "status 3"},
		{line: "echo a\necho b", err: "one line"},
	} {
		got, err := p.Run(ctx, tc.line, 10*time.Second)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Run(%q) = %q, %v, want %q and an error containing %q", tc.line, got, err, tc.want, tc.err)
		}
	}
	run, pid := p.run, p.cmd.Process.Pid
	c := p.Stop()
	stopped = true
	if !strings.Contains(c, "LPEER DONE rc=0") {
		t.Errorf("Stop() console has no LPEER DONE rc=0:\n%s", c)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", p.Netns)); !os.IsNotExist(err) {
		t.Errorf("namespace %s still there after Stop: %v", p.Netns, err)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("run directory %s still there after Stop: %v", run, err)
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); !os.IsNotExist(err) {
		t.Errorf("QEMU (pid %d) still running after Stop", pid)
	}
	if _, err := p.Run(ctx, "true", time.Second); err == nil {
		t.Errorf("Run after Stop succeeded, want an error")
	}
}
