package dnsforward

import (
	"encoding/binary"
	"errors"
)

// The hot path reads queries and patches cached answers as bytes, so that
// a cached answer costs no allocation; everything it does not recognise
// goes to the slow path, which unpacks with miekg/dns. FuzzQuery checks
// that the two agree wherever the fast path accepts.

// Header layout (RFC 1035 §4.1.1).
const (
	headerLen = 12

	flagQR     = 1 << 15
	flagAA     = 1 << 10
	flagTC     = 1 << 9
	flagRD     = 1 << 8
	flagRA     = 1 << 7
	flagAD     = 1 << 5 // RFC 4035 §3.2.3
	flagCD     = 1 << 4 // RFC 4035 §3.2.2
	opcodeMask = 0xf << 11
	rcodeMask  = 0xf

	typeOPT   = 41 // RFC 6891 §6.1.1
	classINET = 1
	optDO     = 1 << 15 // DO bit in the OPT TTL field (RFC 3225 §3)

	// optLen is the size of the OPT record the forwarder appends: root
	// owner, type, class (UDP size), TTL (extended RCODE, version, flags)
	// and a zero RDLENGTH (RFC 6891 §6.1.2).
	optLen = 11
)

// Cache key flag bits: answers differ with DO (RRSIGs included, RFC 3225)
// and CD (unvalidated data, RFC 4035 §3.2.2).
const (
	keyDO = 1 << 0
	keyCD = 1 << 1
)

// query is one client question, parsed by parseQuery or the slow path.
// qname points into the received datagram or a scratch buffer: it is
// valid only while that is.
type query struct {
	id      uint16
	flags   uint16 // header flags as received
	qname   []byte // wire form, case as received, uncompressed
	qtype   uint16
	qclass  uint16
	edns    bool   // the query had an OPT record
	udpSize uint16 // its advertised UDP size, valid iff edns
	do      bool   // its DO bit, valid iff edns
}

// keyBits is the cache-key flag byte of q.
func (q *query) keyBits() byte {
	var b byte
	if q.edns && q.do {
		b |= keyDO
	}
	if q.flags&flagCD != 0 {
		b |= keyCD
	}
	return b
}

// udpLimit is the largest UDP answer q's client takes: 512 without EDNS
// (RFC 1035 §4.2.1), else its advertised size, at least 512 (RFC 6891
// §6.2.5) and at most UpstreamUDPSize.
func (q *query) udpLimit() int {
	if !q.edns {
		return 512
	}
	return min(max(int(q.udpSize), 512), UpstreamUDPSize)
}

// parseQuery is the fast path: it fills q from b and reports true only
// for the common well-formed query: QR=0, opcode QUERY, one question
// with an uncompressed name in class IN and a type other than a zone
// transfer, no answer or authority records, and either nothing more or
// exactly one EDNS version 0 OPT record with the root owner. Everything
// else (false) goes to the slow path, which answers or drops it.
func parseQuery(b []byte, q *query) bool {
	if len(b) < headerLen+5 {
		return false
	}
	flags := binary.BigEndian.Uint16(b[2:])
	if flags&(flagQR|opcodeMask|flagTC) != 0 ||
		binary.BigEndian.Uint16(b[4:]) != 1 || // QDCOUNT
		binary.BigEndian.Uint16(b[6:]) != 0 || // ANCOUNT
		binary.BigEndian.Uint16(b[8:]) != 0 { // NSCOUNT
		return false
	}
	arcount := binary.BigEndian.Uint16(b[10:])
	if arcount > 1 {
		return false
	}
	end, ok := nameEnd(b, headerLen)
	if !ok || end+4 > len(b) {
		return false
	}
	qtype := binary.BigEndian.Uint16(b[end:])
	qclass := binary.BigEndian.Uint16(b[end+2:])
	if qclass != classINET || !forwardableType(qtype) {
		return false
	}
	off := end + 4
	*q = query{
		id:     binary.BigEndian.Uint16(b),
		flags:  flags,
		qname:  b[headerLen:end],
		qtype:  qtype,
		qclass: qclass,
	}
	if arcount == 0 {
		return off == len(b)
	}
	// One OPT record: root owner, type 41, class = UDP size, TTL =
	// extended RCODE (0 in a query), version (0) and flags, RDLENGTH,
	// options (ignored: the forwarder sends its own to the upstream).
	if off+optLen > len(b) || b[off] != 0 || binary.BigEndian.Uint16(b[off+1:]) != typeOPT {
		return false
	}
	if b[off+5] != 0 || b[off+6] != 0 { // extended RCODE, version
		return false
	}
	rdlen := int(binary.BigEndian.Uint16(b[off+9:]))
	if off+optLen+rdlen != len(b) || !optionsValid(b[off+optLen:]) {
		return false
	}
	q.edns = true
	q.udpSize = binary.BigEndian.Uint16(b[off+3:])
	q.do = binary.BigEndian.Uint16(b[off+7:])&optDO != 0
	return true
}

// optionsValid reports whether b is a whole sequence of EDNS options
// (code, length, data; RFC 6891 §6.1.2) whose data has no syntax to
// check: NSID (RFC 5001), COOKIE (RFC 7873) and PADDING (RFC 7830), the
// ones stub resolvers send. Other options (a client subnet, whose family
// and lengths must agree, RFC 7871 §6) take the slow path, where
// miekg/dns checks them.
func optionsValid(b []byte) bool {
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		switch binary.BigEndian.Uint16(b) {
		case 3, 10, 12:
		default:
			return false
		}
		n := 4 + int(binary.BigEndian.Uint16(b[2:]))
		if n > len(b) {
			return false
		}
		b = b[n:]
	}
	return true
}

// forwardableType reports whether qtype may be forwarded: not a zone
// transfer (AXFR 252, IXFR 251; RFC 5936, RFC 1995), not the OPT
// pseudo-type (41), and not the obsolete MAILA/MAILB (253, 254) or TSIG
// and TKEY meta-types (250, 249), which a forwarder does not serve.
func forwardableType(qtype uint16) bool {
	switch qtype {
	case 0, typeOPT, 249, 250, 251, 252, 253, 254:
		return false
	}
	return true
}

// nameEnd returns the offset after the uncompressed name at b[off:]: it
// accepts only ordinary labels (RFC 1035 §3.1) of at most 63 bytes, a
// total of at most 255 bytes, ending with the root label. Compressed
// names and extended label types (ok false) go to the slow path.
func nameEnd(b []byte, off int) (int, bool) {
	start := off
	for {
		if off >= len(b) {
			return 0, false
		}
		l := int(b[off])
		if l == 0 {
			off++
			if off-start > 255 {
				return 0, false
			}
			return off, true
		}
		if l > 63 {
			return 0, false
		}
		off += 1 + l
		if off-start > 255 {
			return 0, false
		}
	}
}

// errName is a name that is truncated, loops or is too long.
var errName = errors.New("dnsforward: bad name")

// skipName returns the offset after the possibly compressed name at
// b[off:], following no pointer (RFC 1035 §4.1.4: a pointer ends a name).
func skipName(b []byte, off int) (int, error) {
	n := 0
	for {
		if off >= len(b) {
			return 0, errName
		}
		l := int(b[off])
		switch {
		case l == 0:
			return off + 1, nil
		case l&0xc0 == 0xc0:
			if off+2 > len(b) {
				return 0, errName
			}
			return off + 2, nil
		case l > 63:
			return 0, errName
		}
		n += l + 1
		off += 1 + l
		if n > 255 {
			return 0, errName
		}
	}
}

// lower returns c in lower case for ASCII letters (RFC 4343 §3: DNS
// compares names case-insensitively in ASCII only).
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// appendLower appends the wire name n in lower case to dst.
func appendLower(dst, n []byte) []byte {
	for _, c := range n {
		dst = append(dst, lower(c))
	}
	return dst
}

// equalFold reports whether the wire names a and b are equal ignoring
// ASCII case. Length bytes are at most 63 and never letters, so a
// byte-wise fold is exact.
func equalFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// appendKey appends q's cache key to dst: the lower-cased wire name,
// type, class and the key bits.
func appendKey(dst []byte, q *query) []byte {
	dst = appendLower(dst, q.qname)
	dst = binary.BigEndian.AppendUint16(dst, q.qtype)
	dst = binary.BigEndian.AppendUint16(dst, q.qclass)
	return append(dst, q.keyBits())
}

// hasSuffixFold reports whether the wire name n ends with the wire name
// suffix at a label boundary, ignoring case; suffix includes the root
// label.
func hasSuffixFold(n, suffix []byte) bool {
	for off := 0; off < len(n); off += int(n[off]) + 1 {
		if len(n)-off == len(suffix) {
			return equalFold(n[off:], suffix)
		}
		if len(n)-off < len(suffix) || n[off] == 0 {
			return false
		}
	}
	return false
}

// appendOPT appends the forwarder's OPT record for a reply: its UDP
// size, extended RCODE ext (the upper 8 bits of a 12-bit RCODE), version
// 0 and the client's DO bit echoed (RFC 3225 §3).
func appendOPT(dst []byte, ext uint8, do bool) []byte {
	var flags uint16
	if do {
		flags = optDO
	}
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, typeOPT)
	dst = binary.BigEndian.AppendUint16(dst, UpstreamUDPSize)
	dst = append(dst, ext, 0)
	dst = binary.BigEndian.AppendUint16(dst, flags)
	return binary.BigEndian.AppendUint16(dst, 0)
}

// checkCounts reports whether b holds at least as many questions and
// records as its header counts say (RFC 1035 §4.1.1), names possibly
// compressed; miekg/dns accepts a message that ends early.
func checkCounts(b []byte) error {
	if len(b) < headerLen {
		return errName
	}
	off := headerLen
	var err error
	for range binary.BigEndian.Uint16(b[4:]) {
		if off, err = skipName(b, off); err != nil {
			return err
		}
		if off += 4; off > len(b) {
			return errName
		}
	}
	n := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) + int(binary.BigEndian.Uint16(b[10:]))
	for range n {
		if off, err = skipName(b, off); err != nil {
			return err
		}
		if off+10 > len(b) {
			return errName
		}
		if off += 10 + int(binary.BigEndian.Uint16(b[off+8:])); off > len(b) {
			return errName
		}
	}
	return nil
}
