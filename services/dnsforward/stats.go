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

// Status is a snapshot of the forwarder for the status page.
type Status struct {
	Listen       []netip.AddrPort // SetListen's addresses being served (Listening)
	Upstreams    []netip.AddrPort
	Domain       string
	Hosts        int // local host names (SetHosts)
	CacheEntries int
	CacheBytes   int
	InFlight     int // questions waiting for an upstream

	QueriesUDP, QueriesTCP                                        uint64
	CacheHits, CacheMisses, CacheInserts, CacheEvictions          uint64
	CacheExpired, Coalesced, LocalAnswers                         uint64
	UpstreamQueries, UpstreamErrors, UpstreamTimeouts             uint64
	UpstreamRcodeErrors, TCRetries                                uint64
	UpstreamMismatched, UpstreamSpoofed, UpstreamMalformed        uint64
	NoUpstream, PortCollisions                                    uint64
	Malformed, FormErr, NotImplemented, Refused, BadVersion       uint64
	ServFail, InFlightDrops, Truncated, TCPConns, TCPConnsRefused uint64

	// LatencyMean is the mean upstream answer time (0 before any).
	LatencyMean time.Duration
	// LatencyCount, LatencySum and Latency are Stats' histogram.
	LatencyCount uint64
	LatencySum   time.Duration
	Latency      [len(LatencyBuckets) + 1]uint64
}

// Status returns a snapshot of the forwarder.
func (f *Forwarder) Status() Status {
	s := &f.stats
	st := Status{
		Listen:    f.Listening(),
		Upstreams: slices.Clone(*f.upstreams.Load()),
		Domain:    f.cfg.Domain,

		QueriesUDP: s.QueriesUDP.Load(), QueriesTCP: s.QueriesTCP.Load(),
		CacheHits: s.CacheHits.Load(), CacheMisses: s.CacheMisses.Load(),
		CacheInserts: s.CacheInserts.Load(), CacheEvictions: s.CacheEvictions.Load(),
		CacheExpired: s.CacheExpired.Load(), Coalesced: s.Coalesced.Load(), LocalAnswers: s.LocalAnswers.Load(),
		UpstreamQueries: s.UpstreamQueries.Load(), UpstreamErrors: s.UpstreamErrors.Load(),
		UpstreamTimeouts: s.UpstreamTimeouts.Load(), UpstreamRcodeErrors: s.UpstreamRcodeErrors.Load(),
		TCRetries: s.TCRetries.Load(), UpstreamMismatched: s.UpstreamMismatched.Load(),
		UpstreamSpoofed: s.UpstreamSpoofed.Load(), UpstreamMalformed: s.UpstreamMalformed.Load(),
		NoUpstream: s.NoUpstream.Load(), PortCollisions: s.PortCollisions.Load(),
		Malformed: s.Malformed.Load(), FormErr: s.FormErr.Load(), NotImplemented: s.NotImplemented.Load(),
		Refused: s.Refused.Load(), BadVersion: s.BadVersion.Load(), ServFail: s.ServFail.Load(),
		InFlightDrops: s.InFlightDrops.Load(), Truncated: s.Truncated.Load(),
		TCPConns: s.TCPConns.Load(), TCPConnsRefused: s.TCPConnsRefused.Load(),

		LatencyCount: s.LatencyCount.Load(),
		LatencySum:   time.Duration(s.LatencySum.Load()),
	}
	for i := range st.Latency {
		st.Latency[i] = s.Latency[i].Load()
	}
	if st.LatencyCount > 0 {
		st.LatencyMean = st.LatencySum / time.Duration(st.LatencyCount)
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
