package ra

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// TestCounterNames: the counters keep the names the status page and the
// metrics show (router/status's router advertisement sections).
func TestCounterNames(t *testing.T) {
	adv := []string{"sent", "solicited_sent", "rs_received", "rs_coalesced", "other_router_ra", "send_errors"}
	if diff := cmp.Diff(adv, svcstats.Names(&Stats{}, "events")); diff != "" {
		t.Errorf("advertiser event names (-want +got):\n%s", diff)
	}
	learner := []string{"ra", "rs_sent", "send_errors", "options_ignored", "prefixes_ignored", "mtu_ignored",
		"prefix_too_short", "prefix_overlap_ignored", "routers_full", "prefixes_full", "routers_replaced", "ns_sent",
		"router_unreachable", "probe_answers_lost", "expired"}
	if diff := cmp.Diff(learner, svcstats.Names(&LearnerStats{}, "events")); diff != "" {
		t.Errorf("learner event names (-want +got):\n%s", diff)
	}
	var l LearnerStats
	l.RoutersFull.Add(1)
	l.PrefixesFull.Add(2)
	l.DNSFull.Add(4)
	l.Drops[0].Add(5)
	c, d := l.Counters(), l.DropCounts()
	if c["too_many"] != 7 || c["routers_full"] != 1 || len(c) != len(learner)+1 || d[DropReason(0).String()] != 5 {
		t.Errorf("LearnerStats Counters() = %v, DropCounts() = %v, want too_many 7 (1+2+4), routers_full 1, drop 5", c, d)
	}
}
