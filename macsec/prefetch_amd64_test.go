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
