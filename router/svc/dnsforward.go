package svc

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/dnsforward"
)

// The DNS forwarder answers on UDP and TCP port 53 of every lan interface's
// addresses, in netstack; it never listens on a wan interface. It runs when
// the config has dns:, and also without it whenever a DHCP server hands out
// the router's own address as DNS (its default, as OpenWrt's dnsmasq does):
// a LAN host told to ask the router must get an answer. Its addresses and
// upstreams change in place (dnsLive): a new delegated /64 on a lan keeps
// its cache.

// dnsServiceName is the forwarder's name among the running services.
const dnsServiceName = "dns"

// dnsPort is the port the forwarder serves.
const dnsPort = 53

// dnsSettings is what a reload compares: a change restarts the forwarder
// (and empties its cache).
type dnsSettings struct {
	Domain    string
	CacheSize int
	MinTTL    time.Duration
	MaxTTL    time.Duration
}

// dnsLive is what the running forwarder takes in place (updateDNS),
// cache and queries in flight kept: the lan addresses change when a
// DHCPv6 delegation renumbers a lan, and dns.upstreams by a reload. The
// upstreams learnt from a WAN lease are in neither: a new lease only
// calls SetUpstreams.
type dnsLive struct {
	Listen    []netip.AddrPort
	Upstreams []netip.AddrPort // from dns.upstreams; nil = the WAN leases'
	LocalNets []netip.Prefix   // the lan subnets, answered locally by PTR
}

// dnsWanted reports whether cfg asks for the forwarder: a dns: section,
// or a DHCP server that hands out one of the router's own addresses.
func dnsWanted(cfg *config.Config) bool {
	if cfg.DNS != nil {
		return true
	}
	for _, ic := range cfg.Interfaces {
		if ic.Role != config.RoleLAN || ic.DHCPServer == nil {
			continue
		}
		if ic.DHCPServer.DNS == nil {
			return true // dhcp4server's default: ServerAddr
		}
		for _, p := range ic.Addresses {
			if slices.Contains(ic.DHCPServer.DNS, p.Addr()) {
				return true
			}
		}
	}
	return false
}

// dnsSpec is the forwarder cfg asks for; ok false when it asks for none.
func dnsSpec(cfg *config.Config) (sp spec, ok bool) {
	if !dnsWanted(cfg) {
		return spec{}, false
	}
	set := dnsSettings{Domain: cfg.DomainName(), CacheSize: config.DefaultDNSCache}
	var live dnsLive
	if d := cfg.DNS; d != nil {
		live.Upstreams = slices.Clone(d.Upstreams)
		if d.CacheSize > 0 {
			set.CacheSize = d.CacheSize
		}
		set.MinTTL, set.MaxTTL = d.MinTTL, d.MaxTTL
	}
	for _, ic := range cfg.Interfaces {
		if ic.Role != config.RoleLAN {
			continue
		}
		for _, p := range ic.Addresses {
			live.Listen = append(live.Listen, netip.AddrPortFrom(p.Addr(), dnsPort))
			live.LocalNets = append(live.LocalNets, p.Masked())
		}
	}
	return spec{
		spec: set,
		live: live,
		start: func(e *env, name string) (*Service, error) {
			return startDNS(e, name, set, live)
		},
		update: func(e *env, s *Service, live any) error {
			return updateDNS(e, s, live.(dnsLive))
		},
	}, true
}

// dnsUpstreams returns the upstreams in force for live, as the
// forwarder wants them: the file's, or the ones learned.
func dnsUpstreams(l Learned, live dnsLive) []netip.AddrPort {
	if live.Upstreams != nil {
		return live.Upstreams
	}
	var out []netip.AddrPort
	for _, a := range l.DNS() {
		out = append(out, netip.AddrPortFrom(a, dnsPort))
	}
	return out
}

// syncDNSUpstreams gives the running forwarder the upstreams of the
// leases in force, after a reload or a lease change, without restarting
// it (its cache stays).
func (m *Manager) syncDNSUpstreams() {
	s := m.services[dnsServiceName]
	if s == nil {
		return
	}
	ups := dnsUpstreams(m.env.learned, s.live.(dnsLive))
	f := s.impl.(*dnsforward.Forwarder)
	if cur := f.Status().Upstreams; !slices.Equal(cur, ups) {
		m.env.Log.Info("DNS upstreams", "upstreams", ups)
		f.SetUpstreams(ups)
	}
}

// updateDNS gives the running forwarder s its new addresses and lan
// subnets; the upstreams follow in syncDNSUpstreams.
func updateDNS(e *env, s *Service, live dnsLive) error {
	if len(live.Listen) == 0 {
		return errors.New("no lan interface has an address to listen on")
	}
	f := s.impl.(*dnsforward.Forwarder)
	f.SetLocalPrefixes(live.LocalNets)
	if err := f.SetListen(live.Listen); err != nil {
		return err
	}
	e.Log.Info("DNS forwarder updated in place", "service", s.name, "listen", live.Listen)
	return nil
}

// startDNS opens the forwarder's sockets and runs it.
func startDNS(e *env, name string, set dnsSettings, live dnsLive) (*Service, error) {
	if len(live.Listen) == 0 {
		return nil, errors.New("no lan interface has an address to listen on")
	}
	netw, nat := e.Sockets, e.NAT
	log := e.Log.With("service", name)
	f, err := dnsforward.New(dnsforward.Config{
		Upstreams:     dnsUpstreams(e.learned, live),
		Domain:        set.Domain,
		LocalPrefixes: live.LocalNets,
		MaxEntries:    set.CacheSize,
		MinTTL:        set.MinTTL,
		MaxTTL:        set.MaxTTL,
		DialUDP: func(_ context.Context, server netip.AddrPort, lport uint16) (net.Conn, error) {
			return netw.DialUDP(lport, server)
		},
		DialTCP: func(ctx context.Context, server netip.AddrPort) (net.Conn, error) {
			return netw.DialTCP(ctx, server)
		},
		// Each query's random source port (RFC 5452 §9.2) is kept out of
		// SNAT's hands on whatever WAN address routing picks.
		ReservePort: func(proto uint8, port uint16) (func(), bool) {
			release, err := nat.ReservePortAny(proto, port)
			return release, err == nil
		},
		// The sockets are netstack's; SetListen opens and closes them
		// as the lan addresses come and go, and Run's end closes all.
		ListenUDP: func(ap netip.AddrPort) (net.PacketConn, error) {
			pc, err := netw.ListenUDPConn(ap)
			if err != nil {
				return nil, err
			}
			return pc, nil
		},
		ListenTCP: func(ap netip.AddrPort) (net.Listener, error) {
			return netw.ListenTCP(ap)
		},
		Log: log,
	})
	if err != nil {
		return nil, err
	}
	if err := f.SetListen(live.Listen); err != nil {
		f.SetListen(nil) // close what did open
		return nil, err
	}
	s := &Service{name: name, spec: set, live: live, impl: f}
	e.hosts.setForwarder(f)
	s.undo = append(s.undo, func() { e.hosts.setForwarder(nil) })
	log.Info("DNS forwarder", "listen", live.Listen, "domain", set.Domain, "upstreams", f.Status().Upstreams)
	if len(f.Status().Upstreams) == 0 {
		log.Warn("DNS forwarder has no upstream yet (none in dns.upstreams, no WAN lease with DNS servers): " +
			"names other than the local ones get SERVFAIL until a lease brings one")
	}
	// Run serves SetListen's sockets until ctx ends, then closes them.
	e.start(s, f.Run)
	return s, nil
}

// DNSStatus fills the status page's DNS section; nil when the forwarder
// does not run.
func (m *Manager) DNSStatus() *status.DNS {
	s := m.services[dnsServiceName]
	if s == nil {
		return nil
	}
	live := s.live.(dnsLive)
	f := s.impl.(*dnsforward.Forwarder)
	d := &status.DNS{Status: f.Status()}
	source := "dhcp"
	if live.Upstreams != nil {
		source = "config"
	}
	for _, u := range d.Status.Upstreams {
		d.Upstreams = append(d.Upstreams, status.DNSUpstream{Address: u.String(), Source: source})
	}
	return d
}
