package stack

import "gvisor.dev/gvisor/pkg/tcpip/header"

// IPv4 shapes the classifier refuses before NAT and netstack see them.
const (
	// maxIPv4FragmentEnd is the highest fragment end (offset plus
	// payload) the classifier lets through: 65535 minus the largest IPv4
	// header. gVisor reassembles up to 65536 bytes of payload, and its
	// echo reply to such a datagram (the "ping of death", RFC 791's
	// 65535-byte limit broken by the fragments) overflows the reply's
	// 16-bit total length and panics in ipv4's icmp.go ("expected to
	// parse IPv4 header we just created"). A whole datagram cannot be
	// longer than 65535 bytes with its header, so nothing legitimate is
	// lost; the 60-byte margin covers a first fragment whose options are
	// longer than those of the fragment that ends the datagram.
	maxIPv4FragmentEnd = 0xffff - header.IPv4MaximumHeaderSize

	ipv4OptionEOL  = 0   // RFC 791: end of option list
	ipv4OptionNOP  = 1   // RFC 791: no operation
	ipv4OptionLSRR = 131 // RFC 791: loose source and record route
	ipv4OptionSSRR = 137 // RFC 791: strict source and record route
)

// fragmentTooBig reports whether an IPv4 fragment whose payload (after
// the header) is payload and whose offset in bytes is off would end past
// maxIPv4FragmentEnd.
func fragmentTooBig(off uint16, payload []byte) bool {
	return int(off)+len(payload) > maxIPv4FragmentEnd
}

// hasSourceRoute reports whether the IPv4 options opts carry a loose or
// strict source route. gVisor forwards such packets unchanged and ignores
// the route, and Linux drops them by default (accept_source_route=0), as
// RFC 7126 section 4.3-4.4 recommends for routers: a source route lets a
// WAN host steer traffic around the firewall's idea of where it comes
// from. A malformed list ends the walk: netstack answers it with
// Parameter Problem.
func hasSourceRoute(opts []byte) bool {
	for len(opts) > 0 {
		switch opts[0] {
		case ipv4OptionEOL:
			return false
		case ipv4OptionNOP:
			opts = opts[1:]
			continue
		case ipv4OptionLSRR, ipv4OptionSSRR:
			return true
		}
		if len(opts) < 2 || opts[1] < 2 || int(opts[1]) > len(opts) {
			return false
		}
		opts = opts[opts[1]:]
	}
	return false
}
