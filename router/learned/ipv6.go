package learned

import (
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/services/ra"
)

// Home-network IPv6 in config terms. What the ISP's router advertisements
// teach a wan interface and what its DHCPv6 client is delegated are applied
// as DHCPv4 leases are (lease.go): added to the file's config by WithIPv6
// and put in force by the reload path, by difference, so flows through
// everything else are untouched.

// RA is what the router advertisements heard on a wan interface give it:
// default routers and on-link prefixes, while their lifetimes last (the
// RA learner drops expired ones and reports again).
type RA struct {
	// Routers are the default routers' link-local addresses, the most
	// preferred (RFC 4191) first; the first is the default route.
	Routers []netip.Addr
	// OnLink are the prefixes with the L flag: reached on the link,
	// without a router.
	OnLink []netip.Prefix
	// DNS are the RDNSS servers (RFC 8106), upstreams when dns: names
	// none and no lease gives any.
	DNS []netip.Addr
}

// Equal reports whether a and b hold the same.
func (a *RA) Equal(b *RA) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Routers, b.Routers) && slices.Equal(a.OnLink, b.OnLink) && slices.Equal(a.DNS, b.DNS)
}

// empty reports whether a teaches nothing.
func (a *RA) empty() bool {
	return a == nil || len(a.Routers) == 0 && len(a.OnLink) == 0 && len(a.DNS) == 0
}

// Delegation is the prefix the delegating wan's DHCPv6 client holds.
type Delegation struct {
	Prefix                     netip.Prefix // e.g. 2001:db8:aa00::/56
	PreferredUntil, ValidUntil time.Time
	DNS                        []netip.Addr
	Domains                    []string
}

// Equal reports whether a and b hold the same.
func (a *Delegation) Equal(b *Delegation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Prefix == b.Prefix && a.PreferredUntil.Equal(b.PreferredUntil) && a.ValidUntil.Equal(b.ValidUntil) &&
		slices.Equal(a.DNS, b.DNS) && slices.Equal(a.Domains, b.Domains)
}

// defaultRoute6 is ::/0.
var defaultRoute6 = netip.PrefixFrom(netip.IPv6Unspecified(), 0)

// LANSubnets returns each lan interface's /64 of the delegation, by the
// subnet ids ids gives (subnets.go). Ids that do not fit are left out.
func LANSubnets(pd *Delegation, ids map[string]int) map[string]netip.Prefix {
	if pd == nil || !pd.Prefix.IsValid() {
		return nil
	}
	out := map[string]netip.Prefix{}
	for name, id := range ids {
		if p, ok := config.SubnetOf(pd.Prefix, id); ok {
			out[name] = p
		}
	}
	return out
}

// RouterAddr is the router's own address in a LAN /64: ::1 (what hosts
// and operators expect of a CPE; SLAAC hosts take random or EUI-64
// interface ids, never ::1).
func RouterAddr(p netip.Prefix) netip.Prefix {
	a := p.Masked().Addr().As16()
	a[15] = 1
	return netip.PrefixFrom(netip.AddrFrom16(a), config.LANPrefixLength)
}

// WithIPv6 returns cfg with what IPv6 autoconfiguration gives added, as
// if written in the file: each wan's default route via its most preferred
// RA router and routes to its on-link prefixes, and each lan's address
// (::1) in its /64 of the delegation. A route the file has for the same
// destination wins; an on-link prefix shorter than ra.MinOnLinkBits or
// overlapping another interface's prefix or the delegation is left out
// (the learner refuses those too; this covers one learnt before the
// router held the overlapping prefix). cfg is not changed; with nothing
// learned it is returned as is.
func WithIPv6(cfg *config.Config, ras map[string]*RA, pd *Delegation, ids map[string]int) *config.Config {
	subnets := LANSubnets(pd, ids)
	if len(ras) == 0 && len(subnets) == 0 {
		return cfg
	}
	owned := NewOwned(cfg, pd)
	out := *cfg
	out.Interfaces = slices.Clone(cfg.Interfaces)
	out.Routes = slices.Clone(cfg.Routes)
	inFile := func(to netip.Prefix) bool {
		return slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return r.To == to })
	}
	for i := range out.Interfaces {
		ic := &out.Interfaces[i]
		if ra := ras[ic.Name]; ra != nil && ic.Role == config.RoleWAN {
			if len(ra.Routers) > 0 && !inFile(defaultRoute6) {
				out.Routes = append(out.Routes, config.Route{To: defaultRoute6, Via: ra.Routers[0], Dev: ic.Name})
			}
			for _, p := range ra.OnLink {
				p = p.Masked()
				onIface := slices.ContainsFunc(ic.Addresses, func(a netip.Prefix) bool { return a.Masked() == p })
				if !onIface && !inFile(p) && owned.TakesOnLink(ic.Name, p) {
					out.Routes = append(out.Routes, config.Route{To: p, Dev: ic.Name})
				}
			}
		}
		if p, ok := subnets[ic.Name]; ok && ic.Role == config.RoleLAN {
			a := RouterAddr(p)
			if !slices.ContainsFunc(ic.Addresses, func(x netip.Prefix) bool { return x.Addr() == a.Addr() }) {
				ic.Addresses = append(slices.Clone(ic.Addresses), a)
			}
		}
	}
	return &out
}

// UnassignedSets returns what the unassigned-prefix guard
// (stack.Netstack.SetUnassigned6) needs: the delegation, and the /64s of it
// that lan interfaces use. nil, nil without a delegation.
func UnassignedSets(pd *Delegation, ids map[string]int) (delegated, assigned []netip.Prefix) {
	if pd == nil || !pd.Prefix.IsValid() {
		return nil, nil
	}
	for _, p := range LANSubnets(pd, ids) {
		assigned = append(assigned, p)
	}
	slices.SortFunc(assigned, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return []netip.Prefix{pd.Prefix.Masked()}, assigned
}

// Owned is what the router holds, by interface, that an RA on another
// interface must not route there: a hostile neighbour on the wan could
// otherwise pull a LAN host's traffic onto the wan link.
type Owned struct {
	byIface   map[string][]netip.Prefix // each interface's IPv6 prefixes, e.g. lan: fd77:1::/64
	delegated netip.Prefix              // the delegation, holding the LAN subnets; zero without
}

// NewOwned returns what cfg's interfaces and delegation pd hold.
func NewOwned(cfg *config.Config, pd *Delegation) *Owned {
	o := &Owned{byIface: map[string][]netip.Prefix{}}
	for _, ic := range cfg.Interfaces {
		for _, a := range ic.Addresses {
			if a.Addr().Is6() && !a.Addr().Is4In6() && !a.Addr().IsLinkLocalUnicast() {
				o.byIface[ic.Name] = append(o.byIface[ic.Name], a.Masked())
			}
		}
	}
	if pd != nil && pd.Prefix.IsValid() {
		o.delegated = pd.Prefix.Masked()
	}
	return o
}

// Except returns the prefixes the router holds other than on iface; nil
// for a nil o.
func (o *Owned) Except(iface string) []netip.Prefix {
	if o == nil {
		return nil
	}
	var out []netip.Prefix
	for name, ps := range o.byIface {
		if name != iface {
			out = append(out, ps...)
		}
	}
	if o.delegated.IsValid() {
		out = append(out, o.delegated)
	}
	return out
}

// TakesOnLink reports whether an RA's on-link prefix p may become a route
// on iface: long enough, and overlapping nothing the router holds
// elsewhere.
func (o *Owned) TakesOnLink(iface string, p netip.Prefix) bool {
	return p.Bits() >= ra.MinOnLinkBits && !slices.ContainsFunc(o.Except(iface), p.Overlaps)
}
