package lab

import (
	"math"
	"os"
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

func TestProcCPUSecondsGrows(t *testing.T) {
	before, err := procCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 1.0
	for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); {
		x = math.Sqrt(x + 1)
	}
	after, err := procCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 0.05 {
		t.Fatalf("150 ms of spinning counted %.2f s of CPU (x=%v)", after-before, x)
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
