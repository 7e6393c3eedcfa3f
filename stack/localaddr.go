package stack

import (
	"encoding/binary"
	"net/netip"
)

// localSet is an immutable snapshot of the addresses that make a packet
// "for the router": every unicast address of every NIC (IPv6 link-local
// included) and the directed broadcast address of every IPv4 subnet. It is
// swapped whole through an atomic.Pointer whenever addresses change, so the
// receive path reads it without locks.
//
// The keys are plain integers and arrays rather than netip.Addr, whose
// hash is several times slower (it covers the zone handle too).
type localSet struct {
	v4 map[uint32]struct{}
	v6 map[[16]byte]struct{}
}

func newLocalSet(addrs []netip.Addr, prefixes []netip.Prefix) *localSet {
	s := &localSet{v4: make(map[uint32]struct{}), v6: make(map[[16]byte]struct{})}
	add := func(a netip.Addr) {
		if a.Is4() {
			s.v4[binary.BigEndian.Uint32(a.AsSlice())] = struct{}{}
		} else {
			s.v6[a.As16()] = struct{}{}
		}
	}
	for _, a := range addrs {
		add(a.Unmap())
	}
	for _, p := range prefixes {
		if b, ok := directedBroadcast(p); ok {
			add(b)
		}
	}
	return s
}

// has4 reports whether the IPv4 address in b is local, the limited
// broadcast address or multicast. Class E (240/4) is not: netstack routes
// it like any unicast destination (so does Linux), so it must meet the
// forwarding rules (TTL).
func (s *localSet) has4(b []byte) bool {
	switch {
	case b[0] >= 224 && b[0] < 240: // multicast (224/4)
		return true
	case b[0]&b[1]&b[2]&b[3] == 0xff: // 255.255.255.255
		return true
	}
	if s == nil {
		return false
	}
	_, ok := s.v4[binary.BigEndian.Uint32(b)]
	return ok
}

// has6 reports whether the IPv6 address in b is local or multicast.
func (s *localSet) has6(b []byte) bool {
	if b[0] == 0xff {
		return true
	}
	if s == nil {
		return false
	}
	_, ok := s.v6[[16]byte(b)]
	return ok
}

// directedBroadcast returns the broadcast address of IPv4 prefix p
// (RFC 919), if p has one (/31 and /32 do not, RFC 3021).
func directedBroadcast(p netip.Prefix) (netip.Addr, bool) {
	if !p.Addr().Is4() || p.Bits() > 30 {
		return netip.Addr{}, false
	}
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
