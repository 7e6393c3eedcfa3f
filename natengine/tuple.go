package natengine

import "net/netip"

// IANA protocol numbers used by the engine.
const (
	ProtoICMP   = 1
	ProtoTCP    = 6
	ProtoUDP    = 17
	ProtoICMPv6 = 58
)

// Tuple identifies one direction of a flow as seen at one point of the path.
// It is packed, pointer-free and comparable so it can be a map key and be
// hashed without allocation (Tailscale net/flowtrack Tuple style). IPv4
// addresses use the first 4 bytes of Src and Dst; the rest are zero. For ICMP
// echo the query identifier is stored in both SrcPort and DstPort, so that the
// inverse of a request tuple is the reply tuple.
type Tuple struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Proto            uint8
	V6               bool
}

// Invert returns the tuple of the opposite direction.
func (t Tuple) Invert() Tuple {
	t.Src, t.Dst = t.Dst, t.Src
	t.SrcPort, t.DstPort = t.DstPort, t.SrcPort
	return t
}

// SrcAddr returns the source address as a netip.Addr.
func (t Tuple) SrcAddr() netip.Addr { return toAddr(t.Src, t.V6) }

// DstAddr returns the destination address as a netip.Addr.
func (t Tuple) DstAddr() netip.Addr { return toAddr(t.Dst, t.V6) }

// String formats t like conntrack -L.
func (t Tuple) String() string {
	return protoName(t.Proto) + " " + netip.AddrPortFrom(t.SrcAddr(), t.SrcPort).String() +
		" -> " + netip.AddrPortFrom(t.DstAddr(), t.DstPort).String()
}

// hash returns a 32-bit hash of t. It uses only uint32 arithmetic on the
// result so bucket indexes never go negative on 32-bit platforms (gVisor's
// conntrack computes int(h.Sum32()) % n, which is negative on GOARCH=arm).
func (t *Tuple) hash(seed uint64) uint32 {
	h := seed ^ 0x9e3779b97f4a7c15
	for i := 0; i < 16; i += 8 {
		h = mix(h, le64(t.Src[i:]))
		h = mix(h, le64(t.Dst[i:]))
	}
	h = mix(h, uint64(t.SrcPort)|uint64(t.DstPort)<<16|uint64(t.Proto)<<32)
	if t.V6 {
		h = mix(h, 1)
	}
	return uint32(h ^ h>>32)
}

// key returns a 64-bit keyed hash of t: the conntrack table's map key
// (flowMap) and, folded, its shard. It exists for 32-bit ARM, where the
// runtime has no AES hash: a map keyed by the 38-byte Tuple hashes it
// with memhashFallback and compares keys byte by byte in memeqbody, a
// third of the fast path's instructions (docs/arm-projection.md). An IPv4
// tuple mixes only the words that can be non-zero (Tuple's addresses are
// zero past the first 4 bytes), two 64-bit mixes instead of five.
func (t *Tuple) key(seed uint64) uint64 {
	h := seed ^ 0x9e3779b97f4a7c15
	if t.V6 {
		for i := 0; i < 16; i += 8 {
			h = mix(h, le64(t.Src[i:]))
			h = mix(h, le64(t.Dst[i:]))
		}
		return mix(h, uint64(t.SrcPort)|uint64(t.DstPort)<<16|uint64(t.Proto)<<32|1<<40)
	}
	h = mix(h, uint64(le32(t.Src[:]))|uint64(le32(t.Dst[:]))<<32)
	return mix(h, uint64(t.SrcPort)|uint64(t.DstPort)<<16|uint64(t.Proto)<<32)
}

// equal reports whether t == u, comparing an IPv4 tuple's addresses by
// their first 4 bytes only (the rest are zero): the compiler's t == u
// calls memequal, a byte loop on 32-bit ARM.
func (t *Tuple) equal(u *Tuple) bool {
	if t.SrcPort != u.SrcPort || t.DstPort != u.DstPort || t.Proto != u.Proto || t.V6 != u.V6 {
		return false
	}
	if !t.V6 {
		return le32(t.Src[:]) == le32(u.Src[:]) && le32(t.Dst[:]) == le32(u.Dst[:])
	}
	return le64(t.Src[:]) == le64(u.Src[:]) && le64(t.Src[8:]) == le64(u.Src[8:]) &&
		le64(t.Dst[:]) == le64(u.Dst[:]) && le64(t.Dst[8:]) == le64(u.Dst[8:])
}

func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func toAddr(a [16]byte, v6 bool) netip.Addr {
	if v6 {
		return netip.AddrFrom16(a)
	}
	return netip.AddrFrom4([4]byte(a[:4]))
}

// fromAddr converts a to the Tuple address form; v6 reports the family.
func fromAddr(a netip.Addr) (b [16]byte, v6 bool) {
	a = a.Unmap()
	if a.Is4() {
		v4 := a.As4()
		copy(b[:], v4[:])
		return b, false
	}
	return a.As16(), true
}

func addrLen(v6 bool) int {
	if v6 {
		return 16
	}
	return 4
}

func protoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoICMP:
		return "icmp"
	case ProtoICMPv6:
		return "icmpv6"
	}
	return "proto-" + itoa(int(p))
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
