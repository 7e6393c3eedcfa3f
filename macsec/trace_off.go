//go:build !macsectrace

package macsec

// traceOn is false: the pipeline's timeline probes compile away (see
// trace.go, built with -tags macsectrace).
const traceOn = false

// timeline is never written without the tag; it only keeps the probes
// compiling.
var timeline struct {
	calls, callNs, fillNs             traceCounter
	containers, joined                traceCounter
	pickupNs, callerNs, finNs, delvNs traceCounter
	claims, claimNs                   [2]traceCounter
	frames, workNs                    [2]traceCounter
}

// traceCounter stands in for atomic.Int64.
type traceCounter struct{}

func (traceCounter) Add(int64) {}

func traceReport() string { return "" }
