package svc

import (
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/ra"
	"github.com/gvrouter/gvrouter/stack"
)

// Router advertisements: each lan interface with ipv6.ra on (the default)
// that has an IPv6 /64 — static, or its share of the delegation — announces
// it for SLAAC, with the router's forwarder as RDNSS and the domain as
// DNSSL. The advertiser runs on the interface's ICMPv6 frames (it takes the
// RSs, netstack sees the rest) and is not restarted when the delegation
// changes: its prefixes and DNS are set in place (Manager.syncRA), so a
// renumbering announces the old prefix deprecated instead of a final RA.

// raAdvertiserPrefix names the advertisers among the running services.
const raAdvertiserPrefix = "ra6advertiser "

// raSettings is what a reload compares: a change restarts the advertiser.
type raSettings struct {
	MAC            string
	SrcAddr        netip.Addr
	MTU            int
	Managed, Other bool
}

// raAdvertiserSpec is the advertiser of lan interface ic, if it gets one:
// RAs on, and a /64 to announce now or a delegation to come.
func raAdvertiserSpec(e *env, cfg *config.Config, ic config.Interface) (spec, bool) {
	v := cfg.IPv6Settings(&ic)
	if ic.Role != config.RoleLAN || !v.RA {
		return spec{}, false
	}
	if len(lanPrefixes64(ic)) == 0 && cfg.DelegatingWAN() == "" {
		return spec{}, false
	}
	ifc := e.Interface(ic.Name)
	if ifc == nil {
		return spec{}, false
	}
	mtu := ic.MTU
	if mtu == 0 {
		mtu = e.PortMTU(ic.Port)
	}
	if mtu < 1280 {
		mtu = 0 // not announced: the port's is unknown
	}
	set := raSettings{MAC: ifc.MAC().String(), SrcAddr: linkLocal(ifc.MAC()), MTU: mtu,
		Managed: v.Managed, Other: v.Other}
	return spec{spec: set, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startRAAdvertiser(e, name, ic.Name, set)
	}}, true
}

// lanPrefixes64 is the /64s of a lan interface's IPv6 addresses that are
// neither link-local nor multicast: what SLAAC can use.
func lanPrefixes64(ic config.Interface) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ic.Addresses {
		a := p.Addr()
		if !a.Is6() || a.Is4In6() || a.IsLinkLocalUnicast() || a.IsMulticast() || p.Bits() != config.LANPrefixLength {
			continue
		}
		if !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	return out
}

// startRAAdvertiser runs the advertiser on the interface's ICMPv6
// frames.
func startRAAdvertiser(e *env, name, iface string, set raSettings) (*Service, error) {
	ifc := e.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	adv, err := ra.New(ra.Config{
		Link: ifc, SrcAddr: set.SrcAddr, MTU: set.MTU, Managed: set.Managed, Other: set.Other,
		Logger: e.Log.With("service", name),
	})
	if err != nil {
		return nil, err
	}
	remove, err := ifc.AddTap(stack.MatchICMPv6(), adv)
	if err != nil {
		return nil, err
	}
	s := &Service{name: name, spec: set, ifc: ifc, impl: adv, undo: []func(){remove}}
	e.start(s, adv.Run)
	return s, nil
}

// syncRA gives each running advertiser the prefixes and DNS of its
// interface in cfg, the config in force: static /64s with radvd's default
// lifetimes, the delegated /64 with the delegation's.
func (m *Manager) syncRA(cfg *config.Config) {
	l := m.env.learned
	for _, s := range m.services {
		adv, ok := s.impl.(*ra.Advertiser)
		if !ok {
			continue
		}
		ic := cfg.Interface(s.ifc.Name())
		if ic == nil {
			continue
		}
		pd := l.Delegation()
		delegated, hasPD := l.LANSubnets()[ic.Name]
		var ps []ra.Prefix
		for _, p := range lanPrefixes64(*ic) {
			if hasPD && p == delegated {
				ps = append(ps, ra.Prefix{Prefix: p, ValidUntil: pd.ValidUntil, PreferredUntil: pd.PreferredUntil})
			} else {
				ps = append(ps, ra.Prefix{Prefix: p})
			}
		}
		if err := adv.SetPrefixes(ps); err != nil {
			m.env.Log.Error("router advertisements: prefixes", "interface", ic.Name, "err", err)
		}
		var dnssl []string
		if dnsWanted(cfg) {
			dnssl = []string{cfg.DomainName()}
		}
		var rdnss []netip.Addr
		if dnsWanted(cfg) {
			rdnss = lanDNS6(*ic)
		}
		if err := adv.SetDNS(rdnss, dnssl); err != nil {
			m.env.Log.Error("router advertisements: DNS", "interface", ic.Name, "err", err)
		}
	}
}

// RAAdvertisersStatus fills the status page's LAN RA sections.
func (m *Manager) RAAdvertisersStatus() []status.RAAdvertiser {
	var out []status.RAAdvertiser
	for _, s := range m.sorted() {
		adv, ok := s.impl.(*ra.Advertiser)
		if !ok {
			continue
		}
		a := status.RAAdvertiser{Interface: s.ifc.Name(), Status: adv.Status()}
		out = append(out, a)
	}
	return out
}
