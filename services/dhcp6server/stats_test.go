package dhcp6server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// TestCounterNames: the counters keep the names the status page and the
// metrics show (router/status's stateless DHCPv6 events and drops).
func TestCounterNames(t *testing.T) {
	if diff := cmp.Diff([]string{"received", "replied", "send_errors"}, svcstats.Names(&Stats{}, "events")); diff != "" {
		t.Errorf("event names (-want +got):\n%s", diff)
	}
	var s Stats
	s.Replied.Add(2)
	s.Drops[NumDropReasons-1].Add(3)
	c, d := s.Counters(), s.DropCounts()
	if c["replied"] != 2 || len(d) != int(NumDropReasons) || d[(NumDropReasons-1).String()] != 3 {
		t.Errorf("Counters() = %v, DropCounts() = %v, want replied 2 and every drop reason by name", c, d)
	}
}
