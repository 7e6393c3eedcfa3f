package router

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/stack"
)

// sweepInterval is how often expired flows are removed (nf_conntrack's GC
// runs about every second; the timeouts are minutes, so 5 s is plenty).
const sweepInterval = 5 * time.Second

// engineConfig is the construction-time part of the NAT config: the table
// size, its per-host limits and router reserve, and the timeouts. They
// cannot change without a restart.
func engineConfig(cfg *config.Config) natengine.Config {
	t := cfg.NAT.Conntrack.Timeouts
	return natengine.Config{
		MaxConns:        cfg.NAT.MaxConns(),
		MaxConnsPerHost: cfg.NAT.ConnsPerHost(),
		MaxPortsPerHost: cfg.NAT.PortsPerHost(),
		RouterReserve:   cfg.NAT.RouterReserve(),
		Timeouts: natengine.Timeouts{ // zero fields take the engine's defaults
			TCPEstablished: t.TCPEstablished,
			TCPTransitory:  t.TCPTransitory,
			UDPUnreplied:   t.UDPUnreplied,
			UDPStream:      t.UDPStream,
			ICMPQuery:      t.ICMP,
			Other:          t.Other,
		},
	}
}

// natIDs maps an interface name to the engine's ID for it (the stack's
// NATIface); ok is false for an interface the stack does not have.
type natIDs func(name string) (natengine.Iface, bool)

// natRules builds the engine's rules from cfg. ids gives each interface's
// engine ID; interfaces the stack does not have (a port that failed to
// open) are left out, with the forwards that listen on them. portMTU gives
// the MTU of an interface that sets none (its port's). reserved lists the
// router's own listening sockets, which SNAT must never allocate.
func natRules(cfg *config.Config, ids natIDs, portMTU func(port string) int, reserved []reservedPort) natengine.Rules {
	n := &cfg.NAT
	r := natengine.Rules{
		Hairpin:   n.HairpinOn(),
		Filtering: filteringOf(n.FilteringMode()),
	}
	id := make(map[string]natengine.Iface)
	var wans []string
	for _, ic := range cfg.Interfaces {
		nid, ok := ids(ic.Name)
		if !ok {
			continue
		}
		id[ic.Name] = nid
		mtu := ic.MTU
		if mtu == 0 && portMTU != nil {
			mtu = portMTU(ic.Port)
		}
		c := natengine.IfaceConfig{
			ID:         nid,
			Name:       ic.Name,
			WAN:        ic.Role == config.RoleWAN,
			Masquerade: slices.Contains(n.Masquerade, ic.Name),
			MTU:        mtu,
		}
		for _, p := range ic.Addresses {
			c.Addrs = append(c.Addrs, p.Addr())
			c.Subnets = append(c.Subnets, p.Masked())
		}
		for _, s := range n.SNAT {
			if s.On == ic.Name {
				c.SNAT = append(c.SNAT, s.To...)
			}
		}
		if c.WAN && has4(&ic) {
			wans = append(wans, ic.Name)
		}
		r.Ifaces = append(r.Ifaces, c)
	}
	// SecYs are NICs of their own. Their link is authenticated, so they
	// are never outside interfaces, but the engine needs them as egress
	// interfaces to offload flows through them (their MTU is the lower
	// one's minus the SecTAG and ICV, as Linux).
	for _, ms := range cfg.MACsec {
		nid, ok := ids(ms.Name)
		if !ok {
			continue
		}
		mtu := ms.MTU
		if lower := cfg.Interface(ms.On); mtu == 0 && lower != nil {
			mtu = lower.MTU
			if mtu == 0 && portMTU != nil {
				mtu = portMTU(lower.Port)
			}
			if mtu > 0 {
				mtu -= stack.MACsecOverhead
			}
		}
		c := natengine.IfaceConfig{ID: nid, Name: ms.Name, Masquerade: slices.Contains(n.Masquerade, ms.Name), MTU: mtu}
		for _, p := range ms.Addresses {
			c.Addrs = append(c.Addrs, p.Addr())
			c.Subnets = append(c.Subnets, p.Masked())
		}
		id[ms.Name] = nid
		r.Ifaces = append(r.Ifaces, c)
	}
	// Routed networks behind an inside interface are inside too: a WAN
	// packet from one of them is spoofed like one from a connected
	// subnet (natengine.IfaceConfig.Subnets). Default routes say nothing.
	for _, rt := range cfg.Routes {
		if rt.To.Bits() == 0 {
			continue
		}
		for i := range r.Ifaces {
			c := &r.Ifaces[i]
			if rt.Dev == c.Name || rt.Dev == "" && slices.ContainsFunc(c.Subnets, func(p netip.Prefix) bool { return p.Contains(rt.Via) }) {
				c.Subnets = append(c.Subnets, rt.To)
				break
			}
		}
	}
	for _, f := range n.Forwards {
		on := []string{f.On}
		if f.On == "" {
			on = wans
		}
		for _, name := range on {
			nid, ok := id[name]
			if !ok || !has4(cfg.Interface(name)) {
				continue // a DHCP interface without a lease yet: back with the lease
			}
			r.Forwards = append(r.Forwards, natengine.Forward{
				Proto:     protoOf(f.Proto),
				In:        nid,
				FirstPort: f.FirstPort,
				LastPort:  f.LastPort,
				To:        f.To,
			})
		}
	}
	r.Forwards = append(r.Forwards, hostForwards(cfg, id)...)
	for _, a := range cfg.Firewall.Allow6 {
		proto, any := a.ProtoNumber()
		for _, dst := range allow6Dsts(cfg, a) {
			r.Allow6 = append(r.Allow6, natengine.Allow6{
				Proto:     proto,
				AnyProto:  any,
				Dst:       dst,
				FirstPort: a.FirstPort,
				LastPort:  a.LastPort,
			})
		}
	}
	if len(reserved) > 0 {
		set := make(map[reservedPort]bool, len(reserved))
		for _, p := range reserved {
			set[p] = true
		}
		r.Reserved = func(proto uint8, addr netip.Addr, port uint16) bool {
			return set[reservedPort{proto, addr.Unmap(), port}]
		}
	}
	return r
}

// has4 reports whether ic has an IPv4 address now (a DHCP interface
// only while it holds a lease).
func has4(ic *config.Interface) bool {
	return ic != nil && slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr().Is4() })
}

// dropNewInput reports whether new flows to the router arriving on ic
// are dropped: wan interfaces under firewall: wan_input: drop.
func dropNewInput(cfg *config.Config, ic config.Interface) bool {
	return ic.Role == config.RoleWAN && cfg.Firewall.WANInputDrop()
}

// reservedPort is a port one of the router's own netstack sockets uses.
type reservedPort struct {
	proto uint8
	addr  netip.Addr
	port  uint16
}

// reservedPorts lists the netstack listeners cfg asks for (the status
// page's interface:port entries) and the extra ones (the bench sink).
func reservedPorts(cfg *config.Config, extra []netip.AddrPort) []reservedPort {
	var out []reservedPort
	for _, l := range cfg.Status.Listen {
		ic := cfg.Interface(l.Interface)
		if l.Interface == "" || ic == nil {
			continue // a host listener is the kernel's
		}
		for _, p := range ic.Addresses {
			out = append(out, reservedPort{natengine.ProtoTCP, p.Addr(), l.Port})
		}
	}
	for _, ap := range extra {
		out = append(out, reservedPort{natengine.ProtoTCP, ap.Addr().Unmap(), ap.Port()})
	}
	return out
}

func protoOf(s string) uint8 {
	switch s {
	case config.ProtoTCP:
		return natengine.ProtoTCP
	case config.ProtoUDP:
		return natengine.ProtoUDP
	}
	return 0
}

func filteringOf(s string) natengine.Filtering {
	switch s {
	case config.FilteringEndpointIndependent:
		return natengine.EndpointIndependent
	case config.FilteringAddressDependent:
		return natengine.AddressDependent
	}
	return natengine.AddressAndPortDependent
}

// applyNATLocked gives the engine the rules of r.cfg and the interfaces
// the stack has now. r.mu must be held.
func (r *Router) applyNATLocked() error {
	if r.nat == nil || r.net == nil || r.cfg == nil {
		return nil
	}
	portMTU := func(port string) int {
		if rp := r.ports[port]; rp != nil {
			return rp.port.MTU()
		}
		return 0
	}
	return r.nat.SetRules(natRules(r.cfg, r.net.NATIface, portMTU, reservedPorts(r.cfg, r.sinks)))
}

// sweepNAT removes expired flows every sweepInterval until ctx is done.
func (r *Router) sweepNAT(ctx context.Context, e *natengine.Engine) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Sweep()
		}
	}
}

// natRestartNeeded reports what of the conntrack config a reload cannot
// change (the engine is built once), or "".
func natRestartNeeded(old, cfg *config.Config) string {
	switch {
	case old.NAT.MaxConns() != cfg.NAT.MaxConns():
		return "nat: conntrack: max"
	case old.NAT.Conntrack.Timeouts != cfg.NAT.Conntrack.Timeouts:
		return "nat: conntrack: timeouts"
	case old.NAT.ConnsPerHost() != cfg.NAT.ConnsPerHost():
		return "nat: conntrack: per_host"
	case old.NAT.PortsPerHost() != cfg.NAT.PortsPerHost():
		return "nat: conntrack: ports_per_host"
	case old.NAT.RouterReserve() != cfg.NAT.RouterReserve():
		return "nat: conntrack: router_reserve"
	}
	return ""
}

// routingChanged reports whether interfaces or routes differ, so offloaded
// flows may now take another way.
func routingChanged(old, cfg *config.Config) bool {
	return !slices.EqualFunc(old.Interfaces, cfg.Interfaces, config.Interface.Equal) ||
		!slices.EqualFunc(old.Routes, cfg.Routes, config.Route.Equal) ||
		!slices.EqualFunc(old.Ports, cfg.Ports, config.Port.Equal)
}

// censusInterval is how often the status sampler walks the conntrack
// table and the NAT mappings. The sampler runs every second; a full table
// takes about 15 ms to walk on a server core and several times that on the
// BCM47094, so the census is reused for a few samples. Counters are read
// at every sample.
const censusInterval = 5 * time.Second

// census is what walking the table and the mappings finds.
type census struct {
	assured, offloaded int
	states             []status.FlowCount
	natPorts           []status.NATPorts
}

// censusCache keeps the last census for censusInterval.
type censusCache struct {
	mu  sync.Mutex
	at  time.Time
	val census
}

// get returns a census of e no older than censusInterval at now.
func (cc *censusCache) get(e *natengine.Engine, now time.Time) census {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.at.IsZero() || now.Sub(cc.at) >= censusInterval || now.Before(cc.at) {
		cc.val, cc.at = takeCensus(e), now
	}
	return cc.val
}

// conntrackStatus is the status page's conntrack section, read from e
// with a fresh census.
func conntrackStatus(e *natengine.Engine, maxConns int) *status.Conntrack {
	c := conntrackCounters(e, maxConns)
	takeCensus(e).apply(c)
	return c
}

// conntrackCounters reads e's counters (atomics only: cheap).
func conntrackCounters(e *natengine.Engine, maxConns int) *status.Conntrack {
	st := e.Stats()
	c := &status.Conntrack{
		Max:           maxConns,
		Flows:         e.Len(),
		RouterFlows:   e.RouterFlows(),
		RouterReserve: e.RouterReserve(),
		FastPathHits:  st.FastPathHits.Load(),
		SlowPath:      make(map[string]uint64, len(st.Slow)),
		Drops:         make(map[string]uint64, len(st.Drops)),
		Events: map[string]uint64{
			"created":              st.Created.Load(),
			"early_dropped":        st.EarlyDropped.Load(),
			"expired":              st.Expired.Load(),
			"offloaded":            st.Offloaded.Load(),
			"icmp_translated":      st.ICMPTranslated.Load(),
			"frags_held":           st.FragsHeld.Load(),
			"mss_clamped":          st.MSSClamped.Load(),
			"untracked":            st.Untracked.Load(),
			"flushed_address_gone": st.FlushedAddressGone.Load(),
			"reserve_refused":      st.ReserveRefused.Load(),
		},
	}
	for i := range st.Slow {
		c.SlowPath[natengine.SlowReason(i).String()] = st.Slow[i].Load()
	}
	for i := range st.Drops {
		c.Drops[natengine.DropReason(i).String()] = st.Drops[i].Load()
	}
	return c
}

// takeCensus walks e's table and mappings.
func takeCensus(e *natengine.Engine) census {
	sc := e.StateCounts()
	cs := census{assured: sc.Assured, offloaded: sc.Offloaded}
	// Every state, zero or not, so metric series do not come and go.
	for i, n := range sc.TCP {
		if s := natengine.TCPState(i); s != natengine.TCPNone {
			cs.states = append(cs.states, status.FlowCount{Proto: "tcp", State: s.String(), Flows: n})
		}
	}
	cs.states = append(cs.states,
		status.FlowCount{Proto: "udp", State: "UNREPLIED", Flows: sc.UDPUnreplied},
		status.FlowCount{Proto: "udp", State: "REPLIED", Flows: sc.UDPStream},
		status.FlowCount{Proto: "icmp", State: "ACTIVE", Flows: sc.ICMP},
		status.FlowCount{Proto: "other", State: "ACTIVE", Flows: sc.Other},
	)
	type key struct {
		proto string
		addr  netip.Addr
	}
	usage := make(map[key]*status.NATPorts)
	for _, m := range e.Mappings() {
		k := key{protoName(m.Proto), m.External.Addr()}
		u := usage[k]
		if u == nil {
			u = &status.NATPorts{Proto: k.proto, Address: k.addr.String()}
			usage[k] = u
		}
		u.Ports++
		u.Flows += m.Flows
	}
	for _, u := range usage {
		cs.natPorts = append(cs.natPorts, *u)
	}
	return cs
}

// apply writes the census into c, in fresh slices (the Server keeps them).
func (cs census) apply(c *status.Conntrack) {
	c.Assured, c.Offloaded = cs.assured, cs.offloaded
	c.States = slices.Clone(cs.states)
	c.NATPorts = slices.Clone(cs.natPorts)
}

// flowsStatus converts the engine's flows for the conntrack table.
func flowsStatus(flows []natengine.Flow) []status.Flow {
	out := make([]status.Flow, 0, len(flows))
	for _, f := range flows {
		sf := status.Flow{
			Proto:          protoName(f.Orig.Proto),
			Src:            netip.AddrPortFrom(f.Orig.SrcAddr(), f.Orig.SrcPort),
			Dst:            netip.AddrPortFrom(f.Orig.DstAddr(), f.Orig.DstPort),
			Assured:        f.Assured,
			Offloaded:      f.Offloaded[0] || f.Offloaded[1],
			PacketsOrig:    f.Packets[0],
			PacketsReply:   f.Packets[1],
			BytesOrig:      f.Bytes[0],
			BytesReply:     f.Bytes[1],
			ExpiresSeconds: max(f.Expires.Seconds(), 0),
		}
		if f.Reply != (natengine.Tuple{}) {
			sf.ReplySrc = netip.AddrPortFrom(f.Reply.SrcAddr(), f.Reply.SrcPort)
			sf.ReplyDst = netip.AddrPortFrom(f.Reply.DstAddr(), f.Reply.DstPort)
		}
		switch {
		case f.Orig.Proto == natengine.ProtoTCP:
			sf.State = f.TCPState.String()
		case f.Packets[1] > 0:
			sf.State = "REPLIED"
		default:
			sf.State = "UNREPLIED"
		}
		out = append(out, sf)
	}
	return out
}

func protoName(p uint8) string {
	switch p {
	case natengine.ProtoTCP:
		return "tcp"
	case natengine.ProtoUDP:
		return "udp"
	case natengine.ProtoICMP:
		return "icmp"
	case natengine.ProtoICMPv6:
		return "icmpv6"
	}
	return strconv.Itoa(int(p))
}

// Flows implements status.FlowSource: every tracked flow, for the
// conntrack table.
func (r *Router) Flows() []status.Flow {
	r.mu.Lock()
	e := r.nat
	r.mu.Unlock()
	if e == nil {
		return nil
	}
	return flowsStatus(e.Flows())
}

var _ status.FlowSource = (*Router)(nil)

// allow6Dsts is what an allow6 rule admits flows to: its to: prefix, or
// for a suffix: rule the host with that interface ID in each IPv6 /64 of
// the lan interfaces (or of its interface:) in force, delegated ones
// included, so the rule follows a renumbering by the ISP.
func allow6Dsts(cfg *config.Config, a config.Allow6) []netip.Prefix {
	if !a.Suffix.IsValid() {
		return []netip.Prefix{a.To}
	}
	id := a.Suffix.As16()
	var out []netip.Prefix
	for _, ic := range cfg.Interfaces {
		if ic.Role != config.RoleLAN || a.Interface != "" && ic.Name != a.Interface {
			continue
		}
		for _, p := range ic.Addresses {
			if !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() != config.LANPrefixLength || p.Addr().IsLinkLocalUnicast() {
				continue
			}
			b := p.Masked().Addr().As16()
			copy(b[8:], id[8:])
			host := netip.PrefixFrom(netip.AddrFrom16(b), 128)
			if !slices.Contains(out, host) {
				out = append(out, host)
			}
		}
	}
	return out
}
