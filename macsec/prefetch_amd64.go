package macsec

// prefetch asks the CPU to load the cache line at p without waiting for
// it (PREFETCHT0). It never faults.
//
//go:noescape
func prefetch(p *byte)

// prefetchw is prefetch with the intent to write (PREFETCHW), which
// takes the line exclusive, so that a later store does not wait for the
// other core to give it up.
//
//go:noescape
func prefetchw(p *byte)

// cpuid returns EAX and ECX of CPUID leaf (subleaf 0).
func cpuid(leaf uint32) (eax, ecx uint32)

// hasPrefetchW reports CPUID.80000001H:ECX.PRFCHW[bit 8]; without it
// PREFETCHW's opcode is not guaranteed to be a no-op.
var hasPrefetchW = func() bool {
	if max, _ := cpuid(0x80000000); max < 0x80000001 {
		return false
	}
	_, ecx := cpuid(0x80000001)
	return ecx&(1<<8) != 0
}()

// prefetchWrite starts taking the line at p for writing: PREFETCHW where
// the CPU has it, else a plain prefetch.
func prefetchWrite(p *byte) {
	if hasPrefetchW {
		prefetchw(p)
	} else {
		prefetch(p)
	}
}

// prefetchSpan prefetches (PREFETCHT0) every cache line of the n
// octets at p, in one call rather than one per line.
//
//go:noescape
func prefetchSpan(p *byte, n int)
