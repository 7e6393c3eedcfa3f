package dnsforward

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// primed returns a forwarder without upstreams whose cache holds the
// answer of rrs to the question (name, qtype).
func primed(tb testing.TB, name string, qtype uint16, rrs ...string) *Forwarder {
	tb.Helper()
	f, err := New(Config{DialUDP: loopbackDialUDP, DialTCP: loopbackDialTCP, Clock: fakeclock.New()})
	if err != nil {
		tb.Fatal(err)
	}
	prime(tb, f, name, qtype, false, rrs...)
	prime(tb, f, name, qtype, true, rrs...)
	return f
}

// prime puts the answer of rrs to (name, qtype) in f's cache, for
// clients with do or without.
func prime(tb testing.TB, f *Forwarder, name string, qtype uint16, do bool, rrs ...string) {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.RecursionAvailable = true, true
	for _, s := range rrs {
		m.Answer = append(m.Answer, mustRR(tb, s))
	}
	e, err := newEntry(m, f.policy, f.cfg.Clock.Now())
	if err != nil {
		tb.Fatal(err)
	}
	q := query{qname: []byte(wireKey(name)), qtype: qtype, qclass: dns.ClassINET, edns: do, do: do}
	e.key = string(appendKey(nil, &q))
	f.cache.put(e)
}

func packQuery(tb testing.TB, name string, qtype uint16, edns bool) []byte {
	m := question(name, qtype)
	m.Id = 0xbeef
	if edns {
		m.SetEdns0(1232, false)
	}
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

var cachedCases = []struct {
	name  string
	qname string
	edns  bool
}{
	{"plain", "www.example.com.", false},
	{"edns", "www.example.com.", true},
	{"mixed-case", "WWW.Example.COM.", false},
}

// TestCachedAnswerAllocs checks that a cache hit allocates nothing
// between the read and the write (STYLE.md, fast paths).
func TestCachedAnswerAllocs(t *testing.T) {
	f := primed(t, "www.example.com.", dns.TypeA, "www.example.com. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.2")
	out := &captureConn{discard: true}
	to := &replyTo{pc: out, fast: out}
	s := newScratch()
	for _, tc := range cachedCases {
		q := packQuery(t, tc.qname, dns.TypeA, tc.edns)
		if n := testing.AllocsPerRun(1000, func() { f.handle(q, to, s) }); n != 0 {
			t.Errorf("%s: %v allocations per cached answer, want 0", tc.name, n)
		}
	}
	if hits := f.Status().CacheHits; hits < 3000 {
		t.Errorf("CacheHits = %d, want every run a hit", hits)
	}
}

// BenchmarkCachedAnswer is the hot path without sockets: parse, local
// check, cache lookup, reply built.
func BenchmarkCachedAnswer(b *testing.B) {
	f := primed(b, "www.example.com.", dns.TypeA, "www.example.com. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.2")
	for _, tc := range cachedCases {
		b.Run(tc.name, func(b *testing.B) {
			q := packQuery(b, tc.qname, dns.TypeA, tc.edns)
			out := &captureConn{discard: true}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				to := &replyTo{pc: out, fast: out}
				s := newScratch()
				for pb.Next() {
					f.handle(q, to, s)
				}
			})
		})
	}
}

// BenchmarkCachedAnswerLoopback is a cached answer through kernel UDP
// sockets on loopback: each parallel client sends a query and waits for
// its answer.
func BenchmarkCachedAnswerLoopback(b *testing.B) {
	f := primed(b, "www.example.com.", dns.TypeA, "www.example.com. 300 IN A 192.0.2.1")
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.Serve(ctx, pc) }()
	defer func() { cancel(); wg.Wait() }()
	q := packQuery(b, "www.example.com.", dns.TypeA, true)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("udp", pc.LocalAddr().String())
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		buf := make([]byte, 1500)
		for pb.Next() {
			c.Write(q)
			if _, err := c.Read(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
