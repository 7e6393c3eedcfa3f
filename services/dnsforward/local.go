package dnsforward

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Local answers: HOST.DOMAIN from SetHosts, the PTR names of its
// addresses, and NXDOMAIN for the rest of the local domain and of the
// local reverse zones, none of which is ever forwarded.

// privateReverse are the zones RFC 6303 §4 (and RFC 7793 for 100.64/10)
// says a resolver serves itself instead of asking the internet, by the
// address ranges whose reverse names they hold.
var privateReverse = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),      // RFC 1918
	netip.MustParsePrefix("172.16.0.0/12"),   // RFC 1918
	netip.MustParsePrefix("192.168.0.0/16"),  // RFC 1918
	netip.MustParsePrefix("0.0.0.0/8"),       // RFC 1122 "this network"
	netip.MustParsePrefix("127.0.0.0/8"),     // RFC 1122 loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // RFC 3927 link-local
	netip.MustParsePrefix("100.64.0.0/10"),   // RFC 6598 shared (RFC 7793)
	netip.MustParsePrefix("192.0.2.0/24"),    // RFC 5737 TEST-NET-1
	netip.MustParsePrefix("198.51.100.0/24"), // RFC 5737 TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // RFC 5737 TEST-NET-3
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("::/128"),        // unspecified
	netip.MustParsePrefix("::1/128"),       // loopback
	netip.MustParsePrefix("fc00::/7"),      // RFC 4193 unique local
	netip.MustParsePrefix("fe80::/10"),     // link-local
	netip.MustParsePrefix("2001:db8::/32"), // RFC 3849 documentation
}

// hostTable is a SetHosts snapshot, immutable once published.
type hostTable struct {
	// byName maps the lower-case wire name of HOST.DOMAIN., and of the
	// bare HOST., to its addresses (IPv4 unmapped).
	byName map[string][]netip.Addr
	// byAddr maps an address to the FQDNs ("laptop.lan.") of its hosts.
	byAddr map[netip.Addr][]string
	// names is the number of hosts.
	names int
}

// newHostTable builds a table from hosts (name -> addresses). A name is
// a single label ("laptop") or that label under domain
// ("laptop.lan"); other names and invalid addresses are skipped and
// returned in skipped.
func newHostTable(hosts map[string][]netip.Addr, domain string) (t *hostTable, skipped []string) {
	t = &hostTable{byName: make(map[string][]netip.Addr), byAddr: make(map[netip.Addr][]string)}
	names := make([]string, 0, len(hosts))
	for n := range hosts {
		names = append(names, n)
	}
	slices.Sort(names) // a deterministic PTR order
	for _, n := range names {
		label := strings.ToLower(strings.TrimSuffix(n, "."))
		if domain != "" {
			label = strings.TrimSuffix(label, "."+strings.ToLower(domain))
		}
		if !validLabel(label) {
			skipped = append(skipped, n)
			continue
		}
		t.names++
		var fqdn string
		if domain != "" {
			fqdn = label + "." + strings.ToLower(domain) + "."
		}
		for _, a := range hosts[n] {
			if !a.IsValid() {
				continue
			}
			a = a.Unmap()
			for _, name := range []string{label + ".", fqdn} {
				if name == "" {
					continue
				}
				k := wireKey(name)
				if !slices.Contains(t.byName[k], a) {
					t.byName[k] = append(t.byName[k], a)
				}
			}
			ptr := fqdn
			if ptr == "" {
				ptr = label + "."
			}
			if !slices.Contains(t.byAddr[a], ptr) {
				t.byAddr[a] = append(t.byAddr[a], ptr)
			}
		}
	}
	return t, skipped
}

// validLabel reports whether s is one host name label: letters, digits,
// hyphens and underscores (which DHCP clients send), 1 to 63 bytes, not
// starting or ending with a hyphen (RFC 952, RFC 1123 §2.1).
func validLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// wireKey returns the lower-case wire form of the FQDN s as a string.
func wireKey(s string) string {
	b := make([]byte, 256)
	n, err := dns.PackDomainName(dns.CanonicalName(s), b, 0, nil, false)
	if err != nil {
		return ""
	}
	return string(b[:n])
}

// zones are the names the forwarder answers itself. Immutable once
// built; SetLocalPrefixes swaps in new ones.
type zones struct {
	domain   string // "lan", "" = none
	domainW  []byte // its lower-case wire form
	reverse  []netip.Prefix
	localTTL uint32
}

var (
	inAddrArpa = []byte("\x07in-addr\x04arpa\x00")
	ip6Arpa    = []byte("\x03ip6\x04arpa\x00")
	localhostW = []byte("\x09localhost\x00")
	invalidW   = []byte("\x07invalid\x00")
)

func newZones(cfg *Config) *zones {
	z := &zones{domain: cfg.Domain, localTTL: uint32(cfg.LocalTTL.Seconds())}
	if z.domain != "" {
		z.domainW = []byte(wireKey(z.domain + "."))
	}
	if !cfg.ForwardPrivateReverse {
		z.reverse = append(z.reverse, privateReverse...)
	}
	for _, p := range cfg.LocalPrefixes {
		z.reverse = append(z.reverse, p.Masked())
	}
	return z
}

// localKind is what kind of local answer a name gets.
type localKind int

const (
	notLocal      localKind = iota
	localHost               // a name in the host table
	localDomain             // in the local domain, not a host
	localReverse            // in a local reverse zone
	localPTR                // the reverse name of a host's address
	localLoopback           // localhost. and below (RFC 6761 §6.3)
	localInvalid            // invalid. and below (RFC 6761 §6.4)
)

// classify says whether the lower-case wire name lname is answered
// locally. For localReverse and localPTR it also returns the address (a
// prefix) the name stands for, and for localDomain and localReverse the
// wire name of the zone's apex, for the SOA of the answer.
func (z *zones) classify(lname []byte, ht *hostTable) (kind localKind, rev netip.Prefix, apex []byte) {
	if ht != nil {
		if _, ok := ht.byName[string(lname)]; ok {
			return localHost, netip.Prefix{}, z.domainW
		}
	}
	if z.domainW != nil && hasSuffixFold(lname, z.domainW) {
		return localDomain, netip.Prefix{}, z.domainW
	}
	if hasSuffixFold(lname, localhostW) {
		return localLoopback, netip.Prefix{}, nil
	}
	if hasSuffixFold(lname, invalidW) {
		return localInvalid, netip.Prefix{}, nil
	}
	var v6 bool
	switch {
	case hasSuffixFold(lname, inAddrArpa):
	case hasSuffixFold(lname, ip6Arpa):
		v6 = true
	default:
		return notLocal, netip.Prefix{}, nil
	}
	p, complete, extra, ok := parseReverse(lname, v6)
	if !ok {
		return notLocal, netip.Prefix{}, nil
	}
	bits := p.Bits()
	if complete && extra == 0 && ht != nil {
		if _, ok := ht.byAddr[p.Addr()]; ok {
			return localPTR, p, nil
		}
	}
	if extra > 0 {
		p = netip.PrefixFrom(p.Addr(), -1) // a name below the address: no host under it
	}
	for _, l := range z.reverse {
		if l.Addr().Is6() == v6 && l.Bits() <= bits && l.Contains(p.Addr()) {
			// The zone holding the name: l's bits rounded up to a
			// whole label (172.16.0.0/12 is 16 zones, 16.172 to
			// 31.172.in-addr.arpa).
			step := 8
			if v6 {
				step = 4
			}
			r := (l.Bits() + step - 1) / step * step
			return localReverse, p, reverseApex(netip.PrefixFrom(p.Addr(), r).Masked(), v6)
		}
	}
	return notLocal, netip.Prefix{}, nil
}

// parseReverse reads the address labels of a reverse name (RFC 1035
// §3.5 for in-addr.arpa, RFC 3596 §2.5 for ip6.arpa) from the right: the
// prefix they spell (leading labels that are not octets or nibbles end
// it), whether all of the address is there, and how many labels lie to
// its left. ok is false for a name that is not under the arpa zone.
func parseReverse(lname []byte, v6 bool) (p netip.Prefix, complete bool, extra int, ok bool) {
	var labels [128][]byte
	n := 0
	for off := 0; off < len(lname) && lname[off] != 0; off += int(lname[off]) + 1 {
		if n == len(labels) || off+1+int(lname[off]) > len(lname) {
			return netip.Prefix{}, false, 0, false
		}
		labels[n] = lname[off+1 : off+1+int(lname[off])]
		n++
	}
	n -= 2 // in-addr.arpa or ip6.arpa
	if n < 0 {
		return netip.Prefix{}, false, 0, false
	}
	var a [16]byte
	bits := 0
	max := 32
	if v6 {
		max = 128
	}
	i := n - 1
	for ; i >= 0 && bits < max; i-- {
		l := labels[i]
		if v6 {
			if len(l) != 1 {
				break
			}
			d, ok := hexDigit(l[0])
			if !ok {
				break
			}
			a[bits/8] |= d << (4 - bits%8)
			bits += 4
			continue
		}
		o, ok := octet(l)
		if !ok {
			break
		}
		a[bits/8] = o
		bits += 8
	}
	var addr netip.Addr
	if v6 {
		addr = netip.AddrFrom16(a)
	} else {
		addr = netip.AddrFrom4([4]byte(a[:4]))
	}
	return netip.PrefixFrom(addr, bits), bits == max, i + 1, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// octet parses a decimal 0..255 without leading zeros.
func octet(l []byte) (byte, bool) {
	if len(l) == 0 || len(l) > 3 || (len(l) > 1 && l[0] == '0') {
		return 0, false
	}
	v := 0
	for _, c := range l {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if v > 255 {
		return 0, false
	}
	return byte(v), true
}

// reverseApex returns the wire name of the reverse zone of p, whose bits
// are a whole number of labels (octets or nibbles).
func reverseApex(p netip.Prefix, v6 bool) []byte {
	a := p.Addr().AsSlice()
	var s strings.Builder
	if v6 {
		nibbles := (p.Bits() + 3) / 4
		for i := nibbles - 1; i >= 0; i-- {
			d := a[i/2]
			if i%2 == 0 {
				d >>= 4
			}
			s.WriteByte("0123456789abcdef"[d&0xf])
			s.WriteByte('.')
		}
		s.WriteString("ip6.arpa.")
	} else {
		octets := (p.Bits() + 7) / 8
		for i := octets - 1; i >= 0; i-- {
			s.WriteString(itoa(int(a[i])))
			s.WriteByte('.')
		}
		s.WriteString("in-addr.arpa.")
	}
	return []byte(wireKey(s.String()))
}

func itoa(v int) string {
	if v >= 100 {
		return string([]byte{byte('0' + v/100), byte('0' + v/10%10), byte('0' + v%10)})
	}
	if v >= 10 {
		return string([]byte{byte('0' + v/10), byte('0' + v%10)})
	}
	return string([]byte{byte('0' + v)})
}

// localSOA is the SOA record of a local zone, for its negative answers
// (RFC 2308 §3) and SOA queries: MINIMUM and TTL are the local TTL.
func (z *zones) localSOA(apex string) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: apex, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.localTTL},
		Ns:      "localhost.",
		Mbox:    "nobody.invalid.",
		Serial:  1,
		Refresh: 3600,
		Retry:   1200,
		Expire:  604800,
		Minttl:  z.localTTL,
	}
}

// localAnswer builds the local answer to the question (name as sent,
// lower-case wire name lname, qtype) of kind k.
func (z *zones) localAnswer(name string, lname []byte, qtype uint16, k localKind, rev netip.Prefix, apex []byte, ht *hostTable) *dns.Msg {
	m := new(dns.Msg)
	m.Response = true
	m.Authoritative = true
	m.RecursionAvailable = true
	m.Question = []dns.Question{{Name: name, Qtype: qtype, Qclass: dns.ClassINET}}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: z.localTTL}
	}
	var addrs []netip.Addr
	switch k {
	case localHost:
		addrs = ht.byName[string(lname)]
	case localLoopback:
		addrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	case localPTR:
		if qtype == dns.TypePTR || qtype == dns.TypeANY {
			for _, t := range ht.byAddr[rev.Addr()] {
				m.Answer = append(m.Answer, &dns.PTR{Hdr: hdr(dns.TypePTR), Ptr: t})
			}
		}
	case localInvalid:
		m.Rcode = dns.RcodeNameError
	case localDomain, localReverse:
		if equalFold(lname, apex) {
			if qtype == dns.TypeSOA || qtype == dns.TypeANY {
				m.Answer = append(m.Answer, z.localSOA(name))
			}
		} else if k == localReverse && hostsUnder(ht, rev) {
			// an empty non-terminal above a host's address: NODATA
			// (RFC 8020 §2: NXDOMAIN would deny the host's name too)
		} else {
			m.Rcode = dns.RcodeNameError
		}
	}
	for _, a := range addrs {
		switch {
		case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
		case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	if len(m.Answer) == 0 {
		owner := name
		switch {
		case k == localLoopback:
			owner = "localhost."
		case k == localInvalid:
			owner = "invalid."
		case apex != nil:
			owner, _, _ = dns.UnpackDomainName(apex, 0)
		}
		m.Ns = append(m.Ns, z.localSOA(owner))
	}
	return m
}

// hostsUnder reports whether some host's address lies in p.
func hostsUnder(ht *hostTable, p netip.Prefix) bool {
	if ht == nil {
		return false
	}
	for a := range ht.byAddr {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
