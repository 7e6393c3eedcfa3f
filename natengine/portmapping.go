package natengine

import (
	"errors"
	"fmt"
	"net/netip"
)

// Port mappings installed at run time.
//
// A port mapping is a one-port forward that a LAN application asked for
// (NAT-PMP, PCP, UPnP IGD: package portmap) rather than one the config
// wrote. It listens on the first IPv4 address of its interface (the WAN),
// now and after a new address from a DHCP lease, and takes new inbound
// flows to its target exactly as a Forward does: same DNAT, same replies,
// same fast path once the flow is known. Mappings are kept apart from
// Rules so that a reload (SetRules) keeps them and so that adding one
// does not walk the flow table as SetRules does.
//
// The set is an immutable map swapped whole under the mapping table's
// lock (copy on write): a new inbound flow reads it without a lock, and
// an SNAT port search or a port reservation, which hold the lock, sees
// the same set a mapping's install checked against. Removing a mapping
// keeps the flows it opened, as deleting a DNAT rule keeps Linux's
// conntrack entries; new inbound flows to the port are then refused.

// PortMapping is a one-port DNAT forward installed at run time. Its
// target's own outbound flows through In leave from Port (RFC 6886
// section 3.3, RFC 6887 section 11: the mapping serves both ways), when no
// other NAT mapping holds it.
type PortMapping struct {
	Proto uint8          // ProtoTCP or ProtoUDP
	In    Iface          // the interface it listens on, e.g. the WAN
	Port  uint16         // external port, e.g. 3074
	To    netip.AddrPort // internal IPv4 endpoint, e.g. 192.168.1.10:3074
	// Peers, when set, are the only remote endpoints whose new flows the
	// mapping admits (a PCP PEER mapping), e.g. [198.51.100.7:5000];
	// empty admits every remote (MAP, NAT-PMP, UPnP).
	Peers []netip.AddrPort
}

// ErrInvalidPortMapping is returned by AddPortMapping for a protocol other
// than TCP and UDP, port 0, a target that is not IPv4 with a port, or an
// interface without an IPv4 address.
var ErrInvalidPortMapping = errors.New("natengine: invalid port mapping")

type pmKey struct {
	port  uint16
	proto uint8
	in    Iface
}

type pmEntry struct {
	to    netip.AddrPort
	peers []netip.AddrPort // nil: any remote
}

// pmTarget names a mapping's internal endpoint and interface, for the
// outbound port choice.
type pmTarget struct {
	addr  [16]byte
	port  uint16
	proto uint8
	in    Iface
}

// pmSet is an immutable set of port mappings: by external port, and
// the external port by internal endpoint.
type pmSet struct {
	byKey    map[pmKey]pmEntry
	byTarget map[pmTarget]uint16
}

func (set *pmSet) with(k pmKey, v *pmEntry, drop bool) *pmSet {
	next := &pmSet{byKey: make(map[pmKey]pmEntry, len(set.byKey)+1), byTarget: make(map[pmTarget]uint16, len(set.byKey)+1)}
	for kk, e := range set.byKey {
		if kk != k {
			next.byKey[kk] = e
		}
	}
	if !drop {
		next.byKey[k] = *v
	}
	for kk, e := range next.byKey {
		a, _ := fromAddr(e.to.Addr())
		next.byTarget[pmTarget{addr: a, port: e.to.Port(), proto: kk.proto, in: kk.in}] = kk.port
	}
	return next
}

// AddPortMapping installs m, or changes the target of the mapping already
// on m's protocol, interface and port. It fails with ErrPortInUse when a
// port forward, a NAT mapping (a LAN host's SNAT flows) or a port
// reservation of the router's own sockets has the external endpoint, and
// with ErrInvalidPortMapping for a malformed m. It is safe for concurrent
// use and costs the fast path nothing.
func (e *Engine) AddPortMapping(m PortMapping) error {
	to := netip.AddrPortFrom(m.To.Addr().Unmap(), m.To.Port())
	if (m.Proto != ProtoTCP && m.Proto != ProtoUDP) || m.Port == 0 || !to.Addr().Is4() || to.Port() == 0 {
		return fmt.Errorf("%w: %s port %d to %s", ErrInvalidPortMapping, protoName(m.Proto), m.Port, m.To)
	}
	n := e.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	s := e.rules.Load()
	is := s.iface(m.In)
	if is == nil || !is.has4 {
		return fmt.Errorf("%w: interface %d has no IPv4 address", ErrInvalidPortMapping, m.In)
	}
	k := pmKey{port: m.Port, proto: m.Proto, in: m.In}
	old := n.pms.Load()
	if _, ok := old.byKey[k]; !ok {
		ek := extKey{addr: is.addr4, port: m.Port, proto: m.Proto}
		err := n.inUseLocked(s, ek)
		if err == nil && (n.resv[ek] > 0 || n.resvAny[anyKey{port: m.Port, proto: m.Proto}] > 0) {
			err = fmt.Errorf("natengine: map %s %s: %w: reserved by the router", protoName(m.Proto), netip.AddrPortFrom(toAddr(is.addr4, false), m.Port), ErrPortInUse)
		}
		if err != nil {
			return err
		}
	}
	for _, p := range m.Peers {
		if !p.Addr().Unmap().Is4() {
			return fmt.Errorf("%w: peer %s is not IPv4", ErrInvalidPortMapping, p)
		}
	}
	var peers []netip.AddrPort
	for _, p := range m.Peers {
		peers = append(peers, netip.AddrPortFrom(p.Addr().Unmap(), p.Port()))
	}
	n.pms.Store(old.with(k, &pmEntry{to: to, peers: peers}, false))
	return nil
}

// RemovePortMapping removes the mapping on proto, interface in and port,
// reporting whether there was one. The flows it opened keep running.
func (e *Engine) RemovePortMapping(proto uint8, in Iface, port uint16) bool {
	n := e.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	k := pmKey{port: port, proto: proto, in: in}
	old := n.pms.Load()
	if _, ok := old.byKey[k]; !ok {
		return false
	}
	n.pms.Store(old.with(k, nil, true))
	n.releases++ // a range found full may have room again
	return true
}

// PortMappings returns the installed mappings, in no particular order.
func (e *Engine) PortMappings() []PortMapping {
	set := e.nat.pms.Load()
	out := make([]PortMapping, 0, len(set.byKey))
	for k, v := range set.byKey {
		out = append(out, PortMapping{Proto: k.proto, In: k.in, Port: k.port, To: v.to, Peers: append([]netip.AddrPort(nil), v.peers...)})
	}
	return out
}

// portMapped returns the target and interface of the port mapping on
// proto/port whose interface's first IPv4 address is dst. It reads the
// set without a lock and does not allocate.
func (n *natTable) portMapped(s *snapshot, proto uint8, dst *[16]byte, port uint16) (netip.AddrPort, Iface, bool) {
	e, in, ok := n.portMapping(s, proto, dst, port)
	return e.to, in, ok
}

// portMappedFrom is portMapped for a new flow from src:sport: a PEER
// mapping admits only its peers.
func (n *natTable) portMappedFrom(s *snapshot, t *Tuple) (netip.AddrPort, Iface, bool) {
	e, in, ok := n.portMapping(s, t.Proto, &t.Dst, t.DstPort)
	if !ok || len(e.peers) == 0 {
		return e.to, in, ok
	}
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(t.Src[:4])), t.SrcPort)
	for _, p := range e.peers {
		if p == src {
			return e.to, in, true
		}
	}
	return netip.AddrPort{}, 0, false
}

// outboundPort returns the external port of the mapping whose target is
// the internal endpoint (proto, addr, port) on interface out.
func (n *natTable) outboundPort(proto uint8, addr [16]byte, port uint16, out Iface) (uint16, bool) {
	set := n.pms.Load()
	if len(set.byTarget) == 0 {
		return 0, false
	}
	p, ok := set.byTarget[pmTarget{addr: addr, port: port, proto: proto, in: out}]
	return p, ok
}

func (n *natTable) portMapping(s *snapshot, proto uint8, dst *[16]byte, port uint16) (pmEntry, Iface, bool) {
	set := n.pms.Load()
	if len(set.byKey) == 0 {
		return pmEntry{}, 0, false
	}
	for id := range s.ifaces {
		is := &s.ifaces[id]
		if !is.ok || !is.has4 || is.addr4 != *dst {
			continue
		}
		if e, ok := set.byKey[pmKey{port: port, proto: proto, in: Iface(id)}]; ok {
			return e, Iface(id), true
		}
	}
	return pmEntry{}, 0, false
}
