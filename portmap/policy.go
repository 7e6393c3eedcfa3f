package portmap

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Lifetime bounds (RFC 6887 section 15 suggests a 120 s minimum;
// miniupnpd's min_lifetime 120 and max_lifetime 86400 are the defaults
// of its PCP/NAT-PMP server).
const (
	DefaultMinLifetime = 120 * time.Second
	DefaultMaxLifetime = 86400 * time.Second
)

// Limits by default: a console or a game asks for a handful of ports;
// 64 per host leaves room for a torrent client, 1024 in total bounds the
// table (and the NAT engine's linear work on a change) on a home router.
const (
	DefaultMaxPerHost = 64
	DefaultMaxTotal   = 1024
)

// PortRange is an inclusive range of ports, e.g. {1024, 65535}.
type PortRange struct {
	First, Last uint16
}

// Contains reports whether p is in r.
func (r PortRange) Contains(p uint16) bool { return p >= r.First && p <= r.Last }

// String returns "first-last".
func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Rule is a permission rule, as miniupnpd's "allow|deny extports
// ip/mask intports": it matches a request from an inside address in
// Inside for internal ports in Internal to an external port in External.
type Rule struct {
	Allow    bool         // allow (true) or deny
	External PortRange    // e.g. {1024, 65535}
	Inside   netip.Prefix // e.g. 192.168.1.0/24
	Internal PortRange    // e.g. {1024, 65535}
}

// DefaultRules are used when a Policy has none: any inside host maps
// ports 1024-65535 to 1024-65535 (miniupnpd's recommended first rule);
// everything else, ports below 1024 too, is refused.
var DefaultRules = []Rule{{Allow: true, External: PortRange{1024, 65535}, Inside: netip.MustParsePrefix("0.0.0.0/0"), Internal: PortRange{1024, 65535}}}

// Policy decides which requests the table accepts.
type Policy struct {
	// Secure: a host maps only to itself (miniupnpd's secure_mode); a
	// request naming another internal host is refused.
	Secure bool
	// Rules are checked in order; the first match decides and no match
	// refuses. Empty means DefaultRules.
	Rules []Rule
	// MinLifetime and MaxLifetime clamp the lifetimes asked for; zero
	// means DefaultMinLifetime and DefaultMaxLifetime.
	MinLifetime, MaxLifetime time.Duration
	// MaxPerHost bounds the mappings of one internal address, e.g. 64;
	// 0 means DefaultMaxPerHost.
	MaxPerHost int
	// MaxTotal bounds the table, e.g. 1024; 0 means DefaultMaxTotal.
	MaxTotal int
}

// ErrInvalidPolicy is wrapped by Policy.Validate's errors.
var ErrInvalidPolicy = errors.New("portmap: invalid policy")

// Validate reports every problem of p at once.
func (p *Policy) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPolicy}, a...)...))
	}
	for i, r := range p.Rules {
		if !r.Inside.IsValid() || !r.Inside.Addr().Is4() {
			bad("rule %d: inside prefix %v (IPv4)", i, r.Inside)
		}
		if r.External.First == 0 || r.External.Last < r.External.First {
			bad("rule %d: external ports %s", i, r.External)
		}
		if r.Internal.First == 0 || r.Internal.Last < r.Internal.First {
			bad("rule %d: internal ports %s", i, r.Internal)
		}
	}
	if p.MinLifetime < 0 || p.MaxLifetime < 0 || (p.MaxLifetime > 0 && p.MinLifetime > p.MaxLifetime) {
		bad("lifetimes %v-%v", p.MinLifetime, p.MaxLifetime)
	}
	if p.MaxPerHost < 0 || p.MaxTotal < 0 {
		bad("limits %d per host, %d in total", p.MaxPerHost, p.MaxTotal)
	}
	return errors.Join(errs...)
}

func (p *Policy) rules() []Rule {
	if len(p.Rules) == 0 {
		return DefaultRules
	}
	return p.Rules
}

// Permits reports whether the rules let inside map internal port intPort
// to external port extPort.
func (p *Policy) Permits(inside netip.Addr, intPort, extPort uint16) bool {
	for _, r := range p.rules() {
		if r.Inside.Contains(inside) && r.Internal.Contains(intPort) && r.External.Contains(extPort) {
			return r.Allow
		}
	}
	return false
}

// permitted returns the external port ranges that allow rules give
// inside and intPort, in rule order, for a port search (each candidate
// is still checked with Permits: a deny rule before may take it).
func (p *Policy) permitted(inside netip.Addr, intPort uint16) []PortRange {
	var out []PortRange
	for _, r := range p.rules() {
		if r.Allow && r.Inside.Contains(inside) && r.Internal.Contains(intPort) {
			out = append(out, r.External)
		}
	}
	return out
}

// Clamp returns d bounded by the policy's lifetimes.
func (p *Policy) Clamp(d time.Duration) time.Duration {
	lo, hi := p.MinLifetime, p.MaxLifetime
	if lo == 0 {
		lo = DefaultMinLifetime
	}
	if hi == 0 {
		hi = DefaultMaxLifetime
	}
	return min(max(d, lo), hi)
}

func (p *Policy) maxPerHost() int {
	if p.MaxPerHost == 0 {
		return DefaultMaxPerHost
	}
	return p.MaxPerHost
}

func (p *Policy) maxTotal() int {
	if p.MaxTotal == 0 {
		return DefaultMaxTotal
	}
	return p.MaxTotal
}

// RefuseZone counts a request from a host of an inside zone that may not
// map ports (a guest zone) and returns ErrZone. The servers know the
// zones (their Refused prefixes) and call it before anything else, for
// every kind of request, answering "not authorized".
func (t *Table) RefuseZone() error {
	t.stats.Zone.Add(1)
	return ErrZone
}

// InPrefixes reports whether a (IPv4-mapped or not) is in one of ps.
func InPrefixes(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
