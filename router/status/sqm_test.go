package status_test

import (
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/qdisc"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
	"github.com/gvrouter/gvrouter/sqm"
)

// TestSQMStatus: the shaped directions show on the page (per tin delay,
// peak, drops, marks, backlog), in /api/status as qdisc.Stats, and in the
// metrics; without sqm none of it.
func TestSQMStatus(t *testing.T) {
	q := qdisc.Stats{NumTins: 3, Limit: 4096, MemoryBytes: 7_050_000, OversizeDrops: 3}
	q.Tins[1] = qdisc.TinStats{SentPackets: 1200, SentBytes: 1_800_000, CoDelDrops: 17, ECNMarks: 5, ECNOverloadDrops: 4, OverlimitDrops: 2,
		BacklogPackets: 9, BacklogBytes: 13_500, Delay: 3_250_000, PeakDelay: 41_000_000}
	snap := status.Snapshot{SQM: []status.SQM{{sqm.Status{Interface: "wan", Stats: sqm.Stats{Direction: "upload", Rate: 20_000_000, Overhead: 44,
		Diffserv: "diffserv3", TinNames: []string{"bulk", "best effort", "voice"}, WriteErrors: 2, Queue: q}}}}}
	s := status.New(statustest.New(snap), nil)
	s.Sample()

	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{`id="sqm"`, `<td>best effort</td>`, `3.25 ms`, `41.00 ms`, `<td class="num">17</td>`, `<td>voice</td>`,
		// The stated bound and the direction's own drops.
		`wan upload: at most 4,096 packets in 6.72 MiB; oversize drops 3, write errors 2`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, want := range []string{`"sqm": [`, `"direction": "upload"`, `"rate_bps": 20000000`, `"codel_drops": 17`,
		`"ecn_marks": 5`, `"ecn_overload_drops": 4`, `"peak_delay_ns": 41000000`, `"backlog_packets": 9`} {
		if !strings.Contains(raw, want) {
			t.Errorf("/api/status lacks %s", want)
		}
	}
	metrics := body(t, get(t, s.Handler(), "GET", "/metrics"))
	for _, want := range []string{
		`gvrouter_sqm_codel_drops_total{direction="upload",interface="wan",tin="best effort"} 17`,
		`gvrouter_sqm_ecn_marks_total{direction="upload",interface="wan",tin="best effort"} 5`,
		`gvrouter_sqm_ecn_overload_drops_total{direction="upload",interface="wan",tin="best effort"} 4`,
		`gvrouter_sqm_peak_delay_seconds{direction="upload",interface="wan",tin="best effort"} 0.041`,
		`gvrouter_sqm_rate_bits_per_second{direction="upload",interface="wan"} 2e+07`,
		`gvrouter_sqm_oversize_drops_total{direction="upload",interface="wan"} 3`,
		`gvrouter_sqm_write_errors_total{direction="upload",interface="wan"} 2`,
		`gvrouter_sqm_limit_packets{direction="upload",interface="wan"} 4096`,
		`gvrouter_sqm_memory_bytes{direction="upload",interface="wan"} 7.05e+06`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	bare := status.New(statustest.New(status.Snapshot{}), nil)
	bare.Sample()
	if p := body(t, get(t, bare.Handler(), "GET", "/")); strings.Contains(p, `id="sqm"`) {
		t.Error("page without sqm shows the sqm table")
	}
}
