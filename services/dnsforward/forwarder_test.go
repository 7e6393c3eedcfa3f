package dnsforward

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/services/svcconfig"
)

func answerStrings(rrs []dns.RR) []string {
	var s []string
	for _, rr := range rrs {
		s = append(s, rr.String())
	}
	return s
}

func TestUpstreamAnswerAndCacheHit(t *testing.T) {
	u := newUpstream(t, "www.example. 300 IN A 192.0.2.1", "www.example. 300 IN AAAA 2001:db8::1")
	f := startForwarder(t, Config{}, u)
	for _, network := range []string{"udp", "tcp", "udp"} {
		r := f.ask(t, network, question("www.example.", dns.TypeA))
		if r.Rcode != dns.RcodeSuccess || !r.Response || !r.RecursionAvailable || !r.RecursionDesired {
			t.Fatalf("%s answer header = %+v, want NOERROR with QR, RA and RD", network, r.MsgHdr)
		}
		want := []string{"www.example.\t300\tIN\tA\t192.0.2.1"}
		if diff := cmp.Diff(want, answerStrings(r.Answer)); diff != "" {
			t.Errorf("%s answer (-want +got):\n%s", network, diff)
		}
	}
	if n := u.count(); n != 1 {
		t.Errorf("upstream saw %d queries, want 1 (then cached)", n)
	}
	st := f.Status()
	if st.CacheHits != 2 || st.CacheMisses != 1 || st.Queries["udp"] != 2 || st.Queries["tcp"] != 1 || st.UpstreamQueries != 1 {
		t.Errorf("Status() hits %d misses %d udp %d tcp %d upstream %d, want 2 1 2 1 1",
			st.CacheHits, st.CacheMisses, st.Queries["udp"], st.Queries["tcp"], st.UpstreamQueries)
	}
	if st.LatencyCount != 1 || st.LatencyMean <= 0 {
		t.Errorf("Status() latency count %d mean %v, want 1 and > 0", st.LatencyCount, st.LatencyMean)
	}
	// The key is case-insensitive, and the reply echoes the case asked.
	r := f.ask(t, "udp", question("WwW.ExAmPlE.", dns.TypeA))
	if r.Question[0].Name != "WwW.ExAmPlE." || len(r.Answer) != 1 || r.Answer[0].Header().Name != "WwW.ExAmPlE." {
		t.Errorf("mixed-case query: question %q answer %v, want the case asked", r.Question[0].Name, r.Answer)
	}
	if n := u.count(); n != 1 {
		t.Errorf("upstream saw %d queries after a mixed-case repeat, want 1", n)
	}
	// Another type is another question.
	f.ask(t, "udp", question("www.example.", dns.TypeAAAA))
	if n := u.count(); n != 2 {
		t.Errorf("upstream saw %d queries after AAAA, want 2", n)
	}
}

// TestCacheTTL_RFC1035_3_2_1 checks that TTLs count down on cached
// answers and that an answer leaves the cache when its TTL runs out.
func TestCacheTTL_RFC1035_3_2_1(t *testing.T) {
	u := newUpstream(t, "a.example. 60 IN A 192.0.2.1", "a.example. 60 IN A 192.0.2.2", "b.example. 0 IN A 192.0.2.3")
	f := startForwarder(t, Config{}, u)
	f.ask(t, "udp", question("a.example.", dns.TypeA))
	for _, step := range []struct {
		advance time.Duration
		ttl     uint32
		queries int
	}{
		{0, 60, 1},
		{10*time.Second + 900*time.Millisecond, 50, 1}, // whole seconds only
		{49 * time.Second, 1, 1},
		{100 * time.Millisecond, 60, 2}, // 60 s after it was stored: gone, asked again
	} {
		f.clock.Forward(step.advance)
		r := f.ask(t, "udp", question("a.example.", dns.TypeA))
		if len(r.Answer) != 2 {
			t.Fatalf("answer %v, want 2 records", r.Answer)
		}
		for _, rr := range r.Answer {
			if rr.Header().Ttl != step.ttl {
				t.Errorf("after %v: TTL %d, want %d", step.advance, rr.Header().Ttl, step.ttl)
			}
		}
		if n := u.count(); n != step.queries {
			t.Errorf("after %v: upstream saw %d queries, want %d", step.advance, n, step.queries)
		}
	}
	if st := f.Status(); st.CacheExpired != 1 {
		t.Errorf("CacheExpired = %d, want 1", st.CacheExpired)
	}
	// TTL 0: never cached.
	f.ask(t, "udp", question("b.example.", dns.TypeA))
	f.ask(t, "udp", question("b.example.", dns.TypeA))
	if n := u.count(); n != 4 {
		t.Errorf("upstream saw %d queries after two TTL-0 questions, want 4", n)
	}
}

func TestTTLClamps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		min, max   time.Duration
		ttl        string
		wantTTL    uint32
		wantCached bool
	}{
		{"within", 0, 0, "300", 300, true},
		{"raised to MinTTL", 60 * time.Second, 0, "5", 60, true},
		{"capped at MaxTTL", 0, time.Hour, "86400", 3600, true},
		{"capped at default MaxTTL", 0, 0, "604800", 86400, true},
		{"zero not raised", 60 * time.Second, 0, "0", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "c.example. "+tc.ttl+" IN A 192.0.2.1")
			f := startForwarder(t, Config{MinTTL: tc.min, MaxTTL: tc.max}, u)
			r := f.ask(t, "udp", question("c.example.", dns.TypeA))
			if got := r.Answer[0].Header().Ttl; got != tc.wantTTL {
				t.Errorf("TTL = %d, want %d", got, tc.wantTTL)
			}
			f.ask(t, "udp", question("c.example.", dns.TypeA))
			if got, want := u.count() == 1, tc.wantCached; got != want {
				t.Errorf("cached = %v (upstream saw %d), want %v", got, u.count(), want)
			}
		})
	}
}

// TestNegativeCache_RFC2308_5 checks NXDOMAIN and NODATA caching for
// min(SOA TTL, SOA MINIMUM), clamped, and no caching without an SOA.
func TestNegativeCache_RFC2308_5(t *testing.T) {
	for _, tc := range []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		soa     string // "" = none
		negMax  time.Duration
		wantTTL uint32 // of the SOA served
		cached  time.Duration
	}{
		{"NXDOMAIN SOA MINIMUM", "nxname.test.", dns.TypeA, dns.RcodeNameError, "test. 3600 IN SOA ns.test. a.test. 1 2 3 4 300", 0, 300, 300 * time.Second},
		{"NXDOMAIN SOA TTL", "nxname.test.", dns.TypeA, dns.RcodeNameError, "test. 120 IN SOA ns.test. a.test. 1 2 3 4 900", 0, 120, 120 * time.Second},
		{"NODATA", "host.test.", dns.TypeMX, dns.RcodeSuccess, "test. 3600 IN SOA ns.test. a.test. 1 2 3 4 600", 0, 600, 600 * time.Second},
		{"NegativeMaxTTL", "nxname.test.", dns.TypeA, dns.RcodeNameError, "test. 86400 IN SOA ns.test. a.test. 1 2 3 4 86400", time.Hour, 3600, time.Hour},
		{"default NegativeMaxTTL", "nxname.test.", dns.TypeA, dns.RcodeNameError, "test. 86400 IN SOA ns.test. a.test. 1 2 3 4 86400", 0, 10800, 3 * time.Hour},
		{"no SOA", "nxname.test.", dns.TypeA, dns.RcodeNameError, "", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, "host.test. 300 IN A 192.0.2.9")
			u.configure(func(u *upstream) {
				if tc.soa == "" {
					u.noSOA = true
				} else {
					u.soa = mustRR(t, tc.soa)
				}
			})
			f := startForwarder(t, Config{NegativeMaxTTL: tc.negMax}, u)
			r := f.ask(t, "udp", question(tc.qname, tc.qtype))
			if r.Rcode != tc.rcode || len(r.Answer) != 0 {
				t.Fatalf("rcode %s with %d answers, want %s and none", dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[tc.rcode])
			}
			if tc.soa != "" {
				if len(r.Ns) != 1 || r.Ns[0].Header().Ttl != tc.wantTTL {
					t.Fatalf("authority %v, want the SOA with TTL %d", r.Ns, tc.wantTTL)
				}
			}
			if tc.cached == 0 {
				f.ask(t, "udp", question(tc.qname, tc.qtype))
				if n := u.count(); n != 2 {
					t.Errorf("upstream saw %d queries, want 2 (not cached)", n)
				}
				return
			}
			f.clock.Forward(tc.cached - time.Second)
			r = f.ask(t, "udp", question(tc.qname, tc.qtype))
			if n := u.count(); n != 1 || r.Rcode != tc.rcode || r.Ns[0].Header().Ttl != 1 {
				t.Errorf("1 s before expiry: upstream saw %d, rcode %d, SOA TTL %d; want 1, %d, 1", n, r.Rcode, r.Ns[0].Header().Ttl, tc.rcode)
			}
			f.clock.Forward(time.Second)
			f.ask(t, "udp", question(tc.qname, tc.qtype))
			if n := u.count(); n != 2 {
				t.Errorf("at expiry: upstream saw %d queries, want 2", n)
			}
		})
	}
}

func TestEDNS(t *testing.T) {
	u := newUpstream(t, "e.example. 300 IN A 192.0.2.1")
	f := startForwarder(t, Config{}, u)

	r := f.ask(t, "udp", question("e.example.", dns.TypeA))
	if r.IsEdns0() != nil {
		t.Errorf("reply to a query without EDNS has OPT %v", r.IsEdns0())
	}
	q := u.queries()[0]
	if q.opt == nil || q.opt.UDPSize() != UpstreamUDPSize || q.opt.Do() {
		t.Errorf("upstream query OPT = %v, want UDP size %d without DO", q.opt, UpstreamUDPSize)
	}

	m := question("e.example.", dns.TypeA)
	m.SetEdns0(4096, false)
	r = f.ask(t, "udp", m)
	opt := r.IsEdns0()
	if opt == nil || opt.UDPSize() != UpstreamUDPSize || opt.Version() != 0 || opt.Do() {
		t.Errorf("reply OPT = %v, want version 0, UDP size %d, no DO", opt, UpstreamUDPSize)
	}
	if u.count() != 1 {
		t.Errorf("EDNS without DO asked upstream again: %d queries", u.count())
	}

	// DO is another cache entry, and it is sent upstream.
	m = question("e.example.", dns.TypeA)
	m.SetEdns0(1232, true)
	r = f.ask(t, "udp", m)
	if opt := r.IsEdns0(); opt == nil || !opt.Do() {
		t.Errorf("reply OPT = %v, want DO echoed", opt)
	}
	qs := u.queries()
	if len(qs) != 2 || qs[1].opt == nil || !qs[1].opt.Do() {
		t.Errorf("upstream queries %+v, want a second one with DO", qs)
	}
	// So is CD.
	m = question("e.example.", dns.TypeA)
	m.CheckingDisabled = true
	r = f.ask(t, "udp", m)
	if qs := u.queries(); len(qs) != 3 || !qs[2].cd || !r.CheckingDisabled {
		t.Errorf("CD query: upstream queries %+v, reply CD %v; want a third upstream query with CD, CD echoed", qs, r.CheckingDisabled)
	}
}

// TestTruncation_RFC1035_4_2_1 checks that a TC answer from the upstream
// is asked again over TCP, and that answers are cut to each client's UDP
// size with TC set (RFC 6891 §7 for the EDNS size).
func TestTruncation_RFC1035_4_2_1(t *testing.T) {
	long := strings.Repeat("x", 250)
	var recs []string
	for i := range 8 { // about 2 KiB of TXT: over 1232
		recs = append(recs, "big.example. 300 IN TXT \""+long+string(rune('a'+i))+"\"")
	}
	recs = append(recs, "mid.example. 300 IN TXT \""+long+"\"", "mid.example. 300 IN TXT \""+long+"1\"", "mid.example. 300 IN TXT \""+long+"2\"")
	u := newUpstream(t, recs...)
	f := startForwarder(t, Config{}, u)

	// Over UDP without EDNS: the full answer is cached, the client gets TC.
	r := f.ask(t, "udp", question("big.example.", dns.TypeTXT))
	if !r.Truncated || len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess {
		t.Errorf("UDP reply: TC %v with %d answers, want TC and none", r.Truncated, len(r.Answer))
	}
	qs := u.queries()
	if len(qs) != 2 || qs[0].tcp || !qs[1].tcp {
		t.Fatalf("upstream queries %+v, want UDP then TCP", qs)
	}
	// Over TCP: all of it, from the cache.
	r = f.ask(t, "tcp", question("big.example.", dns.TypeTXT))
	if r.Truncated || len(r.Answer) != 8 {
		t.Errorf("TCP reply: TC %v with %d answers, want all 8", r.Truncated, len(r.Answer))
	}
	// mid (~780 bytes) fits an EDNS client's 1232 but not 512.
	r = f.ask(t, "udp", question("mid.example.", dns.TypeTXT))
	if !r.Truncated {
		t.Errorf("mid without EDNS: TC %v, want TC", r.Truncated)
	}
	m := question("mid.example.", dns.TypeTXT)
	m.SetEdns0(1232, false)
	r = f.ask(t, "udp", m)
	if r.Truncated || len(r.Answer) != 3 || r.IsEdns0() == nil {
		t.Errorf("mid with EDNS 1232: TC %v with %d answers, want 3 and OPT", r.Truncated, len(r.Answer))
	}
	// A client size above 1232 is held to 1232.
	m = question("big.example.", dns.TypeTXT)
	m.SetEdns0(65000, false)
	if r = f.ask(t, "udp", m); !r.Truncated || r.Len() > UpstreamUDPSize {
		t.Errorf("big with EDNS 65000: TC %v, %d bytes; want TC within %d", r.Truncated, r.Len(), UpstreamUDPSize)
	}
	st := f.Status()
	if st.TCRetries != 1 || st.Truncated != 3 {
		t.Errorf("TCRetries %d, Truncated %d; want 1, 3", st.TCRetries, st.Truncated)
	}
}

func TestCoalescing(t *testing.T) {
	u := newUpstream(t, "slow.example. 300 IN A 192.0.2.1")
	f := startForwarder(t, Config{Timeout: 3 * time.Second}, u)
	release := u.holdQueries()
	const n = 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			network := "udp"
			if i%3 == 0 {
				network = "tcp"
			}
			r, err := f.exchange(network, question("slow.example.", dns.TypeA))
			if err == nil && len(r.Answer) != 1 {
				err = errors.New("no answer")
			}
			errs <- err
		}()
	}
	waitFor(t, "all queries waiting", func() bool { return f.Status().Coalesced == n-1 })
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if c := u.count(); c != 1 {
		t.Errorf("upstream saw %d queries for %d coalesced clients, want 1", c, n)
	}
}

func TestInFlightLimit(t *testing.T) {
	u := newUpstream(t, "a.example. 300 IN A 192.0.2.1", "b.example. 300 IN A 192.0.2.2", "c.example. 300 IN A 192.0.2.3")
	f := startForwarder(t, Config{MaxInFlight: 2, Timeout: 3 * time.Second}, u)
	release := u.holdQueries()
	var wg sync.WaitGroup
	for _, n := range []string{"a.example.", "b.example."} {
		wg.Add(1)
		go func() { defer wg.Done(); f.exchange("udp", question(n, dns.TypeA)) }()
	}
	waitFor(t, "two in flight", func() bool { return f.Status().InFlight == 2 })
	c := &dns.Client{Timeout: 300 * time.Millisecond}
	if r, _, err := c.Exchange(question("c.example.", dns.TypeA), f.addr); err == nil {
		t.Errorf("third question answered %v, want it dropped", r)
	}
	release()
	wg.Wait()
	if st := f.Status(); st.Drops["in_flight_full"] < 1 {
		t.Errorf("InFlightDrops = %d, want >= 1", st.Drops["in_flight_full"])
	}
}

func TestServfail(t *testing.T) {
	t.Run("no upstream", func(t *testing.T) {
		f := startForwarder(t, Config{})
		if r := f.ask(t, "udp", question("x.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
		if st := f.Status(); st.UpstreamErrors["no_upstream"] != 1 || st.ServFail != 1 {
			t.Errorf("NoUpstream %d ServFail %d, want 1 1", st.UpstreamErrors["no_upstream"], st.ServFail)
		}
	})
	t.Run("upstream silent", func(t *testing.T) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		f := startForwarder(t, Config{Upstreams: []netip.AddrPort{pc.LocalAddr().(*net.UDPAddr).AddrPort()}, Timeout: 100 * time.Millisecond})
		if r := f.ask(t, "udp", question("x.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
		if st := f.Status(); st.UpstreamErrors["timeout"] != 2 || st.UpstreamQueries != 2 {
			t.Errorf("UpstreamTimeouts %d of %d queries, want 2 of 2 (one upstream, two attempts)", st.UpstreamErrors["timeout"], st.UpstreamQueries)
		}
		// SERVFAIL is not cached.
		f.ask(t, "udp", question("x.example.", dns.TypeA))
		if st := f.Status(); st.UpstreamQueries != 4 {
			t.Errorf("UpstreamQueries %d after a second question, want 4", st.UpstreamQueries)
		}
	})
	t.Run("upstream SERVFAIL", func(t *testing.T) {
		u := newUpstream(t)
		u.configure(func(u *upstream) { u.rcode = dns.RcodeServerFailure })
		f := startForwarder(t, Config{}, u)
		if r := f.ask(t, "udp", question("x.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
		if st := f.Status(); st.UpstreamErrors["rcode"] != 2 {
			t.Errorf("UpstreamRcodeErrors = %d, want 2", st.UpstreamErrors["rcode"])
		}
	})
	t.Run("upstream refuses connection", func(t *testing.T) {
		pc, _ := net.ListenPacket("udp", "127.0.0.1:0")
		addr := pc.LocalAddr().(*net.UDPAddr).AddrPort()
		pc.Close() // ICMP port unreachable: ECONNREFUSED on the connected socket
		f := startForwarder(t, Config{Upstreams: []netip.AddrPort{addr}, Timeout: time.Second})
		start := time.Now()
		if r := f.ask(t, "udp", question("x.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("rcode = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("SERVFAIL after %v, want it before the timeout", d)
		}
		if st := f.Status(); st.UpstreamErrors["network"] != 2 {
			t.Errorf("UpstreamErrors = %d, want 2", st.UpstreamErrors["network"])
		}
	})
}

func TestUpstreamFailoverAndSetUpstreams(t *testing.T) {
	dead, _ := net.ListenPacket("udp", "127.0.0.1:0")
	defer dead.Close()
	good := newUpstream(t, "f.example. 300 IN A 192.0.2.1", "g.example. 300 IN A 192.0.2.2")
	f := startForwarder(t, Config{Upstreams: []netip.AddrPort{dead.LocalAddr().(*net.UDPAddr).AddrPort()}, Timeout: 100 * time.Millisecond}, good)
	if r := f.ask(t, "udp", question("f.example.", dns.TypeA)); len(r.Answer) != 1 {
		t.Fatalf("answer %v, want one from the second upstream", r)
	}
	// The one that answered is asked first next time.
	f.ask(t, "udp", question("g.example.", dns.TypeA))
	if st := f.Status(); st.UpstreamErrors["timeout"] != 1 || st.UpstreamQueries != 3 {
		t.Errorf("UpstreamTimeouts %d of %d, want 1 of 3", st.UpstreamErrors["timeout"], st.UpstreamQueries)
	}
	other := newUpstream(t, "h.example. 300 IN A 192.0.2.3")
	f.SetUpstreams([]netip.AddrPort{other.addr})
	if r := f.ask(t, "udp", question("h.example.", dns.TypeA)); len(r.Answer) != 1 || other.count() != 1 {
		t.Errorf("after SetUpstreams: answer %v, new upstream saw %d; want an answer from it", r.Answer, other.count())
	}
	if got := f.Status().Upstreams; !cmp.Equal(got, []netip.AddrPort{other.addr}, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })) {
		t.Errorf("Status().Upstreams = %v, want [%v]", got, other.addr)
	}
}

// TestRandomPortAndID_RFC5452_9_2 checks that every upstream query has a
// new random source port and ID, and that ReservePort is asked first.
func TestRandomPortAndID_RFC5452_9_2(t *testing.T) {
	u := newUpstream(t)
	for i := range 20 {
		u.add(t, "n"+string(rune('a'+i))+".example. 300 IN A 192.0.2.1")
	}
	var mu sync.Mutex
	reserved := map[uint16]bool{}
	refused, released := 0, 0
	f := startForwarder(t, Config{ReservePort: func(proto uint8, port uint16) (func(), bool) {
		mu.Lock()
		defer mu.Unlock()
		if proto != 17 {
			t.Errorf("ReservePort proto %d, want 17 (UDP)", proto)
		}
		if refused < 3 { // the NAT engine has these: pick others
			refused++
			return nil, false
		}
		reserved[port] = true
		return func() { mu.Lock(); released++; mu.Unlock() }, true
	}}, u)
	for i := range 20 {
		f.ask(t, "udp", question("n"+string(rune('a'+i))+".example.", dns.TypeA))
	}
	ports, ids := map[uint16]bool{}, map[uint16]bool{}
	for _, q := range u.queries() {
		ports[q.from.Port()] = true
		ids[q.id] = true
		mu.Lock()
		if !reserved[q.from.Port()] {
			t.Errorf("query from port %d, which was not reserved", q.from.Port())
		}
		mu.Unlock()
		if q.from.Port() < minPort {
			t.Errorf("query from port %d, want >= %d", q.from.Port(), minPort)
		}
	}
	if len(ports) < 18 || len(ids) < 18 {
		t.Errorf("%d distinct ports and %d IDs in 20 queries, want about 20", len(ports), len(ids))
	}
	st := f.Status()
	if st.PortCollisions != 3 {
		t.Errorf("PortCollisions = %d, want 3", st.PortCollisions)
	}
	mu.Lock()
	if released != 20 {
		t.Errorf("%d ports released, want 20", released)
	}
	mu.Unlock()
}

// spoofer is an upstream whose answers the test writes, from an
// unconnected client socket that lets a spoofed source through.
type spoofer struct {
	pc    *net.UDPConn
	other *net.UDPConn // another port on the upstream's address
	addr  netip.AddrPort
}

func newSpoofer(t *testing.T) *spoofer {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(); other.Close() })
	return &spoofer{pc: pc, other: other, addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
}

// unconnectedConn is a UDP socket that writes to server but reads from
// anyone, so that the forwarder's own source check is what stops spoofs.
type unconnectedConn struct {
	*net.UDPConn
	server *net.UDPAddr
}

func (c unconnectedConn) Write(b []byte) (int, error) { return c.WriteTo(b, c.server) }

func unconnectedDialUDP(ctx context.Context, server netip.AddrPort, port uint16) (net.Conn, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)})
	if err != nil {
		return nil, err
	}
	return unconnectedConn{c, net.UDPAddrFromAddrPort(server)}, nil
}

// TestSpoofedAnswers_RFC5452_9_1 sends the forwarder answers with the
// wrong ID, the wrong question, from the wrong port and malformed, before
// the real one: each is counted and ignored, and none enters the cache.
func TestSpoofedAnswers_RFC5452_9_1(t *testing.T) {
	s := newSpoofer(t)
	f := startForwarder(t, Config{Upstreams: []netip.AddrPort{s.addr}, DialUDP: unconnectedDialUDP, Timeout: 2 * time.Second})
	done := make(chan *dns.Msg)
	go func() {
		r, _ := f.exchange("udp", question("victim.example.", dns.TypeA))
		done <- r
	}()
	buf := make([]byte, 1500)
	n, from, err := s.pc.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatal(err)
	}
	var q dns.Msg
	if err := q.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	answer := func(mod func(m *dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetReply(&q)
		m.Answer = []dns.RR{mustRR(t, "victim.example. 300 IN A 192.0.2.66")} // the attacker's address
		mod(m)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	to := net.UDPAddrFromAddrPort(from)
	send := func(c *net.UDPConn, b []byte) {
		if _, err := c.WriteTo(b, to); err != nil {
			t.Fatal(err)
		}
	}
	send(s.pc, answer(func(m *dns.Msg) { m.Id ^= 1 }))
	send(s.pc, answer(func(m *dns.Msg) { m.Question[0].Name = "other.example." }))
	send(s.pc, answer(func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA }))
	send(s.pc, answer(func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }))
	send(s.pc, answer(func(m *dns.Msg) { m.Response = false }))
	send(s.other, answer(func(*dns.Msg) {})) // right answer, wrong source port
	bad := answer(func(*dns.Msg) {})
	send(s.pc, bad[:len(bad)-3]) // right ID and question, cut short
	waitFor(t, "the spoofs counted", func() bool {
		st := f.Status()
		return st.Drops["answer_mismatch"] == 5 && st.Drops["answer_spoofed"] == 1 && st.UpstreamErrors["malformed"] == 1
	})
	real := answer(func(m *dns.Msg) { m.Answer = []dns.RR{mustRR(t, "victim.example. 300 IN A 192.0.2.1")} })
	send(s.pc, real)
	r := <-done
	if r == nil || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("answer %v, want the real 192.0.2.1", r)
	}
	r = f.ask(t, "udp", question("victim.example.", dns.TypeA))
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Errorf("cached answer %v, want the real 192.0.2.1", r.Answer)
	}
}

func Test0x20(t *testing.T) {
	u := newUpstream(t, "mixed.example. 300 IN A 192.0.2.1")
	f := startForwarder(t, Config{Use0x20: true}, u)
	if r := f.ask(t, "udp", question("mixed.example.", dns.TypeA)); len(r.Answer) != 1 {
		t.Fatalf("answer %v, want one", r)
	}
	if q := u.queries()[0]; q.name == "mixed.example." && q.name == strings.ToLower(q.name) {
		t.Logf("upstream name %q has no upper case (possible, 1 in 4096)", q.name)
	}
	// A resolver that does not echo the case: its answers do not match.
	u2 := newUpstream(t, "mixedcaseletters.example. 300 IN A 192.0.2.1")
	u2.configure(func(u *upstream) { u.lower = true })
	f2 := startForwarder(t, Config{Use0x20: true, Timeout: 100 * time.Millisecond}, u2)
	if r := f2.ask(t, "udp", question("mixedcaseletters.example.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if st := f2.Status(); st.Drops["answer_mismatch"] != 2 {
		t.Errorf("UpstreamMismatched = %d, want 2", st.Drops["answer_mismatch"])
	}
}

// TestEDNSFallback_RFC6891_7 checks that a server answering FORMERR to
// EDNS is asked again without it.
func TestEDNSFallback_RFC6891_7(t *testing.T) {
	u := newUpstream(t, "old.example. 300 IN A 192.0.2.1")
	u.configure(func(u *upstream) { u.noEDNS = true })
	f := startForwarder(t, Config{}, u)
	m := question("old.example.", dns.TypeA)
	m.SetEdns0(1232, false)
	r := f.ask(t, "udp", m)
	if len(r.Answer) != 1 || r.IsEdns0() == nil {
		t.Errorf("answer %v, want one record with our OPT", r)
	}
	if qs := u.queries(); len(qs) != 2 || qs[0].opt == nil || qs[1].opt != nil {
		t.Errorf("upstream queries %+v, want one with EDNS then one without", qs)
	}
}

func TestTCPPipelined(t *testing.T) {
	u := newUpstream(t, "p1.example. 300 IN A 192.0.2.1", "p2.example. 300 IN A 192.0.2.2")
	f := startForwarder(t, Config{}, u)
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn := &dns.Conn{Conn: c}
	for i, n := range []string{"p1.example.", "p2.example.", "p1.example."} {
		m := question(n, dns.TypeA)
		m.Id = uint16(100 + i)
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	got := map[uint16]string{}
	for range 3 {
		r, err := conn.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		got[r.Id] = r.Answer[0].(*dns.A).A.String()
	}
	want := map[uint16]string{100: "192.0.2.1", 101: "192.0.2.2", 102: "192.0.2.1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pipelined answers by ID (-want +got):\n%s", diff)
	}
}

func TestTCPLimits(t *testing.T) {
	f := startForwarder(t, Config{MaxTCPConns: 1, TCPIdleTimeout: 200 * time.Millisecond})
	c1, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	waitFor(t, "the first connection served", func() bool { return f.Status().TCPConns == 1 })
	c2, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Error("second connection over MaxTCPConns read data, want it closed")
	}
	if st := f.Status(); st.Drops["tcp_conns_full"] != 1 {
		t.Errorf("TCPConnsRefused = %d, want 1", st.Drops["tcp_conns_full"])
	}
	// The idle first one is closed after TCPIdleTimeout.
	c1.SetReadDeadline(time.Now().Add(2 * time.Second))
	start := time.Now()
	if _, err := c1.Read(make([]byte, 1)); err == nil || time.Since(start) > 1500*time.Millisecond {
		t.Errorf("idle connection: read %v after %v, want closed after about 200ms", err, time.Since(start))
	}
}

func TestCacheBounds(t *testing.T) {
	u := newUpstream(t)
	names := []string{"l1.example.", "l2.example.", "l3.example."}
	for _, n := range names {
		u.add(t, n+" 300 IN A 192.0.2.1")
	}
	f := startForwarder(t, Config{MaxEntries: 2}, u)
	f.ask(t, "udp", question(names[0], dns.TypeA))
	f.ask(t, "udp", question(names[1], dns.TypeA))
	f.ask(t, "udp", question(names[0], dns.TypeA)) // l1 most recent
	f.ask(t, "udp", question(names[2], dns.TypeA)) // evicts l2
	if st := f.Status(); st.CacheEntries != 2 || st.CacheEvictions != 1 {
		t.Errorf("CacheEntries %d, CacheEvictions %d; want 2, 1", st.CacheEntries, st.CacheEvictions)
	}
	f.ask(t, "udp", question(names[0], dns.TypeA))
	if n := u.count(); n != 3 {
		t.Errorf("upstream saw %d queries, want 3 (l1 still cached)", n)
	}
	f.ask(t, "udp", question(names[1], dns.TypeA))
	if n := u.count(); n != 4 {
		t.Errorf("upstream saw %d queries, want 4 (l2 evicted)", n)
	}
}

func TestRunStopsInFlight(t *testing.T) {
	u := newUpstream(t, "stuck.example. 300 IN A 192.0.2.1")
	f, err := New(Config{Upstreams: []netip.AddrPort{u.addr}, DialUDP: loopbackDialUDP, DialTCP: loopbackDialTCP, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	release := u.holdQueries()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Run(ctx) }()
	out := &captureConn{}
	to := &replyTo{pc: out, fast: out}
	b, _ := question("stuck.example.", dns.TypeA).Pack()
	f.handle(b, to, newScratch())
	waitFor(t, "the query upstream", func() bool { return u.count() == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	r := out.last(t)
	if r == nil || r.Rcode != dns.RcodeServerFailure {
		t.Errorf("reply %v, want SERVFAIL", r)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // the Key of each FieldError
	}{
		{"zero", Config{}, nil},
		{"bad fields", Config{Domain: "bad..name", MaxEntries: -1, MinTTL: time.Hour, MaxTTL: time.Minute,
			Upstreams: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.53:53"), {}}},
			[]string{"domain", "upstreams.1", "cache.size", "cache.min_ttl"}},
		{"cache too big", Config{MaxEntries: MaxMaxEntries + 1}, []string{"cache.size"}},
		{"cache at its bound", Config{MaxEntries: MaxMaxEntries, MaxTTL: MaxMaxTTL}, nil},
		{"max ttl above 7 days", Config{MaxTTL: MaxMaxTTL + time.Second}, []string{"cache.max_ttl"}},
		{"negatives", Config{MinTTL: -1, Timeout: -time.Second, MaxInFlight: -1, LocalPrefixes: []netip.Prefix{{}}},
			[]string{"local_prefixes.0", "max_in_flight", "cache.min_ttl", "timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var got []string
			for _, e := range svcconfig.Fields(err) {
				got = append(got, e.Key)
			}
			if !slices.Equal(got, tc.want) || len(svcconfig.Others(err)) > 0 {
				t.Errorf("Validate() = %v (%v), want keys %v", got, err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "dnsforward: ") {
				t.Errorf("Validate() = %q, want the dnsforward: prefix", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no dials", Config{}, []string{"DialUDP is required", "DialTCP is required"}},
		{"listen half set", Config{DialUDP: loopbackDialUDP, DialTCP: loopbackDialTCP,
			ListenUDP: func(netip.AddrPort) (net.PacketConn, error) { return nil, errors.New("unused") }},
			[]string{"ListenUDP and ListenTCP"}},
		{"bad field", Config{DialUDP: loopbackDialUDP, DialTCP: loopbackDialTCP, MaxEntries: -1}, []string{"cache.size"}},
	} {
		t.Run("New "+tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("New() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}
