package svc

import (
	"context"
	"net"
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/pppoe"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/pppoelink"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/stack"
)

// PPPoEPrefix names the PPPoE clients among the running services (the
// name is the prefix and the interface).
const PPPoEPrefix = "pppoe "

// pppoeSettings is what a reload compares: a change restarts the
// session (a PADT, then discovery anew).
type pppoeSettings struct {
	MAC     [6]byte
	Session pppoe.Config
	// Route6 adds an IPv6 default route to the peer's link-local
	// address: with ipv6: {ra: off} no RA gives one, and on a point to
	// point link the peer is the only next hop there is.
	Route6 bool
}

// pppoeSpec is the PPPoE client of a wan interface with "pppoe" among
// its addresses.
func pppoeSpec(e *env, ic config.Interface) (spec, error) {
	ifc := e.Interface(ic.Name)
	if ifc == nil {
		return spec{}, errNoInterface(ic.Name)
	}
	set := pppoeSettings{MAC: [6]byte(ifc.MAC()), Session: ic.PPPoE.Session()}
	// IPv6CP runs when the wan wants IPv6 at all: RAs learnt (the
	// default) or a delegation asked for. Its link-local address then
	// carries the RA learner and the DHCPv6 client (wanLinkLocal).
	v6 := ic.IPv6OrDefault()
	set.Session.IPv6 = v6.AcceptRA || v6.PD > 0
	set.Route6 = set.Session.IPv6 && !v6.AcceptRA
	return spec{spec: set, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startPPPoE(e, name, ic.Name, set)
	}}, nil
}

// startPPPoE runs a PPPoE session on the interface's raw frames
// (router/pppoelink). Each change of the session moves the interface's
// data path into or out of the session (stack.Interface.SetPPPoESession)
// and hands IPCP's and IPv6CP's results to the runtime as a lease: the
// local address as a /32, a default route to the peer, the MTU and the
// DNS servers, and the IPv6 link-local address fe80::IID, which the
// reload path applies like a DHCP lease's (and which starts the RA
// learner and DHCPv6 client of the wan, wanLinkLocal).
func startPPPoE(e *env, name, iface string, set pppoeSettings) (*Service, error) {
	s, err := e.newService(name, iface, set)
	if err != nil {
		return nil, err
	}
	ifc := s.ifc
	log := e.Log.With("service", name)
	sc := set.Session
	sc.Local = set.MAC
	var last *learned.Lease
	onChange := func(st pppoe.Status) {
		// On the link's goroutine, one change at a time.
		ifc.SetPPPoESession(dataLink(st))
		lease := pppoeLease(st, set.Route6)
		if lease.Equal(last) {
			return
		}
		if lease != nil {
			log.Info("PPPoE session up", "interface", iface, "address", lease.Addr, "link_local", lease.LinkLocal,
				"session_id", st.SessionID, "ac", st.ACName, "mtu", st.MTU, "dns", lease.DNS)
		} else if last != nil {
			log.Warn("PPPoE session down: address and routes removed", "interface", iface, "state", st.State, "reason", st.LastDownReason)
		}
		last = lease
		e.Post(name, learned.Change{Owner: s, Iface: iface, Lease: lease})
	}
	// A restarted session (new settings) starts without the address
	// the last one had: until IPCP says otherwise there is none.
	e.Post(name, learned.Change{Owner: s, Iface: iface})
	link, err := pppoelink.Start(pppoelink.Config{Name: iface, Session: sc, OnChange: onChange}, log)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, func() {
		link.Close()
		ifc.SetPPPoESession(nil)
	})
	if err := link.Bind(ifc); err != nil {
		return s.abort(err)
	}
	s.impl = link
	// The link runs its own goroutine (Start); the service's waits for
	// the stop.
	e.start(s, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
	return s, nil
}

// dataLink is the framing of an up session for the interface's data
// path, nil while it is not up.
func dataLink(st pppoe.Status) *pppoe.Link {
	if st.State != "up" {
		return nil
	}
	mac, err := net.ParseMAC(st.ACMAC)
	if err != nil || len(mac) != 6 {
		return nil
	}
	return &pppoe.Link{Peer: [6]byte(mac), SessionID: st.SessionID}
}

// pppoeLease is what an up session's IPCP and IPv6CP results add to the
// config; nil while the session is not up or neither gave an address.
// route6 adds the IPv6 default route to the peer (pppoeSettings.Route6).
func pppoeLease(st pppoe.Status, route6 bool) *learned.Lease {
	if st.State != "up" {
		return nil
	}
	v4 := st.IPv4 != nil && st.IPv4.Local.IsValid()
	v6 := st.IPv6 != nil && st.IPv6.Local.Is6() && st.IPv6.Local.IsLinkLocalUnicast()
	if !v4 && !v6 {
		return nil
	}
	l := &learned.Lease{MTU: st.MTU, DNS: []netip.Addr{}}
	if v4 {
		l.Addr = netip.PrefixFrom(st.IPv4.Local, 32)
		l.DNS = slices.Clone(st.IPv4.DNS)
		// Point to point: every destination is the peer's, which the
		// interface reaches without ARP.
		r := config.Route{To: netip.PrefixFrom(netip.IPv4Unspecified(), 0)}
		if st.IPv4.Peer.IsValid() && !st.IPv4.Peer.IsUnspecified() {
			r.Via = st.IPv4.Peer
		}
		l.Routes = []config.Route{r}
	}
	if v6 {
		// RFC 5072 §5: fe80::/64 with the interface identifier.
		l.LinkLocal = netip.PrefixFrom(st.IPv6.Local, 64)
		if p := st.IPv6.Peer; route6 && p.IsLinkLocalUnicast() {
			l.Routes = append(l.Routes, config.Route{To: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Via: p})
		}
	}
	return l
}

// wanLinkLocal is the IPv6 link-local address the RA learner and the
// DHCPv6 client of wan interface ic speak from: on a PPPoE interface
// IPv6CP's (the lease's link-local address among ic's addresses in the
// config in force; ok false until IPv6CP has opened), elsewhere the
// EUI-64 one netstack generates from the MAC.
func wanLinkLocal(ic config.Interface, ifc *stack.Interface) (addr netip.Addr, ok bool) {
	if ic.PPPoE == nil {
		return linkLocal(ifc.MAC()), true
	}
	for _, p := range ic.Addresses {
		if a := p.Addr(); a.Is6() && a.IsLinkLocalUnicast() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// PPPoEStatus fills the status page's PPPoE sections: each session's
// Status with the interface's data-path counters added ("path_*"; the
// drops "pppoe_not_session" and "pppoe_down" are the interface's).
func (m *Manager) PPPoEStatus() []status.PPPoE {
	var out []status.PPPoE
	for _, s := range m.sorted() {
		l, ok := s.impl.(*pppoelink.Link)
		if !ok {
			continue
		}
		st := l.Status()
		// The data path's own counters (stack/pppoe.go), beside the
		// session's: they reach the page and gvrouter_pppoe_counter_total.
		ps := s.ifc.Stats().PPPoE
		st.Counters["path_decapsulated"] = ps.Decapsulated
		st.Counters["path_encapsulated"] = ps.Encapsulated
		st.Counters["path_mss_clamped_in"] = ps.MSSClampedIn
		out = append(out, status.PPPoE{Interface: s.ifc.Name(), Status: st})
	}
	return out
}
