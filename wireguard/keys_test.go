package wireguard

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPublicKey checks X25519 against RFC 7748 §6.1's Alice.
func TestPublicKey(t *testing.T) {
	var priv, want Key
	hex.Decode(priv[:], []byte("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
	hex.Decode(want[:], []byte("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
	if got := priv.PublicKey(); got != want {
		t.Errorf("PublicKey() = %x, want %x", got, want)
	}
	k, err := ParseKey(" " + priv.String() + "\n")
	if err != nil || k != priv {
		t.Errorf("ParseKey(String()) = %x, %v; want the key back", k, err)
	}
	g, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	if g[0]&7 != 0 || g[31]&0xc0 != 0x40 {
		t.Errorf("GenerateKey() = %x, not clamped", g)
	}
}

func TestParseKeyErrors(t *testing.T) {
	for _, s := range []string{"", "abc", strings.Repeat("A", 43) + "!", strings.Repeat("A", 44), strings.Repeat("A", 45)} {
		if _, err := ParseKey(s); !errors.Is(err, ErrKeyText) {
			t.Errorf("ParseKey(%q) = %v, want ErrKeyText", s, err)
		}
	}
}

// TestReadKeyFile: a 0600 file is read; a looser one is refused with
// its mode and never its content.
func TestReadKeyFile(t *testing.T) {
	k, _ := GenerateKey()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got, err := ReadKeyFile(write("ok", k.String()+"\n", 0o600)); err != nil || got != k {
		t.Errorf("ReadKeyFile(0600) = %v; want the key", err)
	}
	if got, err := ReadKeyFile(write("ro", k.String(), 0o400)); err != nil || got != k {
		t.Errorf("ReadKeyFile(0400) = %v; want the key", err)
	}
	open := write("open", k.String()+"\n", 0o644)
	_, err := ReadKeyFile(open)
	if err == nil || !strings.Contains(err.Error(), "has mode 0644") || strings.Contains(err.Error(), k.String()) {
		t.Errorf("ReadKeyFile(0644) = %v; want a mode error without the key", err)
	}
	junk := write("junk", "SECRETSECRET\n", 0o600)
	_, err = ReadKeyFile(junk)
	if !errors.Is(err, ErrKeyText) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("ReadKeyFile(junk) = %v; want ErrKeyText without the content", err)
	}
	if _, err := ReadKeyFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadKeyFile(dir) = %v", err)
	}
}

// FuzzParseKey: no input panics, and an accepted key prints back as its
// input.
func FuzzParseKey(f *testing.F) {
	k, _ := GenerateKey()
	f.Add(k.String())
	f.Add(strings.Repeat("A", 44))
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err == nil && k.String() != strings.TrimSpace(s) {
			t.Errorf("ParseKey(%q) = %s", s, k)
		}
	})
}
