package ra

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/services/hwaddr"
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

// TestLearnerStatusJSON: LearnerStatus is what /api/status shows for a
// wan's RAs (router/status embeds it): a router's MAC, preference and
// reachability as the words page.js shows, and back.
func TestLearnerStatusJSON(t *testing.T) {
	st := LearnerStatus{State: State{
		Routers: []Router{{Addr: netip.MustParseAddr("fe80::1"), MAC: hwaddr.MAC{2, 0, 0, 0, 0, 1},
			Preference: PreferenceHigh, Reachability: Unreachable}},
		RDNSS: []DNSServer{{Addr: netip.MustParseAddr("2001:db8::53")}},
	}, Counters: map[string]uint64{"ra": 1}}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"routers":[{"address":"fe80::1","mac":"02:00:00:00:00:01","preference":"high","reachability":"unreachable"}]`,
		`"rdnss":[{"address":"2001:db8::53"}]`, `"counters":{"ra":1}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("JSON %s does not contain %s", raw, want)
		}
	}
	var back LearnerStatus
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if r := back.Routers[0]; r.Preference != PreferenceHigh || r.Reachability != Unreachable || r.MAC.String() != "02:00:00:00:00:01" {
		t.Errorf("router after a round trip = %+v, want high, unreachable, 02:00:00:00:00:01", r)
	}
	if err := json.Unmarshal([]byte(`{"routers":[{"preference":"urgent"}]}`), &back); err == nil {
		t.Errorf("a preference of %q decoded, want an error", "urgent")
	}
}
