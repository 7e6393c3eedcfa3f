package natengine

// Internet checksum helpers (RFC 1071) and incremental updates (RFC 1624).
//
// A "sum" here is the 16-bit one's complement sum of the data, folded but not
// complemented; a "checksum" is the value stored in a header field, the
// complement of the sum. Incremental updates use RFC 1624 equation 3,
// HC' = ~(~HC + ~m + m'), which never produces the -0 (0xFFFF) result that
// equation 2 can.

// Sum returns the one's complement sum of b added to initial, folded to 16
// bits (RFC 1071). An odd trailing byte is padded with a zero byte.
func Sum(b []byte, initial uint16) uint16 {
	s := uint64(initial)
	for len(b) >= 8 {
		s += uint64(b[0])<<8 | uint64(b[1])
		s += uint64(b[2])<<8 | uint64(b[3])
		s += uint64(b[4])<<8 | uint64(b[5])
		s += uint64(b[6])<<8 | uint64(b[7])
		b = b[8:]
	}
	for len(b) >= 2 {
		s += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint64(b[0]) << 8
	}
	return fold64(s)
}

// SumCombine returns the one's complement sum of a and b.
func SumCombine(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s + s>>16)
}

// UpdateChecksum16 returns the checksum field value that results from
// replacing the 16-bit word old by new in the covered data (RFC 1624 eqn. 3).
func UpdateChecksum16(check, old, new uint16) uint16 {
	return ^SumCombine(SumCombine(^check, ^old), new)
}

// UpdateChecksum returns the checksum field value that results from replacing
// old by new in the covered data. old and new must have the same even length
// and sit at an even offset of the covered data.
func UpdateChecksum(check uint16, old, new []byte) uint16 {
	return applyDelta(check, deltaBytes(0, old, new))
}

// delta is a precomputed RFC 1624 adjustment: the one's complement sum of
// ~m + m' over every changed word. It is constant per flow for NAT rewrites,
// so the fast path computes it once.
type delta uint16

// deltaBytes adds to d the change from old to new (same even length).
func deltaBytes(d delta, old, new []byte) delta {
	s := uint64(d)
	for i := 0; i+1 < len(old); i += 2 {
		s += uint64(^(uint16(old[i])<<8 | uint16(old[i+1])))
		s += uint64(uint16(new[i])<<8 | uint16(new[i+1]))
	}
	return delta(fold64(s))
}

// deltaWord adds to d the change of one 16-bit word from old to new.
func deltaWord(d delta, old, new uint16) delta {
	return delta(SumCombine(SumCombine(uint16(d), ^old), new))
}

// applyDelta returns checksum field value check adjusted by d.
func applyDelta(check uint16, d delta) uint16 {
	return ^SumCombine(^check, uint16(d))
}

func fold64(s uint64) uint16 {
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// pseudoSum is the sum of the IPv4 (RFC 9293 3.1) or IPv6 (RFC 8200 8.1)
// pseudo-header for an L4 segment of length n.
func pseudoSum(src, dst []byte, proto uint8, n int) uint16 {
	s := Sum(src, 0)
	s = Sum(dst, s)
	s = SumCombine(s, uint16(proto))
	s = SumCombine(s, uint16(n>>16))
	return SumCombine(s, uint16(n))
}
