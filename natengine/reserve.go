package natengine

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// Port reservations.
//
// The router's own sockets (the DHCP client's port 68, each upstream DNS
// query's random source port, RFC 5452 section 9.2) share the router's
// WAN address with the SNAT mappings of the LAN hosts. If SNAT maps a LAN
// flow onto a port one of them uses, the replies go to whichever flow
// conntrack finds first, or the router's flow clashes at confirmation. So
// before a socket uses a port, the router reserves it: ReservePort (one
// address) or ReservePortAny (every address SNAT translates to, for a
// socket whose source address is whatever the WAN address is, which a
// DHCP lease may change). A reservation is refused while a NAT mapping
// already owns the port (a LAN host's SNAT, with the flows that use it)
// or a port forward listens on it; otherwise SNAT skips the port until
// the reservation is released. Reservations are counted references: the
// same port may be reserved more than once (two WAN DHCP clients both
// use port 68), and each release undoes one.
//
// The reservation tables live in the mapping table, under its lock: a
// reservation and a new mapping are ordered, so neither misses the other.
// The fast path never reads them; a new mapping's port search reads two
// map lengths (two more lookups with reservations held). The router's own
// flows (PostroutingLocal) are not conflicts: they belong to the router's
// sockets, the ones that reserve.

// ErrPortInUse is returned by ReservePort and ReservePortAny when the port
// is already an external port of a NAT mapping (a LAN host's flows
// translated to it) or of a port forward. The reservation is counted in
// Stats.ReserveRefused; pick another port, or retry once the flows are
// gone.
var ErrPortInUse = errors.New("natengine: port in use")

// ErrInvalidReservation is returned for a reservation of a protocol other
// than TCP and UDP, of port 0, or, by ReservePort, without an address.
var ErrInvalidReservation = errors.New("natengine: invalid port reservation")

// anyKey names a port reserved on every address.
type anyKey struct {
	port  uint16
	proto uint8
}

// ReservePort keeps SNAT from allocating proto (ProtoTCP or ProtoUDP) port
// on the router's IPv4 address addr until release is called, e.g. before
// a socket bound to 203.0.113.2:68 sends. It fails with ErrPortInUse if a
// NAT mapping or a port forward already has that external endpoint. An
// IPv6 address is not translated, so nothing can take its ports: the
// reservation succeeds and does nothing. release may be called more than
// once; only the first call counts. ReservePort is safe for concurrent
// use and costs the fast path nothing.
func (e *Engine) ReservePort(proto uint8, addr netip.Addr, port uint16) (release func(), err error) {
	addr = addr.Unmap()
	if err := checkReservation(proto, port); err != nil {
		return nil, err
	}
	if !addr.IsValid() || addr.IsUnspecified() {
		return nil, fmt.Errorf("%w: %s port %d: no address (ReservePortAny reserves every address)", ErrInvalidReservation, protoName(proto), port)
	}
	if addr.Is6() {
		return func() {}, nil
	}
	a, _ := fromAddr(addr)
	ek := extKey{addr: a, port: port, proto: proto}
	n := e.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.inUseLocked(e.rules.Load(), ek); err != nil {
		e.stats.ReserveRefused.Add(1)
		return nil, err
	}
	if n.resv == nil {
		n.resv = make(map[extKey]int32)
	}
	n.resv[ek]++
	return sync.OnceFunc(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.resv[ek]--; n.resv[ek] <= 0 {
			delete(n.resv, ek)
		}
		n.releases++ // a range found full may have room again
	}), nil
}

// ReservePortAny is ReservePort on every IPv4 address SNAT translates to,
// now and after any SetRules (a new WAN address from a DHCP lease
// included), for a socket bound to 0.0.0.0 whose source address is
// whatever the WAN address is: the DHCP client's port 68, a DNS
// forwarder's upstream query ports. It fails with ErrPortInUse if a NAT
// mapping or a port forward on any of the router's addresses has the
// port.
func (e *Engine) ReservePortAny(proto uint8, port uint16) (release func(), err error) {
	if err := checkReservation(proto, port); err != nil {
		return nil, err
	}
	k := anyKey{port: port, proto: proto}
	n := e.nat
	n.mu.Lock()
	defer n.mu.Unlock()
	// The rules are read under n.mu: a mapping made before it was taken
	// was made on a snapshot no newer than this one.
	if err := n.inUseAnyLocked(e.rules.Load(), proto, port); err != nil {
		e.stats.ReserveRefused.Add(1)
		return nil, err
	}
	if n.resvAny == nil {
		n.resvAny = make(map[anyKey]int32)
	}
	n.resvAny[k]++
	return sync.OnceFunc(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.resvAny[k]--; n.resvAny[k] <= 0 {
			delete(n.resvAny, k)
		}
		n.releases++
	}), nil
}

func checkReservation(proto uint8, port uint16) error {
	if (proto != ProtoTCP && proto != ProtoUDP) || port == 0 {
		return fmt.Errorf("%w: %s port %d: need tcp or udp and a port", ErrInvalidReservation, protoName(proto), port)
	}
	return nil
}

// inUseLocked returns ErrPortInUse, with what holds it, if ek is the
// external endpoint of a mapping or a port forward. n.mu must be held.
func (n *natTable) inUseLocked(s *snapshot, ek extKey) error {
	ext := netip.AddrPortFrom(toAddr(ek.addr, false), ek.port)
	if m := n.byExt[ek]; m != nil {
		return fmt.Errorf("natengine: reserve %s %s: %w: NAT mapping of %s (%d flows)", protoName(ek.proto), ext, ErrPortInUse,
			netip.AddrPortFrom(toAddr(m.ik.addr, false), m.ik.port), m.refs)
	}
	if f, _ := s.forward(ek.proto, &ek.addr, ek.port); f != nil {
		return fmt.Errorf("natengine: reserve %s %s: %w: port forward to %s", protoName(ek.proto), ext, ErrPortInUse, f.To)
	}
	if to, _, ok := n.portMapped(s, ek.proto, &ek.addr, ek.port); ok {
		return fmt.Errorf("natengine: reserve %s %s: %w: port mapping to %s", protoName(ek.proto), ext, ErrPortInUse, to)
	}
	return nil
}

// inUseAnyLocked is inUseLocked on every IPv4 address SNAT may map
// onto: the SNAT pools (masquerade: each interface's first address) and,
// for hairpin, every local address. n.mu must be held.
func (n *natTable) inUseAnyLocked(s *snapshot, proto uint8, port uint16) error {
	for i := range s.ifaces {
		for _, a := range s.ifaces[i].snat {
			if err := n.inUseLocked(s, extKey{addr: a, port: port, proto: proto}); err != nil {
				return err
			}
		}
	}
	for i := range s.local {
		if s.local[i].v6 {
			continue
		}
		if err := n.inUseLocked(s, extKey{addr: s.local[i].a, port: port, proto: proto}); err != nil {
			return err
		}
	}
	return nil
}

// reservedLocked reports whether proto/port on ext is reserved
// (ReservePort, ReservePortAny). n.mu must be held.
func (n *natTable) reservedLocked(proto uint8, ext [16]byte, port uint16) bool {
	if len(n.resvAny) > 0 && n.resvAny[anyKey{port: port, proto: proto}] > 0 {
		return true
	}
	return len(n.resv) > 0 && n.resv[extKey{addr: ext, port: port, proto: proto}] > 0
}
