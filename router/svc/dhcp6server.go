package svc

import (
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp6server"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/stack"
)

// The stateless DHCPv6 server of each lan interface with ipv6.dhcpv6 on
// (the default) answers Information-requests with the router's forwarder as
// DNS server and the domain: hosts that see the O flag of the router's RAs
// ask it. It runs on the interface's raw frames (port 547), as the DHCPv4
// server does, and only where there is a DNS address to hand out: the
// forwarder runs and the interface has a non-link-local IPv6 address
// (static, or ::1 of its delegated /64).

// dhcp6RefreshTime is the Information Refresh Time handed out (RFC 8415
// §21.23): an hour, not the default day, because the DNS address changes
// with the delegation.
const dhcp6RefreshTime = time.Hour

// dhcp6ServerPrefix names the servers among the running services.
const dhcp6ServerPrefix = "dhcp6server "

// dhcp6ServerSpec is the stateless DHCPv6 server of lan interface ic, if
// it gets one. cfg is the config in force (delegated addresses included).
func dhcp6ServerSpec(e *env, cfg *config.Config, ic config.Interface) (spec, bool) {
	if ic.Role != config.RoleLAN || !cfg.IPv6Settings(&ic).DHCPv6 || !dnsWanted(cfg) {
		return spec{}, false
	}
	ifc := e.Interface(ic.Name)
	if ifc == nil {
		return spec{}, false
	}
	dns := lanDNS6(ic)
	if len(dns) == 0 {
		return spec{}, false
	}
	dc := dhcp6server.Config{
		HWAddr:      ifc.MAC(),
		Addr:        linkLocal(ifc.MAC()),
		DNS:         dns,
		Domains:     []string{cfg.DomainName()},
		RefreshTime: dhcp6RefreshTime,
	}
	if err := dc.Validate(); err != nil {
		e.Log.Error("stateless DHCPv6 server not started", "interface", ic.Name, "err", err)
		return spec{}, false
	}
	return spec{spec: dc, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startDHCP6Server(e, name, ic.Name, dc)
	}}, true
}

// lanDNS6 is the router's IPv6 DNS addresses on a lan interface: its
// addresses that are neither link-local nor multicast, where the
// forwarder listens (dnsSpec).
func lanDNS6(ic config.Interface) []netip.Addr {
	var out []netip.Addr
	for _, p := range ic.Addresses {
		a := p.Addr()
		if a.Is6() && !a.Is4In6() && !a.IsLinkLocalUnicast() && !a.IsMulticast() && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// startDHCP6Server runs the server on the interface's frames to UDP
// 547 at ff02::1:2 or its link-local address.
func startDHCP6Server(e *env, name, iface string, dc dhcp6server.Config) (*Service, error) {
	ifc := e.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	conn := rawudp.New6(ifc, dhcp6server.ServerPort, dhcpServerQueue)
	own := dc.Addr
	tap := dstTap{conn: conn, accept: func(dst netip.Addr) bool {
		return dst == own || dst == dhcp6server.AllRelayAgentsAndServers
	}}
	remove, err := ifc.AddTap(stack.MatchUDP6(dhcp6server.ServerPort), tap)
	if err != nil {
		return nil, err
	}
	set := dc
	dc.Log = e.Log.With("service", name)
	srv, err := dhcp6server.New(dc, conn)
	if err != nil {
		remove()
		conn.Close()
		return nil, err
	}
	s := &Service{name: name, spec: set, ifc: ifc, impl: srv, undo: []func(){remove, func() { conn.Close() }}}
	e.start(s, srv.Run)
	return s, nil
}

// DHCP6ServersStatus fills the status page's stateless DHCPv6
// sections.
func (m *Manager) DHCP6ServersStatus() []status.DHCPv6Server {
	var out []status.DHCPv6Server
	for _, s := range m.sorted() {
		srv, ok := s.impl.(*dhcp6server.Server)
		if !ok {
			continue
		}
		d := status.DHCPv6Server{Interface: s.ifc.Name(), Status: srv.Status()}
		out = append(out, d)
	}
	return out
}
