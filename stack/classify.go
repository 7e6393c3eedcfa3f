package stack

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// Classification: the checks every frame the fast path did not take goes
// through before netstack (classify, then classify4 or classify6), and
// the verdict that tells handleFrame what to do with it.

// verdict is what classify decided about one frame.
type verdict struct {
	proto   tcpip.NetworkProtocolNumber
	pktType tcpip.PacketType
	// drop is the reason to drop the frame; valid iff dropped.
	drop    dropReason
	dropped bool
	// ttlExpired: an IPv4 packet to be forwarded arrived with TTL <= 1;
	// the sender gets ICMP Time Exceeded. Valid iff dropped.
	ttlExpired bool
	// reject: a firewall reject rule refused the packet, a new flow to
	// the router: answer it (reject.go).
	reject bool
	// fixPartial: a forwarded TCP/UDP segment with a CHECKSUM_PARTIAL
	// checksum; l4Off:l4End (frame offsets) and l4Proto locate it.
	fixPartial   bool
	l4Off, l4End int
	l4Proto      uint8

	// forUs: the destination is one of the router's addresses.
	forUs bool
	// tcpOff is the frame offset of the TCP header of a packet GRO could
	// take (IPv4 without options or fragments, IPv6 without extension
	// headers, whole TCP header); 0 otherwise. l4End is then valid.
	tcpOff int
	// gro: hand the packet to the GRO (groDecide).
	gro bool
	// bypass: forwarded TCP that GROSelective leaves alone.
	bypass bool
	// verified: we checked the L4 checksum in software; bad: it was wrong.
	verified, bad bool
	// stolen: the NAT engine kept the packet (an out-of-order fragment it
	// delivers later through DrainHeld); not dropped, not delivered now.
	stolen bool
}

func dropped(r dropReason) verdict { return verdict{drop: r, dropped: true} }

// classify validates one frame with the state of its receive run r:
// r.mac is the interface's MAC, r.mtu its L3 MTU, r.local the router's
// local addresses; r.ingress, if not nil, is the interface's ingress
// source filter (srcfilter.go), applied after the IP header checks and
// before everything else; r.nat, if not nil, runs its Prerouting hook on
// IP packets received on r.in. It does not allocate.
//
// r.inputDrop is the WAN input policy: packets to the router's own
// addresses that open a flow (natengine.CTNew: a TCP SYN, UDP that answers
// none of the router's own flows and is not for its DHCP client ports,
// any protocol but TCP, UDP, ICMP and IGMP) are dropped (fw4's wan zone
// "input REJECT"), after NAT, so port forwards still pass (inputNew);
// UDP to r.admitUDP's ports passes too (inputadmit.go).
// r.frags, if not nil, refuses fragments that could evade NAT and
// firewall, before NAT (fragguard.go).
func classify(f *hw.Frame, r *rxRun) verdict {
	data, mac, mtu := f.Data, r.mac, r.mtu
	switch {
	case f.WireLen > len(data), len(data) < header.EthernetMinimumSize:
		return dropped(dropTruncated)
	case f.VLANValid:
		// A Trunk strips tags before it hands frames over; an endpoint
		// used alone is untagged and must not answer tagged frames.
		return dropped(dropVLANUnknown)
	case len(data) > mtu+header.EthernetMinimumSize+inbandTagAllowance:
		return dropped(dropOversize)
	}
	var v verdict
	dst := data[:header.EthernetAddressSize]
	switch {
	case dst[0]&1 == 0:
		if string(dst) != string(mac) {
			return dropped(dropOtherHost)
		}
		v.pktType = tcpip.PacketHost
	case isBroadcast(dst):
		v.pktType = tcpip.PacketBroadcast
	default:
		v.pktType = tcpip.PacketMulticast
	}
	l3 := data[header.EthernetMinimumSize:]
	et := binary.BigEndian.Uint16(data[12:])
	switch et {
	case uint16(header.IPv4ProtocolNumber):
		v.proto = header.IPv4ProtocolNumber
	case uint16(header.IPv6ProtocolNumber):
		v.proto = header.IPv6ProtocolNumber
	case uint16(header.ARPProtocolNumber):
		v.proto = header.ARPProtocolNumber
		if len(l3) < header.ARPSize {
			return dropped(dropMalformed)
		}
		return v
	case etherTypeVLAN, etherTypeQinQ, etherTypeQinQv1:
		return dropped(dropVLANUnknown)
	default:
		return dropped(dropUnknownEthertype)
	}
	if len(l3) > mtu {
		return dropped(dropOversize)
	}
	if v.proto == header.IPv4ProtocolNumber {
		classify4(f, l3, r, &v)
	} else {
		classify6(f, l3, r, &v)
	}
	return v
}

// prerouting runs the NAT engine's Prerouting hook on ip and reports
// whether the packet goes on, with its conntrack state; otherwise v says
// what became of it. Frames the port marked Backlogged go to
// PreroutingOverloaded, which sheds new flows (counted as the engine's
// "overload" drops).
func prerouting(nat *natengine.Engine, f *hw.Frame, ip []byte, in natengine.Iface, v *verdict) (bool, natengine.CTState) {
	r, st, input := nat.PreroutingCT(ip, in, f.Backlogged)
	reason := dropNAT
	if input {
		reason = dropFirewallInput // the zones' input chain: the input policy's own counter
	}
	switch r {
	case natengine.Accept:
		return true, st
	case natengine.Stolen:
		*v = verdict{stolen: true}
	case natengine.Reject:
		*v = dropped(reason)
		v.reject = true
	default:
		*v = dropped(reason)
	}
	return false, st
}

// inputNew reports whether a packet to the router opens a flow, for the
// WAN input policy: the engine's conntrack state when the interface has
// one (tracked), else newInbound on an unfragmented packet's proto and
// l4.
func inputNew(tracked bool, st natengine.CTState, proto uint8, l4 []byte, fragment bool) bool {
	if tracked {
		return st == natengine.CTNew
	}
	return !fragment && newInbound(proto, l4)
}

// classify4 validates an IPv4 packet (RFC 791, RFC 1812 section 5.2.2).
// Netstack does not check the header checksum because we claim RX offload,
// so it is checked here for every packet.
func classify4(f *hw.Frame, ip []byte, r *rxRun, v *verdict) {
	local, src, nat, frags := r.local, r.ingress, r.nat, r.frags
	if len(ip) < header.IPv4MinimumSize || ip[0]>>4 != 4 {
		*v = dropped(dropMalformed)
		return
	}
	h, l4, ok := ipv4Parts(ip)
	if !ok {
		*v = dropped(dropMalformed)
		return
	}
	ihl := len(ip) - len(ip[h.HeaderLength():])
	if checksum.Checksum(ip[:ihl], 0) != 0xffff {
		*v = dropped(dropIPv4HeaderChecksum)
		return
	}
	if src != nil && !src.allows4(ip[12:16], ip[16:20], local) {
		*v = dropped(dropSpoofedSource)
		return
	}
	if (h.More() || h.FragmentOffset() != 0) && fragmentTooBig(h.FragmentOffset(), l4) {
		*v = dropped(dropFragmentTooBig)
		return
	}
	if (h.More() || h.FragmentOffset() != 0) && frags.refused(ip, false, v) {
		return
	}
	if ihl > header.IPv4MinimumSize && hasSourceRoute(ip[header.IPv4MinimumSize:ihl]) {
		*v = dropped(dropSourceRoute)
		return
	}
	// NAT first: un-NAT of replies and DNAT decide who the packet is for.
	var st natengine.CTState
	if nat != nil {
		var ok bool
		if ok, st = prerouting(nat, f, ip, r.in, v); !ok {
			return
		}
	}
	forUs := local.has4(ip[16:20])
	if !forUs && ip[8] <= 1 {
		// gVisor only refuses TTL 0 and forwards TTL 1 as TTL 0. Catching
		// it here rather than in NFTablesInterface.CheckForward costs one
		// compare on a header we parse anyway, spares netstack the route
		// lookup (a *Route allocation) for a packet it will not forward,
		// keeps the rule next to the future fast path (which bypasses
		// netstack and needs the same check), and quotes the header
		// exactly as received (TTL 1), as RFC 792 asks.
		*v = verdict{drop: dropTTLExceeded, dropped: true, ttlExpired: true}
		return
	}
	fragment := h.More() || h.FragmentOffset() != 0
	if forUs && r.inputDrop && inputNew(nat != nil, st, h.Protocol(), l4, fragment) && (fragment || !admitUDP(r.admitUDP, h.Protocol(), l4)) {
		// Before the fragment check: a first fragment opens a flow too.
		*v = dropped(dropFirewallInput)
		return
	}
	if fragment {
		return
	}
	off := header.EthernetMinimumSize + ihl
	v.forUs = forUs
	if h.Protocol() == protoTCP && ihl == header.IPv4MinimumSize && validTCP(l4) {
		v.tcpOff, v.l4End = off, off+len(l4)
	}
	switch {
	case forUs && !f.CsumValid && !f.CsumPartial:
		v.verified = h.Protocol() == protoTCP || h.Protocol() == protoUDP
		if !l4ChecksumValid(false, ip[12:16], ip[16:20], h.Protocol(), l4) {
			*v = dropped(dropL4Checksum)
			v.verified, v.bad = true, true
		}
	case !forUs && f.CsumPartial:
		v.fixPartial, v.l4Proto, v.l4Off, v.l4End = true, h.Protocol(), off, off+len(l4)
	}
}

// newInbound reports whether an L4 segment opens a connection to the
// router on an interface without a NAT engine (which tracks nothing): a
// TCP SYN without ACK, or any UDP datagram. ICMP and the rest of TCP
// pass: netstack answers those itself (echo replies, RSTs).
func newInbound(proto uint8, l4 []byte) bool {
	switch proto {
	case protoTCP:
		return len(l4) >= header.TCPMinimumSize && header.TCPFlags(l4[13])&(header.TCPFlagSyn|header.TCPFlagAck) == header.TCPFlagSyn
	case protoUDP:
		return true
	}
	return false
}

// validTCP reports whether l4 holds a whole TCP header (RFC 9293 section
// 3.1: data offset at least 5 words, within the segment).
func validTCP(l4 []byte) bool {
	if len(l4) < header.TCPMinimumSize {
		return false
	}
	n := int(l4[12]>>4) * 4
	return n >= header.TCPMinimumSize && n <= len(l4)
}

// classify6 validates an IPv6 packet (RFC 8200). The hop limit is left to
// netstack, which handles it correctly.
func classify6(f *hw.Frame, ip []byte, r *rxRun, v *verdict) {
	local, src, nat, frags := r.local, r.ingress, r.nat, r.frags
	if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
		*v = dropped(dropMalformed)
		return
	}
	end := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
	if end > len(ip) {
		*v = dropped(dropMalformed)
		return
	}
	// Octets after the payload (link padding) go: gVisor's parse.IPv6
	// (header/parse, pinned version) caps the data at the payload length
	// only after taking the extension headers off, so it would forward
	// as many trailing octets as the extension headers are long.
	f.Data = f.Data[:header.EthernetMinimumSize+end]
	ip = ip[:end]
	if src != nil && !src.allows6(ip[8:24], ip[24:40], local) {
		*v = dropped(dropSpoofedSource)
		return
	}
	if mayCarryFragment6(ip[6]) && frags.refused(ip, true, v) {
		return
	}
	var st natengine.CTState
	if nat != nil {
		var ok bool
		if ok, st = prerouting(nat, f, ip, r.in, v); !ok {
			return
		}
	}
	forUs := local.has6(ip[24:40])
	if forUs && r.inputDrop && inputNew(nat != nil, st, ip[6], ip[header.IPv6MinimumSize:end], false) && !admitUDP(r.admitUDP, ip[6], ip[header.IPv6MinimumSize:end]) {
		*v = dropped(dropFirewallInput)
		return
	}
	v.forUs = forUs
	if ip[6] == protoTCP && validTCP(ip[header.IPv6MinimumSize:end]) {
		v.tcpOff, v.l4End = header.EthernetMinimumSize+header.IPv6MinimumSize, header.EthernetMinimumSize+end
	}
	if !(forUs && !f.CsumValid && !f.CsumPartial) && !(!forUs && f.CsumPartial) {
		return
	}
	proto, off, ok := ipv6Transport(ip[:end])
	if !ok {
		return
	}
	l4 := ip[off:end]
	if forUs {
		v.verified = proto == protoTCP || proto == protoUDP
		if !l4ChecksumValid(true, ip[8:24], ip[24:40], proto, l4) {
			*v = dropped(dropL4Checksum)
			v.verified, v.bad = true, true
		}
		return
	}
	base := header.EthernetMinimumSize + off
	v.fixPartial, v.l4Proto, v.l4Off, v.l4End = true, proto, base, base+len(l4)
}

// ipv6Transport walks the extension headers of ip (RFC 8200 section 4)
// and returns the upper-layer protocol and its offset. ok is false for
// fragments and malformed chains.
func ipv6Transport(ip []byte) (proto uint8, off int, ok bool) {
	proto, off = ip[6], header.IPv6MinimumSize
	for {
		switch proto {
		case uint8(header.IPv6HopByHopOptionsExtHdrIdentifier),
			uint8(header.IPv6RoutingExtHdrIdentifier),
			uint8(header.IPv6DestinationOptionsExtHdrIdentifier):
			if off+2 > len(ip) {
				return 0, 0, false
			}
			proto, off = ip[off], off+(int(ip[off+1])+1)*8
			if off > len(ip) {
				return 0, 0, false
			}
		case uint8(header.IPv6FragmentExtHdrIdentifier):
			return 0, 0, false
		default:
			return proto, off, true
		}
	}
}

// isBroadcast reports whether mac is ff:ff:ff:ff:ff:ff.
func isBroadcast(mac []byte) bool {
	return mac[0]&mac[1]&mac[2]&mac[3]&mac[4]&mac[5] == 0xff
}
