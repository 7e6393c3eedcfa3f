package stack

import (
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/fragguard"
)

// Fragments that could evade the NAT engine and firewall (RFC 1858, RFC
// 5722, RFC 7112) are refused in classify4/classify6 before Prerouting, on
// every interface, with or without NAT: see package fragguard. A refusal
// is an interface drop named after its reason.

// fragFilter is the router's fragment guard with its clock. The zero
// value is ready to use. It is safe for concurrent use; a nil *fragFilter
// passes everything.
type fragFilter struct {
	g fragguard.Guard
	// now, if set, replaces the clock (tests).
	now func() int64
}

// fragEpoch is the origin of the guard's monotonic clock.
var fragEpoch = time.Now()

// fragClock is the guard's clock: nanoseconds since fragEpoch.
func fragClock() int64 { return int64(time.Since(fragEpoch)) }

// fragDrops maps the guard's reasons to interface drop reasons.
var fragDrops = [fragguard.NumReasons]dropReason{
	fragguard.TinyFirstFragment: dropFragTiny,
	fragguard.TCPOffset8:        dropFragTCPOffset8,
	fragguard.Overlap:           dropFragOverlap,
	fragguard.AfterOverlap:      dropFragAfterOverlap,
	fragguard.IncompleteChain:   dropFragIncompleteChain,
	fragguard.Malformed:         dropFragMalformed,
	fragguard.TooManyHoles:      dropFragTooManyHoles,
}

// refused runs the guard on ip, an IPv4 fragment or an IPv6 packet that
// may carry a Fragment header (ip cut to its payload length), and reports
// whether it is refused; then v says why. The clock is read only for
// fragments the guard tracks, not for every tunnel packet.
func (ff *fragFilter) refused(ip []byte, v6 bool, v *verdict) bool {
	if ff == nil {
		return false
	}
	clock := ff.now
	if clock == nil {
		clock = fragClock
	}
	r := ff.g.CheckClock(ip, v6, clock)
	if r == fragguard.Pass {
		return false
	}
	*v = dropped(fragDrops[r])
	return true
}

// mayCarryFragment6 reports whether an IPv6 packet whose next header is
// nh may hold a Fragment header: TCP, UDP and ICMPv6 right after the
// fixed header (nearly every packet, NDP included) cost this compare only.
func mayCarryFragment6(nh uint8) bool {
	return nh != protoTCP && nh != protoUDP && nh != uint8(header.ICMPv6ProtocolNumber)
}

// icmpv6IncompleteChain is RFC 4443 section 3.4's Parameter Problem code
// 3, "IPv6 First Fragment has incomplete IPv6 Header Chain" (RFC 7112).
const icmpv6IncompleteChain = 3

// sendIncompleteChain answers an IPv6 first fragment refused for an
// incomplete header chain with ICMPv6 Parameter Problem code 3, pointer 0
// (RFC 7112 section 5 allows an intermediate system to; Linux sends the
// same), quoting as much of the fragment as fits in the minimum MTU
// (RFC 4443 section 2.4 (c)). Not to a source that is not a unicast host,
// nor for a packet to a multicast group (RFC 4443 section 2.4 (e)), nor
// about an ICMPv6 error; rate limited by netstack's ICMP limiter; the
// source address is netstack's choice for the ingress interface. ip is
// the IPv6 packet, already validated by classify6; it is only read. This
// runs on the receive goroutine, only for refused fragments.
func (e *Endpoint) sendIncompleteChain(ip []byte) {
	if len(ip) < header.IPv6MinimumSize {
		return
	}
	h := header.IPv6(ip)
	src, dst := h.SourceAddress(), h.DestinationAddress()
	if src.Unspecified() || header.IsV6MulticastAddress(src) || header.IsV6LoopbackAddress(src) ||
		header.IsV6MulticastAddress(dst) || quotesICMPv6Error(ip) {
		return
	}
	e.sendICMPv6Error(src, header.ICMPv6ParamProblem, icmpv6IncompleteChain, 0, ip)
}

// quotesICMPv6Error reports whether the first fragment ip carries, or may
// carry, an ICMPv6 error (type below 128, RFC 4443 section 2.1): its
// Fragment header (found after the extension headers ipv6Transport
// walks) names ICMPv6 and the type octet is absent or an error's.
func quotesICMPv6Error(ip []byte) bool {
	nh, off := ip[6], header.IPv6MinimumSize
	for nh != uint8(header.IPv6FragmentExtHdrIdentifier) {
		switch nh {
		case uint8(header.IPv6HopByHopOptionsExtHdrIdentifier),
			uint8(header.IPv6RoutingExtHdrIdentifier),
			uint8(header.IPv6DestinationOptionsExtHdrIdentifier):
			if off+2 > len(ip) {
				return true
			}
			nh, off = ip[off], off+(int(ip[off+1])+1)*8
		default:
			return false
		}
	}
	if off+8 > len(ip) {
		return true
	}
	if ip[off] != uint8(header.ICMPv6ProtocolNumber) {
		return false
	}
	return off+8 >= len(ip) || ip[off+8] < 128
}

// FragmentStats is the fragment guard's state, router-wide; its refusals
// are the interfaces' drops (tiny_first_fragment, tcp_offset_8, ...).
type FragmentStats struct {
	// Tracked is the number of datagrams whose fragment ranges are
	// remembered now, e.g. 3.
	Tracked int
	// Evicted counts datagrams forgotten before their timeout because
	// the guard's table was full (a flood of fragments); their later
	// fragments were checked as if nothing had come before.
	Evicted uint64
}

// FragmentStats returns the fragment guard's state.
func (r *Netstack) FragmentStats() FragmentStats {
	return FragmentStats{Tracked: r.frags.g.Len(), Evicted: r.frags.g.Stats.Evicted.Load()}
}
