package stack

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// ErrClosed is returned by Netstack methods called after Close.
var ErrClosed = errors.New("stack: router closed")

// Netstack is the router's gVisor netstack: one NIC per interface,
// forwarding on for IPv4 and IPv6. Netstack is safe for concurrent use;
// the receive path (Interface.HandleBatch) takes no Netstack lock.
type Netstack struct {
	s   *stack.Stack
	log *slog.Logger
	// local is shared with every Endpoint; see localSet.
	local atomic.Pointer[localSet]
	pins  *forwardPins
	// tx batches writes per receive batch across all endpoints.
	tx txBatcher
	// nat is the NAT engine or nil; neighbors invalidates its fast path.
	nat       *natengine.Engine
	neighbors *neighborWatch
	// egress maps NIC IDs to endpoints for the fast path; rebuilt under
	// mu when interfaces come and go.
	egress atomic.Pointer[egressTable]
	// linkOut maps NIC IDs to the links the fast path can write into
	// (linkfast.go); rebuilt with egress.
	linkOut atomic.Pointer[linkTable]
	// hops is the next-hop cache the endpoints share (nexthop.go).
	hops nextHopCache
	// frags is the fragment guard the endpoints share (fragguard.go).
	frags fragFilter

	// mu protects ifaces, nextID, routes, table, closed and each
	// Interface's addrs, removed, ingressFilter and egressFilter.
	mu     sync.Mutex
	ifaces map[string]*Interface
	// links are the point-to-point NICs of Config.Links (link.go),
	// under mu like ifaces.
	links  map[string]*link
	nextID tcpip.NICID
	routes []RouteConfig
	table  []tcpip.Route
	closed bool
}

// Interface is one interface of a Netstack. Its methods are safe for
// concurrent use. An Interface removed by Apply keeps answering
// HandleBatch (its frames are counted drops) and Stats.
type Interface struct {
	name string
	r    *Netstack
	id   tcpip.NICID
	ep   *Endpoint
	mac  net.HardwareAddr

	addrs   []netip.Prefix
	removed bool
	// ingressFilter and egressFilter are the InterfaceConfig flags
	// (srcfilter.go).
	ingressFilter, egressFilter bool
}

// New builds a netstack from cfg. log receives control-path messages at
// debug level; the data path never logs.
func New(cfg Config, log *slog.Logger) (*Netstack, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var nw *neighborWatch
	var nud stack.NUDDispatcher
	if cfg.NAT != nil {
		nw = newNeighborWatch(cfg.NAT)
		nud = nw
	}
	s := stack.New(stack.Options{
		NUDDisp: nud,
		NetworkProtocols: []stack.NetworkProtocolFactory{
			ipv4.NewProtocol,
			ipv6.NewProtocolWithOptions(ipv6.Options{
				AutoGenLinkLocal: true,
				// Static router addresses are assigned at once; DAD
				// would hold every address tentative for a second.
				DADConfigs: stack.DADConfigurations{DupAddrDetectTransmits: 0},
			}),
			arp.NewProtocol,
		},
		TransportProtocols: []stack.TransportProtocolFactory{
			tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6,
		},
	})
	for _, p := range []tcpip.NetworkProtocolNumber{ipv4.ProtocolNumber, ipv6.ProtocolNumber} {
		if err := s.SetForwardingDefaultAndAllNICs(p, true); err != nil {
			s.Destroy()
			return nil, fmt.Errorf("stack: SetForwardingDefaultAndAllNICs(%d): %s", p, err)
		}
	}
	// Before any NIC exists, so that no packet passes without the pins.
	pins := newForwardPins()
	s.SetNFTables(pins)
	s.SetNFTablesConfigured(true)
	r := &Netstack{s: s, log: log, pins: pins, ifaces: make(map[string]*Interface), links: make(map[string]*link), nat: cfg.NAT, neighbors: nw}
	pins.egress = &r.egress
	pins.reroute.start(s, pins)
	if err := r.Apply(cfg); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Stack returns the underlying gVisor stack, for hooks and tests. Callers
// must not add or remove NICs, addresses or routes on it.
func (r *Netstack) Stack() *stack.Stack { return r.s }

// Apply moves the router to cfg: it removes the NICs, addresses and routes
// cfg no longer has, adds the new ones and leaves unchanged ones alone, so
// connections through unchanged interfaces survive. An interface whose MAC
// changed is recreated, as a new *Interface (fetch it again with
// Netstack.Interface). Apply reports every failure; on error the stack
// may be partly updated (each step that succeeded stays).
func (r *Netstack) Apply(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.nat != nil {
		// Also before the changes: fast-path and next-hop decisions
		// must not be used while interfaces, addresses and routes move.
		r.nat.InvalidateFastPath()
	}
	var errs []error
	want := make(map[string]*InterfaceConfig, len(cfg.Interfaces))
	for i := range cfg.Interfaces {
		want[cfg.Interfaces[i].Name] = &cfg.Interfaces[i]
	}
	for name, ifc := range r.ifaces {
		if c, ok := want[name]; !ok || !bytes.Equal(c.MAC, ifc.mac) || c.PPPoE != ifc.ep.pppoeMode {
			if err := r.removeLocked(ifc); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for i := range cfg.Interfaces {
		c := &cfg.Interfaces[i]
		mtu := c.MTU
		if mtu == 0 {
			mtu = defaultMTU
		}
		ifc := r.ifaces[c.Name]
		if ifc == nil {
			var err error
			if ifc, err = r.addLocked(c, mtu); err != nil {
				errs = append(errs, err)
				continue
			}
		} else {
			ifc.ep.SetMTU(mtu)
			ifc.ep.setWriter(c.Writer)
			ifc.ep.vlan.Store(newEgressVLAN(c))
		}
		ifc.ep.gro.Store(uint32(c.GRO))
		ifc.ep.inputDrop.Store(c.DropNewInput)
		ifc.ep.storeAdmitUDP(c.AdmitUDP)
		ifc.ingressFilter, ifc.egressFilter = c.IngressFilter, c.EgressFilter
		errs = append(errs, r.syncAddrsLocked(ifc, c.Addresses)...)
	}
	errs = append(errs, r.syncLinksLocked(&cfg)...)
	r.syncRoutesLocked(&cfg)
	r.refreshSourceFiltersLocked()
	r.refreshLocalLocked()
	r.refreshEgressLocked()
	if r.nat != nil {
		// Routes, MTUs, tags or interfaces may have changed: every flow
		// takes the slow path once and is offloaded again as it now goes.
		r.nat.InvalidateFastPath()
	}
	return errors.Join(errs...)
}

// refreshEgressLocked rebuilds the fast path's NIC ID → endpoint table.
// r.mu must be held.
func (r *Netstack) refreshEgressLocked() {
	tab := make(egressTable, r.nextID+1)
	for _, ifc := range r.ifaces {
		tab[ifc.id] = ifc.ep
	}
	r.egress.Store(&tab)
	links := make(linkTable, r.nextID+1)
	for _, l := range r.links {
		if w, ok := l.ep.(FastLinkWriter); ok {
			links[l.ifc.id] = w
		}
	}
	r.linkOut.Store(&links)
}

// NATIface returns the NAT engine's number for the interface named name
// (its NIC ID), for natengine.Rules.
func (r *Netstack) NATIface(name string) (natengine.Iface, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ifc, ok := r.ifaces[name]
	if !ok {
		if id, ok := r.linkIDLocked(name); ok {
			return natIface(id), true
		}
		return natengine.NoIface, false
	}
	return natIface(ifc.id), true
}

// NAT returns the router's NAT engine, or nil.
func (r *Netstack) NAT() *natengine.Engine { return r.nat }

func (r *Netstack) addLocked(c *InterfaceConfig, mtu uint32) (*Interface, error) {
	r.nextID++
	ep := newEndpoint(c.MAC, mtu, c.Writer, &r.local)
	ep.vlan.Store(newEgressVLAN(c))
	ep.pppoeMode = c.PPPoE // before CreateNIC, which reads Capabilities
	ep.stack = r.s
	ep.nicID = r.nextID
	ep.pins = r.pins
	ep.tx = &r.tx
	ep.nat = r.nat
	ep.egress = &r.egress
	ep.linkOut = &r.linkOut
	ep.frags = &r.frags
	if r.nat != nil {
		ep.hops = &r.hops
	}
	r.tx.add(ep)
	if err := r.s.CreateNICWithOptions(r.nextID, ep, stack.NICOptions{Name: c.Name}); err != nil {
		return nil, fmt.Errorf("stack: interface %s: CreateNIC(%d): %s", c.Name, r.nextID, err)
	}
	ifc := &Interface{name: c.Name, r: r, id: r.nextID, ep: ep, mac: bytes.Clone(c.MAC)}
	r.ifaces[c.Name] = ifc
	r.log.Debug("interface added", "name", c.Name, "nic", ifc.id, "mac", ifc.mac.String(), "mtu", mtu)
	return ifc, nil
}

func (r *Netstack) removeLocked(ifc *Interface) error {
	delete(r.ifaces, ifc.name)
	ifc.removed = true
	ifc.addrs = nil
	r.log.Debug("interface removed", "name", ifc.name, "nic", ifc.id)
	// Out of the egress table before its last flush: a receive goroutine
	// must not queue ring frames on an endpoint nothing flushes anymore.
	r.refreshEgressLocked()
	err := r.s.RemoveNIC(ifc.id)
	r.tx.remove(ifc.ep)
	if err != nil {
		return fmt.Errorf("stack: interface %s: RemoveNIC(%d): %s", ifc.name, ifc.id, err)
	}
	return nil
}

// syncAddrsLocked makes ifc's addresses equal want, in want's order for
// the ones it adds.
func (r *Netstack) syncAddrsLocked(ifc *Interface, want []netip.Prefix) []error {
	var errs []error
	keep := ifc.addrs[:0:0]
	for _, p := range ifc.addrs {
		if containsPrefix(want, p) {
			keep = append(keep, p)
			continue
		}
		if err := r.s.RemoveAddress(ifc.id, tcpipAddr(p.Addr())); err != nil {
			errs = append(errs, fmt.Errorf("stack: interface %s: RemoveAddress(%s): %s", ifc.name, p, err))
			keep = append(keep, p)
			continue
		}
		r.log.Debug("address removed", "interface", ifc.name, "address", p)
	}
	for _, p := range want {
		if containsPrefix(keep, p) {
			continue
		}
		proto := ipv4.ProtocolNumber
		if p.Addr().Is6() {
			proto = ipv6.ProtocolNumber
		}
		pa := tcpip.ProtocolAddress{
			Protocol:          proto,
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpipAddr(p.Addr()), PrefixLen: p.Bits()},
		}
		props := stack.AddressProperties{PEB: stack.CanBePrimaryEndpoint, ConfigType: stack.AddressConfigStatic}
		if err := r.s.AddProtocolAddress(ifc.id, pa, props); err != nil {
			errs = append(errs, fmt.Errorf("stack: interface %s: AddProtocolAddress(%s): %s", ifc.name, p, err))
			continue
		}
		keep = append(keep, p)
		r.log.Debug("address added", "interface", ifc.name, "address", p)
	}
	ifc.addrs = keep
	return errs
}

// syncRoutesLocked installs the connected routes of every address plus the
// static routes, replacing the table only if it changed.
func (r *Netstack) syncRoutesLocked(cfg *Config) {
	var routes []RouteConfig
	var table []tcpip.Route
	seen := make(map[RouteConfig]bool)
	add := func(rc RouteConfig) {
		var id tcpip.NICID
		if ifc := r.ifaces[rc.Dev]; ifc != nil {
			id = ifc.id
		} else if lid, ok := r.linkIDLocked(rc.Dev); ok {
			id = lid
		}
		if id == 0 || seen[rc] {
			return
		}
		seen[rc] = true
		routes = append(routes, rc)
		tr := tcpip.Route{Destination: subnet(rc.To), NIC: id}
		if rc.Via.IsValid() {
			tr.Gateway = tcpipAddr(rc.Via)
		}
		table = append(table, tr)
	}
	for _, c := range cfg.Interfaces {
		for _, p := range c.Addresses {
			add(RouteConfig{To: p.Masked(), Dev: c.Name})
		}
	}
	for _, l := range cfg.Links {
		for _, p := range l.Addresses {
			add(RouteConfig{To: p.Masked(), Dev: l.Name})
		}
		for _, p := range l.Routes {
			add(RouteConfig{To: p.Masked(), Dev: l.Name})
		}
	}
	for _, rc := range cfg.Routes {
		rc, err := cfg.resolveRoute(rc)
		if err == nil {
			add(rc)
		}
	}
	r.routes = routes
	if reflect.DeepEqual(table, r.table) {
		return
	}
	r.table = table
	r.pins.reroute.setRoutes(table)
	r.s.SetRouteTable(append([]tcpip.Route(nil), table...))
	r.log.Debug("route table replaced", "routes", len(table))
}

// refreshLocalLocked rebuilds the local-address snapshot from netstack
// (which also knows the IPv6 link-local addresses it generated).
func (r *Netstack) refreshLocalLocked() {
	var addrs []netip.Addr
	var prefixes []netip.Prefix
	for _, info := range r.s.NICInfo() {
		for _, pa := range info.ProtocolAddresses {
			if a, ok := netip.AddrFromSlice(pa.AddressWithPrefix.Address.AsSlice()); ok {
				addrs = append(addrs, a)
				prefixes = append(prefixes, netip.PrefixFrom(a, pa.AddressWithPrefix.PrefixLen))
			}
		}
	}
	r.local.Store(newLocalSet(addrs, prefixes))
}

// Interface returns the interface called name, or nil.
func (r *Netstack) Interface(name string) *Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ifaces[name]
}

// Routes returns the routes in effect: one connected route per interface
// subnet (Via zero) and the static routes, each with Dev filled in.
func (r *Netstack) Routes() []RouteConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RouteConfig(nil), r.routes...)
}

// ListenTCP returns a TCP listener in the router's netstack, bound to addr
// (an unspecified address listens on all of the router's addresses of that
// family).
func (r *Netstack) ListenTCP(addr netip.AddrPort) (net.Listener, error) {
	a := addr.Addr().Unmap()
	proto := ipv4.ProtocolNumber
	if a.Is6() {
		proto = ipv6.ProtocolNumber
	}
	fa := tcpip.FullAddress{Port: addr.Port()}
	if !a.IsUnspecified() {
		fa.Addr = tcpipAddr(a)
	}
	// SO_REUSEADDR, as Go's net.Listen sets on Linux: a reload that
	// closes a listener and opens it again (the status page, UPnP's
	// HTTP server on a LAN address that changed) must bind while the
	// old listener's connections linger in TIME_WAIT.
	var wq waiter.Queue
	ep, terr := r.s.NewEndpoint(tcp.ProtocolNumber, proto, &wq)
	if terr != nil {
		return nil, fmt.Errorf("stack: listen tcp %s: %s", addr, terr)
	}
	ep.SocketOptions().SetReuseAddress(true)
	if terr := ep.Bind(fa); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("stack: listen tcp %s: bind: %s", addr, terr)
	}
	if terr := ep.Listen(listenBacklog); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("stack: listen tcp %s: listen: %s", addr, terr)
	}
	return gonet.NewTCPListener(r.s, &wq, ep), nil
}

// listenBacklog is ListenTCP's backlog, gonet's (Linux's somaxconn).
const listenBacklog = 4096

// Close removes every NIC and stops netstack. Interfaces keep counting
// frames handed to them afterwards as drops.
func (r *Netstack) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	for _, ifc := range r.ifaces {
		ifc.removed = true
	}
	r.s.Destroy()
	r.pins.reroute.stop()
	r.pins.releaseAll()
}

// Interfaces returns the router's interfaces sorted by name.
func (r *Netstack) Interfaces() []*Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	ifcs := make([]*Interface, 0, len(r.ifaces))
	for _, ifc := range r.ifaces {
		ifcs = append(ifcs, ifc)
	}
	slices.SortFunc(ifcs, func(a, b *Interface) int { return strings.Compare(a.name, b.name) })
	return ifcs
}

// Name returns the interface's name, e.g. "lan".
func (i *Interface) Name() string { return i.name }

// MAC returns the interface's Ethernet address.
func (i *Interface) MAC() net.HardwareAddr { return bytes.Clone(i.mac) }

// VLAN returns the interface's VIDs, outer first (nil when untagged), the
// outer tag's TPID (0 when untagged) and the PCP of the frames it sends.
func (i *Interface) VLAN() (vids []uint16, tpid uint16, pcp uint8) {
	v := i.ep.vlan.Load()
	switch v.key.n {
	case 2:
		vids = []uint16{v.key.outer, v.key.inner}
	case 1:
		vids = []uint16{v.key.outer}
	}
	return vids, v.tpid, v.pcp
}

// MTU returns the interface's L3 MTU.
func (i *Interface) MTU() uint32 { return i.ep.MTU() }

// GRO returns the interface's receive coalescing policy.
func (i *Interface) GRO() GROMode { return GROMode(i.ep.gro.Load()) }

// Up reports whether the link is up (see SetLinkUp).
func (i *Interface) Up() bool { return i.ep.up.Load() }

// Addresses returns the interface's configured addresses, in the order
// they were added (the first IPv4 one is the primary).
func (i *Interface) Addresses() []netip.Prefix {
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	return slices.Clone(i.addrs)
}

// HandleBatch is the interface's hw.BatchHandler: it validates the frames
// and delivers them to netstack. See Endpoint.HandleBatch.
func (i *Interface) HandleBatch(queue int, frames []hw.Frame) { i.ep.HandleBatch(queue, frames) }

// SetLinkUp follows the port's carrier: down disables the NIC, so it
// neither sends nor receives and routes through it are skipped; up enables
// it again.
func (i *Interface) SetLinkUp(up bool) {
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	if i.removed {
		return
	}
	i.ep.up.Store(up)
	var err tcpip.Error
	if up {
		err = i.r.s.EnableNIC(i.id)
	} else {
		err = i.r.s.DisableNIC(i.id)
	}
	if err != nil {
		i.r.log.Warn("set link state", "interface", i.name, "up", up, "err", err.String())
	}
	i.r.log.Debug("link state", "interface", i.name, "up", up)
	i.r.refreshLocalLocked()
	if i.r.nat != nil {
		i.r.nat.InvalidateFastPath()
	}
}

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func tcpipAddr(a netip.Addr) tcpip.Address { return tcpip.AddrFromSlice(a.Unmap().AsSlice()) }

func subnet(p netip.Prefix) tcpip.Subnet {
	return tcpip.AddressWithPrefix{Address: tcpipAddr(p.Masked().Addr()), PrefixLen: p.Bits()}.Subnet()
}
