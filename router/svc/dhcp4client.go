package svc

import (
	"net/netip"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/stack"
)

// DHCP4ClientPrefix names the DHCPv4 clients among the running services
// (the name is the prefix and the interface).
const DHCP4ClientPrefix = "dhcp4client "

// dhcpClientQueue bounds the DHCP replies waiting for a client.
const dhcpClientQueue = 64

// dhcpClientSettings is what a reload compares: a change restarts the
// client (its lease file lets it INIT-REBOOT to the same address).
type dhcpClientSettings struct {
	MAC       string
	ClientID  string
	Hostname  string
	Release   bool
	MinMTU    int
	LeaseFile string
}

// dhcp4ClientSpec is the DHCP client of an interface with "dhcp" among its
// addresses.
func dhcp4ClientSpec(e *env, ic config.Interface) (spec, error) {
	dir, err := e.Dir("dhcp4")
	if err != nil {
		return spec{}, err
	}
	minMTU := config.MinMTUConntrack
	for _, p := range ic.Addresses {
		if p.Addr().Is6() {
			minMTU = config.MinMTUIPv6 // netstack cannot forward IPv6 below 1280
		}
	}
	ifc := e.Interface(ic.Name)
	if ifc == nil {
		return spec{}, errNoInterface(ic.Name)
	}
	set := dhcpClientSettings{
		MAC: ifc.MAC().String(), ClientID: string(ic.DHCP.ClientID), Hostname: ic.DHCP.Hostname,
		Release: ic.DHCP.Release, MinMTU: minMTU, LeaseFile: dir + "/" + ic.Name + ".client.json",
	}
	return spec{spec: set, iface: ic.Name, start: func(e *env, name string) (*Service, error) {
		return startDHCP4Client(e, name, ic.Name, set)
	}}, nil
}

// startDHCP4Client runs a DHCP client on the interface's raw frames
// (it has no address to send from until BOUND), with port 68 reserved in
// the NAT engine so that no LAN flow is translated onto it.
func startDHCP4Client(e *env, name, iface string, set dhcpClientSettings) (*Service, error) {
	s, err := e.newService(name, iface, set)
	if err != nil {
		return nil, err
	}
	ifc := s.ifc
	release, err := e.NAT.ReservePortAny(natengine.ProtoUDP, 68)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, release)
	conn := rawudp.New(ifc, dhcp4client.ClientPort, dhcpClientQueue)
	s.undo = append(s.undo, func() { conn.Close() })
	remove, err := ifc.AddTap(stack.MatchUDP4(dhcp4client.ClientPort), conn)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, remove)
	probe := e.ARPProbe
	probe.Link = ifc
	prober, err := dhcp4client.NewARPProber(probe)
	if err != nil {
		return s.abort(err)
	}
	removeARP, err := ifc.AddTap(stack.MatchARP(), prober)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, removeARP)
	var clientID []byte
	if set.ClientID != "" {
		clientID = []byte(set.ClientID)
	}
	log := e.Log.With("service", name)
	cl, err := dhcp4client.New(dhcp4client.Config{
		Transport: conn, HWAddr: ifc.MAC(), ClientID: clientID, Hostname: set.Hostname,
		LeaseFile: set.LeaseFile, Release: set.Release, MinMTU: set.MinMTU, Prober: prober,
		Logger: log,
		OnLease: func(old, new *dhcp4client.Lease) {
			if new == nil {
				log.Warn("DHCP lease lost: address and routes removed", "interface", iface, "address", old.Addr)
			} else {
				log.Info("DHCP lease", "interface", iface, "address", new.Addr, "server", new.Server,
					"routes", len(new.Routes), "dns", new.DNS, "mtu", new.MTU, "expiry", new.Expiry)
			}
			e.Post(name, learned.Change{Owner: s, Iface: iface, Lease: leaseOf(new)})
		},
	})
	if err != nil {
		return s.abort(err)
	}
	s.impl = cl
	e.start(s, cl.Run)
	return s, nil
}

// leaseOf turns a client's lease into the config it adds.
func leaseOf(l *dhcp4client.Lease) *learned.Lease {
	if l == nil {
		return nil
	}
	a := &learned.Lease{Addr: l.Addr, MTU: l.MTU, DNS: append([]netip.Addr(nil), l.DNS...)}
	for _, rt := range l.Routes {
		cr := config.Route{To: rt.Dst}
		if rt.Via.IsValid() && !rt.Via.IsUnspecified() {
			cr.Via = rt.Via
		}
		a.Routes = append(a.Routes, cr)
	}
	return a
}

// DHCP4ClientsStatus fills the status page's WAN lease sections; lost
// is the note on an interface's lost lease (learned.State.LeaseLost).
func (m *Manager) DHCP4ClientsStatus(lost func(iface string) string) []status.DHCPClient {
	var out []status.DHCPClient
	for _, s := range m.sorted() {
		cl, ok := s.impl.(*dhcp4client.Client)
		if !ok {
			continue
		}
		st := cl.Status()
		iface := s.ifc.Name()
		st.LastError = joinNonEmpty(lost(iface), joinNonEmpty(st.LastError, st.LeaseFileError))
		c := status.DHCPClient{Interface: iface, Status: st}
		out = append(out, c)
	}
	return out
}
