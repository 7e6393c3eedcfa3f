package mka

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
)

// cmac computes AES-CMAC (RFC 4493, NIST SP 800-38B) with a 16- or
// 32-octet key. The subkeys and scratch blocks live in the struct, so a MAC
// costs no allocation; a cmac is therefore not safe for concurrent use.
type cmac struct {
	b      cipher.Block
	k1, k2 [16]byte
	x, y   [16]byte // chaining value and scratch, see sum
}

// newCMAC returns a CMAC for key, which must be 16 or 32 octets long (the
// only lengths 802.1X uses).
func newCMAC(key []byte) (*cmac, error) {
	if len(key) != 16 && len(key) != 32 {
		return nil, errKeyLength
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, errKeyLength
	}
	c := &cmac{b: b}
	// L = AES(K, 0^128); K1 = L<<1 ^ Rb if msb(L); K2 = K1<<1 likewise
	// (RFC 4493 2.3).
	var l [16]byte
	b.Encrypt(l[:], l[:])
	dbl(&c.k1, &l)
	dbl(&c.k2, &c.k1)
	clear(l[:])
	return c, nil
}

// dbl sets dst to src doubled in GF(2^128) with the CMAC polynomial.
func dbl(dst, src *[16]byte) {
	carry := src[0] >> 7
	for i := 0; i < 15; i++ {
		dst[i] = src[i]<<1 | src[i+1]>>7
	}
	dst[15] = src[15]<<1 ^ 0x87*carry
}

// sum writes the CMAC of the concatenation of parts to out. Taking several
// parts lets callers MAC a header and a body without copying them together.
func (c *cmac) sum(out *[16]byte, parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	clear(c.x[:])
	fill := 0 // octets of the current block in c.y
	for _, p := range parts {
		for len(p) > 0 {
			if fill == 16 {
				// The block is full and more data follows, so it is not
				// the last one: chain it.
				subtle.XORBytes(c.x[:], c.x[:], c.y[:])
				c.b.Encrypt(c.x[:], c.x[:])
				fill = 0
			}
			k := copy(c.y[fill:], p)
			fill += k
			p = p[k:]
		}
	}
	// Last block: complete (n > 0, n%16 == 0) XOR K1, else pad 10* XOR K2.
	if n > 0 && fill == 16 {
		subtle.XORBytes(c.y[:], c.y[:], c.k1[:])
	} else {
		c.y[fill] = 0x80
		clear(c.y[fill+1:])
		subtle.XORBytes(c.y[:], c.y[:], c.k2[:])
	}
	subtle.XORBytes(c.x[:], c.x[:], c.y[:])
	c.b.Encrypt(out[:], c.x[:])
	clear(c.y[:])
}
