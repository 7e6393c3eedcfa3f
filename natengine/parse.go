package natengine

import "encoding/binary"

// Kind classifies a packet for conntrack.
type Kind uint8

// Packet kinds.
const (
	KindOther     Kind = iota // IP with an L4 protocol without ports: tracked by addresses and protocol (generic.go)
	KindTCP                   // TCP segment
	KindUDP                   // UDP datagram
	KindICMPQuery             // ICMP/ICMPv6 query or reply with an identifier (RFC 5508 section 2)
	KindICMPError             // ICMP/ICMPv6 error carrying an embedded packet
	KindICMPOther             // any other ICMP/ICMPv6 message (ND, MLD, router renumbering ...)
	KindFragment              // a non-first fragment: no L4 header
)

// Parsed is the result of classifying one IP packet. Offsets are relative to
// the start of the IP header. It holds no pointers into the packet.
type Parsed struct {
	V6        bool   // IPv6 (else IPv4)
	Kind      Kind   // what the packet is
	Proto     uint8  // L4 protocol number after any IPv6 extension headers
	Len       int    // packet length from the IP header (total/payload length); the caller's slice may be longer
	L4Off     int    // offset of the L4 header; valid iff Kind != KindFragment
	Options   bool   // IPv4 options or IPv6 extension headers present
	Frag      bool   // the packet is a fragment (first or not)
	FragOff   int    // fragment offset in bytes; valid iff Frag
	MoreFrags bool   // MF flag; valid iff Frag
	FragID    uint32 // IPv4 identification or IPv6 fragment identification; valid iff Frag
	SrcPort   uint16 // TCP/UDP source port, or the ICMP query identifier
	DstPort   uint16 // TCP/UDP destination port, or the ICMP query identifier
	TCPFlags  uint8  // TCP flags byte; valid iff Kind == KindTCP
	ICMPType  uint8  // ICMP type; valid iff the protocol is ICMP/ICMPv6
	ICMPCode  uint8  // ICMP code; valid iff the protocol is ICMP/ICMPv6
	Inner     int    // offset of the embedded IP header; valid iff Kind == KindICMPError
}

// TCP flag bits (RFC 9293 section 3.1).
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// Header sizes and offsets (RFC 791, RFC 8200, RFC 9293, RFC 768, RFC 792).
const (
	ipv4MinLen     = 20
	ipv6Len        = 40
	ipv4ChecksumAt = 10
	ipv4TTLAt      = 8
	ipv6HopAt      = 7
	tcpChecksumAt  = 16
	udpChecksumAt  = 6
	icmpChecksumAt = 2
	icmpHdrLen     = 8
	maxExtHeaders  = 8 // extension headers walked before giving up (RFC 8200 allows any number; 8 bounds the work)
)

// Classify parses the IPv4 or IPv6 packet pkt (starting at the IP header)
// far enough for conntrack and NAT. ok is false for malformed packets. It
// does not verify checksums and never modifies pkt.
func Classify(pkt []byte) (p Parsed, ok bool) {
	ok = parse(pkt, &p, true)
	return p, ok
}

// parse fills p from b. strict requires the whole packet to be present (an
// outer packet); non-strict accepts a truncated packet whose first 8 L4
// bytes are present (a packet embedded in an ICMP error, RFC 792).
func parse(b []byte, p *Parsed, strict bool) bool {
	*p = Parsed{}
	if len(b) < 1 {
		return false
	}
	switch b[0] >> 4 {
	case 4:
		return parse4(b, p, strict)
	case 6:
		return parse6(b, p, strict)
	}
	return false
}

func parse4(b []byte, p *Parsed, strict bool) bool {
	if len(b) < ipv4MinLen {
		return false
	}
	ihl := int(b[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if ihl < ipv4MinLen || total < ihl || len(b) < ihl {
		return false
	}
	if strict && len(b) < total {
		return false
	}
	p.Len = total
	p.Options = ihl > ipv4MinLen
	p.Proto = b[9]
	ff := binary.BigEndian.Uint16(b[6:])
	p.FragOff = int(ff&0x1fff) * 8
	p.MoreFrags = ff&0x2000 != 0
	if p.FragOff != 0 || p.MoreFrags {
		p.Frag = true
		p.FragID = uint32(binary.BigEndian.Uint16(b[4:]))
	}
	end := total
	if end > len(b) {
		end = len(b)
	}
	return parseL4(b[:end], ihl, p, strict)
}

func parse6(b []byte, p *Parsed, strict bool) bool {
	if len(b) < ipv6Len {
		return false
	}
	total := ipv6Len + int(binary.BigEndian.Uint16(b[4:]))
	if strict && len(b) < total {
		return false
	}
	p.V6 = true
	p.Len = total
	end := total
	if end > len(b) {
		end = len(b)
	}
	b = b[:end]
	nh := b[6]
	off := ipv6Len
	for i := 0; ; i++ {
		if i > maxExtHeaders {
			return false
		}
		switch nh {
		case 0, 43, 60, 51: // hop-by-hop, routing, destination options, AH
			if len(b) < off+8 {
				return false
			}
			n := (int(b[off+1]) + 1) * 8
			if nh == 51 {
				n = (int(b[off+1]) + 2) * 4
			}
			nh = b[off]
			off += n
			p.Options = true
			continue
		case 44: // fragment (RFC 8200 section 4.5)
			if len(b) < off+8 {
				return false
			}
			v := binary.BigEndian.Uint16(b[off+2:])
			p.Frag = true
			p.FragOff = int(v &^ 7)
			p.MoreFrags = v&1 != 0
			p.FragID = binary.BigEndian.Uint32(b[off+4:])
			nh = b[off]
			off += 8
			if p.FragOff != 0 {
				// A later fragment's data is not headers: its
				// first bytes may look like an extension header.
				break
			}
			continue
		}
		break
	}
	if off > len(b) {
		return false
	}
	p.Proto = nh
	return parseL4(b, off, p, strict)
}

// parseL4 parses the L4 header at off in b (b ends at the packet's end or
// at the truncation point).
func parseL4(b []byte, off int, p *Parsed, strict bool) bool {
	p.L4Off = off
	if p.FragOff != 0 {
		p.Kind = KindFragment
		return true
	}
	// Outer packets need the whole L4 header; embedded ones the first 8 bytes.
	need := func(n int) bool {
		if !strict && n > 8 {
			n = 8
		}
		return len(b) >= off+n
	}
	l4 := b[off:]
	switch p.Proto {
	case ProtoTCP:
		if !need(20) {
			return false
		}
		p.Kind = KindTCP
		p.SrcPort = binary.BigEndian.Uint16(l4)
		p.DstPort = binary.BigEndian.Uint16(l4[2:])
		if len(l4) >= 14 {
			p.TCPFlags = l4[13]
		}
		if strict {
			doff := int(l4[12]>>4) * 4
			if doff < 20 || len(l4) < doff {
				return false
			}
		}
	case ProtoUDP:
		if !need(8) {
			return false
		}
		p.Kind = KindUDP
		p.SrcPort = binary.BigEndian.Uint16(l4)
		p.DstPort = binary.BigEndian.Uint16(l4[2:])
	case ProtoICMP, ProtoICMPv6:
		if (p.Proto == ProtoICMPv6) != p.V6 {
			p.Kind = KindOther
			return true
		}
		if !need(icmpHdrLen) {
			return false
		}
		p.ICMPType, p.ICMPCode = l4[0], l4[1]
		switch {
		case icmpIsQuery(p.ICMPType, p.V6):
			p.Kind = KindICMPQuery
			id := binary.BigEndian.Uint16(l4[4:])
			p.SrcPort, p.DstPort = id, id
		case icmpIsError(p.ICMPType, p.V6):
			p.Kind = KindICMPError
			p.Inner = off + icmpHdrLen
			if p.Frag {
				// An error split over fragments cannot be translated here.
				return false
			}
		default:
			p.Kind = KindICMPOther
		}
	default:
		p.Kind = KindOther
	}
	return true
}

// icmpIsQuery reports whether ICMP type t is an echo/timestamp/information/
// address-mask query or reply (RFC 792, RFC 950) or an ICMPv6 echo (RFC 4443).
func icmpIsQuery(t uint8, v6 bool) bool {
	if v6 {
		return t == 128 || t == 129
	}
	switch t {
	case 0, 8, 13, 14, 15, 16, 17, 18:
		return true
	}
	return false
}

// icmpIsRequest reports whether query type t opens a session.
func icmpIsRequest(t uint8, v6 bool) bool {
	if v6 {
		return t == 128
	}
	return t == 8 || t == 13 || t == 15 || t == 17
}

// icmpIsError reports whether t is an ICMP error carrying an embedded packet:
// destination unreachable, source quench, redirect, time exceeded, parameter
// problem (RFC 792), or the ICMPv6 errors 1-4 (RFC 4443).
func icmpIsError(t uint8, v6 bool) bool {
	if v6 {
		return t >= 1 && t <= 4
	}
	switch t {
	case 3, 4, 5, 11, 12:
		return true
	}
	return false
}

// tuple returns the conntrack tuple of the packet b described by p.
func (p *Parsed) tuple(b []byte) Tuple {
	var t Tuple
	t.V6 = p.V6
	t.Proto = p.Proto
	if p.V6 {
		copy(t.Src[:], b[8:24])
		copy(t.Dst[:], b[24:40])
	} else {
		copy(t.Src[:4], b[12:16])
		copy(t.Dst[:4], b[16:20])
	}
	if p.Kind != KindFragment {
		t.SrcPort, t.DstPort = p.SrcPort, p.DstPort
	}
	return t
}

// srcOff and dstOff are the offsets of the addresses in the IP header.
func (p *Parsed) srcOff() int {
	if p.V6 {
		return 8
	}
	return 12
}

func (p *Parsed) dstOff() int {
	if p.V6 {
		return 24
	}
	return 16
}
