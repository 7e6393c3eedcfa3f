package dnsforward

import (
	"encoding/json"
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

// TestStatusJSON: Status is what /api/status shows for the forwarder
// (router/status embeds it): the keys page.js and the lab read, the
// counters by group, and the upstreams left to the router (which adds
// their source).
func TestStatusJSON(t *testing.T) {
	f := startForwarder(t, Config{MaxEntries: 500}) // no upstream: SERVFAIL, counted
	if r := f.ask(t, "udp", question("www.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("answer %v, want SERVFAIL", r)
	}
	st := f.Status()
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Listen         []string          `json:"listen"`
		Queries        map[string]uint64 `json:"queries"`
		UpstreamErrors map[string]uint64 `json:"upstream_errors"`
		Drops          map[string]uint64 `json:"drops"`
		CacheMax       int               `json:"cache_max"`
		LatencyBuckets []LatencyBucket   `json:"latency_buckets"`
		Upstreams      any               `json:"upstreams"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Listen) != len(st.Listen) || got.Queries["udp"] != 1 || got.UpstreamErrors["no_upstream"] != 1 ||
		len(got.Drops) != 5 || got.CacheMax != 500 || len(got.LatencyBuckets) != len(LatencyBuckets) || got.Upstreams != nil {
		t.Errorf("JSON %s: want listen %v, queries udp 1, upstream_errors no_upstream 1, five drops, cache_max 500, %d latency buckets, no upstreams",
			raw, st.Listen, len(LatencyBuckets))
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cache_hits", "cache_misses", "cache_entries", "local_answers", "in_flight",
		"upstream_queries", "latency_sum_seconds", "latency_count"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON %s has no key %q", raw, k)
		}
	}
}
