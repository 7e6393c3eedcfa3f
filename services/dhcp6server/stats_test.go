package dhcp6server

import (
	"encoding/json"
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

// TestStatusJSON: Status is what /api/status shows for a lan's stateless
// server (router/status embeds it), with the keys page.js reads and the
// counters included.
func TestStatusJSON(t *testing.T) {
	s, _ := newTestServer(t, testConfig())
	s.Stats().Replied.Add(4)
	raw, err := json.Marshal(s.Status())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		DNS      []string          `json:"dns"`
		Domains  []string          `json:"domains"`
		Counters map[string]uint64 `json:"counters"`
		Drops    map[string]uint64 `json:"drops"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{dns1.String(), dns2.String()}
	if !cmp.Equal(got.DNS, want) || !cmp.Equal(got.Domains, []string{"lan", "example.org"}) ||
		got.Counters["replied"] != 4 || len(got.Drops) != int(NumDropReasons) {
		t.Errorf("JSON %s: want dns %v, domains lan and example.org, replied 4 and every drop reason", raw, want)
	}
}
