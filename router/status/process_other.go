//go:build !linux

package status

import "runtime/metrics"

// processCPUSeconds returns the Go runtime's estimate of the CPU time the
// process used (the router runs on Linux; this keeps the package testable
// elsewhere).
func processCPUSeconds() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64() - s[1].Value.Float64()
}

// processRSS is unknown outside Linux.
func processRSS() uint64 { return 0 }
