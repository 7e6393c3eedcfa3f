package mka

import (
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Key errors. Their text never includes key material.
var (
	// errKeyLength: a key, KEK or wrapped key of a length 802.1X does not
	// use.
	errKeyLength = errors.New("mka: key length not supported")
	// errUnwrap: AES Key Wrap integrity check failed (wrong KEK or damaged
	// Distributed SAK).
	errUnwrap = errors.New("mka: key unwrap failed")
)

// KDF labels (802.1X-2020 6.2.1, 9.3.3, 9.8.1); each is 12 octets.
const (
	labelICK = "IEEE8021 ICK"
	labelKEK = "IEEE8021 KEK"
	labelSAK = "IEEE8021 SAK"
)

// secret holds key bytes behind a closure: fmt prints a func value as an
// address even when it reaches it by reflection through unexported fields,
// so no verb and no %+v of an enclosing struct can reveal the bytes (the
// same device as macsec.Key). The bytes are never modified after creation.
type secret struct {
	b func() []byte
}

func newSecret(b []byte) secret {
	c := append([]byte(nil), b...)
	return secret{func() []byte { return c }}
}

func (s secret) bytes() []byte {
	if s.b == nil {
		return nil
	}
	return s.b()
}

func (s secret) String() string               { return fmt.Sprintf("secret(redacted, %d octets)", len(s.bytes())) }
func (s secret) GoString() string             { return s.String() }
func (s secret) Format(f fmt.State, _ rune)   { fmt.Fprint(f, s.String()) }
func (s secret) MarshalText() ([]byte, error) { return []byte("redacted"), nil }

// CAK is a pre-shared Connectivity Association Key with its name, the CKN
// (802.1X 9.3). The key is 16 octets (MKA algorithm agility 0x0080C201 with
// 128-bit keys) or 32 octets (256-bit ICK and KEK); the CKN, 1..32 octets,
// is sent in the clear in every MKPDU and is not secret. A CAK never prints
// its key: String, GoString, every fmt verb and text marshalling show only
// lengths and the CKN. CAK values may be copied.
type CAK struct {
	key secret
	ckn []byte
}

// Limits on CAK and CKN lengths (802.1X 9.3.1; wpa_supplicant's mka_cak
// and mka_ckn accept the same).
const (
	MinCKNLen = 1
	MaxCKNLen = 32
)

// NewCAK returns a CAK holding copies of key (16 or 32 octets) and ckn
// (1..32 octets).
func NewCAK(key, ckn []byte) (CAK, error) {
	if len(key) != 16 && len(key) != 32 {
		return CAK{}, fmt.Errorf("mka: cak must be 16 or 32 octets, got %d", len(key))
	}
	if len(ckn) < MinCKNLen || len(ckn) > MaxCKNLen {
		return CAK{}, fmt.Errorf("mka: ckn must be %d..%d octets, got %d", MinCKNLen, MaxCKNLen, len(ckn))
	}
	return CAK{key: newSecret(key), ckn: append([]byte(nil), ckn...)}, nil
}

// ParseCAK parses a hex CAK and a hex CKN, as wpa_supplicant's mka_cak and
// mka_ckn. The error never quotes the key.
func ParseCAK(keyHex, cknHex string) (CAK, error) {
	k, err := hex.DecodeString(keyHex)
	if err != nil {
		return CAK{}, fmt.Errorf("mka: cak is not valid hex (%d characters)", len(keyHex))
	}
	defer clear(k)
	n, err := hex.DecodeString(cknHex)
	if err != nil {
		return CAK{}, fmt.Errorf("mka: ckn %q is not valid hex", cknHex)
	}
	return NewCAK(k, n)
}

// Len returns the key length in octets, 16 or 32 (0 for the zero CAK).
func (c CAK) Len() int { return len(c.key.bytes()) }

// CKN returns a copy of the CAK's name.
func (c CAK) CKN() []byte { return append([]byte(nil), c.ckn...) }

// String implements fmt.Stringer without revealing the key.
func (c CAK) String() string { return fmt.Sprintf("CAK(redacted, %d octets, ckn %x)", c.Len(), c.ckn) }

// GoString implements fmt.GoStringer without revealing the key.
func (c CAK) GoString() string { return c.String() }

// Format implements fmt.Formatter: every verb prints String.
func (c CAK) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// MarshalText implements encoding.TextMarshaler without revealing the key.
func (c CAK) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// kdf is the 802.1X KDF (6.2.1): NIST SP 800-108 counter mode with
// AES-CMAC as the PRF; block i is CMAC(key, i || label || 0x00 || context
// || L), with i one octet from 1 and L the output length in bits, two
// octets big-endian. outLen is in octets, a multiple of 16.
func kdf(key []byte, label string, context []byte, outLen int) ([]byte, error) {
	if outLen <= 0 || outLen%16 != 0 || outLen/16 > 255 {
		return nil, errKeyLength
	}
	c, err := newCMAC(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, outLen)
	var ctr [1]byte
	var tail [3]byte // 0x00 separator, L
	binary.BigEndian.PutUint16(tail[1:], uint16(outLen*8))
	var blk [16]byte
	for i := 1; len(out) < outLen; i++ {
		ctr[0] = byte(i)
		c.sum(&blk, ctr[:], []byte(label), tail[:1], context, tail[1:])
		out = append(out, blk[:]...)
	}
	clear(blk[:])
	return out, nil
}

// keyContext returns the KDF context of the ICK and KEK: the first 16
// octets of the CKN, zero-padded when it is shorter (802.1X 9.3.3; as
// wpa_supplicant and MKAdaemon do).
func (c CAK) keyContext() []byte {
	ctx := make([]byte, 16)
	copy(ctx, c.ckn)
	return ctx
}

// deriveICK returns the ICK, as long as the CAK (802.1X 9.3.3).
func (c CAK) deriveICK() ([]byte, error) {
	return kdf(c.key.bytes(), labelICK, c.keyContext(), c.Len())
}

// deriveKEK returns the KEK, as long as the CAK (802.1X 9.3.3).
func (c CAK) deriveKEK() ([]byte, error) {
	return kdf(c.key.bytes(), labelKEK, c.keyContext(), c.Len())
}

// deriveSAK returns the KDF form of a SAK (802.1X 9.8.1): KDF(CAK, "IEEE8021
// SAK", KS-nonce || MI list || KN, len(nonce)), where the nonce is fresh
// random data as long as the SAK. The participant draws SAKs directly from
// its random source instead (the standard allows either); this form exists
// for Annex G's vectors and for callers who want it.
func (c CAK) deriveSAK(nonce []byte, mis [][12]byte, kn uint32) ([]byte, error) {
	ctx := make([]byte, 0, len(nonce)+12*len(mis)+4)
	ctx = append(ctx, nonce...)
	for i := range mis {
		ctx = append(ctx, mis[i][:]...)
	}
	ctx = binary.BigEndian.AppendUint32(ctx, kn)
	return kdf(c.key.bytes(), labelSAK, ctx, len(nonce))
}

// newSAK draws a SAK of n octets from r (a CSPRNG, crypto/rand.Reader by
// default).
func newSAK(r io.Reader, n int) ([]byte, error) {
	k := make([]byte, n)
	if _, err := io.ReadFull(r, k); err != nil {
		return nil, fmt.Errorf("mka: random source: %w", err)
	}
	return k, nil
}

// equal reports whether a and b hold the same secret, in constant time.
func (s secret) equal(o secret) bool { return subtle.ConstantTimeCompare(s.bytes(), o.bytes()) == 1 }
