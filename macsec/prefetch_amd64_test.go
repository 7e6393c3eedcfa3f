package macsec

import (
	"os"
	"strings"
	"testing"
)

// TestHasPrefetchW checks our CPUID reading against the kernel's: Linux
// lists the PRFCHW bit as "3dnowprefetch" in /proc/cpuinfo.
func TestHasPrefetchW(t *testing.T) {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip("no /proc/cpuinfo:", err)
	}
	var flags []string
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			flags = strings.Fields(v)
			break
		}
	}
	if flags == nil {
		t.Skip("no flags line in /proc/cpuinfo")
	}
	want := false
	for _, f := range flags {
		want = want || f == "3dnowprefetch"
	}
	if hasPrefetchW != want {
		t.Errorf("hasPrefetchW = %v, /proc/cpuinfo 3dnowprefetch = %v", hasPrefetchW, want)
	}
	buf := make([]byte, 64)
	prefetchWrite(&buf[0]) // must not fault either way
}

// TestPrefetchSpan runs prefetchSpan over spans of every shape, the last
// reaching past its slice (a received slot's ICV, a guard page): a
// prefetch never faults, and nothing may be written.
func TestPrefetchSpan(t *testing.T) {
	b := make([]byte, 9000)
	for i := range b {
		b[i] = byte(i)
	}
	for _, n := range []int{-1, 0, 1, 63, 64, 65, 1514, 9000, 9000 + ICVLen} {
		prefetchSpan(&b[0], n)
		prefetchWhole(b[:max(0, min(n, len(b)))], ICVLen)
	}
	prefetchWhole(nil, ICVLen)
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("octet %d changed", i)
		}
	}
}
