package netnstest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// CI reports whether the tests run under CI (CI=true), where a lab test
// that cannot run fails instead of skipping, so that a green CI means the
// lab tests ran.
func CI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail ends tb because something the test needs is missing (a
// privilege, a tool, a peer): it skips, or under CI fails. It is the one
// place that decides; every test in the module that can miss something
// calls it.
func SkipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if CI() {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

// SkipIfNotPermitted skips tb, outside CI only, when err is EPERM: the
// test lacks a privilege rather than found a bug. Otherwise it returns
// and the caller reports err as it sees fit.
func SkipIfNotPermitted(tb testing.TB, err error, format string, args ...any) {
	tb.Helper()
	if !CI() && errors.Is(err, syscall.EPERM) {
		tb.Skipf(format, args...)
	}
}

// Privileged ends tb through SkipOrFail unless it runs as root (for
// CAP_NET_ADMIN, CAP_NET_RAW and CAP_SYS_ADMIN) and finds every one of
// tools on PATH. A tool given as "a|b" needs either of a and b.
func Privileged(tb testing.TB, tools ...string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(tb, "needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN)")
	}
	for _, tool := range tools {
		var err error
		for alt := range strings.SplitSeq(tool, "|") {
			if _, err = exec.LookPath(alt); err == nil {
				break
			}
		}
		if err != nil {
			SkipOrFail(tb, "needs %s: %v", strings.ReplaceAll(tool, "|", " or "), err)
		}
	}
}
