package stack

import "sync/atomic"

// dropReason indexes the per-interface drop counters. The names are the
// keys of [InterfaceStats.Drops].
type dropReason int

const (
	dropTruncated           dropReason = iota // shorter than an Ethernet header, or cut by the ring (WireLen > len(Data))
	dropOversize                              // longer than the MTU allows
	dropMalformed                             // bad IPv4/IPv6/ARP header: version, lengths
	dropVLANUnknown                           // tagged frame on an interface without that VLAN
	dropOtherHost                             // unicast to a MAC that is not ours
	dropUnknownEthertype                      // neither IPv4, IPv6 nor ARP
	dropIPv4HeaderChecksum                    // IPv4 header checksum wrong
	dropL4Checksum                            // TCP/UDP checksum wrong on a packet for the router
	dropTTLExceeded                           // IPv4 TTL <= 1 on a packet to be forwarded (Time Exceeded sent)
	dropLinkDown                              // received or sent while the link is down
	dropNotAttached                           // received before the NIC existed or after it was removed
	dropTxError                               // the FrameWriter refused the frame
	dropTxOversize                            // netstack gave a packet larger than the frame buffer
	dropNAT                                   // the NAT engine refused the packet (its own counters say why)
	dropNoEgress                              // fast-path packet whose egress interface was just removed
	dropFirewallInput                         // new connection to the router refused by the interface's input policy
	dropHeaderChain                           // IPv6 header chain over 1280 bytes on a packet to be forwarded (RFC 7112 section 5; Parameter Problem sent)
	dropEgressMTU                             // forward refused: egress MTU below the family's minimum (68 IPv4, 1280 IPv6)
	dropFragmentTooBig                        // IPv4 fragment ending past 65475 bytes (ping of death; see ipv4guard.go)
	dropSourceRoute                           // IPv4 loose or strict source route option (RFC 7126; Linux accept_source_route=0)
	dropUnassignedDelegated                   // IPv6 forward to a delegated prefix no interface uses (RFC 7084 WPD-5; Destination Unreachable sent)
	dropGSOMalformed                          // superframe whose headers disagree with its virtio-net header, with IPv4 options or IPv6 extension headers, or UDP datagrams over the MTU (superframe.go)
	dropSpoofedSource                         // source the interface's link cannot have (RFC 3704 ingress filtering; srcfilter.go)
	dropInsideSourceOut                       // the router's own packet leaving a wan interface with a LAN source (srcfilter.go)
	dropPPPoENotSession                       // plain IPv4, IPv6 or ARP frame on a PPPoE interface (pppoe.go)
	dropPPPoEDown                             // IP packet to send on a PPPoE interface whose session is not up (pppoe.go)
	dropAnswerReroute                         // the router's answer to a host on this interface from another interface's address found the reroute queue full or no route (crossnic.go)

	// Fragments refused by package fragguard (fragguard.go).
	dropFragTiny            // first fragment without the whole TCP/UDP/ICMP header (RFC 1858 section 3.1)
	dropFragTCPOffset8      // TCP fragment at fragment offset 1 (RFC 1858 section 3.2)
	dropFragOverlap         // fragment overlapping an earlier one of its datagram (RFC 5722)
	dropFragAfterOverlap    // later fragment of a datagram found overlapping (RFC 5722)
	dropFragIncompleteChain // IPv6 first fragment without the whole header chain (RFC 7112; Parameter Problem sent)
	dropFragMalformed       // fragment length not a multiple of 8, past 65,535 bytes, nested Fragment header
	dropFragTooManyHoles    // fragment of a datagram scattered into more pieces than the guard remembers

	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	dropTruncated:           "truncated",
	dropOversize:            "oversize",
	dropMalformed:           "malformed",
	dropVLANUnknown:         "vlan_unknown",
	dropOtherHost:           "other_host",
	dropUnknownEthertype:    "unknown_ethertype",
	dropIPv4HeaderChecksum:  "ipv4_header_checksum",
	dropL4Checksum:          "l4_checksum",
	dropTTLExceeded:         "ttl_exceeded",
	dropLinkDown:            "link_down",
	dropNotAttached:         "not_attached",
	dropTxError:             "tx_error",
	dropTxOversize:          "tx_oversize",
	dropNAT:                 "nat",
	dropNoEgress:            "no_egress",
	dropFirewallInput:       "firewall_input",
	dropHeaderChain:         "ipv6_header_chain",
	dropEgressMTU:           "egress_mtu_below_minimum",
	dropFragmentTooBig:      "ipv4_fragment_too_big",
	dropSourceRoute:         "ipv4_source_route",
	dropUnassignedDelegated: "unassigned_delegated",
	dropGSOMalformed:        "gso_malformed",
	dropSpoofedSource:       "spoofed_source",
	dropInsideSourceOut:     "inside_source_out",
	dropPPPoENotSession:     "pppoe_not_session",
	dropPPPoEDown:           "pppoe_down",
	dropAnswerReroute:       "answer_reroute",

	dropFragTiny:            "tiny_first_fragment",
	dropFragTCPOffset8:      "tcp_offset_8",
	dropFragOverlap:         "overlap",
	dropFragAfterOverlap:    "after_overlap",
	dropFragIncompleteChain: "incomplete_chain",
	dropFragMalformed:       "malformed_fragment",
	dropFragTooManyHoles:    "too_many_holes",
}

func (r dropReason) String() string { return dropReasonNames[r] }

// InterfaceStats is a snapshot of one interface's counters.
type InterfaceStats struct {
	// RxPackets counts frames received from the port, dropped or not.
	RxPackets uint64
	// RxBytes counts the bytes of those frames (Ethernet header included).
	RxBytes uint64
	// TxPackets counts frames the FrameWriter accepted.
	TxPackets uint64
	// TxBytes counts the bytes of those frames (Ethernet header included).
	TxBytes uint64
	// Drops counts dropped frames by reason, e.g. "truncated": 3. Reasons
	// of our own link endpoint are plain words (see stats.go); reasons
	// taken from netstack's per-NIC counters start with "netstack_", e.g.
	// "netstack_no_route". Only non-zero reasons are present.
	Drops map[string]uint64
	// GRO is the interface's receive coalescing and checksum counters.
	GRO GROStats
	// NextHopForwarded counts packets received here that were forwarded
	// without netstack before their flow reached the fast path: netstack
	// had already chosen the next hop for their destination (nexthop.go).
	NextHopForwarded uint64
	// Tapped counts received frames a raw-frame tap consumed
	// (Interface.AddTap): netstack, the fast path and NAT never saw them.
	Tapped uint64
	// GSO counts superframes: a local sender's TSO/GSO frames
	// (superframe.go).
	GSO GSOStats
	// PPPoE counts the session's data path on a PPPoE interface
	// (pppoe.go); zero on others.
	PPPoE PPPoEStats
}

// GSOStats counts the superframes of one interface.
type GSOStats struct {
	// Received counts superframes received (each also one RxPackets).
	Received uint64
	// SentWhole counts superframes sent on whole, with a virtio-net
	// header, out of this interface.
	SentWhole uint64
	// Segmented counts superframes cut into wire frames in software:
	// received here for the slow path, or sent out of this interface
	// where it cannot take them whole.
	Segmented uint64
}

// GROStats counts what selective GRO did on one interface.
type GROStats struct {
	// Coalesced counts segments merged into an earlier one of their flow.
	Coalesced uint64
	// Flushed counts packets the GRO handed to netstack, merged or not.
	Flushed uint64
	// BypassedForward counts forwarded TCP packets GROSelective passed on
	// one by one, headers untouched.
	BypassedForward uint64
	// Segmented counts forwarded merged packets split again in software
	// on egress from this interface (GROOn on the ingress interface).
	Segmented uint64
	// ChecksumVerified counts TCP/UDP checksums verified in software
	// because the port had not validated them.
	ChecksumVerified uint64
	// ChecksumBad counts those that were wrong (packets for the router
	// are dropped and also counted in Drops["l4_checksum"]).
	ChecksumBad uint64
}

// counters are one endpoint's statistics. All fields are updated
// atomically; the receive path adds packets and bytes once per batch.
type counters struct {
	rxPackets atomic.Uint64
	rxBytes   atomic.Uint64
	txPackets atomic.Uint64
	txBytes   atomic.Uint64
	drops     [numDropReasons]atomic.Uint64

	groCoalesced atomic.Uint64
	groFlushed   atomic.Uint64
	groBypassed  atomic.Uint64
	groSegmented atomic.Uint64
	csumVerified atomic.Uint64
	csumBad      atomic.Uint64

	nextHopForwarded atomic.Uint64
	tapped           atomic.Uint64

	gsoReceived, gsoSent, gsoSegmented atomic.Uint64

	pppoe pppoeCounters
}

func (c *counters) drop(r dropReason) { c.drops[r].Add(1) }

// fill copies the counters into s, adding only non-zero drop reasons.
func (c *counters) fill(s *InterfaceStats) {
	s.RxPackets = c.rxPackets.Load()
	s.RxBytes = c.rxBytes.Load()
	s.TxPackets = c.txPackets.Load()
	s.TxBytes = c.txBytes.Load()
	s.NextHopForwarded = c.nextHopForwarded.Load()
	s.Tapped = c.tapped.Load()
	s.PPPoE = PPPoEStats{Decapsulated: c.pppoe.decapsulated.Load(), Encapsulated: c.pppoe.encapsulated.Load(), MSSClampedIn: c.pppoe.mssClamped.Load()}
	s.GSO = GSOStats{Received: c.gsoReceived.Load(), SentWhole: c.gsoSent.Load(), Segmented: c.gsoSegmented.Load()}
	s.GRO = GROStats{
		Coalesced:        c.groCoalesced.Load(),
		Flushed:          c.groFlushed.Load(),
		BypassedForward:  c.groBypassed.Load(),
		Segmented:        c.groSegmented.Load(),
		ChecksumVerified: c.csumVerified.Load(),
		ChecksumBad:      c.csumBad.Load(),
	}
	if s.Drops == nil {
		s.Drops = make(map[string]uint64)
	}
	for i := range c.drops {
		if v := c.drops[i].Load(); v != 0 {
			s.Drops[dropReason(i).String()] += v
		}
	}
}
