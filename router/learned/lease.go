package learned

import (
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/router/config"
)

// Lease is what a DHCPv4 lease (or a PPPoE session's IPCP) gives its
// interface, in config terms: the
// router applies it by the same by-difference path as a reload (Apply on
// the netstack, SetRules on the NAT engine), so flows through everything
// else are untouched.
type Lease struct {
	Addr   netip.Prefix // e.g. 198.51.100.23/24
	Routes []config.Route
	MTU    int          // 0 = none (or ignored by the client)
	DNS    []netip.Addr // the lease's DNS servers, upstreams when dns: names none
	// LinkLocal is a PPPoE session's IPv6 link-local address, fe80::
	// and IPv6CP's interface identifier as a /64 (RFC 5072 §5), e.g.
	// fe80::1c2d:3e4f:5a6b:7c8d/64: the address the wan's RA learner
	// and DHCPv6 client speak from; invalid for none.
	LinkLocal netip.Prefix
}

// Equal reports whether a and b configure the same.
func (a *Lease) Equal(b *Lease) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Addr == b.Addr && a.MTU == b.MTU && a.LinkLocal == b.LinkLocal && slices.Equal(a.DNS, b.DNS) &&
		slices.EqualFunc(a.Routes, b.Routes, config.Route.Equal)
}

// WithLeases returns cfg with each lease's addresses, routes and MTU added
// to its interface, as if they were written in the file. cfg is not
// changed. portMTU caps a lease's MTU at the port's (0 = unknown).
func WithLeases(cfg *config.Config, leases map[string]*Lease, portMTU func(port string) int) *config.Config {
	if len(leases) == 0 {
		return cfg
	}
	out := *cfg
	out.Interfaces = slices.Clone(cfg.Interfaces)
	out.Routes = slices.Clone(cfg.Routes)
	for i := range out.Interfaces {
		ic := &out.Interfaces[i]
		l := leases[ic.Name]
		if l == nil || (ic.DHCP == nil && ic.PPPoE == nil) {
			continue
		}
		for _, a := range []netip.Prefix{l.Addr, l.LinkLocal} {
			if a.IsValid() && !slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr() == a.Addr() }) {
				ic.Addresses = append(slices.Clone(ic.Addresses), a)
			}
		}
		if l.MTU > 0 && ic.MTU == 0 {
			mtu := l.MTU
			if pm := portMTU(ic.Port); pm > 0 {
				mtu = min(mtu, pm)
			}
			ic.MTU = mtu
		}
		for _, r := range l.Routes {
			r.Dev = ic.Name
			// A route in the file wins over the lease's for the same
			// destination (the operator's word is final).
			if slices.ContainsFunc(out.Routes, func(s config.Route) bool { return s.To == r.To }) {
				continue
			}
			out.Routes = append(out.Routes, r)
		}
	}
	return &out
}
