package dnsforward

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// TestCounters: the counters keep the names the status page and the
// metrics show (router/status's DNS queries, upstream errors and drops,
// page.js), and queries count in them.
func TestCounters(t *testing.T) {
	for group, want := range map[string][]string{
		"queries":         {"udp", "tcp"},
		"upstream_errors": {"network", "timeout", "rcode", "malformed", "no_upstream"},
		"drops":           {"answer_mismatch", "answer_spoofed", "malformed", "in_flight_full", "tcp_conns_full"},
	} {
		if diff := cmp.Diff(want, svcstats.Names(&Stats{}, group)); diff != "" {
			t.Errorf("%s names (-want +got):\n%s", group, diff)
		}
	}
	f := startForwarder(t, Config{}) // no upstream: SERVFAIL, counted
	for _, network := range []string{"udp", "tcp", "udp"} {
		if r := f.ask(t, network, question("www.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Fatalf("%s answer %v, want SERVFAIL", network, r)
		}
	}
	f.rawAsk(t, []byte{1, 2, 3}, 50*time.Millisecond)
	s := f.Stats()
	waitFor(t, "the malformed query counted", func() bool { return s.Counters("drops")["malformed"] == 1 })
	if diff := cmp.Diff(map[string]uint64{"udp": 3, "tcp": 1}, s.Counters("queries")); diff != "" {
		t.Errorf(`Counters("queries") (-want +got):\n%s`, diff)
	}
	if got := s.Counters("upstream_errors")["no_upstream"]; got == 0 {
		t.Errorf(`Counters("upstream_errors") = %v, want no_upstream counted`, s.Counters("upstream_errors"))
	}
}
