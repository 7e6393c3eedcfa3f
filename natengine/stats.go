package natengine

import "sync/atomic"

// DropReason says why the engine dropped a packet or refused a flow.
type DropReason uint8

// Drop reasons. Every drop increments exactly one of these counters.
const (
	DropMalformed      DropReason = iota // packet failed to parse
	DropTableFull                        // table at the limit (forwarded flows: at the limit less the router's reserve) and no unassured entry to early-drop (RFC 6888 REQ-11)
	DropNoPort                           // no free external port for a new mapping (RFC 5508 REQ-8 situation)
	DropFiltered                         // inbound packet refused by the mapping's filtering behaviour (RFC 4787 REQ-8)
	DropUnsolicited                      // new inbound flow from a WAN interface with no mapping, forward or allow rule
	DropInvalidTCP                       // TCP packet that cannot open a flow (e.g. RST, FIN or SYN-ACK first)
	DropICMPChecksum                     // ICMP error with a bad ICMP checksum (RFC 5508 REQ-3)
	DropICMPNoConn                       // forwarded ICMP error whose embedded packet matches no flow (RFC 5508 REQ-4/5)
	DropICMPBad                          // ICMP error with an unusable embedded packet, or a reply-type query opening a flow
	DropICMPv6Policy                     // ICMPv6 type refused inbound by the RFC 4890 policy
	DropClash                            // new flow's tuple collides with an existing flow
	DropFragNoFlow                       // non-first fragment whose first fragment never came (or the hold queue is full)
	DropUntranslatable                   // private-source IPv4 packet with no flow to translate it, leaving a NAT interface (e.g. a fragment whose first fragment never passed)
	DropOverload                         // packet that would open a flow, arriving while its port's receive ring was falling behind (PreroutingOverloaded)
	DropNATAddrTaken                     // IPv4 flow of a protocol without ports (GRE, ESP, ...) to a remote address another LAN host already uses with that protocol through every external address (address-only NAT, generic.go)
	DropSpoofed                          // from a WAN interface with a router address or a LAN subnet's address as source (RFC 3704 ingress filtering)
	DropHostFlows                        // new flow from an inside address that holds Config.MaxConnsPerHost flows (limits.go)
	DropHostPorts                        // new NAT mapping for an inside address that holds Config.MaxPortsPerHost (limits.go)
	DropFirewall                         // new flow refused by a zone policy or rule (Rules.Zones, firewall.go)
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"malformed", "table_full", "no_port", "filtered", "unsolicited", "invalid_tcp",
	"icmp_checksum", "icmp_no_conn", "icmp_bad", "icmpv6_policy", "clash", "frag_no_flow",
	"untranslatable", "overload", "nat_addr_taken", "spoofed_source", "host_flows", "host_ports",
	"firewall",
}

// String returns the reason's metric label.
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// SlowReason says why the fast path handed a packet back to the slow path.
type SlowReason uint8

// Fast-path hand-back reasons (nf_flowtable's list).
const (
	SlowMiss     SlowReason = iota // no offloaded flow for this packet and interface
	SlowNotIP                      // not IPv4/IPv6 in an untagged Ethernet frame, or malformed
	SlowOptions                    // IPv4 options or IPv6 extension headers
	SlowFragment                   // IP fragment
	SlowTTL                        // TTL or hop limit <= 1: the slow path sends Time Exceeded
	SlowMTU                        // larger than the egress MTU: the slow path sends PTB / fragments
	SlowFinRst                     // TCP FIN or RST: the flow leaves the fast path
	SlowStale                      // route or neighbour changed, or the flow expired
	SlowSYN                        // TCP SYN: a new connection (or a reused port) is conntrack's, without a table lookup here
	numSlowReasons
)

var slowNames = [numSlowReasons]string{"miss", "not_ip", "options", "fragment", "ttl", "mtu", "fin_rst", "stale", "syn"}

// String returns the reason's metric label.
func (r SlowReason) String() string {
	if r < numSlowReasons {
		return slowNames[r]
	}
	return "unknown"
}

// Stats holds the engine's counters. All fields are safe for concurrent use.
type Stats struct {
	Drops          [numDropReasons]atomic.Uint64 // packets dropped, by DropReason
	Slow           [numSlowReasons]atomic.Uint64 // fast-path hand-backs, by SlowReason
	FastPathHits   atomic.Uint64                 // packets forwarded by FastPath
	Created        atomic.Uint64                 // flows inserted
	EarlyDropped   atomic.Uint64                 // unassured flows evicted to make room (Linux early_drop)
	Expired        atomic.Uint64                 // flows removed by idle timeout
	Offloaded      atomic.Uint64                 // flow directions handed to the fast path
	ICMPTranslated atomic.Uint64                 // ICMP errors translated (RFC 5508 REQ-4/5)
	FragsHeld      atomic.Uint64                 // out-of-order fragments held until their first fragment
	MSSClamped     atomic.Uint64                 // TCP SYNs whose MSS option was lowered
	Untracked      atomic.Uint64                 // packets passed without a flow (to the router itself; IGMP; ICMP that is not a query)
	// FlushedAddressGone counts flows removed because the address they
	// were translated to left the router (SetRules; a DHCP lease moved
	// the WAN address), as Linux's masquerade does on NETDEV_DOWN.
	FlushedAddressGone atomic.Uint64
	// ReserveRefused counts port reservations (ReservePort,
	// ReservePortAny) refused because a NAT mapping or a port forward
	// already had the port.
	ReserveRefused atomic.Uint64
	// FirewallRejects counts refused flows answered with a TCP RST or
	// ICMP unreachable (the Reject verdict), within the reject limit;
	// every refused flow also counts in Drops[DropFirewall].
	FirewallRejects atomic.Uint64
	// FlushedFirewall counts flows removed because a reload's zones and
	// rules no longer allow them (SetRules).
	FlushedFirewall atomic.Uint64
}

// Drop returns the counter for reason r.
func (s *Stats) Drop(r DropReason) uint64 { return s.Drops[r].Load() }

// StateCounts is a census of the table by protocol and state.
type StateCounts struct {
	TCP          [numTCPStates]int // by TCPState
	UDPUnreplied int               // UDP flows without a reply
	UDPStream    int               // UDP flows with replies
	ICMP         int               // ICMP/ICMPv6 query sessions
	Other        int               // other protocols
	Assured      int               // flows marked assured
	Offloaded    int               // flows with at least one direction on the fast path
	Total        int               // all flows
}
