package dnsforward

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/miekg/dns"
)

// entry is one answer ready to send: the whole response to one question,
// packed once, with the offsets of the fields that change per reply. A
// cached entry is immutable apart from its LRU links, which its shard's
// mutex guards; readers copy msg out without the lock.
type entry struct {
	key string // the cache key (appendKey), "" for an uncached entry

	// msg is the response packed without OPT or TSIG records. Its
	// question starts at headerLen and is uncompressed; no compression
	// pointer targets it except from later names, so a question of the
	// same length in another case may be copied over it.
	msg    []byte
	qEnd   int    // offset after the question
	preAdd int    // offset after the authority section
	flags  uint16 // header flags of the response, RCODE included
	ext    uint8  // the upper 8 bits of a 12-bit RCODE (RFC 6891 §6.1.3)
	// counts are ANCOUNT, NSCOUNT, ARCOUNT of msg.
	ancount, nscount, arcount uint16
	// ttlOff are the offsets of the TTL fields in msg, in order; the
	// first nPre of them lie before preAdd. ttl are their values at
	// stored, already clamped.
	ttlOff []uint16
	ttl    []uint32
	nPre   int

	stored  time.Time
	expires time.Time // stored + lifetime; == stored: not cacheable
	size    int       // bytes counted against Config.MaxBytes

	prev, next *entry // LRU list of the shard, most recent first
}

// entryOverhead approximates the bytes an entry costs beyond its message,
// key and TTL slices: the struct, the map slot and slice headers.
const entryOverhead = 200

// ttlPolicy is how an answer's TTLs are clamped (Config.MinTTL, MaxTTL,
// NegativeMaxTTL), in seconds.
type ttlPolicy struct {
	min, max, negMax uint32
}

func (p ttlPolicy) clamp(ttl uint32) uint32 {
	if ttl == 0 {
		return 0 // RFC 1035 §3.2.1: not to be cached
	}
	return min(max(ttl, p.min), p.max)
}

// isNegative reports whether m answers q negatively (RFC 2308 §1:
// NXDOMAIN, or NODATA: NOERROR and no record of the type asked for,
// perhaps after a CNAME chain).
func isNegative(m *dns.Msg, qtype uint16) bool {
	switch m.Rcode {
	case dns.RcodeNameError:
		return true
	case dns.RcodeSuccess:
	default:
		return false
	}
	for _, rr := range m.Answer {
		t := rr.Header().Rrtype
		if t == qtype || qtype == dns.TypeANY || (qtype == dns.TypeCNAME && t == dns.TypeCNAME) {
			return false
		}
	}
	return true
}

// errNoQuestion is a message without exactly one question.
var errNoQuestion = errors.New("dnsforward: message without one question")

// newEntry packs m (which must have one question) into an entry at now.
// It drops OPT and TSIG records, clamps each TTL by p, and makes the
// entry cacheable for the shortest TTL when m is a NOERROR or NXDOMAIN
// answer with no zero TTL. A negative answer is cacheable only with an
// SOA record in its authority section, for min(SOA TTL, SOA MINIMUM)
// (RFC 2308 §5), and that SOA is served with that TTL (RFC 2308 §3).
// m is modified.
func newEntry(m *dns.Msg, p ttlPolicy, now time.Time) (*entry, error) {
	if len(m.Question) != 1 {
		return nil, errNoQuestion
	}
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if t := rr.Header().Rrtype; t != dns.TypeOPT && t != dns.TypeTSIG {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra

	cacheable := m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError
	negative := isNegative(m, m.Question[0].Qtype)
	var soa *dns.SOA
	if negative {
		for _, rr := range m.Ns {
			if s, ok := rr.(*dns.SOA); ok {
				soa = s
				break
			}
		}
		if soa == nil {
			cacheable = false // RFC 2308 §5: no SOA, no negative caching
		}
	}
	lifetime := ^uint32(0)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if rr == dns.RR(soa) {
				h.Ttl = min(min(h.Ttl, soa.Minttl), p.negMax)
				if h.Ttl > 0 {
					h.Ttl = max(h.Ttl, p.min)
				}
			} else {
				h.Ttl = p.clamp(h.Ttl)
			}
			lifetime = min(lifetime, h.Ttl)
		}
	}
	if lifetime == ^uint32(0) { // no records: nothing says how long
		lifetime = 0
	}
	if !cacheable {
		lifetime = 0
	}
	m.Compress = true
	rcode := m.Rcode
	m.Rcode &= 0xf // the upper bits travel in the OPT record
	b, err := m.Pack()
	m.Rcode = rcode
	if err != nil {
		return nil, err
	}
	// miekg/dns unpacks some broken records (an SOA with no RDATA) into
	// values it then packs into a message no one can read: keep only
	// what reads back.
	if err := new(dns.Msg).Unpack(b); err != nil {
		return nil, err
	}
	e := &entry{
		msg:     b,
		flags:   binary.BigEndian.Uint16(b[2:]),
		ext:     uint8(rcode >> 4),
		ancount: binary.BigEndian.Uint16(b[6:]),
		nscount: binary.BigEndian.Uint16(b[8:]),
		arcount: binary.BigEndian.Uint16(b[10:]),
		stored:  now,
		expires: now.Add(time.Duration(lifetime) * time.Second),
	}
	if err := e.index(); err != nil {
		return nil, err
	}
	e.size = len(e.msg) + 6*len(e.ttlOff) + entryOverhead
	return e, nil
}

// index finds the question's end, the additional section's start and the
// TTL fields of e.msg, and reads the TTLs.
func (e *entry) index() error {
	b := e.msg
	off, ok := nameEnd(b, headerLen)
	if !ok || off+4 > len(b) {
		return errName
	}
	e.qEnd = off + 4
	off = e.qEnd
	n := int(e.ancount) + int(e.nscount) + int(e.arcount)
	e.ttlOff = make([]uint16, 0, n)
	e.ttl = make([]uint32, 0, n)
	for i := 0; i < n; i++ {
		if i == int(e.ancount)+int(e.nscount) {
			e.preAdd = off
			e.nPre = len(e.ttlOff)
		}
		var err error
		if off, err = skipName(b, off); err != nil {
			return err
		}
		if off+10 > len(b) {
			return errName
		}
		e.ttlOff = append(e.ttlOff, uint16(off+4))
		e.ttl = append(e.ttl, binary.BigEndian.Uint32(b[off+4:]))
		off += 10 + int(binary.BigEndian.Uint16(b[off+8:]))
		if off > len(b) {
			return errName
		}
	}
	if e.arcount == 0 {
		e.preAdd = off
		e.nPre = len(e.ttlOff)
	}
	if off != len(b) {
		return errName
	}
	return nil
}

// cacheable reports whether e may be kept.
func (e *entry) cacheable() bool { return e.expires.After(e.stored) }

// appendReply appends e's answer to q at now to dst, at most limit bytes
// (0: no limit). It echoes the client's ID, name case, RD and
// CD bits, keeps AD only for a client that set AD or DO (RFC 6840 §5.8),
// counts the TTLs down by the whole seconds since the entry was stored,
// and adds an OPT record when the query had one. An answer that does not
// fit loses its additional section first (no TC, RFC 2181 §9), and then
// everything but its question, with TC set (RFC 1035 §4.2.1). truncated
// reports the latter.
func (e *entry) appendReply(dst []byte, q *query, now time.Time, limit int) (out []byte, truncated bool) {
	opt := 0
	if q.edns {
		opt = optLen
	}
	n, ttlN := len(e.msg), len(e.ttlOff)
	an, ns, ar := e.ancount, e.nscount, e.arcount
	if limit > 0 && n+opt > limit {
		if e.preAdd+opt <= limit {
			n, ttlN, ar = e.preAdd, e.nPre, 0
		} else {
			n, ttlN, an, ns, ar = e.qEnd, 0, 0, 0, 0
			truncated = true
		}
	}
	start := len(dst)
	dst = append(dst, e.msg[:n]...)
	b := dst[start:]
	flags := e.flags&^(flagRD|flagCD|flagTC) | q.flags&(flagRD|flagCD)
	if q.flags&flagAD == 0 && !(q.edns && q.do) {
		flags &^= flagAD
	}
	if truncated {
		flags |= flagTC
	}
	binary.BigEndian.PutUint16(b, q.id)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint16(b[6:], an)
	binary.BigEndian.PutUint16(b[8:], ns)
	binary.BigEndian.PutUint16(b[10:], ar)
	copy(b[headerLen:], q.qname)
	var age uint32
	if d := now.Sub(e.stored); d > 0 {
		age = uint32(min(d/time.Second, 1<<31))
	}
	for i, off := range e.ttlOff[:ttlN] {
		t := e.ttl[i]
		if t > age {
			t -= age
		} else {
			t = 0
		}
		binary.BigEndian.PutUint32(b[off:], t)
	}
	if q.edns {
		dst = appendOPT(dst, e.ext, q.do)
		binary.BigEndian.PutUint16(dst[start+10:], ar+1)
	}
	return dst, truncated
}
