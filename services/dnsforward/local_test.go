package dnsforward

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

func TestLocalNames(t *testing.T) {
	u := newUpstream(t, "8.8.8.8.in-addr.arpa. 300 IN PTR dns.example.", "99.1.168.192.in-addr.arpa. 300 IN PTR leak.example.")
	f := startForwarder(t, Config{Domain: "lan", LocalPrefixes: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}}, u)
	f.SetHosts(map[string][]netip.Addr{
		"laptop":      {netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("fd00::10")},
		"Printer.lan": {netip.MustParseAddr("::ffff:192.168.1.20")},
		"bad name":    {netip.MustParseAddr("192.168.1.30")},
	})
	for _, tc := range []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answers []string
		soa     string // owner of the authority SOA, "" = none
	}{
		{"A", "laptop.lan.", dns.TypeA, dns.RcodeSuccess, []string{"laptop.lan.\t60\tIN\tA\t192.168.1.10"}, ""},
		{"AAAA in other case", "LAPTOP.Lan.", dns.TypeAAAA, dns.RcodeSuccess, []string{"LAPTOP.Lan.\t60\tIN\tAAAA\tfd00::10"}, ""},
		{"mapped address unmapped", "printer.lan.", dns.TypeA, dns.RcodeSuccess, []string{"printer.lan.\t60\tIN\tA\t192.168.1.20"}, ""},
		{"bare host name", "laptop.", dns.TypeA, dns.RcodeSuccess, []string{"laptop.\t60\tIN\tA\t192.168.1.10"}, ""},
		{"NODATA for another type", "laptop.lan.", dns.TypeMX, dns.RcodeSuccess, nil, "lan."},
		{"NODATA AAAA", "printer.lan.", dns.TypeAAAA, dns.RcodeSuccess, nil, "lan."},
		{"unknown host", "nobody.lan.", dns.TypeA, dns.RcodeNameError, nil, "lan."},
		{"invalid name skipped", "bad\\ name.lan.", dns.TypeA, dns.RcodeNameError, nil, "lan."},
		{"below a host", "x.laptop.lan.", dns.TypeA, dns.RcodeNameError, nil, "lan."},
		{"apex SOA", "lan.", dns.TypeSOA, dns.RcodeSuccess, []string{"lan.\t60\tIN\tSOA\tlocalhost. nobody.invalid. 1 3600 1200 604800 60"}, ""},
		{"apex NS", "lan.", dns.TypeNS, dns.RcodeSuccess, nil, "lan."},
		{"PTR v4", "10.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"10.1.168.192.in-addr.arpa.\t60\tIN\tPTR\tlaptop.lan."}, ""},
		{"PTR v6", "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR, dns.RcodeSuccess,
			[]string{"0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.\t60\tIN\tPTR\tlaptop.lan."}, ""},
		{"PTR of mapped", "20.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"20.1.168.192.in-addr.arpa.\t60\tIN\tPTR\tprinter.lan."}, ""},
		{"unknown private address", "99.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, "168.192.in-addr.arpa."},
		{"above hosts: NODATA", "1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, nil, "168.192.in-addr.arpa."},
		{"private zone apex", "10.in-addr.arpa.", dns.TypeSOA, dns.RcodeSuccess, []string{"10.in-addr.arpa.\t60\tIN\tSOA\tlocalhost. nobody.invalid. 1 3600 1200 604800 60"}, ""},
		{"10/8", "4.3.2.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, "10.in-addr.arpa."},
		{"172.16/12", "1.0.20.172.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, "20.172.in-addr.arpa."},
		{"LocalPrefixes", "5.0.19.198.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, "19.198.in-addr.arpa."},
		{"fe80::/10", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.e.f.ip6.arpa.", dns.TypePTR, dns.RcodeNameError, nil, "8.e.f.ip6.arpa."},
		{"DNS-SD browse under a private zone", "b._dns-sd._udp.0.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, "168.192.in-addr.arpa."},
		{"localhost", "localhost.", dns.TypeA, dns.RcodeSuccess, []string{"localhost.\t60\tIN\tA\t127.0.0.1"}, ""},
		{"below localhost", "app.localhost.", dns.TypeAAAA, dns.RcodeSuccess, []string{"app.localhost.\t60\tIN\tAAAA\t::1"}, ""},
		{"invalid", "x.invalid.", dns.TypeA, dns.RcodeNameError, nil, "invalid."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ask(t, "udp", question(tc.qname, tc.qtype))
			if r.Rcode != tc.rcode || !r.Authoritative {
				t.Errorf("rcode %s AA %v, want %s and AA", dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tc.rcode])
			}
			if diff := cmp.Diff(tc.answers, answerStrings(r.Answer)); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			var soa string
			if len(r.Ns) == 1 {
				soa = r.Ns[0].Header().Name
			}
			if soa != tc.soa || len(r.Ns) > 1 {
				t.Errorf("authority %v, want the SOA of %q", r.Ns, tc.soa)
			}
		})
	}
	if n := u.count(); n != 0 {
		t.Errorf("upstream saw %d local questions, want none: %+v", n, u.queries())
	}
	// A public reverse name is forwarded.
	if r := f.ask(t, "udp", question("8.8.8.8.in-addr.arpa.", dns.TypePTR)); len(r.Answer) != 1 || u.count() != 1 {
		t.Errorf("public PTR: answer %v, upstream saw %d; want it forwarded", r.Answer, u.count())
	}
	st := f.Status()
	if st.Hosts != 2 || st.LocalAnswers != 25 {
		t.Errorf("Status() Hosts %d LocalAnswers %d, want 2 and 25", st.Hosts, st.LocalAnswers)
	}
	// SetHosts replaces the table.
	f.SetHosts(map[string][]netip.Addr{"laptop": {netip.MustParseAddr("192.168.1.11")}})
	if r := f.ask(t, "udp", question("printer.lan.", dns.TypeA)); r.Rcode != dns.RcodeNameError {
		t.Errorf("removed host: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	if r := f.ask(t, "udp", question("laptop.lan.", dns.TypeA)); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.168.1.11" {
		t.Errorf("moved host: %v, want 192.168.1.11", r.Answer)
	}
}

func TestForwardPrivateReverse(t *testing.T) {
	u := newUpstream(t, "99.1.168.192.in-addr.arpa. 300 IN PTR upstream.example.")
	f := startForwarder(t, Config{ForwardPrivateReverse: true}, u)
	if r := f.ask(t, "udp", question("99.1.168.192.in-addr.arpa.", dns.TypePTR)); len(r.Answer) != 1 || u.count() != 1 {
		t.Errorf("answer %v, upstream saw %d; want it forwarded", r.Answer, u.count())
	}
	// Without a domain, single labels that are no host are forwarded.
	f.ask(t, "udp", question("com.", dns.TypeNS))
	if u.count() != 2 {
		t.Errorf("upstream saw %d, want com. forwarded", u.count())
	}
}

func TestParseReverse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v6       bool
		prefix   string
		complete bool
		extra    int
	}{
		{"4.3.2.1.in-addr.arpa.", false, "1.2.3.4/32", true, 0},
		{"2.1.in-addr.arpa.", false, "1.2.0.0/16", false, 0},
		{"in-addr.arpa.", false, "0.0.0.0/0", false, 0},
		{"x.4.3.2.1.in-addr.arpa.", false, "1.2.3.4/32", true, 1},
		{"01.2.1.in-addr.arpa.", false, "1.2.0.0/16", false, 1},
		{"256.2.1.in-addr.arpa.", false, "1.2.0.0/16", false, 1},
		{"b.a.9.8.ip6.arpa.", true, "89ab::/16", false, 0},
		{"B.ip6.arpa.", true, "::/0", false, 1}, // lname is lower-case; upper is not a nibble
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.ip6.arpa.", true, "::1/128", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, complete, extra, ok := parseReverse([]byte(wireKey(tc.name)), tc.v6)
			if tc.name == "B.ip6.arpa." {
				p, complete, extra, ok = parseReverse(append([]byte("\x01B"), ip6Arpa...), true)
			}
			want := netip.MustParsePrefix(tc.prefix)
			if !ok || p != want || complete != tc.complete || extra != tc.extra {
				t.Errorf("parseReverse(%s) = %v, %v, %d, %v; want %v, %v, %d, true", tc.name, p, complete, extra, ok, want, tc.complete, tc.extra)
			}
		})
	}
}

// TestSetLocalPrefixes: a prefix added at run time makes its reverse
// names local, ahead of what the cache holds for them, and one removed
// is forwarded again.
func TestSetLocalPrefixes(t *testing.T) {
	const name = "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.5.0.0.0.8.f.4.0.1.0.a.2.ip6.arpa."
	u := newUpstream(t, name+" 300 IN PTR upstream.example.")
	f := startForwarder(t, Config{}, u)
	if r := f.ask(t, "udp", question(name, dns.TypePTR)); len(r.Answer) != 1 || u.count() != 1 {
		t.Fatalf("before: answer %v, upstream saw %d; want it forwarded", r.Answer, u.count())
	}
	f.SetLocalPrefixes([]netip.Prefix{netip.MustParsePrefix("2a01:4f8:5::/48")})
	r := f.ask(t, "udp", question(name, dns.TypePTR))
	if r.Rcode != dns.RcodeNameError || !r.Authoritative || u.count() != 1 {
		t.Errorf("after SetLocalPrefixes: rcode %s AA %v, upstream saw %d; want a local NXDOMAIN, 1",
			dns.RcodeToString[r.Rcode], r.Authoritative, u.count())
	}
	f.SetLocalPrefixes(nil)
	if r := f.ask(t, "udp", question(name, dns.TypePTR)); len(r.Answer) != 1 || r.Authoritative {
		t.Errorf("after SetLocalPrefixes(nil): answer %v AA %v, want the cached upstream answer", r.Answer, r.Authoritative)
	}
	if st := f.Status(); st.LocalAnswers != 1 || st.CacheHits != 1 {
		t.Errorf("Status() LocalAnswers %d CacheHits %d, want 1 and 1", st.LocalAnswers, st.CacheHits)
	}
}
