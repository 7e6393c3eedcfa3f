package lab

import (
	"math"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStatCPU(t *testing.T) {
	// A command name with a space and a ')' of its own; utime 250, stime 50.
	line := "4242 (we ird) proc) S 1 4242 4242 0 -1 4194560 120 0 0 0 250 50 0 0 20 0 3 0 100 1000 10\n"
	got, err := parseProcStatCPU([]byte(line))
	if err != nil || got != 3 {
		t.Fatalf("parseProcStatCPU = %v, %v; want 3 s", got, err)
	}
	for _, bad := range []string{"", "42 (x) S 1 2", "42 (x) S 1 2 3 4 5 6 7 8 9 10 ten 12"} {
		if _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcStatCPU(%q): no error", bad)
		}
	}
}

// TestProcCPUSecondsGrows spins until getrusage says the process used
// 150 ms more CPU (not 150 ms of wall time: on a loaded machine that was
// 0.045 s of CPU in a CI run) and wants /proc's count to agree within its
// 10 ms ticks.
func TestProcCPUSecondsGrows(t *testing.T) {
	before, err := procCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	x, start := 1.0, used()
	for deadline := time.Now().Add(30 * time.Second); used()-start < 150*time.Millisecond; {
		for range 10000 {
			x = math.Sqrt(x + 1)
		}
		if time.Now().After(deadline) {
			t.Fatalf("getrusage counted %v of CPU in 30 s of spinning", used()-start)
		}
	}
	after, err := procCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 0.12 {
		t.Fatalf("spinning for 150 ms of CPU (getrusage) counted %.3f s in /proc (x=%v)", after-before, x)
	}
}

func TestCPUMsPerGbit(t *testing.T) {
	// 1.5 CPU seconds while 1 Gbit/s flowed for 12 s: 125 ms per Gbit.
	if got := cpuMsPerGbit(1.5, 1e9, 12); math.Abs(got-125) > 1e-9 {
		t.Fatalf("cpuMsPerGbit = %v, want 125", got)
	}
	if got := cpuMsPerGbit(1, 0, 12); got >= 0 {
		t.Fatalf("no traffic gave a cost %v", got)
	}
}
