package router

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	"github.com/gvrouter/gvrouter/portmap/natpmp"
	"github.com/gvrouter/gvrouter/portmap/pcp"
	"github.com/gvrouter/gvrouter/portmap/pmpd"
	"github.com/gvrouter/gvrouter/portmap/upnp"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/svcstats"
	"github.com/gvrouter/gvrouter/statedir"
)

// Port mapping (config port_mapping:, packages portmap/...) as
// portmap/doc.go's "Wiring" asks: one table on the NAT engine and the
// wan interface, its state file in the state directory, and the servers
// on the inside zones' interfaces only (config.PortMapIfaces decides
// which): NAT-PMP and PCP on UDP 5351 of each inside address, UPnP's
// HTTP server on TCP 5000 of each, its SSDP on UDP 1900 of each
// interface of a zone permitted to map ports, joined to 239.255.255.250
// there. A zone not permitted (a guest zone) is served only to be
// refused: NAT-PMP and PCP answer NOT_AUTHORIZED, UPnP actions 606, and
// it gets no SSDP answers. No socket is ever opened on a wan interface:
// a request from the WAN side gets no answer at all (miniupnpd's
// behaviour), as the WAN zone's input policy drops it first.

// Ports and group of the servers.
const (
	pmpPort  = config.PMPPort // NAT-PMP and PCP (RFC 6886 section 3, RFC 6887 section 19.1)
	ssdpPort = 1900           // UDA 1.1 section 1.1.2
)

// ssdpGroup is SSDP's IPv4 multicast group (UDA 1.1 section 1.1.2).
var ssdpGroup = netip.MustParseAddr("239.255.255.250")

// State files in the state directory.
const (
	portmapStateFile = "portmap.json"     // the mappings and the epoch
	upnpUUIDFile     = "portmap/uuid.txt" // the UPnP device's UUID, kept so clients know it after a restart
)

// portMapper runs port_mapping:. All of it is under Router.mu except
// ext, which the table reads on the servers' goroutines.
type portMapper struct {
	// policy is the section whose policy the table was built with, wan
	// the interface it maps on; nil table = off (or no wan address yet).
	policy *config.PortMapping
	wan    string
	wanIf  natengine.Iface // wan's NAT engine interface: a reload that recreates it rebuilds the table
	table  *portmap.Table
	// ext is the wan's first IPv4 address, invalid while none.
	ext atomic.Pointer[netip.Addr]
	// stopTable ends the table's sweeper and waits for it.
	stopTable func()

	// srv is the servers running for srvKey (the protocols, the LAN
	// addresses, the table); nil when none runs.
	srv    *portMapServers
	srvKey string
}

// portMapServers is one set of running servers; stop ends them all.
type portMapServers struct {
	natpmp *natpmp.Handler
	pcp    *pcp.Handler
	pmpd   []*pmpd.Server
	upnp   []*upnp.Server
	ctx    context.Context // ends with stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// listen names every socket held, for the status page.
	listen []string
	// announce cancels the restart announcements in progress.
	announce context.CancelFunc
}

func (s *portMapServers) stop() {
	s.cancel()
	s.wg.Wait()
}

// syncPortMapLocked brings port mapping in line with r.cfg; called by
// New and every reload after the NAT engine has the new interfaces.
// r.mu must be held.
func (r *Router) syncPortMapLocked() error {
	pm := &r.portmap
	cfg := r.cfg.PortMapping
	wan, ext := portMapWAN(r.cfg)
	if !cfg.Enabled() || !ext.IsValid() {
		if cfg.Enabled() && pm.table != nil {
			r.log.Warn("port mapping paused: the wan has no IPv4 address", "interface", wan)
		}
		r.stopPortMapLocked()
		return nil
	}
	oldExt := pm.ext.Load()
	pm.ext.Store(&ext)
	var errs []error
	wanIf, _ := r.net.NATIface(wan)
	if pm.table == nil || !samePortMapPolicy(pm.policy, cfg) || pm.wan != wan || pm.wanIf != wanIf {
		r.stopPortMapLocked()
		pm.ext.Store(&ext)
		if err := r.startPortMapTableLocked(cfg, wan); err != nil {
			return err
		}
		oldExt = nil // a new table announces its epoch
	}
	key := portMapServerKey(r.cfg, pm.table)
	if pm.srv == nil || pm.srvKey != key {
		if pm.srv != nil {
			pm.srv.stop()
			pm.srv = nil
		}
		srv, err := r.startPortMapServersLocked(cfg)
		if err != nil {
			errs = append(errs, err)
		}
		pm.srv, pm.srvKey = srv, key
		oldExt = nil
	}
	if oldExt == nil || *oldExt != ext {
		// RFC 6886 section 3.2.1, RFC 6887 section 14.1.3: a new
		// server, a new epoch or a new external address is announced.
		r.announcePortMapLocked()
	}
	return errors.Join(errs...)
}

// portMapWAN returns the wan interface mappings are made on and its
// first IPv4 address (invalid while it has none, e.g. before the DHCP
// lease): the first wan interface with one, else the first wan.
func portMapWAN(cfg *config.Config) (string, netip.Addr) {
	first := ""
	for _, ic := range cfg.Interfaces {
		if ic.Role != config.RoleWAN {
			continue
		}
		if first == "" {
			first = ic.Name
		}
		for _, p := range ic.Addresses {
			if p.Addr().Is4() {
				return ic.Name, p.Addr()
			}
		}
	}
	return first, netip.Addr{}
}

// portMapInside returns the interfaces the servers listen on
// (config.PortMapIfaces), the prefixes of those whose zone may map
// ports (inside) and of those whose zone may not (refused), masked.
func portMapInside(cfg *config.Config) (ifaces []config.PortMapIface, inside, refused []netip.Prefix) {
	ifaces = cfg.PortMapIfaces()
	for _, pi := range ifaces {
		for _, p := range pi.Addrs {
			if pi.Permitted {
				inside = append(inside, p.Masked())
			} else {
				refused = append(refused, p.Masked())
			}
		}
	}
	return ifaces, inside, refused
}

// portMapServerKey names what the running servers depend on: the
// protocols, the LAN addresses and the table.
func portMapServerKey(cfg *config.Config, t *portmap.Table) string {
	ifaces, _, _ := portMapInside(cfg)
	pm := cfg.PortMapping
	key := fmt.Sprintf("%p natpmp=%v pcp=%v upnp=%v", t, pm.NATPMP, pm.PCP, pm.UPnP)
	for _, pi := range ifaces {
		key += fmt.Sprintf(" %s/%s/%v%v", pi.Name, pi.Zone, pi.Permitted, pi.Addrs)
	}
	return key
}

// samePortMapPolicy reports whether a and b give the table the same
// policy; the protocols' on/off is not part of it, nor are the zones
// (the servers' business: a zone that loses its permission keeps its
// mappings until they expire, and cannot renew them).
func samePortMapPolicy(a, b *config.PortMapping) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.NATPMP, x.PCP, x.UPnP, x.Zones = true, true, true, nil
	y.NATPMP, y.PCP, y.UPnP, y.Zones = true, true, true, nil
	return x.Equal(&y)
}

// portMapPolicy translates the section into the table's policy.
func portMapPolicy(c *config.PortMapping) portmap.Policy {
	p := portmap.Policy{Secure: c.Secure, MaxPerHost: c.MaxPerHost, MaxTotal: c.MaxTotal, MinLifetime: c.MinLifetime, MaxLifetime: c.MaxLifetime}
	for _, rc := range c.Rules {
		p.Rules = append(p.Rules, portmap.Rule{
			Allow: rc.Allow, Inside: rc.Inside,
			External: portmap.PortRange{First: rc.External[0], Last: rc.External[1]},
			Internal: portmap.PortRange{First: rc.Internal[0], Last: rc.Internal[1]},
		})
	}
	return p
}

// startPortMapTableLocked builds the table on the wan interface, restores
// the state file into it and starts its sweeper. r.mu must be held.
func (r *Router) startPortMapTableLocked(cfg *config.PortMapping, wan string) error {
	pm := &r.portmap
	wanIf, ok := r.net.NATIface(wan)
	if !ok {
		return fmt.Errorf("port mapping: wan interface %s is not in the netstack", wan)
	}
	log := r.log.With("component", "portmap")
	t, err := portmap.New(portmap.Config{
		Policy: portMapPolicy(cfg),
		NAT:    r.nat.engine,
		WAN:    wanIf,
		ExternalAddr: func() netip.Addr {
			if a := pm.ext.Load(); a != nil {
				return *a
			}
			return netip.Addr{}
		},
		StateFile: filepath.Join(r.state.dir, portmapStateFile),
		Logf:      func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) },
		Now:       r.portmapNow,
	})
	if err != nil {
		return fmt.Errorf("port mapping: %w", err)
	}
	n, err := t.Restore()
	if err != nil {
		log.Warn("port mapping state", "err", err)
	}
	log.Info("port mapping table", "wan", wan, "restored", n)
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run(ctx)
	}()
	pm.table, pm.policy, pm.wan, pm.wanIf = t, cfg, wan, wanIf
	pm.stopTable = func() {
		cancel()
		<-done
	}
	return nil
}

// stopPortMapLocked stops the servers and the table and takes the
// table's mappings out of the NAT engine; the state file keeps them for
// the next table. r.mu must be held.
func (r *Router) stopPortMapLocked() {
	pm := &r.portmap
	if pm.srv != nil {
		pm.srv.stop()
		pm.srv, pm.srvKey = nil, ""
	}
	if pm.table == nil {
		return
	}
	pm.stopTable()
	for _, m := range pm.table.Mappings() {
		r.nat.engine.RemovePortMapping(m.Proto, pm.wanIf, m.External)
	}
	pm.table, pm.policy, pm.wan, pm.stopTable = nil, nil, "", nil
	pm.ext.Store(nil)
}

// startPortMapServersLocked opens the servers' sockets on the LAN-side
// interfaces and starts them. A socket that cannot be opened is
// reported; the others run. r.mu must be held.
func (r *Router) startPortMapServersLocked(cfg *config.PortMapping) (*portMapServers, error) {
	pm := &r.portmap
	ifaces, inside, refused := portMapInside(r.cfg)
	ctx, cancel := context.WithCancel(r.ctx)
	s := &portMapServers{ctx: ctx, cancel: cancel, announce: func() {}}
	if cfg.NATPMP {
		s.natpmp = &natpmp.Handler{Table: pm.table, Inside: inside, Refused: refused}
	}
	if cfg.PCP {
		s.pcp = &pcp.Handler{Table: pm.table, Inside: inside, Refused: refused}
	}
	log := r.log.With("component", "portmap")
	var errs []error
	serve := func(what string, f func() error) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				log.Error("port mapping server stopped", "server", what, "err", err)
			}
		}()
	}
	var dev upnp.Device
	if cfg.UPnP {
		uuid, err := r.upnpUUIDLocked()
		if err != nil {
			errs = append(errs, err)
		}
		dev = upnp.Device{UUID: uuid, FriendlyName: "gvrouter"}
	}
	var names []string
	for _, pi := range ifaces {
		name := pi.Name
		ifc := r.net.Interface(name)
		if ifc == nil {
			continue
		}
		label := name + " (zone " + pi.Zone + ")"
		if !pi.Permitted {
			label = name + " (zone " + pi.Zone + ", refused)"
		}
		names = append(names, label)
		var first *upnp.Server
		for _, p := range pi.Addrs {
			if cfg.NATPMP || cfg.PCP {
				ap := netip.AddrPortFrom(p.Addr(), pmpPort)
				c, err := ifc.ListenUDP(ap)
				if err != nil {
					errs = append(errs, fmt.Errorf("port mapping: %w", err))
				} else {
					ps := &pmpd.Server{Conn: c}
					if s.natpmp != nil {
						ps.NATPMP = s.natpmp
					}
					if s.pcp != nil {
						ps.PCP = s.pcp
					}
					s.pmpd = append(s.pmpd, ps)
					s.listen = append(s.listen, "udp "+ap.String())
					serve("pmp "+ap.String(), func() error { return ps.Serve(ctx) })
				}
			}
			if cfg.UPnP {
				ap := netip.AddrPortFrom(p.Addr(), config.UPnPPort)
				ln, err := r.net.ListenTCP(ap)
				if err != nil {
					errs = append(errs, fmt.Errorf("port mapping: upnp http %s: %w", ap, err))
					continue
				}
				us := &upnp.Server{Table: pm.table, Device: dev, Inside: inside, Refused: refused, Location: "http://" + ap.String() + "/rootDesc.xml"}
				s.upnp = append(s.upnp, us)
				s.listen = append(s.listen, "tcp "+ap.String())
				hs := us.HTTPServer()
				hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
				context.AfterFunc(ctx, func() { hs.Close() })
				serve("upnp http "+ap.String(), func() error {
					if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
						return err
					}
					return nil
				})
				if first == nil && pi.Permitted {
					first = us // SSDP only where hosts may map
				}
			}
		}
		if first != nil {
			c, err := ifc.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), ssdpPort), ssdpGroup)
			if err != nil {
				errs = append(errs, fmt.Errorf("port mapping: ssdp: %w", err))
				continue
			}
			s.listen = append(s.listen, "udp 0.0.0.0:1900 on "+name+" ("+ssdpGroup.String()+")")
			serve("ssdp "+name, func() error { return first.ServeSSDP(ctx, c) })
		}
	}
	log.Info("port mapping servers", "natpmp", cfg.NATPMP, "pcp", cfg.PCP, "upnp", cfg.UPnP, "on", names)
	return s, errors.Join(errs...)
}

// announcePortMapLocked sends the restart announcements (pmpd.Announce)
// on every LAN socket, replacing those still in progress. r.mu must be
// held.
func (r *Router) announcePortMapLocked() {
	s := r.portmap.srv
	if s == nil || (s.natpmp == nil && s.pcp == nil) {
		return
	}
	s.announce()
	ctx, cancel := context.WithCancel(s.ctx)
	s.announce = cancel
	for _, ps := range s.pmpd {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := ps.Announce(ctx, ps.Conn, pmpd.AnnounceGroup); err != nil && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				r.log.Warn("port mapping announcement", "err", err)
			}
		}()
	}
}

// upnpUUIDLocked returns the UPnP device's UUID, kept in the state
// directory (made, random, the first time). r.mu must be held.
func (r *Router) upnpUUIDLocked() (string, error) {
	path := filepath.Join(r.state.dir, upnpUUIDFile)
	b, err := os.ReadFile(path)
	if err == nil && uuidRE.Match(b) {
		return string(b[:36]), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("port mapping: upnp uuid: %w", err)
	}
	var u [16]byte
	rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4 (RFC 9562 section 5.4)
	u[8] = u[8]&0x3f | 0x80 // variant 10
	id := fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return id, fmt.Errorf("port mapping: upnp uuid: %w", err)
	}
	if err := statedir.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return id, fmt.Errorf("port mapping: upnp uuid: %w", err)
	}
	return id, nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\s*$`)

var _ portmap.NAT = (*natengine.Engine)(nil)

// portMapStatusLocked is the status page's port mapping section; nil
// while it does not run. r.mu must be held.
func (r *Router) portMapStatusLocked() *status.PortMapping {
	pm := &r.portmap
	cfg := r.cfg.PortMapping
	if !cfg.Enabled() {
		return nil
	}
	p := &status.PortMapping{WAN: pm.wan, Listen: []string{}, Servers: []status.PortMapServer{}}
	for _, on := range []struct {
		name string
		on   bool
	}{{"natpmp", cfg.NATPMP}, {"pcp", cfg.PCP}, {"upnp", cfg.UPnP}} {
		if on.on {
			p.Protocols = append(p.Protocols, on.name)
		}
	}
	if pm.table == nil {
		wan, _ := portMapWAN(r.cfg)
		p.WAN = wan
		p.Status = portmap.Status{Mappings: []portmap.MappingStatus{}, Events: map[string]uint64{}, Refused: map[string]uint64{}, Errors: map[string]uint64{}}
		return p
	}
	p.Status = pm.table.Status()
	if p.Mappings == nil {
		p.Mappings = []portmap.MappingStatus{}
	}
	s := pm.srv
	if s == nil {
		return p
	}
	p.Listen = slices.Clone(s.listen)
	groups := []string{"requests", "drops", "results", "events", "errors"}
	all := func(stats any) map[string]uint64 {
		out := map[string]uint64{}
		for _, g := range groups {
			for k, v := range svcstats.Counters(stats, g) {
				out[g+"/"+k] += v
			}
		}
		return out
	}
	if s.natpmp != nil {
		p.Servers = append(p.Servers, status.PortMapServer{Name: "natpmp", Counters: all(s.natpmp.Stats())})
	}
	if s.pcp != nil {
		c := all(s.pcp.Stats())
		st := s.pcp.Stats()
		for i := range st.Results {
			c["results/"+pcp.ResultName(i)] = st.Results[i].Load()
		}
		p.Servers = append(p.Servers, status.PortMapServer{Name: "pcp", Counters: c})
	}
	if len(s.upnp) > 0 {
		c := map[string]uint64{}
		for _, u := range s.upnp {
			for k, v := range all(u.Stats()) {
				c[k] += v
			}
		}
		p.Servers = append(p.Servers, status.PortMapServer{Name: "upnp", Counters: c})
	}
	if len(s.pmpd) > 0 {
		c := map[string]uint64{}
		for _, ps := range s.pmpd {
			for k, v := range all(ps.Stats()) {
				c[k] += v
			}
		}
		p.Servers = append(p.Servers, status.PortMapServer{Name: "listener", Counters: c})
	}
	return p
}
