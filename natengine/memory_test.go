package natengine

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// vmRSS returns this process's VmRSS line from /proc/self/status, or "".
func vmRSS() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return ""
}

// TestLimitCostsNothingAtStart checks that a large conntrack limit is
// not paid for at start: the tables are sized for at most preallocFlows
// and grow with use. Sized for the limit, New(MaxConns: 1,048,576) took
// 436 MB of heap and 0.64 s (VmRSS 401 MB).
func TestLimitCostsNothingAtStart(t *testing.T) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	rss0 := vmRSS()
	start := time.Now()
	e, _ := newTestEngine(t, 1<<20, twoAddrs)
	d := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	heap := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	t.Logf("New(MaxConns 1048576): %v, heap +%.1f MB, VmRSS %s -> %s", d, float64(heap)/1e6, rss0, vmRSS())
	// The tables for preallocFlows (65,536) flows are ~27 MB.
	if heap > 40<<20 {
		t.Errorf("New(MaxConns 1048576) holds %d MB of heap, want <= 40 MB (tables for %d flows)", heap>>20, preallocFlows)
	}
	for _, p := range flowPackets(1000) {
		if e.Prerouting(p, lanIf) != Accept || e.Postrouting(p, wanIf) != Accept {
			t.Fatal("drop")
		}
	}
	if e.Len() != 1000 {
		t.Errorf("Len() = %d, want 1000", e.Len())
	}
	runtime.KeepAlive(e)
}
