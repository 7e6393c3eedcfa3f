package fragguard

import "encoding/binary"

// parse4 applies the stateless rules to an IPv4 packet. f.timeout stays 0
// when there is nothing to track.
func parse4(ip []byte, f *frag) Reason {
	if len(ip) < 20 || ip[0]>>4 != 4 {
		return Malformed
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ihl < 20 || total < ihl || total > len(ip) {
		return Malformed
	}
	ff := binary.BigEndian.Uint16(ip[6:])
	more, fo := ff&0x2000 != 0, uint32(ff&0x1fff)
	if !more && fo == 0 {
		return Pass
	}
	proto := ip[9]
	payload := ip[ihl:total]
	off := fo * 8
	end := off + uint32(len(payload))
	switch {
	case more && len(payload)%8 != 0, uint32(ihl)+end > 0xffff:
		return Malformed
	case fo == 0 && !wholeHeader(proto, payload, protoICMP):
		return TinyFirstFragment
	case fo == 1 && proto == protoTCP:
		return TCPOffset8
	}
	f.k = key{id: uint32(binary.BigEndian.Uint16(ip[4:])), proto: proto}
	copy(f.k.src[:], ip[12:16])
	copy(f.k.dst[:], ip[16:20])
	f.off, f.end, f.more, f.timeout = off, end, more, timeout4
	return Pass
}

// wholeHeader reports whether b starts with the whole header of transport
// protocol proto (icmp is the family's ICMP number). Other protocols need
// nothing.
func wholeHeader(proto uint8, b []byte, icmp uint8) bool {
	switch proto {
	case protoTCP:
		if len(b) < minTCP {
			return false
		}
		n := int(b[12]>>4) * 4
		return n >= minTCP && n <= len(b)
	case protoUDP:
		return len(b) >= minUDP
	case icmp:
		return len(b) >= minICMP
	}
	return true
}

// parse6 applies the stateless rules to an IPv6 packet. f.timeout stays 0
// when there is nothing to track.
func parse6(ip []byte, f *frag) Reason {
	if len(ip) < 40 || ip[0]>>4 != 6 {
		return Malformed
	}
	end := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if end > len(ip) {
		return Malformed
	}
	ip = ip[:end]
	// The unfragmentable part: Hop-by-Hop, Routing and Destination
	// Options headers before the Fragment header (RFC 8200 section 4.5).
	nh, off := ip[6], 40
	for nh != ip6Fragment {
		n, ok := extLen(nh, ip[off:])
		if !ok {
			// Not a fragment, or a chain too broken to say; netstack
			// drops the latter.
			return Pass
		}
		nh, off = ip[off], off+n
	}
	if off+8 > len(ip) {
		return Malformed
	}
	fh := ip[off : off+8]
	payload := ip[off+8:]
	fo := uint32(binary.BigEndian.Uint16(fh[2:]) >> 3)
	more := fh[3]&1 != 0
	if fo == 0 && !more {
		return Pass // RFC 6946: an atomic fragment is processed as a whole packet
	}
	first := fh[0]
	foff := fo * 8
	fend := foff + uint32(len(payload))
	switch {
	case more && len(payload)%8 != 0, uint32(off-40)+fend > 0xffff:
		return Malformed
	case fo == 1 && first == protoTCP:
		return TCPOffset8
	case fo == 0:
		if r := chain6(first, payload); r != Pass {
			return r
		}
	}
	f.k = key{id: binary.BigEndian.Uint32(fh[4:]), v6: true}
	copy(f.k.src[:], ip[8:24])
	copy(f.k.dst[:], ip[24:40])
	f.off, f.end, f.more, f.timeout = foff, fend, more, timeout6
	return Pass
}

// chain6 checks that the fragmentable part b of a first fragment, whose
// first header is nh, holds the rest of the header chain through the
// upper-layer header (RFC 7112 section 5).
func chain6(nh uint8, b []byte) Reason {
	off := 0
	for {
		switch nh {
		case ip6Fragment:
			return Malformed // a Fragment header inside a fragment
		case ip6NoNext:
			return Pass
		case ip6ESP:
			// Everything after the SPI and sequence number is encrypted:
			// the chain ends there (RFC 4303 section 2).
			if len(b)-off < 8 {
				return IncompleteChain
			}
			return Pass
		}
		n, ok := extLen(nh, b[off:])
		if !ok {
			if isExt(nh) || !wholeHeader(nh, b[off:], protoICMPv6) {
				return IncompleteChain
			}
			return Pass
		}
		nh, off = b[off], off+n
	}
}

// isExt reports whether nh is an IPv6 extension header that extLen walks
// (RFC 7045 section 4, less Fragment and ESP).
func isExt(nh uint8) bool {
	switch nh {
	case ip6HopByHop, ip6Routing, ip6DestOpts, ip6AH, ip6Mobility, ip6HIP, ip6Shim6:
		return true
	}
	return false
}

// extLen returns the length of extension header nh at the start of b; ok
// is false if nh is not one isExt names or b does not hold it whole.
func extLen(nh uint8, b []byte) (n int, ok bool) {
	if !isExt(nh) || len(b) < 8 {
		return 0, false
	}
	if nh == ip6AH {
		n = (int(b[1]) + 2) * 4 // RFC 4302 section 2.2
	} else {
		n = (int(b[1]) + 1) * 8 // RFC 8200 section 4.3
	}
	return n, n <= len(b)
}
