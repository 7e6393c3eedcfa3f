package mka

import (
	"crypto/aes"
	"crypto/subtle"
	"encoding/binary"
)

// keyWrapIV is the default initial value of RFC 3394 2.2.3.1.
var keyWrapIV = [8]byte{0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xa6, 0xa6}

// wrapKey wraps key (a multiple of 8 octets, at least 16) with kek using
// the AES Key Wrap of RFC 3394 2.2.1 (802.1X 9.8 wraps SAKs this way) and
// returns the 8 octets longer ciphertext.
func wrapKey(kek, key []byte) ([]byte, error) {
	if len(key) < 16 || len(key)%8 != 0 {
		return nil, errKeyLength
	}
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, errKeyLength
	}
	n := len(key) / 8
	out := make([]byte, 8+len(key))
	copy(out[8:], key)
	var a [8]byte
	a = keyWrapIV
	var blk [16]byte
	for j := 0; j < 6; j++ {
		for i := 1; i <= n; i++ {
			r := out[8*i : 8*i+8]
			copy(blk[:8], a[:])
			copy(blk[8:], r)
			b.Encrypt(blk[:], blk[:])
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(a[:], binary.BigEndian.Uint64(blk[:8])^t)
			copy(r, blk[8:])
		}
	}
	copy(out[:8], a[:])
	clear(blk[:])
	return out, nil
}

// unwrapKey reverses wrapKey (RFC 3394 2.2.2) and checks the integrity
// value; a wrong KEK or a damaged ciphertext gives errUnwrap, never a key.
func unwrapKey(kek, wrapped []byte) ([]byte, error) {
	if len(wrapped) < 24 || len(wrapped)%8 != 0 {
		return nil, errKeyLength
	}
	b, err := aes.NewCipher(kek)
	if err != nil {
		return nil, errKeyLength
	}
	n := len(wrapped)/8 - 1
	out := make([]byte, 8*n)
	copy(out, wrapped[8:])
	var a [8]byte
	copy(a[:], wrapped[:8])
	var blk [16]byte
	for j := 5; j >= 0; j-- {
		for i := n; i >= 1; i-- {
			r := out[8*(i-1) : 8*i]
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(blk[:8], binary.BigEndian.Uint64(a[:])^t)
			copy(blk[8:], r)
			b.Decrypt(blk[:], blk[:])
			copy(a[:], blk[:8])
			copy(r, blk[8:])
		}
	}
	clear(blk[:])
	if subtle.ConstantTimeCompare(a[:], keyWrapIV[:]) != 1 {
		clear(out)
		return nil, errUnwrap
	}
	return out, nil
}
