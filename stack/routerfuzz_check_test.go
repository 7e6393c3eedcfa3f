package stack

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// The invariants FuzzRouter checks on every frame the router sends, with
// what it knows of the frames that went in.

// ipInfo is what the harness reads from an untagged frame's IP packet.
type ipInfo struct {
	ok       bool
	v6       bool
	src, dst netip.Addr
	ttl      uint8
	// key identifies a packet across the router; fragKey is key without
	// the length and fragment fields, for fragments the router makes of a
	// bigger packet.
	key, fragKey pktKey
	// frag: a fragment (IPv4 MF or offset, an IPv6 fragment header);
	// first: the first one (offset 0).
	frag, first bool
	// proto is the upper-layer protocol; l4 its bytes, valid iff !frag ||
	// first (for a first fragment, what this fragment carries).
	proto uint8
	l4    []byte
	// csumOK: the TCP, UDP, ICMP or ICMPv6 checksum is right (or cannot
	// be checked: fragments, short headers). partialOK: the TCP or UDP
	// checksum field holds what a CHECKSUM_PARTIAL sender leaves there,
	// the pseudo-header sum, so the router can complete it.
	csumOK, partialOK bool
}

// pktKey is what forwarding and NAT leave alone in a packet: the IPv4
// protocol, ID, total length and fragment field, or the IPv6 next header,
// flow label, payload length and the payload's first 6 octets (no NAT66:
// an extension header, or the ports; not the UDP checksum, which the
// router completes in CHECKSUM_PARTIAL packets).
type pktKey struct {
	v6     bool
	proto  uint8
	id     uint32
	length int
	frag   uint16
	head   [6]byte
}

// ports returns the TCP or UDP ports; ok is false for other protocols and
// short headers.
func (p *ipInfo) ports() (src, dst uint16, ok bool) {
	if (p.proto != protoTCP && p.proto != protoUDP) || len(p.l4) < 4 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(p.l4), binary.BigEndian.Uint16(p.l4[2:]), true
}

// parseIPFrame reads the IP packet of an untagged Ethernet frame. It
// accepts only what is well formed enough to have addresses and lengths
// that fit the frame.
func parseIPFrame(frame []byte) ipInfo {
	var p ipInfo
	if len(frame) < header.EthernetMinimumSize {
		return p
	}
	ip := frame[header.EthernetMinimumSize:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		h, l4, ok := ipv4Parts(ip)
		if !ok || ip[0]>>4 != 4 {
			return p
		}
		p.ok = true
		p.src = netip.AddrFrom4([4]byte(ip[12:16]))
		p.dst = netip.AddrFrom4([4]byte(ip[16:20]))
		p.ttl = h.TTL()
		p.proto = h.Protocol()
		p.fragKey = pktKey{proto: p.proto, id: uint32(h.ID())}
		p.key = p.fragKey
		p.key.length, p.key.frag = int(h.TotalLength()), binary.BigEndian.Uint16(ip[6:])
		p.frag = h.More() || h.FragmentOffset() != 0
		p.first = h.FragmentOffset() == 0
		p.l4 = l4
		p.csumOK = p.frag || checksumOK(false, ip[12:16], ip[16:20], p.proto, l4)
		p.partialOK = !p.frag && partialOK(ip[12:16], ip[16:20], p.proto, l4)
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
			return p
		}
		end := header.IPv6MinimumSize + int(binary.BigEndian.Uint16(ip[4:]))
		if end > len(ip) {
			return p
		}
		ip = ip[:end]
		p.ok, p.v6 = true, true
		p.src = netip.AddrFrom16([16]byte(ip[8:24]))
		p.dst = netip.AddrFrom16([16]byte(ip[24:40]))
		p.ttl = ip[7]
		p.fragKey = pktKey{v6: true, proto: ip[6], id: binary.BigEndian.Uint32(ip) & 0xfffff}
		p.key = p.fragKey
		p.key.length = end - header.IPv6MinimumSize
		copy(p.key.head[:], ip[header.IPv6MinimumSize:])
		proto, off, ok := ipv6Transport(ip)
		p.frag = !ok
		p.csumOK = true
		if ok {
			p.proto, p.l4 = proto, ip[off:]
			p.first = true
			p.csumOK = checksumOK(true, ip[8:24], ip[24:40], proto, p.l4)
			p.partialOK = partialOK(ip[8:24], ip[24:40], proto, p.l4)
		}
	}
	return p
}

// checksumOK reports whether l4 carries a right TCP, UDP, ICMP or ICMPv6
// checksum; other protocols and short headers count as right.
func checksumOK(v6 bool, src, dst []byte, proto uint8, l4 []byte) bool {
	switch {
	case proto == uint8(header.ICMPv4ProtocolNumber) && !v6:
		return len(l4) < header.ICMPv4MinimumSize || checksum.Checksum(l4, 0) == 0xffff
	case proto == uint8(header.ICMPv6ProtocolNumber) && v6:
		return len(l4) < header.ICMPv6MinimumSize || checksum.Checksum(l4, pseudoHeaderSum(src, dst, proto, len(l4))) == 0xffff
	}
	return l4ChecksumValid(v6, src, dst, proto, l4)
}

// partialOK reports whether the TCP or UDP segment l4 carries the
// pseudo-header sum in its checksum field, as fixFrame leaves it.
func partialOK(src, dst []byte, proto uint8, l4 []byte) bool {
	off, minLen, ok := checksumOffset(proto)
	return ok && len(l4) >= minLen && binary.BigEndian.Uint16(l4[off:]) == pseudoHeaderSum(src, dst, proto, len(l4))
}

// flowKey is a TCP or UDP 5-tuple as the harness saw it.
type flowKey struct {
	proto            uint8
	src, dst         netip.Addr
	srcPort, dstPort uint16
}

func (k flowKey) reverse() flowKey {
	return flowKey{k.proto, k.dst, k.src, k.dstPort, k.srcPort}
}

// ingress is an IP packet the harness delivered.
type ingress struct {
	port    int
	info    ipInfo
	partial bool
}

// wrongChecksum reports whether the router may forward in's TCP, UDP or
// ICMP checksum wrong: it came in wrong, or as CHECKSUM_PARTIAL without
// the pseudo-header sum that completing it needs.
func (in *ingress) wrongChecksum() bool {
	if _, _, ok := checksumOffset(in.info.proto); ok && in.partial {
		return !in.info.partialOK
	}
	return !in.info.csumOK
}

// fuzzHistory is what the harness remembers of the frames it delivered
// since the router was built: what the firewall may let reach the LAN.
type fuzzHistory struct {
	// lanFlows holds the 5-tuples of TCP and UDP packets that came in on
	// the LAN port, in both directions: a LAN host opened them, so their
	// replies may come back (and LAN-to-LAN traffic is the LAN's own).
	lanFlows map[flowKey]bool
	// forwarded holds the sources of TCP packets from the WAN to the port
	// forward (the WAN address, port 8080).
	forwarded map[netip.AddrPort]bool
	// ttls holds the TTLs of the IP packets delivered, by key;
	// unfragTTLs those of unfragmented ones by fragKey, for the fragments
	// the router makes of them.
	ttls, unfragTTLs map[pktKey]*ttlSet
}

func newFuzzHistory() *fuzzHistory {
	return &fuzzHistory{
		lanFlows:   make(map[flowKey]bool),
		forwarded:  make(map[netip.AddrPort]bool),
		ttls:       make(map[pktKey]*ttlSet),
		unfragTTLs: make(map[pktKey]*ttlSet),
	}
}

// addTTL adds ttl to m's set for k.
func addTTL(m map[pktKey]*ttlSet, k pktKey, ttl uint8) {
	s := m[k]
	if s == nil {
		s = new(ttlSet)
		m[k] = s
	}
	s.add(ttl)
}

// record notes a delivered packet.
func (h *fuzzHistory) record(in *ingress) {
	p := &in.info
	if p.ok {
		addTTL(h.ttls, p.key, p.ttl)
		if !p.frag {
			addTTL(h.unfragTTLs, p.fragKey, p.ttl)
		}
	}
	sp, dp, ok := p.ports()
	if !p.ok || !ok || (p.frag && !p.first) {
		return
	}
	k := flowKey{p.proto, p.src, p.dst, sp, dp}
	switch {
	case in.port == portLAN:
		h.lanFlows[k] = true
		h.lanFlows[k.reverse()] = true
	case p.proto == protoTCP && p.dst == fzWAN4 && dp == fzForwardExt:
		h.forwarded[netip.AddrPortFrom(p.src, sp)] = true
	}
}

// admitted reports whether the firewall may let the TCP or UDP packet p
// (one the router sent on the LAN port) reach a LAN host.
func (h *fuzzHistory) admitted(p *ipInfo) bool {
	sp, dp, ok := p.ports()
	if !ok {
		return true
	}
	k := flowKey{p.proto, p.src, p.dst, sp, dp}
	switch {
	case h.lanFlows[k]:
		return true
	case !p.v6 && p.proto == protoTCP && p.dst == fzHost4 && dp == fzForwardInt:
		return h.forwarded[netip.AddrPortFrom(p.src, sp)]
	case p.v6 && p.proto == protoTCP && p.dst == fzHost6 && dp == fzAllow6Port:
		return true
	}
	return false
}

// checkSent checks one frame the router sent on port against the
// invariants; in is every IP packet delivered in this input. It returns
// a description of the first broken one, or "".
func checkSent(port int, frame []byte, in []ingress, hist *fuzzHistory) string {
	if len(frame) < header.EthernetMinimumSize {
		return "runt frame"
	}
	if string(frame[6:12]) != string(fzMACFor(port)) {
		return fmt.Sprintf("source MAC %x is not the interface's", frame[6:12])
	}
	if isZeroMAC(frame[:6]) {
		return "destination MAC 00:00:00:00:00:00"
	}
	mtu := 1500
	off := 12
	if port == portWAN {
		mtu = fzWANMTU
		if len(frame) < 18 || binary.BigEndian.Uint16(frame[12:]) != etherTypeVLAN || binary.BigEndian.Uint16(frame[14:])&0xfff != fzWANVID {
			return "WAN frame without its VLAN 2 tag"
		}
		off = 16
	}
	et := binary.BigEndian.Uint16(frame[off:])
	l3 := frame[off+2:]
	if len(l3) > mtu {
		return fmt.Sprintf("%d-byte packet over the %d-byte MTU", len(l3), mtu)
	}
	switch et {
	case uint16(header.ARPProtocolNumber):
		a := header.ARP(l3)
		if len(l3) < header.ARPSize || !a.IsValid() || string(a.HardwareAddressSender()) != string(fzMACFor(port)) {
			return "malformed ARP"
		}
		return ""
	case uint16(header.IPv4ProtocolNumber):
		ihl := 0
		if len(l3) > 0 {
			ihl = int(l3[0]&0xf) * 4
		}
		switch {
		case len(l3) < header.IPv4MinimumSize || l3[0]>>4 != 4 || ihl < header.IPv4MinimumSize || ihl > len(l3):
			return "malformed IPv4 header"
		case int(binary.BigEndian.Uint16(l3[2:])) != len(l3):
			return fmt.Sprintf("IPv4 total length %d in a %d-byte packet", binary.BigEndian.Uint16(l3[2:]), len(l3))
		case checksum.Checksum(l3[:ihl], 0) != 0xffff:
			return "bad IPv4 header checksum"
		}
	case uint16(header.IPv6ProtocolNumber):
		switch {
		case len(l3) < header.IPv6MinimumSize || l3[0]>>4 != 6:
			return "malformed IPv6 header"
		case header.IPv6MinimumSize+int(binary.BigEndian.Uint16(l3[4:])) != len(l3):
			return fmt.Sprintf("IPv6 payload length %d in a %d-byte packet", binary.BigEndian.Uint16(l3[4:]), len(l3))
		}
	default:
		return fmt.Sprintf("EtherType %#04x", et)
	}
	eth := append(append([]byte(nil), frame[:12]...), frame[off:]...)
	p := parseIPFrame(eth)
	if !p.ok {
		return "unparsable IP packet"
	}
	if p.ttl == 0 {
		return "TTL / hop limit 0"
	}
	if msg := checkForwarded(&p, in, hist); msg != "" {
		return msg
	}
	if port == portLAN && !isRouterAddr(p.src) && inPrefixes(fzLANNet, p.dst) && (!p.frag || p.first) && !hist.admitted(&p) {
		return fmt.Sprintf("firewall: %s %s -> %s reached the LAN with no rule or flow admitting it", protoName(p.proto), p.src, p.dst)
	}
	return ""
}

// checkForwarded checks a sent packet that may be the forward of a
// delivered one: its TTL is one less than that of a packet with its key
// delivered since the router was built (the NAT engine holds fragments
// for later inputs), and its checksum is right unless one of the packets
// with its key in in (this input's and the last one's) came in wrong.
// Router-originated packets (TTL 64, NDP's 255) are not told apart from
// forwards that arrived with 65 or 256 and are skipped by the TTL rule.
func checkForwarded(p *ipInfo, in []ingress, hist *fuzzHistory) string {
	ttls := hist.ttls[p.key]
	if ttls == nil && p.frag {
		ttls = hist.unfragTTLs[p.fragKey]
	}
	if ttls != nil && p.ttl != 64 && p.ttl != 255 && !ttls.has(p.ttl+1) {
		return fmt.Sprintf("forwarded with TTL %d; packets with its key came in with TTL %v", p.ttl, ttls)
	}
	if p.csumOK {
		return ""
	}
	for i := range in {
		q := &in[i].info
		if q.ok && (q.key == p.key || (p.frag && !q.frag && q.fragKey == p.fragKey)) && in[i].wrongChecksum() {
			return ""
		}
	}
	return fmt.Sprintf("%s checksum wrong, and no packet with a wrong one came in", protoName(p.proto))
}

// ttlSet is a set of TTL values.
type ttlSet [4]uint64

func (s *ttlSet) add(ttl uint8)      { s[ttl/64] |= 1 << (ttl % 64) }
func (s *ttlSet) has(ttl uint8) bool { return s[ttl/64]&(1<<(ttl%64)) != 0 }

func (s *ttlSet) String() string {
	var ttls []int
	for i := range 256 {
		if s.has(uint8(i)) {
			ttls = append(ttls, i)
		}
	}
	return fmt.Sprint(ttls)
}

func isZeroMAC(m []byte) bool {
	return m[0]|m[1]|m[2]|m[3]|m[4]|m[5] == 0
}

func inPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func protoName(proto uint8) string {
	switch proto {
	case protoTCP:
		return "TCP"
	case protoUDP:
		return "UDP"
	case uint8(header.ICMPv4ProtocolNumber):
		return "ICMP"
	case uint8(header.ICMPv6ProtocolNumber):
		return "ICMPv6"
	}
	return fmt.Sprintf("protocol %d", proto)
}
