package svc

import (
	"net/netip"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp4server"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/stack"
)

// dhcp4ServerPrefix names the DHCPv4 servers among the running services.
const dhcp4ServerPrefix = "dhcp4server "

// dhcpServerQueue bounds the datagrams waiting for a DHCP server: a flood
// beyond it is counted (rawudp QueueFull) and dropped in the receive path.
const dhcpServerQueue = 256

// dhcp4ServerSpec is the DHCP server a lan interface's dhcp_server: asks
// for. cfg is the config in force.
func dhcp4ServerSpec(e *env, cfg *config.Config, ic config.Interface) (spec, error) {
	dir, err := e.Dir("dhcp4")
	if err != nil {
		return spec{}, err
	}
	var own netip.Prefix
	for _, p := range ic.Addresses {
		if p.Addr().Is4() {
			own = p
			break
		}
	}
	// The config's Validate ran the same settings through the server's
	// Validate; only the runtime's parts are added here.
	dc := ic.DHCPServer.ServerConfig(own)
	dc.LeaseFile = dir + "/" + ic.Name + ".json"
	if dc.Domain == "" {
		dc.Domain = cfg.DomainName()
	}
	// DNS nil hands out ServerAddr: the router's forwarder (dnsWanted).
	if err := dc.Validate(); err != nil {
		return spec{}, err
	}
	return spec{spec: dc, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startDHCP4Server(e, name, ic.Name, dc)
	}}, nil
}

// startDHCP4Server runs a DHCP server on the interface's raw frames:
// it must answer clients that have no address yet (RFC 2131 §4.1), which
// netstack sockets cannot.
func startDHCP4Server(e *env, name, iface string, dc dhcp4server.Config) (*Service, error) {
	ifc := e.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	conn := rawudp.New(ifc, dhcp4server.ServerPort, dhcpServerQueue)
	own := dc.ServerAddr
	tap := dstTap{conn: conn, accept: func(dst netip.Addr) bool {
		return dst == own || dst == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}}
	remove, err := ifc.AddTap(stack.MatchUDP4(dhcp4server.ServerPort), tap)
	if err != nil {
		return nil, err
	}
	set := dc
	dc.Log = e.Log.With("service", name)
	var srv *dhcp4server.Server
	// On the server's goroutine: the forwarder's host names, never the
	// runtime's lock.
	dc.OnChange = func() { e.hosts.refresh() }
	srv, err = dhcp4server.New(dc, conn)
	if err != nil {
		remove()
		return nil, err
	}
	e.hosts.setServer(iface, srv)
	s := &Service{name: name, spec: set, ifc: ifc, impl: srv, note: srv.Status().LeaseFileProblem, undo: []func(){
		remove, func() { conn.Close() }, func() { e.hosts.setServer(iface, nil) }}}
	e.start(s, srv.Run)
	return s, nil
}

// DHCP4ServersStatus fills the status page's DHCP server sections.
func (m *Manager) DHCP4ServersStatus() []status.DHCPServer {
	var out []status.DHCPServer
	for _, s := range m.sorted() {
		srv, ok := s.impl.(*dhcp4server.Server)
		if !ok {
			continue
		}
		st := srv.Status()
		st.LeaseFileError = joinNonEmpty(m.leaseFileProblems[s.ifc.Name()], st.LeaseFileError)
		d := status.DHCPServer{Interface: s.ifc.Name(), Status: st}
		out = append(out, d)
	}
	return out
}
