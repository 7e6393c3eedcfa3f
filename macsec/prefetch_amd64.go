package macsec

// prefetch asks the CPU to load the cache line at p without waiting for
// it (PREFETCHT0). It never faults.
//
//go:noescape
func prefetch(p *byte)
