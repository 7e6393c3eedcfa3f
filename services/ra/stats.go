package ra

import (
	"sync/atomic"

	"github.com/gvrouter/gvrouter/services/svcstats"
)

// DropReason is why a received RS (Advertiser) or RA (Learner) was
// dropped: the checks of RFC 4861 §6.1.1 and §6.1.2, and the Learner's
// own limits. Every RS an Advertiser consumes and every RA a Learner
// consumes ends in exactly one of: counted as received, or one drop
// reason.
type DropReason int

// Drop reasons, the index of Stats.Drops and LearnerStats.Drops.
const (
	// DropMalformed: a Payload Length of 0 (a jumbogram) or past the
	// frame's end, an ICMP length below the message's fixed part (RS 8,
	// RA 16 octets), or an option cut short.
	DropMalformed DropReason = iota
	// DropHopLimit: an IP Hop Limit other than 255, so the message may
	// come from beyond the link.
	DropHopLimit
	// DropCode: an ICMP Code other than 0.
	DropCode
	// DropChecksum: a wrong ICMPv6 checksum.
	DropChecksum
	// DropOptionLengthZero: an option whose Length is 0 (§6.1.1 and
	// §6.1.2: "all included options have a length that is greater than
	// zero").
	DropOptionLengthZero
	// DropUnspecifiedWithSLLA: an RS from the unspecified address that
	// carries a Source Link-Layer Address option (§6.1.1). Advertiser
	// only.
	DropUnspecifiedWithSLLA
	// DropSourceNotLinkLocal: an RA whose IP source is not a link-local
	// address (§6.1.2). Learner only.
	DropSourceNotLinkLocal
	// DropOwn: an RA from the Learner's own address or MAC, looped
	// back. Learner only.
	DropOwn
	// DropQueueFull: a valid RA that arrived while learnerQueue others
	// waited for Run. Learner only.
	DropQueueFull
	// NumDropReasons is the number of drop reasons.
	NumDropReasons
)

var dropNames = [NumDropReasons]string{
	"malformed", "hop_limit", "code", "checksum", "option_length_zero", "unspecified_with_slla",
	"source_not_link_local", "own", "queue_full",
}

// String returns the reason's metric label, e.g. "hop_limit".
func (r DropReason) String() string {
	if r < 0 || r >= NumDropReasons {
		return "unknown"
	}
	return dropNames[r]
}

// Stats counts what an Advertiser did. Fields are read with Load; they
// only grow.
type Stats struct {
	// Sent counts the RAs the link accepted, the final one included.
	Sent atomic.Uint64 `counter:"events/sent"`
	// SolicitedSent counts, of Sent, the RAs that answered at least one
	// RS.
	SolicitedSent atomic.Uint64 `counter:"events/solicited_sent"`
	// RSReceived counts the valid RSs. Each is answered by one RA
	// (SolicitedSent) or by an RA that already answered an earlier one
	// (RSCoalesced), so RSReceived = SolicitedSent + RSCoalesced once
	// no RS waits.
	RSReceived atomic.Uint64 `counter:"events/rs_received"`
	// RSCoalesced counts the valid RSs answered by an RA that an earlier
	// RS had already scheduled (RFC 4861 §6.2.6): what a flood of RSs
	// costs beyond one RA every 3 s.
	RSCoalesced atomic.Uint64 `counter:"events/rs_coalesced"`
	// OtherRA counts the RAs from other routers on the link, which are
	// left to the caller (netstack).
	OtherRA atomic.Uint64 `counter:"events/other_router_ra"`
	// OtherRAInvalid counts, of OtherRA, those failing the checks of
	// §6.1.2 or refused by the wire library: not compared with ours.
	OtherRAInvalid atomic.Uint64
	// OtherRAUnchecked counts, of OtherRA, valid ones not compared with
	// ours because one was compared less than otherRACheckEvery before
	// (the comparison allocates; a flood must not buy CPU).
	OtherRAUnchecked atomic.Uint64
	// Inconsistent counts the RAs from other routers whose Cur Hop
	// Limit, M or O flag, MTU or lifetimes of one of our prefixes differ
	// from ours (§6.2.7); each is logged, at most every logEvery.
	Inconsistent atomic.Uint64
	// WithdrawnForgotten counts the withdrawn prefixes no longer
	// announced before their valid lifetime ended because maxWithdrawn
	// younger ones were.
	WithdrawnForgotten atomic.Uint64
	// SendErrors counts the RAs that could not be built or that the
	// link refused.
	SendErrors atomic.Uint64 `counter:"events/send_errors"`
	// Drops counts the RSs dropped, by reason.
	Drops [NumDropReasons]atomic.Uint64
}

// LearnerStats counts what a Learner did. Fields are read with Load; they
// only grow.
type LearnerStats struct {
	// Received counts the valid RAs queued for Run, which applies each
	// to the State.
	Received atomic.Uint64 `counter:"events/ra"`
	// Drops counts the RAs dropped, by reason.
	Drops [NumDropReasons]atomic.Uint64
	// RSSent counts the Router Solicitations the link accepted.
	RSSent atomic.Uint64 `counter:"events/rs_sent"`
	// SendErrors counts the RSs and NSs that could not be built or that
	// the link refused.
	SendErrors atomic.Uint64 `counter:"events/send_errors"`
	// OptionsIgnored counts the options of valid RAs that the wire
	// library refused (a Prefix Information option of the wrong length,
	// an RDNSS without servers, a DNSSL with a bad name, ...); the rest
	// of the RA is applied.
	OptionsIgnored atomic.Uint64 `counter:"events/options_ignored"`
	// PrefixesIgnored counts the Prefix Information options ignored: the
	// link-local prefix (§6.3.4), a multicast prefix, a prefix length
	// over 128, or a preferred lifetime over the valid one (RFC 4862
	// §5.5.3 c).
	PrefixesIgnored atomic.Uint64 `counter:"events/prefixes_ignored"`
	// MTUIgnored counts the MTU options below 1280 (RFC 8200 §5) or
	// above 65575, the largest IPv6 packet without a jumbo payload.
	MTUIgnored atomic.Uint64 `counter:"events/mtu_ignored"`
	// DNSIgnored counts the RDNSS addresses that are not unicast.
	DNSIgnored atomic.Uint64
	// PrefixTooShort counts the Prefix Information options shorter than
	// MinOnLinkBits, ignored.
	PrefixTooShort atomic.Uint64 `counter:"events/prefix_too_short"`
	// PrefixOverlapIgnored counts the Prefix Information options that
	// overlap a prefix the router holds elsewhere (LearnerConfig.Owned),
	// ignored.
	PrefixOverlapIgnored atomic.Uint64 `counter:"events/prefix_overlap_ignored"`
	// RoutersFull, PrefixesFull and DNSFull count the new routers,
	// prefixes and RDNSS or DNSSL entries refused because maxRouters,
	// maxLearnedPrefixes or maxDNS were already kept (and, for routers,
	// none of them was unreachable).
	RoutersFull  atomic.Uint64 `counter:"events/routers_full"`
	PrefixesFull atomic.Uint64 `counter:"events/prefixes_full"`
	DNSFull      atomic.Uint64
	// RoutersReplaced counts the new routers learnt, with maxRouters
	// kept, in place of an unreachable one.
	RoutersReplaced atomic.Uint64 `counter:"events/routers_replaced"`
	// NSSent counts the Neighbor Solicitations that probe routers
	// (nud.go) the link accepted.
	NSSent atomic.Uint64 `counter:"events/ns_sent"`
	// RouterUnreachable counts the routers found unreachable: a round
	// of solicitations went unanswered. An unreachable router is used
	// only while no other is reachable or being probed.
	RouterUnreachable atomic.Uint64 `counter:"events/router_unreachable"`
	// ProbeAnswersLost counts the answers to probes that found naQueue
	// full; the NA still goes to the caller.
	ProbeAnswersLost atomic.Uint64 `counter:"events/probe_answers_lost"`
	// Expired counts the routers, prefixes and DNS entries removed when
	// their lifetime ended.
	Expired atomic.Uint64 `counter:"events/expired"`
	// Changes counts the calls of OnChange.
	Changes atomic.Uint64
}

// Counters returns the event counters by their tag's name, e.g. {"sent":
// 12, "rs_received": 3}: the status page's events and the metrics.
func (s *Stats) Counters() map[string]uint64 { return svcstats.Counters(s, "events") }

// DropCounts returns Drops by reason name (DropReason.String).
func (s *Stats) DropCounts() map[string]uint64 {
	return svcstats.ByName(s.Drops[:], func(i int) string { return DropReason(i).String() })
}

// Counters returns the event counters by their tag's name, and
// "too_many": the routers, prefixes and DNS servers refused because
// their tables were full (RoutersFull + PrefixesFull + DNSFull).
func (s *LearnerStats) Counters() map[string]uint64 {
	m := svcstats.Counters(s, "events")
	m["too_many"] = s.RoutersFull.Load() + s.PrefixesFull.Load() + s.DNSFull.Load()
	return m
}

// DropCounts returns Drops by reason name (DropReason.String).
func (s *LearnerStats) DropCounts() map[string]uint64 {
	return svcstats.ByName(s.Drops[:], func(i int) string { return DropReason(i).String() })
}
