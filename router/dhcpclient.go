package router

import (
	"context"
	"net/netip"
	"strings"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/stack"
)

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

// dhcpClientSpec is the DHCP client of an interface with "dhcp" among its
// addresses.
func (r *Router) dhcpClientSpec(ic config.Interface) (serviceSpec, error) {
	dir, err := r.serviceDir("dhcp4")
	if err != nil {
		return serviceSpec{}, err
	}
	minMTU := config.MinMTUConntrack
	for _, p := range ic.Addresses {
		if p.Addr().Is6() {
			minMTU = config.MinMTUIPv6 // netstack cannot forward IPv6 below 1280
		}
	}
	ifc := r.net.Interface(ic.Name)
	if ifc == nil {
		return serviceSpec{}, errNoInterface(ic.Name)
	}
	set := dhcpClientSettings{
		MAC: ifc.MAC().String(), ClientID: string(ic.DHCP.ClientID), Hostname: ic.DHCP.Hostname,
		Release: ic.DHCP.Release, MinMTU: minMTU, LeaseFile: dir + "/" + ic.Name + ".client.json",
	}
	return serviceSpec{spec: set, iface: ic.Name, start: func(r *Router, name string) (*runningService, error) {
		return r.startDHCPClientLocked(name, ic.Name, set)
	}}, nil
}

// startDHCPClientLocked runs a DHCP client on the interface's raw frames
// (it has no address to send from until BOUND), with port 68 reserved in
// the NAT engine so that no LAN flow is translated onto it. r.mu must be
// held.
func (r *Router) startDHCPClientLocked(name, iface string, set dhcpClientSettings) (*runningService, error) {
	s, err := r.newServiceLocked(name, iface, set)
	if err != nil {
		return nil, err
	}
	ifc := s.ifc
	release, err := r.nat.ReservePortAny(natengine.ProtoUDP, 68)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, release)
	conn := rawudp.New(ifc, 68, dhcpClientQueue)
	s.undo = append(s.undo, func() { conn.Close() })
	remove, err := ifc.AddTap(stack.TapMatch{EtherType: 0x0800, IPProto: 17, DstPort: 68}, conn)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, remove)
	prober, err := dhcp4client.NewARPProber(dhcp4client.ARPProberConfig{Link: ifc})
	if err != nil {
		return s.abort(err)
	}
	removeARP, err := ifc.AddTap(stack.TapMatch{EtherType: 0x0806}, prober)
	if err != nil {
		return s.abort(err)
	}
	s.undo = append(s.undo, removeARP)
	var clientID []byte
	if set.ClientID != "" {
		clientID = []byte(set.ClientID)
	}
	log := r.log.With("service", name)
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
			r.leaseQ.Post(name, learned.Change{Owner: s, Iface: iface, Lease: appliedOf(new)})
		},
	})
	if err != nil {
		return s.abort(err)
	}
	s.impl = cl
	r.startService(s, cl.Run)
	return s, nil
}

// appliedOf turns a client's lease into the config it adds.
func appliedOf(l *dhcp4client.Lease) *learned.Lease {
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

// leaseLoop applies the DHCP clients' lease changes, a batch at a time,
// by the reload path, until ctx ends.
func (r *Router) leaseLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.leaseQ.Kick:
		}
		changes := r.leaseQ.Take()
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return
		}
		changed := false
		for name, c := range changes {
			if s := r.services[name]; s == nil || s != c.Owner {
				continue // from a client a reload replaced
			}
			switch {
			case strings.HasPrefix(name, dhcp4ClientPrefix):
				changed = r.learned.TakeLease(c.Iface, c.Lease) || changed
			case strings.HasPrefix(name, raLearnerPrefix):
				changed = r.learned.TakeRA(c.Iface, c.RA) || changed
			case strings.HasPrefix(name, dhcp6ClientPrefix):
				changed = r.learned.TakeDelegation(c.Iface, c.PD, r.userCfg) || changed
			}
		}
		if changed {
			if err := r.reloadLocked(r.userCfg); err != nil {
				r.log.Error("applying DHCP lease", "err", err)
			}
		}
		r.mu.Unlock()
	}
}

// dhcpClientsStatusLocked fills the status page's WAN lease sections.
// r.mu must be held.
func (r *Router) dhcpClientsStatusLocked() []status.DHCPClient {
	var out []status.DHCPClient
	for _, s := range r.sortedServicesLocked() {
		cl, ok := s.impl.(*dhcp4client.Client)
		if !ok {
			continue
		}
		st := cl.Status()
		ss := cl.Stats()
		iface := s.ifc.Name()
		c := status.DHCPClient{
			Interface: iface,
			State:     strings.ToLower(st.State),
			LastError: joinNonEmpty(r.learned.LeaseLost(iface), joinNonEmpty(st.LastError, st.LeaseFileError)),
			Counters: map[string]uint64{
				"discover": ss.Discovers.Load(), "offer": ss.Offers.Load(), "request": ss.Requests.Load(),
				"ack": ss.Acks.Load(), "nak": ss.Naks.Load(), "decline": ss.Declines.Load(),
				"release": ss.Releases.Load(), "renew": ss.Renewals.Load(), "rebind": ss.Rebinds.Load(),
				"expired": ss.Expiries.Load(), "mtu_ignored": ss.MTUIgnored.Load(),
				"lease_file_errors": ss.LeaseFileErrors.Load(), "send_errors": ss.SendErrors.Load(),
				"probe_errors": ss.ProbeErrors.Load(),
			},
			Drops: map[string]uint64{
				"malformed": ss.Drops.Malformed.Load(), "not_reply": ss.Drops.NotReply.Load(),
				"hwaddr": ss.Drops.HWAddr.Load(), "unexpected": ss.Drops.Unexpected.Load(),
				"xid": ss.Drops.XID.Load(), "type": ss.Drops.Type.Load(), "server_id": ss.Drops.ServerID.Load(),
				"client_id": ss.Drops.ClientID.Load(), "address": ss.Drops.Address.Load(),
				"lease_time": ss.Drops.LeaseTime.Load(),
			},
		}
		if l := st.Lease; l != nil {
			c.Address, c.Server, c.Routers, c.DNS, c.Domain, c.MTU = l.Addr, l.Server, l.Routers, l.DNS, l.Domain, l.MTU
			c.Acquired, c.Renew, c.Rebind, c.Expiry = l.Acquired, l.T1, l.T2, l.Expiry
			for _, rt := range l.Routes {
				c.Routes = append(c.Routes, status.Route{To: rt.Dst.String(), Via: rt.Via.String()})
			}
		}
		out = append(out, c)
	}
	return out
}
