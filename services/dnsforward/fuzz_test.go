package dnsforward

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// querySeeds are client messages for FuzzQuery: well-formed queries of
// the fast and slow paths and the malformed ones of TestMalformedQueries.
func querySeeds(tb testing.TB) [][]byte {
	seeds := [][]byte{
		packQuery(tb, "www.example.com.", dns.TypeA, false),
		packQuery(tb, "WWW.example.com.", dns.TypeAAAA, true),
		packQuery(tb, "laptop.lan.", dns.TypeA, true),
		packQuery(tb, "nobody.lan.", dns.TypeMX, false),
		packQuery(tb, "10.1.168.192.in-addr.arpa.", dns.TypePTR, false),
		packQuery(tb, "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, true),
		packQuery(tb, "localhost.", dns.TypeA, false),
		packQuery(tb, ".", dns.TypeNS, true),
		packQuery(tb, "big.example.com.", dns.TypeTXT, false),
		cat(hdr(flagRD, 1, 0, 0, 0), []byte{0xc0, 12}, typeAIN),
		cat(hdr(flagRD, 1, 0, 0, 0), []byte("\x05ab")),
		cat(hdr(flagRD, 2, 0, 0, 0), wwwExample, typeAIN, wwwExample, typeAIN),
		cat(hdr(flagRD, 1, 0, 0, 2), wwwExample, typeAIN, optRR, optRR),
		cat(hdr(flagRD, 1, 0, 0, 1), wwwExample, typeAIN, unhex("00 0029 04d0 00 01 0000 0000")),
		cat(hdr(flagRD, 1, 0, 0, 1), wwwExample, typeAIN, unhex("00 0029 04d0 00 00 8000 000c 000a 0008 0102030405060708")),
		cat(hdr(4<<11, 1, 0, 0, 0), wwwExample, []byte{0, 6, 0, 1}),
		cat(hdr(flagQR, 1, 1, 0, 0), wwwExample, typeAIN, []byte{0xc0, 12}, typeAIN, []byte{0, 0, 0, 60, 0, 4, 192, 0, 2, 1}),
		cat(hdr(flagRD, 1, 0, 0, 0), []byte{3, 'w', 'w', 'w', 0xc0, 22}, typeAIN, []byte("\x07example\x00")),
		hdr(0, 0, 0, 0, 0),
	}
	return seeds
}

// fuzzForwarder is a forwarder without upstreams (misses get SERVFAIL at
// once) with a primed cache and local names.
func fuzzForwarder(tb testing.TB) *Forwarder {
	f, err := New(Config{DialUDP: loopbackDialUDP, DialTCP: loopbackDialTCP, Clock: fakeclock.New(), Domain: "lan"})
	if err != nil {
		tb.Fatal(err)
	}
	f.SetHosts(map[string][]netip.Addr{"laptop": {netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00::1")}})
	prime(tb, f, "www.example.com.", dns.TypeA, false, "www.example.com. 300 IN A 192.0.2.1")
	prime(tb, f, "www.example.com.", dns.TypeAAAA, true, "www.example.com. 300 IN AAAA 2001:db8::1")
	var big []string
	for range 10 {
		big = append(big, "big.example.com. 300 IN TXT \""+string(bytes.Repeat([]byte("t"), 200))+"\"")
	}
	prime(tb, f, "big.example.com.", dns.TypeTXT, false, big...)
	return f
}

// FuzzQuery feeds client messages to the query path. The fast parser
// must agree with miekg/dns wherever it accepts; every reply must unpack,
// carry the query's ID and fit the client's UDP size; a response is
// never answered; nothing panics.
func FuzzQuery(f *testing.F) {
	for _, s := range querySeeds(f) {
		f.Add(s)
	}
	fw := fuzzForwarder(f)
	out := &captureConn{}
	to := &replyTo{pc: out, fast: out}
	s := newScratch()
	f.Fuzz(func(t *testing.T, b []byte) {
		var q query
		if parseQuery(b, &q) {
			var m dns.Msg
			if err := m.Unpack(b); err != nil {
				t.Fatalf("parseQuery accepts % x, miekg/dns does not: %v", b, err)
			}
			if len(m.Question) != 1 {
				t.Fatalf("parseQuery accepts % x with %d questions", b, len(m.Question))
			}
			mq := m.Question[0]
			var wire [256]byte
			n, err := dns.PackDomainName(mq.Name, wire[:], 0, nil, false)
			if err != nil || !bytes.Equal(wire[:n], q.qname) || mq.Qtype != q.qtype || mq.Qclass != q.qclass || m.Id != q.id {
				t.Fatalf("parseQuery(% x) = %q %d %d id %d, miekg/dns %q %d %d id %d", b, q.qname, q.qtype, q.qclass, q.id, mq.Name, mq.Qtype, mq.Qclass, m.Id)
			}
			opt := m.IsEdns0()
			if (opt != nil) != q.edns || (opt != nil && (opt.UDPSize() != q.udpSize || opt.Do() != q.do || opt.Version() != 0)) {
				t.Fatalf("parseQuery(% x) EDNS %v size %d DO %v, miekg/dns %v", b, q.edns, q.udpSize, q.do, opt)
			}
		}
		in := bytes.Clone(b)
		fw.handle(in, to, s)
		fw.wg.Wait() // misses: SERVFAIL without upstreams
		replies := out.take()
		if len(b) >= headerLen && binary.BigEndian.Uint16(b[2:])&flagQR != 0 && len(replies) > 0 {
			t.Fatalf("a response % x was answered", b)
		}
		for _, r := range replies {
			var m dns.Msg
			if err := m.Unpack(r); err != nil {
				t.Fatalf("reply % x to % x does not unpack: %v", r, b, err)
			}
			if !m.Response || m.Id != binary.BigEndian.Uint16(b) {
				t.Fatalf("reply to % x: QR %v ID %d, want QR and the query's ID", b, m.Response, m.Id)
			}
			if len(r) > UpstreamUDPSize {
				t.Fatalf("reply to % x is %d bytes, over %d", b, len(r), UpstreamUDPSize)
			}
			if q.edns || len(m.Question) == 0 {
				continue
			}
			if len(r) > 512 && m.IsEdns0() == nil {
				t.Fatalf("reply to % x without EDNS is %d bytes, over 512", b, len(r))
			}
		}
	})
}

// answerSeeds are upstream answers to www.example.com. A (ID 0x4242).
func answerSeeds(tb testing.TB) [][]byte {
	q := new(dns.Msg)
	q.SetQuestion("www.example.com.", dns.TypeA)
	q.Id = 0x4242
	var seeds [][]byte
	add := func(mod func(m *dns.Msg)) {
		m := new(dns.Msg)
		m.SetReply(q)
		mod(m)
		b, err := m.Pack()
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	add(func(m *dns.Msg) {
		m.Answer = []dns.RR{mustRR(tb, "www.example.com. 300 IN CNAME web.example.com."), mustRR(tb, "web.example.com. 60 IN A 192.0.2.1")}
	})
	add(func(m *dns.Msg) {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{mustRR(tb, "example.com. 3600 IN SOA ns.example.com. a.example.com. 1 2 3 4 300")}
		m.SetEdns0(4096, true)
	})
	add(func(m *dns.Msg) {
		m.Ns = []dns.RR{mustRR(tb, "example.com. 3600 IN SOA ns.example.com. a.example.com. 1 2 3 4 300")}
	})
	add(func(m *dns.Msg) { m.Truncated = true })
	add(func(m *dns.Msg) { m.Rcode = dns.RcodeServerFailure })
	add(func(m *dns.Msg) {
		m.Answer = []dns.RR{mustRR(tb, "www.example.com. 300 IN A 192.0.2.1")}
		m.Extra = []dns.RR{mustRR(tb, "ns.example.com. 300 IN AAAA 2001:db8::53")}
		m.SetEdns0(1232, false)
		m.Question[0].Name = "WWW.Example.COM."
	})
	add(func(m *dns.Msg) { m.Id = 1 })
	add(func(m *dns.Msg) { m.Question[0].Name = "evil.example.com." })
	return seeds
}

// FuzzUpstreamAnswer feeds upstream answers to the validation path and
// then to the cache entry and reply builders. An accepted answer must
// have the query's ID and question; its entry's replies must unpack,
// echo the client's question, and keep TTLs within the clamps; nothing
// panics.
func FuzzUpstreamAnswer(f *testing.F) {
	for _, s := range answerSeeds(f) {
		f.Add(s, false)
		f.Add(s, true)
	}
	fw := fuzzForwarder(f)
	sent := []byte(wireKey("www.example.com."))
	f.Fuzz(func(t *testing.T, b []byte, tcp bool) {
		q := &query{id: 7, flags: flagRD, qname: []byte("\x03WwW\x07exAMPLE\x03com\x00"), qtype: dns.TypeA, qclass: dns.ClassINET}
		ans, err := fw.checkAnswer(b, 0x4242, sent, q, tcp)
		if err != nil {
			if err == errTruncated && (tcp || binary.BigEndian.Uint16(b[2:])&flagTC == 0) {
				t.Fatalf("errTruncated for % x over tcp %v", b, tcp)
			}
			return
		}
		if binary.BigEndian.Uint16(b) != 0x4242 || len(ans.Question) != 1 || !equalFold([]byte(wireKey(ans.Question[0].Name)), sent) ||
			ans.Question[0].Qtype != dns.TypeA || ans.Question[0].Qclass != dns.ClassINET || !ans.Response {
			t.Fatalf("checkAnswer accepted % x: %v", b, ans)
		}
		now := fw.cfg.Clock.Now()
		e, err := newEntry(ans, fw.policy, now)
		if err != nil {
			return
		}
		if e.cacheable() {
			if rc := e.flags & rcodeMask; (rc != dns.RcodeSuccess && rc != dns.RcodeNameError) || e.ext != 0 {
				t.Fatalf("cacheable entry with rcode %d/%d from % x", rc, e.ext, b)
			}
			if life := e.expires.Sub(e.stored); life > DefaultMaxTTL {
				t.Fatalf("entry lives %v, over MaxTTL", life)
			}
		}
		for _, edns := range []bool{false, true} {
			cq := *q
			cq.edns, cq.udpSize = edns, 1232
			for _, limit := range []int{0, cq.udpLimit()} {
				out, _ := e.appendReply(nil, &cq, now.Add(10*time.Second), limit)
				var m dns.Msg
				if err := m.Unpack(out); err != nil {
					t.Fatalf("reply % x from answer % x does not unpack: %v", out, b, err)
				}
				if limit > 0 && len(out) > limit {
					t.Fatalf("reply of %d bytes over the limit %d", len(out), limit)
				}
				if m.Id != 7 || len(m.Question) != 1 || m.Question[0].Name != "WwW.exAMPLE.com." || (m.IsEdns0() != nil) != edns {
					t.Fatalf("reply %v from answer % x: want ID 7, the client's question, EDNS %v", &m, b, edns)
				}
				for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
					for _, rr := range sec {
						if rr.Header().Rrtype != dns.TypeOPT && rr.Header().Ttl > uint32(DefaultMaxTTL/time.Second) {
							t.Fatalf("TTL %d over MaxTTL in %v", rr.Header().Ttl, rr)
						}
					}
				}
			}
		}
	})
}
