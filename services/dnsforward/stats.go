package dnsforward

import (
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// LatencyBuckets are the upper bounds of the upstream latency histogram
// (Stats.Latency); a last bucket counts the slower answers.
var LatencyBuckets = [...]time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
}

// Stats counts what the forwarder did. Fields are read with Load. A tag
// names a counter for the status page and the metrics, in the group of
// its map there (Counters): queries by transport, upstream errors by
// kind, drops by reason.
type Stats struct {
	QueriesUDP atomic.Uint64 `counter:"queries/udp"` // client datagrams received
	QueriesTCP atomic.Uint64 `counter:"queries/tcp"` // client messages received over TCP

	CacheHits      atomic.Uint64 // questions answered from the cache
	CacheMisses    atomic.Uint64 // questions not local and not cached
	CacheInserts   atomic.Uint64 // answers stored
	CacheEvictions atomic.Uint64 // answers evicted to keep the bounds
	CacheExpired   atomic.Uint64 // answers dropped at the end of their TTL
	Coalesced      atomic.Uint64 // misses that joined a question already in flight
	LocalAnswers   atomic.Uint64 // questions answered from the local names and zones

	UpstreamQueries     atomic.Uint64 // queries sent upstream (UDP attempts, EDNS fallbacks)
	UpstreamErrors      atomic.Uint64 `counter:"upstream_errors/network"` // attempts that failed to dial, send or read (not timeouts)
	UpstreamTimeouts    atomic.Uint64 `counter:"upstream_errors/timeout"` // attempts with no valid answer in Config.Timeout
	UpstreamRcodeErrors atomic.Uint64 `counter:"upstream_errors/rcode"`   // answers with an rcode but NOERROR or NXDOMAIN (SERVFAIL, REFUSED, ...)
	TCRetries           atomic.Uint64 // truncated UDP answers retried over TCP
	UpstreamMismatched  atomic.Uint64 `counter:"drops/answer_mismatch"`       // answers with the wrong ID or question, ignored
	UpstreamSpoofed     atomic.Uint64 `counter:"drops/answer_spoofed"`        // answers from the wrong address or port, ignored
	UpstreamMalformed   atomic.Uint64 `counter:"upstream_errors/malformed"`   // answers with the right ID and question that did not unpack
	NoUpstream          atomic.Uint64 `counter:"upstream_errors/no_upstream"` // questions with no upstream configured
	PortCollisions      atomic.Uint64 // random source ports taken (ReservePort or EADDRINUSE)

	Malformed       atomic.Uint64 `counter:"drops/malformed"` // client messages dropped or answered FORMERR as unreadable
	FormErr         atomic.Uint64 // FORMERR answers sent
	NotImplemented  atomic.Uint64 // NOTIMP answers to opcodes other than QUERY
	Refused         atomic.Uint64 // REFUSED answers (zone transfers, meta-types, classes but IN)
	BadVersion      atomic.Uint64 // BADVERS answers to EDNS versions above 0
	ServFail        atomic.Uint64 // questions answered SERVFAIL as the upstreams failed
	InFlightDrops   atomic.Uint64 `counter:"drops/in_flight_full"` // questions dropped at Config.MaxInFlight or maxWaiters
	Truncated       atomic.Uint64 // answers sent with TC as they exceeded the client's UDP size
	TCPConns        atomic.Uint64 // client TCP connections served
	TCPConnsRefused atomic.Uint64 `counter:"drops/tcp_conns_full"` // client TCP connections closed at Config.MaxTCPConns

	// LatencySum and LatencyCount give the mean upstream answer time;
	// Latency[i] counts answers within LatencyBuckets[i] (and above the
	// bucket before), the last one the slower.
	LatencySum   atomic.Int64 // nanoseconds
	LatencyCount atomic.Uint64
	Latency      [len(LatencyBuckets) + 1]atomic.Uint64
}

// Counters returns the counters of group ("queries", "upstream_errors"
// or "drops") by their tag's name, e.g. Counters("queries") = {"udp":
// 12, "tcp": 1}.
func (s *Stats) Counters(group string) map[string]uint64 { return svcstats.Counters(s, group) }

func (s *Stats) observeLatency(d time.Duration) {
	s.LatencySum.Add(int64(d))
	s.LatencyCount.Add(1)
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	s.Latency[i].Add(1)
}

// Stats returns the forwarder's counters.
func (f *Forwarder) Stats() *Stats { return &f.stats }

// LatencyBucket is one cumulative bucket of the upstream latency
// histogram: Count answers took at most LE seconds.
type LatencyBucket struct {
	LE    float64 `json:"le"`
	Count uint64  `json:"count"`
}

// Status is a snapshot of the forwarder: the status page shows it and
// /api/status encodes it as it is (router/status DNS), so a new field or
// counter needs no glue in the router. The counters of Stats' groups are
// in Queries, UpstreamErrors and Drops; the others are fields.
type Status struct {
	// Listen are SetListen's addresses being served (Listening), e.g.
	// ["192.168.1.1:53"], UDP and TCP on each.
	Listen []netip.AddrPort `json:"listen"`
	// Upstreams are the servers questions go to, in order. The router
	// shows them with where each came from (config or a DHCP lease), so
	// the JSON leaves them to it.
	Upstreams []netip.AddrPort `json:"-"`
	// Domain is Config.Domain, e.g. "lan"; Hosts the number of local host
	// names (SetHosts).
	Domain string `json:"domain"`
	Hosts  int    `json:"hosts"`
	// CacheEntries and CacheBytes are the answers cached now and their
	// size; CacheMax is Config.MaxEntries, the bound of CacheEntries.
	CacheEntries int `json:"cache_entries"`
	CacheBytes   int `json:"cache_bytes"`
	CacheMax     int `json:"cache_max"`
	// InFlight is the number of questions waiting for an upstream.
	InFlight int `json:"in_flight"`

	// Queries are the client messages received, by transport (Stats'
	// "queries" group: udp, tcp).
	Queries map[string]uint64 `json:"queries"`
	// UpstreamErrors are the failed upstream attempts, by kind (the
	// "upstream_errors" group: network, timeout, rcode, malformed,
	// no_upstream).
	UpstreamErrors map[string]uint64 `json:"upstream_errors"`
	// Drops are the messages dropped, by reason (the "drops" group:
	// malformed, answer_mismatch, answer_spoofed, in_flight_full,
	// tcp_conns_full).
	Drops map[string]uint64 `json:"drops"`

	// The other counters of Stats, as documented there.
	CacheHits       uint64 `json:"cache_hits"`
	CacheMisses     uint64 `json:"cache_misses"`
	CacheInserts    uint64 `json:"cache_inserts"`
	CacheEvictions  uint64 `json:"cache_evictions"`
	CacheExpired    uint64 `json:"cache_expired"`
	Coalesced       uint64 `json:"coalesced"`
	LocalAnswers    uint64 `json:"local_answers"`
	UpstreamQueries uint64 `json:"upstream_queries"`
	TCRetries       uint64 `json:"tc_retries"`
	PortCollisions  uint64 `json:"port_collisions"`
	FormErr         uint64 `json:"formerr"`
	NotImplemented  uint64 `json:"notimp"`
	Refused         uint64 `json:"refused"`
	BadVersion      uint64 `json:"badvers"`
	ServFail        uint64 `json:"servfail"`
	Truncated       uint64 `json:"truncated"`
	TCPConns        uint64 `json:"tcp_conns"`

	// LatencySum is the total time, in seconds, upstreams took to answer
	// the LatencyCount answered questions; LatencyMean is their mean (0
	// before any).
	LatencySum   float64       `json:"latency_sum_seconds"`
	LatencyCount uint64        `json:"latency_count"`
	LatencyMean  time.Duration `json:"-"`
	// LatencyBuckets are the histogram's cumulative buckets, one per
	// LatencyBuckets bound; the slower answers are LatencyCount's rest.
	LatencyBuckets []LatencyBucket `json:"latency_buckets,omitempty"`
}

// Status returns a snapshot of the forwarder.
func (f *Forwarder) Status() Status {
	s := &f.stats
	st := Status{
		Listen:    f.Listening(),
		Upstreams: slices.Clone(*f.upstreams.Load()),
		Domain:    f.cfg.Domain,
		CacheMax:  f.cfg.MaxEntries,

		Queries:        s.Counters("queries"),
		UpstreamErrors: s.Counters("upstream_errors"),
		Drops:          s.Counters("drops"),

		CacheHits: s.CacheHits.Load(), CacheMisses: s.CacheMisses.Load(),
		CacheInserts: s.CacheInserts.Load(), CacheEvictions: s.CacheEvictions.Load(),
		CacheExpired: s.CacheExpired.Load(), Coalesced: s.Coalesced.Load(), LocalAnswers: s.LocalAnswers.Load(),
		UpstreamQueries: s.UpstreamQueries.Load(), TCRetries: s.TCRetries.Load(),
		PortCollisions: s.PortCollisions.Load(),
		FormErr:        s.FormErr.Load(), NotImplemented: s.NotImplemented.Load(),
		Refused: s.Refused.Load(), BadVersion: s.BadVersion.Load(), ServFail: s.ServFail.Load(),
		Truncated: s.Truncated.Load(), TCPConns: s.TCPConns.Load(),

		LatencyCount: s.LatencyCount.Load(),
	}
	sum := time.Duration(s.LatencySum.Load())
	st.LatencySum = sum.Seconds()
	if st.LatencyCount > 0 {
		st.LatencyMean = sum / time.Duration(st.LatencyCount)
	}
	var cum uint64
	for i, le := range LatencyBuckets {
		cum += s.Latency[i].Load()
		st.LatencyBuckets = append(st.LatencyBuckets, LatencyBucket{LE: le.Seconds(), Count: cum})
	}
	st.CacheEntries, st.CacheBytes = f.cache.len()
	f.mu.Lock()
	st.InFlight = len(f.inflight)
	f.mu.Unlock()
	if ht := f.hosts.Load(); ht != nil {
		st.Hosts = ht.names
	}
	return st
}
