package firewall

import "net/netip"

// Target is what a rule or policy does with a new flow.
type Target uint8

// Targets (fw4 ACCEPT, DROP, REJECT).
const (
	Accept Target = iota
	Drop
	// Reject drops the flow and answers it: a TCP RST for TCP, an ICMP
	// port unreachable (ICMPv6 port unreachable) for everything else, at
	// most RejectRate answers a second (Ruleset.RejectAllowed).
	Reject
)

var targetNames = [...]string{"accept", "drop", "reject"}

// String returns the target's config word.
func (t Target) String() string {
	if int(t) < len(targetNames) {
		return targetNames[t]
	}
	return "unknown"
}

// ParseTarget parses accept, drop or reject.
func ParseTarget(s string) (Target, bool) {
	for i, n := range targetNames {
		if n == s {
			return Target(i), true
		}
	}
	return 0, false
}

// Zone is a set of interfaces with one policy per direction.
type Zone struct {
	Name    string  // e.g. "lan", "guest", "wan"
	Ifaces  []int32 // interface IDs (the NAT engine's), e.g. [2, 3]
	Input   Target  // new flows from the zone to the router itself
	Forward Target  // new flows from the zone through the router
	Output  Target  // new flows from the router into the zone
}

// Any names every zone in Rule.Src or Rule.Dest.
const Any = "*"

// PortRange is an inclusive port range; First == Last for one port.
type PortRange struct{ First, Last uint16 }

// ICMPType is an ICMP (ICMPv6 for IPv6) type, with one code or any.
type ICMPType struct {
	Type    uint8 // e.g. 8 (echo request) or 128 (ICMPv6 echo request)
	Code    uint8
	AnyCode bool
	V6      bool // an ICMPv6 type; it matches IPv6 flows only, the others IPv4 ones
}

// Suffix matches IPv6 addresses by their interface ID (the low 64
// bits), so a rule survives a new delegated prefix (fw4's
// "::1234/::ffff:ffff:ffff:ffff" form).
type Suffix netip.Addr

// Rule matches new flows. A field left empty matches everything.
type Rule struct {
	Name string // for counters and errors, e.g. "block-tv"
	// Src and Dest are zone names or Any. An empty Src is the router
	// itself (an output rule), an empty Dest too (an input rule).
	Src, Dest string
	Family    uint8 // 4 or 6; 0 for both
	// Protos are IP protocol numbers, e.g. [6, 17]; empty means every
	// protocol. Ports apply to TCP, UDP, SCTP and UDP-Lite only.
	Protos     []uint8
	SrcAddrs   []netip.Prefix
	DestAddrs  []netip.Prefix
	SrcSuffix  []Suffix
	DestSuffix []Suffix
	SrcPorts   []PortRange
	DestPorts  []PortRange
	ICMPTypes  []ICMPType
	// Limit is the most flows a second the rule matches (0: no limit),
	// Burst how many it matches at once above that (nft "limit rate
	// 10/second burst 20"); flows over the limit go on to the next rule.
	Limit  float64
	Burst  int
	Target Target
	// Log counts the rule's matches in Counters' Logged as well as in
	// its hit counter (fw4 "log": here a counter, not a syslog line).
	Log bool
	// LogCapture (with Log) also hands the packet that made each
	// logged decision to the capture (Decision.Capture), at most
	// LogRate a second per rule; the rest are counted in LogDropped.
	LogCapture bool
}

// Policy is the whole zone and rule configuration.
type Policy struct {
	Zones []Zone
	Rules []Rule
}

// Flow is what a rule sees of a new flow: its first packet after DNAT.
// Addresses are 16 bytes; IPv4 uses the first 4 (the NAT engine's Tuple
// layout).
type Flow struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	ICMPType         uint8
	ICMPCode         uint8
	Proto            uint8
	V6               bool
	// In is the interface the flow arrived on, 0 for the router's own
	// flows; Out the interface it leaves by, 0 for flows to the router.
	In, Out int32
	// DNAT says a redirect (port forward) or NAT mapping rewrote the
	// destination: with no rule matching, such a forwarded flow is
	// accepted.
	DNAT bool
}

// hasPorts reports whether protocol p carries ports (TCP, UDP, SCTP,
// UDP-Lite).
func hasPorts(p uint8) bool { return p == 6 || p == 17 || p == 132 || p == 136 }
