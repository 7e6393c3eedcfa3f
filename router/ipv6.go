package router

import (
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

// Home-network IPv6 (issue 19) in config terms. What the ISP's router
// advertisements teach a wan interface and what its DHCPv6 client is
// delegated are applied as DHCPv4 leases are (leases.go): added to the
// file's config by withIPv6 and put in force by the reload path, by
// difference, so flows through everything else are untouched.

// learnedRA is what the router advertisements heard on a wan interface
// give it: default routers and on-link prefixes, while their lifetimes
// last (the RA learner drops expired ones and reports again).
type learnedRA struct {
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

func (a *learnedRA) equal(b *learnedRA) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Routers, b.Routers) && slices.Equal(a.OnLink, b.OnLink) && slices.Equal(a.DNS, b.DNS)
}

// delegation is the prefix the delegating wan's DHCPv6 client holds.
type delegation struct {
	Prefix                     netip.Prefix // e.g. 2001:db8:aa00::/56
	PreferredUntil, ValidUntil time.Time
	DNS                        []netip.Addr
	Domains                    []string
}

func (a *delegation) equal(b *delegation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Prefix == b.Prefix && a.PreferredUntil.Equal(b.PreferredUntil) && a.ValidUntil.Equal(b.ValidUntil) &&
		slices.Equal(a.DNS, b.DNS) && slices.Equal(a.Domains, b.Domains)
}

// defaultRoute6 is ::/0.
var defaultRoute6 = netip.PrefixFrom(netip.IPv6Unspecified(), 0)

// lanSubnets returns each lan interface's /64 of the delegation, by the
// subnet ids ids gives (subnets.go). Ids that do not fit are left out.
func lanSubnets(pd *delegation, ids map[string]int) map[string]netip.Prefix {
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

// routerAddr is the router's own address in a LAN /64: ::1 (what hosts
// and operators expect of a CPE; SLAAC hosts take random or EUI-64
// interface ids, never ::1).
func routerAddr(p netip.Prefix) netip.Prefix {
	a := p.Masked().Addr().As16()
	a[15] = 1
	return netip.PrefixFrom(netip.AddrFrom16(a), config.LANPrefixLength)
}

// withIPv6 returns cfg with what IPv6 autoconfiguration gives added, as
// if written in the file: each wan's default route via its most preferred
// RA router and routes to its on-link prefixes, and each lan's address
// (::1) in its /64 of the delegation. A route the file has for the same
// destination wins; an on-link prefix shorter than ra.MinOnLinkBits or
// overlapping another interface's prefix or the delegation is left out
// (the learner refuses those too; this covers one learnt before the
// router held the overlapping prefix). cfg is not changed; with nothing learned it is
// returned as is.
func withIPv6(cfg *config.Config, ras map[string]*learnedRA, pd *delegation, ids map[string]int) *config.Config {
	subnets := lanSubnets(pd, ids)
	if len(ras) == 0 && len(subnets) == 0 {
		return cfg
	}
	owned := newOwnedPrefixes6(cfg, pd)
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
				if !onIface && !inFile(p) && owned.takesOnLink(ic.Name, p) {
					out.Routes = append(out.Routes, config.Route{To: p, Dev: ic.Name})
				}
			}
		}
		if p, ok := subnets[ic.Name]; ok && ic.Role == config.RoleLAN {
			a := routerAddr(p)
			if !slices.ContainsFunc(ic.Addresses, func(x netip.Prefix) bool { return x.Addr() == a.Addr() }) {
				ic.Addresses = append(slices.Clone(ic.Addresses), a)
			}
		}
	}
	return &out
}

// unassignedSets returns what the unassigned-prefix guard
// (stack.Netstack.SetUnassigned6) needs: the delegation, and the /64s of it
// that lan interfaces use. nil, nil without a delegation.
func unassignedSets(pd *delegation, ids map[string]int) (delegated, assigned []netip.Prefix) {
	if pd == nil || !pd.Prefix.IsValid() {
		return nil, nil
	}
	subnets := lanSubnets(pd, ids)
	for _, p := range subnets {
		assigned = append(assigned, p)
	}
	slices.SortFunc(assigned, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return []netip.Prefix{pd.Prefix.Masked()}, assigned
}

// takeRALocked records what iface's RA learner knows (nil: nothing) and
// reports whether it changed. r.mu must be held.
func (r *Router) takeRALocked(iface string, ra *learnedRA) bool {
	if r.ra6[iface].equal(ra) {
		return false
	}
	if ra == nil || len(ra.Routers) == 0 && len(ra.OnLink) == 0 && len(ra.DNS) == 0 {
		delete(r.ra6, iface)
	} else {
		r.ra6[iface] = ra
	}
	return true
}

// takeDelegationLocked records the delegating wan's prefix (nil: lost)
// and reports whether it changed; a new prefix (re)assigns the lan
// interfaces' subnet ids, kept in the state directory. r.mu must be held.
func (r *Router) takeDelegationLocked(iface string, pd *delegation) bool {
	if r.pd6.equal(pd) {
		return false
	}
	if r.pd6 != nil && (pd == nil || pd.Prefix != r.pd6.Prefix) {
		r.log.Warn("IPv6 delegation withdrawn: its LAN prefixes are deprecated and removed", "interface", iface, "prefix", r.pd6.Prefix)
	}
	if pd != nil && (r.pd6 == nil || pd.Prefix != r.pd6.Prefix) {
		r.log.Info("IPv6 delegation", "interface", iface, "prefix", pd.Prefix, "valid_until", pd.ValidUntil)
	}
	r.pd6 = pd
	r.assignSubnetsLocked(r.userCfg)
	return true
}

// assignSubnetsLocked sets r.lanIDs for the delegation in force and cfg's
// lan interfaces (none without a delegation). r.mu must be held.
func (r *Router) assignSubnetsLocked(cfg *config.Config) {
	if r.pd6 == nil {
		r.lanIDs = nil
		return
	}
	if r.subnets == nil {
		dir, err := r.serviceDir("ipv6")
		if err != nil {
			r.log.Error("LAN subnet ids are not kept", "err", err)
			dir = r.stateDir
		}
		s, err := loadSubnetIDs(dir + "/subnets.json")
		if err != nil {
			r.log.Error("LAN subnet ids: the file is replaced", "err", err)
		}
		r.subnets = s
	}
	ids, err := r.subnets.assign(cfg, r.pd6.Prefix.Bits())
	if err != nil {
		r.log.Error("LAN subnets of the delegation", "prefix", r.pd6.Prefix, "err", err)
	}
	r.lanIDs = ids
}

// dropStaleIPv6Locked forgets what interfaces cfg no longer learns RAs on
// or asks a delegation for. r.mu must be held.
func (r *Router) dropStaleIPv6Locked(cfg *config.Config) {
	for name := range r.ra6 {
		if ic := cfg.Interface(name); ic == nil || ic.Role != config.RoleWAN || !cfg.IPv6Settings(ic).AcceptRA {
			delete(r.ra6, name)
		}
	}
	if r.pd6 != nil && cfg.DelegatingWAN() == "" {
		r.pd6 = nil
	}
	r.assignSubnetsLocked(cfg)
}

// ipv6StatusLocked fills the status page's IPv6 section; nil when none of
// it runs. r.mu must be held.
func (r *Router) ipv6StatusLocked() *status.IPv6 {
	v := &status.IPv6{DHCPv6Servers: r.dhcp6ServersStatusLocked(), Delegation: r.dhcp6ClientStatusLocked(),
		LANRA: r.raAdvertisersStatusLocked(), WANRA: r.raLearnersStatusLocked()}
	if subnets := lanSubnets(r.pd6, r.lanIDs); len(subnets) > 0 {
		v.LANPrefixes = subnets
	}
	if v.DHCPv6Servers == nil && v.LANPrefixes == nil && v.Delegation == nil && v.WANRA == nil && v.LANRA == nil {
		return nil
	}
	return v
}
