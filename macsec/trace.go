//go:build macsectrace

package macsec

import (
	"fmt"
	"sync/atomic"
)

// traceOn builds the pipeline's timeline probes in (go test -tags
// macsectrace): where each participant's time goes in calls with
// helpers. Without the tag traceOn is false and the probes compile away.
const traceOn = true

// timeline sums the probes over all calls with helpers.
var timeline struct {
	calls, callNs, fillNs             atomic.Int64    // per call: all of it; fill/classify before the first post
	containers, joined                atomic.Int64    // containers offered to helpers; joined by one
	pickupNs, callerNs, finNs, delvNs atomic.Int64    // post → a helper's first claim; post → caller done claiming; caller done → last slot done; delivery
	claims, claimNs                   [2]atomic.Int64 // [caller, helper]: claims taken, ns spent in claim
	frames, workNs                    [2]atomic.Int64 // [caller, helper]: frames sealed/opened, ns spent on them
}

// traceReport formats the timeline.
func traceReport() string {
	t := &timeline
	per := func(a, b *atomic.Int64) float64 { return float64(a.Load()) / float64(max(1, b.Load())) }
	s := fmt.Sprintf("macsectrace: %d calls with helpers, %.0f ns each, %.0f of it filling before the first post\n", t.calls.Load(), per(&t.callNs, &t.calls), per(&t.fillNs, &t.calls))
	s += fmt.Sprintf("macsectrace: %d containers (%d joined): helper's first claim %.0f ns after the post (joined ones); caller done claiming %.0f ns after it, then waits %.0f ns for the last slot; delivery %.0f ns\n",
		t.containers.Load(), t.joined.Load(), per(&t.pickupNs, &t.joined), per(&t.callerNs, &t.containers), per(&t.finNs, &t.containers), per(&t.delvNs, &t.containers))
	for k, who := range []string{"caller", "helper"} {
		s += fmt.Sprintf("macsectrace: %s: %d frames, %.0f ns per frame in claims; %d claims, %.0f ns per claim\n",
			who, t.frames[k].Load(), per(&t.workNs[k], &t.frames[k]), t.claims[k].Load(), per(&t.claimNs[k], &t.claims[k]))
	}
	return s
}
