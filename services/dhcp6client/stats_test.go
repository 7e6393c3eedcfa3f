package dhcp6client

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// TestCounterNames: the counters keep the names the status page and the
// metrics show (router/status's IPv6 delegation events and drops).
func TestCounterNames(t *testing.T) {
	events := []string{"solicit", "advertise", "request", "renew", "rebind", "release", "reply", "renewals",
		"rebindings", "expired", "lost", "no_prefix_avail", "no_binding", "request_refused", "exhausted",
		"lease_file_errors", "duid_file_errors", "send_errors"}
	drops := []string{"malformed", "relay", "not_server", "type", "unexpected", "xid", "client_id", "server_id",
		"no_prefix", "status"}
	if diff := cmp.Diff(events, svcstats.Names(&Stats{}, "events")); diff != "" {
		t.Errorf("event names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(drops, svcstats.Names(&Stats{}, "drops")); diff != "" {
		t.Errorf("drop names (-want +got):\n%s", diff)
	}
	var s Stats
	s.Solicits.Add(2)
	s.Drops.XID.Add(3)
	if c, d := s.Counters(), s.DropCounts(); c["solicit"] != 2 || d["xid"] != 3 || len(c) != len(events) || len(d) != len(drops) {
		t.Errorf("Counters() = %v, DropCounts() = %v, want solicit 2, xid 3 and every name", c, d)
	}
}
