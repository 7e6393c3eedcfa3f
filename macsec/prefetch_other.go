//go:build !amd64

package macsec

// prefetch does nothing where there is no assembly for it.
func prefetch(p *byte) {}

// prefetchWrite does nothing where there is no assembly for it.
func prefetchWrite(p *byte) {}

// prefetchSpan does nothing where there is no assembly for it.
func prefetchSpan(p *byte, n int) {}
