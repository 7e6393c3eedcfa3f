package status

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// Process is the router process's own load: CPU time and memory. A router
// on a dual Cortex-A9 has little of either to spare, so the page shows
// them beside the traffic they serve.
type Process struct {
	// CPUSeconds is the user plus system CPU time the process used since
	// it started, e.g. 1234.5.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPercent is the CPU the process used over the last sample
	// interval, 100 meaning one core busy (as top shows it), e.g. 37.5;
	// at most 100 × CPUs.
	CPUPercent float64 `json:"cpu_percent"`
	// CPUs is the number of logical CPUs the process may use, e.g. 2.
	CPUs int `json:"cpus"`
	// RSSBytes is the resident set size, from /proc/self/statm; 0 where
	// unknown.
	RSSBytes uint64 `json:"rss_bytes"`
	// HeapBytes is the Go heap in use: live objects and those not yet
	// swept (runtime/metrics /memory/classes/heap/objects:bytes).
	HeapBytes uint64 `json:"go_heap_bytes"`
	// GoMemoryBytes is all memory the Go runtime has mapped for heap,
	// stacks and its own use (/memory/classes/total:bytes); the rest of
	// the RSS is netstack's and the rings' off-heap memory.
	GoMemoryBytes uint64 `json:"go_memory_bytes"`
	// Goroutines is the number of live goroutines, e.g. 42.
	Goroutines int `json:"goroutines"`
}

// processMetrics are the runtime/metrics samples readProcess reads, in
// this order.
var processMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/sched/goroutines:goroutines",
}

// readProcess returns the process's counters now; CPUPercent is left 0
// (fillProcessRate sets it from two readings).
func readProcess() *Process {
	samples := make([]metrics.Sample, len(processMetrics))
	for i, name := range processMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	val := func(i int) uint64 {
		if samples[i].Value.Kind() != metrics.KindUint64 {
			return 0 // unsupported by this Go release
		}
		return samples[i].Value.Uint64()
	}
	return &Process{
		CPUSeconds:    processCPUSeconds(),
		CPUs:          runtime.NumCPU(),
		RSSBytes:      processRSS(),
		HeapBytes:     val(0),
		GoMemoryBytes: val(1),
		Goroutines:    int(val(2)),
	}
}

// fillProcessRate sets cur.CPUPercent from the CPU time used since prev,
// taken dt earlier.
func fillProcessRate(prev, cur *Process, dt time.Duration) {
	if prev == nil || cur == nil || dt <= 0 || cur.CPUSeconds < prev.CPUSeconds {
		return
	}
	cur.CPUPercent = (cur.CPUSeconds - prev.CPUSeconds) / dt.Seconds() * 100
}
