package macsec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
)

// CipherSuite is a MACsec cipher suite, identified by its 64-bit
// Cipher Suite Identifier (802.1AE 14.1; Linux if_macsec.h).
type CipherSuite uint64

// The four standard GCM cipher suites (802.1AE 14.5, 14.6; 802.1AEbw).
const (
	GCMAES128    CipherSuite = 0x0080C20001000001
	GCMAES256    CipherSuite = 0x0080C20001000002
	GCMAESXPN128 CipherSuite = 0x0080C20001000003
	GCMAESXPN256 CipherSuite = 0x0080C20001000004
)

// String returns the name iproute2 uses, e.g. "gcm-aes-128".
func (c CipherSuite) String() string {
	switch c {
	case GCMAES128:
		return "gcm-aes-128"
	case GCMAES256:
		return "gcm-aes-256"
	case GCMAESXPN128:
		return "gcm-aes-xpn-128"
	case GCMAESXPN256:
		return "gcm-aes-xpn-256"
	}
	return fmt.Sprintf("cipher-suite-%016x", uint64(c))
}

// ParseCipherSuite parses an iproute2 cipher name ("gcm-aes-128",
// "gcm-aes-256", "gcm-aes-xpn-128", "gcm-aes-xpn-256"; "default" is
// gcm-aes-128).
func ParseCipherSuite(s string) (CipherSuite, error) {
	switch s {
	case "gcm-aes-128", "default":
		return GCMAES128, nil
	case "gcm-aes-256":
		return GCMAES256, nil
	case "gcm-aes-xpn-128":
		return GCMAESXPN128, nil
	case "gcm-aes-xpn-256":
		return GCMAESXPN256, nil
	}
	return 0, fmt.Errorf("macsec: unknown cipher %q", s)
}

// Valid reports whether c is one of the four supported suites.
func (c CipherSuite) Valid() bool { return c.KeyLen() != 0 }

// XPN reports whether c uses 64-bit extended packet numbers.
func (c CipherSuite) XPN() bool { return c == GCMAESXPN128 || c == GCMAESXPN256 }

// KeyLen returns the SAK length in octets, 16 or 32, or 0 for an unknown
// suite.
func (c CipherSuite) KeyLen() int {
	switch c {
	case GCMAES128, GCMAESXPN128:
		return 16
	case GCMAES256, GCMAESXPN256:
		return 32
	}
	return 0
}

// MaxPN returns the highest packet number an SA of suite c may use.
func (c CipherSuite) MaxPN() uint64 {
	if c.XPN() {
		return ^uint64(0)
	}
	return 0xffffffff
}

// Key is a Secure Association Key (SAK). Its value never appears in
// String, GoString, fmt output of any verb, JSON or text marshalling, or
// errors, even when a Key sits in an unexported field that fmt prints by
// reflection: the bytes are reachable only through a closure, which fmt
// prints as an address. The zero Key is empty. Key values may be copied;
// they share the key bytes, which are never modified.
type Key struct {
	b func() []byte
}

// NewKey returns a Key holding a copy of b.
func NewKey(b []byte) Key {
	c := append([]byte(nil), b...)
	return Key{func() []byte { return c }}
}

// ParseKey parses a hex-encoded key (as `ip macsec ... key ID KEY`). The
// error never quotes the input.
func ParseKey(s string) (Key, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return Key{}, fmt.Errorf("macsec: key is not valid hex (%d characters)", len(s))
	}
	k := NewKey(b)
	clear(b)
	return k, nil
}

// Len returns the key length in octets.
func (k Key) Len() int {
	return len(k.bytes())
}

func (k Key) bytes() []byte {
	if k.b == nil {
		return nil
	}
	return k.b()
}

// Equal reports whether k and o hold the same key, in constant time, so
// that a reload can tell whether an SA's key changed without anyone
// reading the bytes.
func (k Key) Equal(o Key) bool {
	return subtle.ConstantTimeCompare(k.bytes(), o.bytes()) == 1
}

// String implements fmt.Stringer without revealing the key.
func (k Key) String() string { return fmt.Sprintf("Key(redacted, %d octets)", k.Len()) }

// GoString implements fmt.GoStringer without revealing the key.
func (k Key) GoString() string { return k.String() }

// Format implements fmt.Formatter: every verb prints String.
func (k Key) Format(f fmt.State, verb rune) { fmt.Fprint(f, k.String()) }

// MarshalText implements encoding.TextMarshaler without revealing the key.
func (k Key) MarshalText() ([]byte, error) { return []byte("redacted"), nil }

// MarshalJSON implements json.Marshaler without revealing the key.
func (k Key) MarshalJSON() ([]byte, error) { return []byte(`"redacted"`), nil }

// newAEAD returns the GCM AEAD of suite c for key k. Errors never include
// the key.
func newAEAD(c CipherSuite, k Key) (cipher.AEAD, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("macsec: unsupported cipher suite %v", c)
	}
	if k.Len() != c.KeyLen() {
		return nil, fmt.Errorf("macsec: %v needs a %d-octet key, got %d octets", c, c.KeyLen(), k.Len())
	}
	blk, err := aes.NewCipher(k.bytes())
	if err != nil {
		return nil, fmt.Errorf("macsec: aes: key of %d octets rejected", k.Len())
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, fmt.Errorf("macsec: gcm: %v", err)
	}
	return g, nil
}
