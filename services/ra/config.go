package ra

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/mdlayher/ndp"
)

// RFC 4861 §6.2.1 bounds and defaults, §10 router constants.
const (
	// DefaultMaxInterval is MaxRtrAdvInterval's default.
	DefaultMaxInterval = 600 * time.Second
	// MinMaxInterval and MaxMaxInterval bound MaxRtrAdvInterval.
	MinMaxInterval = 4 * time.Second
	MaxMaxInterval = 1800 * time.Second
	// MinMinInterval is MinRtrAdvInterval's floor.
	MinMinInterval = 3 * time.Second
	// MaxRouterLifetime bounds AdvDefaultLifetime.
	MaxRouterLifetime = 9000 * time.Second

	// maxInitialInterval and maxInitialAdverts are
	// MAX_INITIAL_RTR_ADVERT_INTERVAL and MAX_INITIAL_RTR_ADVERTISEMENTS:
	// the first three multicast RAs, after start or a change, are at
	// most 16 s apart (§6.2.4), so hosts learn news fast even when a
	// first RA is lost.
	maxInitialInterval = 16 * time.Second
	maxInitialAdverts  = 3
	// minDelayBetweenRAs is MIN_DELAY_BETWEEN_RAS: multicast RAs are at
	// least 3 s apart (§6.2.6), which is what bounds an RS flood.
	minDelayBetweenRAs = 3 * time.Second
	// maxRADelay is MAX_RA_DELAY_TIME: a solicited RA waits a random
	// time up to 0.5 s (§6.2.6), so that routers answering the same RS
	// do not collide.
	maxRADelay = 500 * time.Millisecond

	// DefaultValidLifetime and DefaultPreferredLifetime are the
	// lifetimes of a Prefix that gives neither durations nor ends:
	// radvd's AdvValidLifetime and AdvPreferredLifetime defaults (a day,
	// four hours), shorter than RFC 4861's 30 and 7 days so that a
	// vanished static prefix leaves hosts within a day.
	DefaultValidLifetime     = 24 * time.Hour
	DefaultPreferredLifetime = 4 * time.Hour
	// Infinity is the lifetime 0xffffffff s, which means forever (RFC
	// 4861 §4.6.2, RFC 8106 §5.1).
	Infinity = ndp.Infinity

	// withdrawnValidLifetime caps the valid lifetime of a withdrawn
	// prefix: RFC 7084 L-13 b) (the lower of the remaining lifetime and
	// two hours, counting down). A host takes it whatever lifetime it
	// holds, as RFC 4862 §5.5.3 e) accepts two hours; L-13 a), zero, a
	// host holding more than two hours would ignore.
	withdrawnValidLifetime = 2 * time.Hour

	// maxPrefixes bounds the prefixes one Advertiser announces
	// (SetPrefixes), maxWithdrawn the withdrawn ones it still
	// announces: with RDNSS and DNSSL every RA fits in maxRALen.
	maxPrefixes  = 8
	maxWithdrawn = 8

	// maxOptionLen is the longest option the wire library encodes: it
	// computes an option's octets as Length × 8 in a uint8, so a Length
	// over 31 wraps (github.com/mdlayher/ndp v1.1.0, RawOption). RFC
	// 8106 allows up to 2040 octets. maxRDNSS is the most servers one
	// RDNSS option of that size holds.
	maxOptionLen = 31 * 8
	maxRDNSS     = (maxOptionLen - 8) / 16
)

// Prefix is one prefix announced with the on-link (L) and autonomous (A)
// flags (RFC 4861 §4.6.2), for SLAAC.
type Prefix struct {
	// Prefix is a /64 (RFC 4862 §5.5.3 d with RFC 4291's 64-bit
	// interface identifiers), e.g. 2001:db8:1:2::/64; neither link-local
	// nor multicast.
	Prefix netip.Prefix
	// ValidUntil and PreferredUntil, if set, are when the prefix stops
	// being valid and preferred: a delegated prefix's, so that the
	// lifetimes announced count down with the delegation's (RFC 4861
	// §6.2.1 AdvValidLifetime "decrements in real time"). They take
	// precedence over Valid and Preferred.
	ValidUntil, PreferredUntil time.Time
	// Valid and Preferred are fixed lifetimes announced in every RA; 0 is
	// DefaultValidLifetime and DefaultPreferredLifetime; Infinity is
	// forever. A preferred lifetime over the valid one is cut to it.
	Valid, Preferred time.Duration
}

// Config is one LAN interface's Advertiser.
type Config struct {
	// Link sends the RAs. Required.
	Link Link
	// SrcAddr is the interface's link-local address, e.g. fe80::1, the
	// source of every RA (§4.2) and the host's default router. Required.
	SrcAddr netip.Addr
	// MTU, if not 0, is announced in an MTU option (§4.6.4), e.g. 1492;
	// at least 1280.
	MTU int
	// HopLimit is the Cur Hop Limit announced, e.g. 64; 0 leaves hosts
	// with their own.
	HopLimit uint8
	// Managed and Other are the M and O flags: addresses, or other
	// configuration (DNS), by DHCPv6.
	Managed, Other bool
	// RDNSS and DNSSL are the DNS servers and search domains announced
	// (RFC 8106), e.g. [fd00:1::1] and ["lan"]; nil announces none.
	RDNSS []netip.Addr
	DNSSL []string
	// DNSLifetime is their lifetime; 0 is 3 × MaxInterval, RFC 8106
	// §5.1's default; else at least MaxInterval, so that it never ends
	// between two RAs.
	DNSLifetime time.Duration
	// MaxInterval and MinInterval bound the interval between unsolicited
	// RAs (MaxRtrAdvInterval, MinRtrAdvInterval). MaxInterval: 0 is
	// 600 s, else 4 s to 1800 s. MinInterval: 0 is 0.33 × MaxInterval
	// (3 s at least) when MaxInterval is 9 s or more, else
	// 0.75 × MaxInterval (see the package doc); else 3 s to
	// 0.75 × MaxInterval (§6.2.1).
	MaxInterval, MinInterval time.Duration
	// RouterLifetime is the Router Lifetime announced: 0 is
	// 3 × MaxInterval, else MaxInterval to 9000 s, whole seconds.
	RouterLifetime time.Duration
	// NotDefaultRouter announces a Router Lifetime of 0: hosts learn the
	// prefixes but do not route through this router (§6.2.1: "A value of
	// zero indicates that the router is not to be used as a default
	// router").
	NotDefaultRouter bool
	// Prefixes is the first set of prefixes; SetPrefixes changes it.
	Prefixes []Prefix
	// Clock is the time source; nil is SystemClock.
	Clock Clock
	// Rand draws the intervals and delays; nil is a ChaCha8 seeded from
	// crypto/rand. Only Run uses it.
	Rand rand.Source
	// Logger receives events; nil discards them.
	Logger *slog.Logger
}

// errorList collects the problems Validate finds.
type errorList []error

func (l *errorList) add(format string, args ...any) {
	*l = append(*l, fmt.Errorf("ra: "+format, args...))
}

// Validate checks cfg and returns nil or every problem found, joined
// (errors.Join): the bounds of RFC 4861 §6.2.1, RFC 8106 §5 and the
// documentation of each field, and that the largest RA fits in 1240
// octets (an IPv6 packet of 1280).
func (c *Config) Validate() error {
	var errs errorList
	if c.Link == nil {
		errs.add("no link")
	} else if mac := c.Link.HardwareAddr(); len(mac) != 6 || mac[0]&1 != 0 {
		errs.add("link address %v is not a unicast Ethernet address", mac)
	}
	if !c.SrcAddr.Is6() || c.SrcAddr.Is4In6() || !c.SrcAddr.IsLinkLocalUnicast() {
		errs.add("source %v is not an IPv6 link-local address (RFC 4861 §4.2); it is required", c.SrcAddr)
	}
	if c.MTU != 0 && (c.MTU < minLinkMTU || c.MTU > 65535) {
		errs.add("MTU %d is not between the IPv6 minimum 1280 (RFC 8200 §5) and 65535", c.MTU)
	}
	maxI, minI := c.intervals()
	switch {
	case maxI < MinMaxInterval || maxI > MaxMaxInterval:
		errs.add("max interval %v is not between %v and %v (RFC 4861 §6.2.1)", maxI, MinMaxInterval, MaxMaxInterval)
	case minI < MinMinInterval || minI > maxI*3/4:
		errs.add("min interval %v is not between %v and 0.75 × max interval = %v (RFC 4861 §6.2.1)", minI, MinMinInterval, maxI*3/4)
	}
	if rl := c.RouterLifetime; rl != 0 && (rl < maxI || rl > MaxRouterLifetime || rl%time.Second != 0) {
		errs.add("router lifetime %v is not whole seconds between the max interval %v and %v (RFC 4861 §6.2.1)", rl, maxI, MaxRouterLifetime)
	}
	if lt := c.DNSLifetime; lt != 0 && (lt < maxI || lt > Infinity || lt%time.Second != 0) {
		errs.add("DNS lifetime %v is not whole seconds of at least the max interval %v (RFC 8106 §5.1)", lt, maxI)
	}
	errs = append(errs, checkDNS(c.RDNSS, c.DNSSL)...)
	errs = append(errs, checkPrefixes(c.Prefixes)...)
	return errors.Join(errs...)
}

// intervals returns MaxInterval and MinInterval with their defaults.
func (c *Config) intervals() (maxI, minI time.Duration) {
	maxI, minI = c.MaxInterval, c.MinInterval
	if maxI == 0 {
		maxI = DefaultMaxInterval
	}
	if minI == 0 {
		if maxI >= 9*time.Second {
			minI = max(maxI*33/100, MinMinInterval)
		} else {
			minI = maxI * 3 / 4
		}
	}
	return maxI, minI
}

// checkDNS checks what SetDNS may change, and that the largest RA with
// them fits in maxRALen.
func checkDNS(rdnss []netip.Addr, dnssl []string) errorList {
	var errs errorList
	for i, a := range rdnss {
		switch {
		case !a.Is6() || a.Is4In6():
			errs.add("RDNSS[%d] %v is not an IPv6 address", i, a)
		case a.Zone() != "":
			errs.add("RDNSS[%d] %v has a zone, which the option cannot carry", i, a)
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			errs.add("RDNSS[%d] %v is not a unicast address", i, a)
		}
	}
	for i, d := range dnssl {
		if err := checkDomain(d); err != nil {
			errs.add("DNSSL[%d] %q: %v", i, d, err)
		}
	}
	if len(rdnss) > maxRDNSS {
		errs.add("%d RDNSS servers, at most %d", len(rdnss), maxRDNSS)
	}
	if n := dnsslSize(dnssl); n > maxOptionLen {
		errs.add("the DNSSL would be %d octets, more than %d: fewer or shorter domains", n, maxOptionLen)
	}
	if len(errs) == 0 {
		if n := maxRASize(len(rdnss), dnssl); n > maxRALen {
			errs.add("the largest RA would be %d octets, more than %d: fewer DNS servers or domains", n, maxRALen)
		}
	}
	return errs
}

// dnsslSize is the size of the DNSSL option for names, 0 for none (RFC
// 8106 §5.2: the names in the RFC 1035 encoding, padded to 8 octets).
func dnsslSize(names []string) int {
	if len(names) == 0 {
		return 0
	}
	n := 8
	for _, d := range names {
		n += len(strings.TrimSuffix(d, ".")) + 2 // the labels' lengths and the root label
	}
	return (n + 7) / 8 * 8
}

// maxRASize is the size of the largest RA: header, SLLA, MTU, every
// prefix and withdrawn prefix, RDNSS and DNSSL.
func maxRASize(nrdnss int, dnssl []string) int {
	n := raMinLen + 8 + 8 + 32*(maxPrefixes+maxWithdrawn)
	if nrdnss > 0 {
		n += 8 + 16*nrdnss
	}
	return n + dnsslSize(dnssl)
}

// checkDomain accepts a DNS name of letters, digits and '-' in labels of
// 1 to 63 (RFC 1123 §2.1), at most 253 characters, one final dot allowed.
func checkDomain(d string) error {
	d = strings.TrimSuffix(d, ".")
	if len(d) == 0 || len(d) > 253 {
		return fmt.Errorf("length %d is not 1 to 253", len(d))
	}
	for l := range strings.SplitSeq(d, ".") {
		ok := len(l) > 0 && len(l) <= 63 && l[0] != '-' && l[len(l)-1] != '-'
		for i := 0; ok && i < len(l); i++ {
			c := l[i]
			ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
		}
		if !ok {
			return fmt.Errorf("label %q is not 1 to 63 letters, digits and inner '-'", l)
		}
	}
	return nil
}

// checkPrefixes checks what SetPrefixes may set.
func checkPrefixes(ps []Prefix) errorList {
	var errs errorList
	if len(ps) > maxPrefixes {
		errs.add("%d prefixes, at most %d", len(ps), maxPrefixes)
	}
	for i, p := range ps {
		a := p.Prefix.Addr()
		switch {
		case !p.Prefix.IsValid() || !a.Is6() || a.Is4In6() || p.Prefix.Bits() != 64 || p.Prefix.Masked() != p.Prefix:
			errs.add("Prefixes[%d] %v is not an IPv6 /64 with its host bits zero (SLAAC needs one, RFC 4862 §5.5.3 d)", i, p.Prefix)
		case a.IsLinkLocalUnicast() || a.IsMulticast() || a.Zone() != "":
			errs.add("Prefixes[%d] %v is link-local or multicast", i, p.Prefix)
		case slices.ContainsFunc(ps[:i], func(q Prefix) bool { return q.Prefix == p.Prefix }):
			errs.add("Prefixes[%d] %v is given twice", i, p.Prefix)
		}
		if p.Valid < 0 || p.Preferred < 0 {
			errs.add("Prefixes[%d] %v has a negative lifetime", i, p.Prefix)
		}
	}
	return errs
}

// withDefaults returns c with its zero values replaced and its slices
// copied.
func (c Config) withDefaults() Config {
	c.MaxInterval, c.MinInterval = c.intervals()
	if c.RouterLifetime == 0 {
		c.RouterLifetime = 3 * c.MaxInterval
	}
	if c.DNSLifetime == 0 {
		c.DNSLifetime = 3 * c.MaxInterval
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Rand == nil {
		c.Rand = newSource()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.SrcAddr = c.SrcAddr.WithZone("")
	c.RDNSS = slices.Clone(c.RDNSS)
	c.DNSSL = normDomains(c.DNSSL)
	c.Prefixes = slices.Clone(c.Prefixes)
	return c
}

// normDomains copies names without their final dot.
func normDomains(names []string) []string {
	out := make([]string, 0, len(names))
	for _, d := range names {
		out = append(out, strings.TrimSuffix(d, "."))
	}
	return out
}
