// Package svc runs the router's own services on its netstack and its
// interfaces' raw-frame taps, never on the host kernel: a DHCPv4 client per
// interface with "dhcp" among its addresses, a PPPoE client per wan
// interface with "pppoe" among them, a DHCPv4 server per lan
// interface with dhcp_server:, the DHCPv6 client of the delegating wan, a
// stateless DHCPv6 server and an RA advertiser per lan, an RA learner per
// wan, and the DNS forwarder.
//
// Manager.Sync starts what the config in force asks for and, on reload,
// restarts only the services whose settings (or interface) changed; a
// service may take part of its settings in place instead (spec.update).
// Each service's glue — its settings, how it is started on the netstack,
// its status section — is one file named like its package under
// services/. The glue sees the runtime only through Env: it never
// imports package router.
package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/stack"
)

// Env is what the services need of the runtime. Its funcs are called
// under the runtime's lock (from Sync) unless their doc says otherwise.
type Env struct {
	Log *slog.Logger
	// Interface finds a netstack interface by name, nil if there is
	// none. The DNS host book calls it on its own goroutine.
	Interface func(name string) *stack.Interface
	// Sockets opens the DNS forwarder's netstack sockets.
	Sockets Sockets
	// NAT keeps the services' own ports out of SNAT's hands.
	NAT PortReserver
	// Dir returns (and creates) the state directory's subdirectory for
	// a service's files, e.g. state_dir/dhcp4.
	Dir func(sub string) (string, error)
	// PortMTU is the MTU of an open port, 0 if unknown.
	PortMTU func(port string) int
	// Post hands a client's news (a lease, RAs, a delegation) to the
	// runtime, which applies it by the reload path. It is called on the
	// clients' goroutines and never blocks (learned.Queue.Post).
	Post func(name string, c learned.Change)
	// Owned is the IPv6 prefixes the router holds other than on iface,
	// which the RA learner of iface must not take; called on the
	// learner's goroutine.
	Owned func(iface string) []netip.Prefix
	// ARPProbe is the timing of the DHCP clients' RFC 5227 probe of an
	// offered address (each client sets Link); the zero value takes the
	// RFC's, about 5.5 s. Only a lab build changes it
	// (router.WithARPProbeTiming).
	ARPProbe dhcp4client.ARPProberConfig
}

// Sockets is the netstack's socket API the DNS forwarder uses
// (*stack.Netstack).
type Sockets interface {
	DialUDP(lport uint16, raddr netip.AddrPort) (net.Conn, error)
	DialTCP(ctx context.Context, raddr netip.AddrPort) (net.Conn, error)
	ListenUDPConn(addr netip.AddrPort) (*stack.UDPConn, error)
	ListenTCP(addr netip.AddrPort) (net.Listener, error)
}

// PortReserver reserves a port on every address the NAT engine
// translates to (*natengine.Engine).
type PortReserver interface {
	ReservePortAny(proto uint8, port uint16) (release func(), err error)
}

// Learned is what the services read of the learned state
// (*learned.State): the WAN side's DNS servers and the delegation.
type Learned interface {
	DNS() []netip.Addr
	Delegation() *learned.Delegation
	LANSubnets() map[string]netip.Prefix
}

// Manager holds the running services. It is not safe for concurrent use:
// the runtime calls it under the lock it reloads with. The DNS host book
// it feeds has a lock of its own (hostbook.go).
type Manager struct {
	env env
	// services are the running services by name, e.g. "dhcp4server lan".
	services map[string]*Service
	// leaseFileProblems keeps, by interface, what a DHCP server found
	// wrong with its lease file when it started, for the status page
	// until the router restarts: a reload restarting the server reads
	// the replaced, healthy file and would forget it.
	leaseFileProblems map[string]string
}

// env is what an adapter gets: the runtime's Env, the DNS host book the
// DHCP servers and the forwarder share, and the learned state of the
// Sync in progress.
type env struct {
	Env
	hosts   *hostBook
	learned Learned
}

// New returns a Manager with no service running.
func New(e Env) *Manager {
	return &Manager{
		env:               env{Env: e, hosts: &hostBook{iface: e.Interface}},
		services:          map[string]*Service{},
		leaseFileProblems: map[string]string{},
	}
}

// Run refreshes the DNS forwarder's host names from the lan neighbour
// caches until ctx ends (hostbook.go).
func (m *Manager) Run(ctx context.Context) { m.env.hosts.watchNeighbors(ctx) }

// Service is one service's goroutine and what it holds.
type Service struct {
	name   string // e.g. "dhcp4server eth0.1"
	spec   any    // the settings it was started with; a reload restarts it iff they differ
	live   any    // the settings it took in place (spec.live), last applied
	ifc    *stack.Interface
	cancel context.CancelFunc
	done   chan struct{}
	// undo releases what it holds (taps, port reservations, sockets),
	// last first, after its goroutine ended.
	undo []func()
	// impl is the service (*dhcp4server.Server, ...), for the status page.
	impl any
	// note is what the service found wrong at start that the status page
	// keeps showing (a DHCP server's lease file problem).
	note string
}

// stop ends the service and waits for it.
func (s *Service) stop() {
	s.cancel()
	<-s.done
	s.release()
}

// release runs the undo steps, last first.
func (s *Service) release() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// abort releases what a service that failed to start holds and returns
// err, for its start function to return.
func (s *Service) abort(err error) (*Service, error) {
	s.release()
	return nil, err
}

// newService is the Service name will be on the interface iface, with
// the settings spec and nothing held yet.
func (e *env) newService(name, iface string, spec any) (*Service, error) {
	ifc := e.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	return &Service{name: name, spec: spec, ifc: ifc}, nil
}

// start runs run on the service's own goroutine until it is stopped,
// logging an error it stops with.
func (e *env) start(s *Service, run func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	log := e.Log.With("service", s.name)
	go func() {
		defer close(s.done)
		if err := run(ctx); err != nil && ctx.Err() == nil {
			log.Error("service stopped", "err", err)
		}
	}()
}

// spec is a service the config asks for: its settings, its interface and
// how to start it.
type spec struct {
	// spec is the settings a change of which restarts the service
	// (compared with reflect.DeepEqual).
	spec  any
	iface string
	start func(e *env, name string) (*Service, error)
	// live is the settings the running service takes in place, and
	// update gives them to it (s.live holds the last ones it took): a
	// reload that changes only live keeps the service and its state. An
	// update error restarts the service. nil update: live is unused.
	live   any
	update func(e *env, s *Service, live any) error
}

// Owns reports whether owner is the running service named name: news
// from a client a reload has replaced is ignored.
func (m *Manager) Owns(name string, owner any) bool {
	s := m.services[name]
	return s != nil && s == owner
}

// Sync brings the running services in line with cfg (the config in
// force, what was learned included); l is the learned state it came from.
func (m *Manager) Sync(cfg *config.Config, l Learned) error {
	e := &m.env
	e.learned = l
	want := map[string]spec{}
	for _, ic := range cfg.Interfaces {
		if ic.DHCP != nil {
			if sp, err := dhcp4ClientSpec(e, ic); err != nil {
				e.Log.Error("dhcp client not started", "interface", ic.Name, "err", err)
			} else {
				want[DHCP4ClientPrefix+ic.Name] = sp
			}
		}
		if ic.PPPoE != nil {
			if sp, err := pppoeSpec(e, ic); err != nil {
				e.Log.Error("pppoe client not started", "interface", ic.Name, "err", err)
			} else {
				want[PPPoEPrefix+ic.Name] = sp
			}
		}
		if ic.Role == config.RoleWAN && cfg.DelegatingWAN() == ic.Name {
			if sp, ok, err := dhcp6ClientSpec(e, ic); err != nil {
				e.Log.Error("dhcpv6 client not started", "interface", ic.Name, "err", err)
			} else if ok {
				want[DHCP6ClientPrefix+ic.Name] = sp
			}
		}
		if sp, ok := raLearnerSpec(e, cfg, ic); ok {
			want[RALearnerPrefix+ic.Name] = sp
		}
		if sp, ok := raAdvertiserSpec(e, cfg, ic); ok {
			want[raAdvertiserPrefix+ic.Name] = sp
		}
		if sp, ok := dhcp6ServerSpec(e, cfg, ic); ok {
			want[dhcp6ServerPrefix+ic.Name] = sp
		}
		if ic.DHCPServer != nil {
			if sp, err := dhcp4ServerSpec(e, cfg, ic); err != nil {
				e.Log.Error("dhcp server not started", "interface", ic.Name, "err", err)
			} else {
				want[dhcp4ServerPrefix+ic.Name] = sp
			}
		}
	}
	if sp, ok := dnsSpec(cfg); ok {
		want[dnsServiceName] = sp
	}
	var errs []error
	for name, s := range m.services {
		sp, ok := want[name]
		if ok && reflect.DeepEqual(sp.spec, s.spec) && s.ifc == e.Interface(sp.iface) {
			err := m.update(s, sp)
			if err == nil {
				delete(want, name)
				continue
			}
			e.Log.Warn("service not updated in place, restarting it", "service", name, "err", err)
		}
		s.stop()
		delete(m.services, name)
	}
	for name, sp := range want {
		s, err := sp.start(e, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if s.note != "" {
			m.leaseFileProblems[s.ifc.Name()] = s.note
		}
		s.live = sp.live
		m.services[name] = s
	}
	m.syncDNSUpstreams()
	m.syncRA(cfg)
	return errors.Join(errs...)
}

// update gives s the in-place settings of sp, if they changed.
func (m *Manager) update(s *Service, sp spec) error {
	if reflect.DeepEqual(sp.live, s.live) {
		return nil
	}
	if sp.update == nil {
		return errors.New("settings changed and the service takes none in place")
	}
	if err := sp.update(&m.env, s, sp.live); err != nil {
		return err
	}
	s.live = sp.live
	return nil
}

// Stop stops every service (the runtime's Close).
func (m *Manager) Stop() {
	for name, s := range m.services {
		s.stop()
		delete(m.services, name)
	}
}

// sorted returns the running services by name.
func (m *Manager) sorted() []*Service {
	out := make([]*Service, 0, len(m.services))
	for _, s := range m.services {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Service) int { return strings.Compare(a.name, b.name) })
	return out
}

func errNoInterface(name string) error {
	return fmt.Errorf("interface %s is not in the netstack", name)
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
