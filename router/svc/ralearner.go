package svc

import (
	"net/netip"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/ra"
	"github.com/gvrouter/gvrouter/stack"
)

// The RA learner of each wan interface with ipv6.ra on (the default) takes
// the ISP's router advertisements as Linux's accept_ra=2 does on a
// forwarding interface: the most preferred default router becomes the wan's
// IPv6 default route, on-link prefixes routes on the wan, RDNSS servers
// upstreams, each for as long as its lifetime lasts, through the reload
// path (learned.WithIPv6). Netstack, a forwarding stack, ignores RAs
// itself; turning its own handling on would install routes behind the
// router's back and take a LAN host's RAs too.
//
// A neighbour on the wan may send RAs too, hostile ones included. The
// learner takes no prefix that overlaps one the router holds elsewhere
// (Owned: the other interfaces' prefixes, the delegation and so its LAN
// subnets) and none shorter than ra.MinOnLinkBits, and learned.WithIPv6
// checks the same again when it turns what was learnt into routes; the
// learner prefers routers that answer its neighbor solicitations, so an
// address nobody answers for does not become the default route while the
// ISP's router answers.

// RALearnerPrefix names the RA learners among the running services.
const RALearnerPrefix = "ra6learner "

// raLearnerSettings is what a reload compares.
type raLearnerSettings struct {
	MAC     string
	SrcAddr netip.Addr // wanLinkLocal: a new PPPoE session's restarts it
	PPP     bool       // a PPPoE wan: ra.LearnerConfig.PointToPoint
}

// raLearnerSpec is the learner of wan interface ic, if it gets one.
func raLearnerSpec(e *env, cfg *config.Config, ic config.Interface) (spec, bool) {
	if ic.Role != config.RoleWAN || !cfg.IPv6Settings(&ic).AcceptRA {
		return spec{}, false
	}
	ifc := e.Interface(ic.Name)
	if ifc == nil {
		return spec{}, false
	}
	src, ok := wanLinkLocal(ic, ifc)
	if !ok {
		return spec{}, false // a PPPoE session before IPv6CP opened
	}
	set := raLearnerSettings{MAC: ifc.MAC().String(), SrcAddr: src, PPP: ic.PPPoE != nil}
	return spec{spec: set, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startRALearner(e, name, ic.Name, set)
	}}, true
}

// startRALearner runs the learner on the interface's ICMPv6 frames
// (it watches them, consuming none).
func startRALearner(e *env, name, iface string, set raLearnerSettings) (*Service, error) {
	ifc := e.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	s := &Service{name: name, spec: set, ifc: ifc}
	log := e.Log.With("service", name)
	l, err := ra.NewLearner(ra.LearnerConfig{Link: ifc, SrcAddr: set.SrcAddr, Solicit: true, PointToPoint: set.PPP,
		Owned:  func() []netip.Prefix { return e.Owned(iface) },
		Logger: log, OnChange: func(st ra.State) {
			lr := &learned.RA{OnLink: st.OnLinkPrefixes(), DNS: st.DNSServers()}
			for _, rt := range st.Routers {
				lr.Routers = append(lr.Routers, rt.Addr)
			}
			log.Info("IPv6 router advertisements", "interface", iface, "routers", lr.Routers, "on_link", lr.OnLink, "rdnss", lr.DNS)
			e.Post(name, learned.Change{Owner: s, Iface: iface, RA: lr})
		}})
	if err != nil {
		return nil, err
	}
	remove, err := ifc.AddTap(stack.MatchICMPv6(), l)
	if err != nil {
		return nil, err
	}
	s.impl, s.undo = l, []func(){remove}
	e.start(s, l.Run)
	return s, nil
}

// RALearnersStatus fills the status page's WAN RA sections.
func (m *Manager) RALearnersStatus() []status.RALearner {
	var out []status.RALearner
	for _, s := range m.sorted() {
		l, ok := s.impl.(*ra.Learner)
		if !ok {
			continue
		}
		x := status.RALearner{Interface: s.ifc.Name(), LearnerStatus: l.Status()}
		out = append(out, x)
	}
	return out
}
