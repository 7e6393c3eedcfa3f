package svc

import (
	"net"
	"net/netip"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp6client"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/stack"
)

// The DHCPv6 client of the delegating wan interface (ipv6: {pd: N}) asks
// the ISP for a prefix (IA_PD); what it holds is applied by the reload path
// (learned.WithIPv6): each lan interface's ::1 in its /64 of it, the
// unassigned rest refused, the ISP's DNS servers as upstreams. It runs on
// the interface's raw frames to UDP 546 at its link-local address (IPv6 is
// routed, not translated: no NAT port to reserve).

// DHCP6ClientPrefix names the DHCPv6 client among the running services.
const DHCP6ClientPrefix = "dhcp6client "

// dhcp6ClientSettings is what a reload compares: a change restarts the
// client (its lease file lets it confirm the same prefix by Rebind).
type dhcp6ClientSettings struct {
	MAC         string
	SrcAddr     netip.Addr // wanLinkLocal: a new PPPoE session's restarts it
	PDLength    int
	WantAddress bool
	Release     bool
	DUIDFile    string
	LeaseFile   string
}

// dhcp6ClientSpec is the DHCPv6 client of the delegating wan interface;
// ok is false while it has no link-local address to speak from yet (a
// PPPoE session before IPv6CP opened).
func dhcp6ClientSpec(e *env, ic config.Interface) (sp spec, ok bool, err error) {
	ifc := e.Interface(ic.Name)
	if ifc == nil {
		return spec{}, false, errNoInterface(ic.Name)
	}
	src, ok := wanLinkLocal(ic, ifc)
	if !ok {
		return spec{}, false, nil
	}
	dir, err := e.Dir("dhcp6")
	if err != nil {
		return spec{}, false, err
	}
	v := ic.IPv6OrDefault()
	set := dhcp6ClientSettings{
		MAC: ifc.MAC().String(), SrcAddr: src, PDLength: v.PD, WantAddress: v.Address, Release: v.Release,
		DUIDFile:  dir + "/duid",
		LeaseFile: dir + "/" + ic.Name + ".client.json",
	}
	return spec{spec: set, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startDHCP6Client(e, name, ic.Name, set)
	}}, true, nil
}

// startDHCP6Client runs the client on the interface's frames.
func startDHCP6Client(e *env, name, iface string, set dhcp6ClientSettings) (*Service, error) {
	s, err := e.newService(name, iface, set)
	if err != nil {
		return nil, err
	}
	ifc := s.ifc
	conn := rawudp.New6(ifc, dhcp6client.ClientPort, dhcpClientQueue)
	s.undo = append(s.undo, func() { conn.Close() })
	ll := set.SrcAddr
	tap := dstTap{conn: conn, accept: func(dst netip.Addr) bool { return dst == ll }}
	remove, err := ifc.AddTap(stack.MatchUDP6(dhcp6client.ClientPort), tap)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, remove)
	log := e.Log.With("service", name)
	cl, err := dhcp6client.New(dhcp6client.Config{
		Transport: conn, HWAddr: ifc.MAC(), SrcAddr: ll, PDLength: set.PDLength, WantAddress: set.WantAddress,
		DUIDFile: set.DUIDFile, LeaseFile: set.LeaseFile, ReleaseOnStop: set.Release, Logger: log,
		OnChange: func(l *dhcp6client.Lease) {
			e.Post(name, learned.Change{Owner: s, Iface: iface, PD: delegationOf(l)})
		},
	})
	if err != nil {
		return s.abort(err)
	}
	s.impl = cl
	e.start(s, cl.Run)
	return s, nil
}

// delegationOf turns the client's lease into what the router applies: its
// first delegated prefix short enough to carve /64s from (an ISP hands
// out one; a second is ignored), nil for none.
func delegationOf(l *dhcp6client.Lease) *learned.Delegation {
	if l == nil {
		return nil
	}
	for _, p := range l.Prefixes {
		if p.Prefix.Addr().Is6() && p.Prefix.Bits() <= config.LANPrefixLength {
			return &learned.Delegation{
				Prefix: p.Prefix.Masked(), PreferredUntil: p.PreferredUntil, ValidUntil: p.ValidUntil,
				DNS: append([]netip.Addr(nil), l.DNS...), Domains: append([]string(nil), l.Domains...),
			}
		}
	}
	return nil
}

// DHCP6ClientStatus fills the status page's delegation section; nil
// when no client runs.
func (m *Manager) DHCP6ClientStatus() *status.DHCPv6Client {
	for _, s := range m.sorted() {
		cl, ok := s.impl.(*dhcp6client.Client)
		if !ok {
			continue
		}
		st := cl.Status()
		if st.LeaseFileError != "" {
			st.LastError = joinNonEmpty(st.LastError, st.LeaseFileError)
		}
		d := &status.DHCPv6Client{Interface: s.ifc.Name(), Status: st}
		return d
	}
	return nil
}

// linkLocal is the EUI-64 link-local address netstack generates for mac,
// the one the services send from.
func linkLocal(mac net.HardwareAddr) netip.Addr { return dhcp6client.LinkLocal(mac) }
