package wireguard

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeyLen is the length of a WireGuard key: a Curve25519 scalar or point,
// or a preshared key.
const KeyLen = 32

// Key is a WireGuard private, public or preshared key. Its String is the
// base64 text wg(8) prints and reads; a private Key must not be logged,
// so code that holds one formats only its PublicKey.
type Key [KeyLen]byte

// ErrKeyText is returned for text that is not 44 characters of base64
// holding 32 bytes, the only form wg(8) writes.
var ErrKeyText = errors.New("wireguard: a key is 44 characters of base64 holding 32 bytes")

// GenerateKey returns a new private key, clamped as wg genkey's are.
func GenerateKey() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return Key{}, fmt.Errorf("wireguard: genkey: %w", err)
	}
	k.clamp()
	return k, nil
}

// clamp applies Curve25519's scalar clamping (RFC 7748 §5), which wg
// genkey stores in the key itself.
func (k *Key) clamp() {
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
}

// PublicKey returns the public key of the private key k: X25519(k, 9).
// Clamping happens inside X25519, so an unclamped k gives the same
// result as wg pubkey.
func (k Key) PublicKey() Key {
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil { // only for a wrong length, which Key excludes
		panic("wireguard: " + err.Error())
	}
	var pub Key
	copy(pub[:], priv.PublicKey().Bytes())
	return pub
}

// IsZero reports whether k is all zeroes (no key).
func (k Key) IsZero() bool { return k == Key{} }

// String returns k in base64, as wg(8) writes keys.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// hex returns k in the lower-case hex of the UAPI (wireguard-go's IpcSet).
func (k Key) hex() string { return hex.EncodeToString(k[:]) }

// ParseKey parses a key in wg(8)'s base64 text; surrounding white space
// is ignored. Errors never quote s, which may be a private key.
func ParseKey(s string) (Key, error) {
	s = strings.TrimSpace(s)
	if len(s) != base64.StdEncoding.EncodedLen(KeyLen) {
		return Key{}, ErrKeyText
	}
	// Decode writes up to DecodedLen (33) bytes: 44 characters without
	// padding hold more than a key.
	var buf [KeyLen + 1]byte
	defer clear(buf[:])
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(s))
	if err != nil || n != KeyLen {
		return Key{}, ErrKeyText
	}
	return Key(buf[:KeyLen]), nil
}

// MaxKeyFileMode is the loosest mode a key file may have: readable and
// writable by its owner only, as wg(8) warns about and umask 077 gives.
const MaxKeyFileMode os.FileMode = 0o600

// ReadKeyFile reads a private or preshared key from path: a regular
// file with mode 0600 or stricter holding one base64 key, as
// `wg genkey > path` writes it. Errors name the file and its mode but
// never its content.
func ReadKeyFile(path string) (Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Key{}, err
	}
	if !st.Mode().IsRegular() {
		return Key{}, fmt.Errorf("%s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&^MaxKeyFileMode != 0 {
		return Key{}, fmt.Errorf("%s has mode %04o; a key file must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	defer clear(b)
	k, err := ParseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
