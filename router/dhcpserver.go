package router

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dhcp4server"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/gvrouter/gvrouter/stack"
)

// dhcpServerQueue bounds the datagrams waiting for a DHCP server: a flood
// beyond it is counted (rawudp QueueFull) and dropped in the receive path.
const dhcpServerQueue = 256

// dhcpServerSpec is the DHCP server a lan interface's dhcp_server: asks
// for. cfg is the config in force.
func (r *Router) dhcpServerSpec(cfg *config.Config, ic config.Interface) (serviceSpec, error) {
	s := ic.DHCPServer
	var own netip.Prefix
	for _, p := range ic.Addresses {
		if p.Addr().Is4() {
			own = p
			break
		}
	}
	dir, err := r.serviceDir("dhcp4")
	if err != nil {
		return serviceSpec{}, err
	}
	dc := dhcp4server.Config{
		ServerAddr: own.Addr(),
		Subnet:     own.Masked(),
		RangeStart: s.RangeStart,
		RangeEnd:   s.RangeEnd,
		LeaseTime:  s.LeaseTimeOrDefault(),
		Router:     s.Router,
		DNS:        s.DNS,
		Domain:     s.Domain,
		MTU:        s.MTU,
		NTP:        s.NTP,
		LeaseFile:  dir + "/" + ic.Name + ".json",
		// 0 = the server's defaults.
		NewLeaseBurst: s.NewLeaseBurst,
		NewLeaseRate:  float64(s.NewLeasesPerMinute) / 60,
	}
	if dc.Domain == "" {
		dc.Domain = cfg.DomainName()
	}
	// DNS nil hands out ServerAddr: the router's forwarder (dnsWanted).
	for _, rt := range s.Routes {
		dc.Routes = append(dc.Routes, dhcp4server.Route{To: rt.To, Via: rt.Via})
	}
	for _, st := range s.Static {
		dc.Static = append(dc.Static, dhcp4server.StaticLease{MAC: st.MAC, Addr: st.Address, Hostname: st.Hostname})
	}
	if err := dc.Validate(); err != nil {
		return serviceSpec{}, err
	}
	return serviceSpec{spec: dc, iface: ic.Name, start: func(r *Router, name string) (*runningService, error) {
		return r.startDHCPServerLocked(name, ic.Name, dc)
	}}, nil
}

// startDHCPServerLocked runs a DHCP server on the interface's raw frames:
// it must answer clients that have no address yet (RFC 2131 §4.1), which
// netstack sockets cannot. r.mu must be held.
func (r *Router) startDHCPServerLocked(name, iface string, dc dhcp4server.Config) (*runningService, error) {
	ifc := r.net.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	conn := rawudp.New(ifc, 67, dhcpServerQueue)
	own := dc.ServerAddr
	tap := dstTap{conn: conn, accept: func(dst netip.Addr) bool {
		return dst == own || dst == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}}
	remove, err := ifc.AddTap(stack.TapMatch{EtherType: 0x0800, IPProto: 17, DstPort: 67}, tap)
	if err != nil {
		return nil, err
	}
	spec := dc
	dc.Log = r.log.With("service", name)
	var srv *dhcp4server.Server
	// On the server's goroutine: the forwarder's host names, never r.mu.
	dc.OnChange = func() { r.dnsHosts.refresh() }
	srv, err = dhcp4server.New(dc, conn)
	if err != nil {
		remove()
		return nil, err
	}
	if p := srv.Status().LeaseFileProblem; p != "" {
		r.leaseFileProblems[ifc.Name()] = p
	}
	r.dnsHosts.setServer(iface, srv)
	s := &runningService{name: name, spec: spec, ifc: ifc, impl: srv, undo: []func(){
		remove, func() { conn.Close() }, func() { r.dnsHosts.setServer(iface, nil) }}}
	r.startService(s, srv.Run)
	return s, nil
}

// dstTap is a rawudp.Conn, IPv4 or IPv6, that takes only datagrams to
// the addresses accept allows: a DHCP server must not steal a LAN host's
// forwarded traffic to some other server's port, and the DHCPv6 client
// takes only what is sent to its link-local address. The tap's match
// fixes the frames' EtherType, so each Deliver sees one family.
type dstTap struct {
	conn   *rawudp.Conn
	accept func(dst netip.Addr) bool
}

// Deliver implements stack.Tap.
func (t dstTap) Deliver(frame []byte) bool {
	var dst netip.Addr
	switch {
	case len(frame) < 14:
		return false
	case binary.BigEndian.Uint16(frame[12:]) == 0x86dd:
		if len(frame) < 14+40 {
			return false
		}
		dst = netip.AddrFrom16([16]byte(frame[14+24 : 14+40]))
	default:
		if len(frame) < 14+20 {
			return false
		}
		dst = netip.AddrFrom4([4]byte(frame[14+16 : 14+20]))
	}
	if !t.accept(dst) {
		return false
	}
	return t.conn.Deliver(frame)
}

// dhcpServersStatusLocked fills the status page's DHCP server sections.
// r.mu must be held.
func (r *Router) dhcpServersStatusLocked() []status.DHCPServer {
	var out []status.DHCPServer
	for _, s := range r.sortedServicesLocked() {
		srv, ok := s.impl.(*dhcp4server.Server)
		if !ok {
			continue
		}
		st := srv.Status()
		ss := srv.Stats()
		d := status.DHCPServer{
			Interface: s.ifc.Name(),
			PoolStart: st.RangeStart, PoolEnd: st.RangeEnd,
			PoolSize: st.PoolSize, PoolUsed: st.PoolUsed,
			Offered: st.Offered, Declined: st.Declined,
			LeaseFileError: joinNonEmpty(r.leaseFileProblems[s.ifc.Name()], st.LeaseFileError),
			Counters: map[string]uint64{
				"received": ss.Received.Load(), "discover": ss.Discover.Load(), "request": ss.Request.Load(),
				"decline": ss.Decline.Load(), "release": ss.Release.Load(), "inform": ss.Inform.Load(),
				"offer": ss.Offer.Load(), "ack": ss.Ack.Load(), "nak": ss.Nak.Load(),
				"pool_exhausted": ss.PoolExhausted.Load(), "other_server": ss.OtherServer.Load(),
				"no_record": ss.NoRecord.Load(), "expired": ss.Expired.Load(), "send_errors": ss.SendErrors.Load(),
				"lease_writes": ss.LeaseWrites.Load(), "lease_write_errors": ss.LeaseWriteErrors.Load(),
				"lease_file_corrupt": ss.LeaseFileCorrupt.Load(),
			},
			Drops: map[string]uint64{},
		}
		for i := range ss.Drops {
			d.Drops[dhcp4server.DropReason(i).String()] = ss.Drops[i].Load()
		}
		for _, l := range st.Leases {
			d.Leases = append(d.Leases, status.DHCPLease{
				MAC: l.MAC.String(), Address: l.Addr, Hostname: l.Hostname, Expiry: l.Expiry,
				Static: l.Static, State: string(l.State),
			})
		}
		out = append(out, d)
	}
	return out
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// sortedServicesLocked returns the running services by name.
func (r *Router) sortedServicesLocked() []*runningService {
	out := make([]*runningService, 0, len(r.services))
	for _, s := range r.services {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *runningService) int { return strings.Compare(a.name, b.name) })
	return out
}
