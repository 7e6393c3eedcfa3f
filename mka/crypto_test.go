package mka

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestCMACVectors checks AES-CMAC against RFC 4493 section 4 (AES-128,
// examples 1-4) and NIST SP 800-38B appendix D.3 (AES-256, the same
// messages); python3-cryptography's CMAC gives the same values.
func TestCMACVectors(t *testing.T) {
	msg := "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51" +
		"30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710"
	tests := []struct {
		key  string
		n    int
		want string
	}{
		{"2b7e151628aed2a6abf7158809cf4f3c", 0, "bb1d6929e95937287fa37d129b756746"},
		{"2b7e151628aed2a6abf7158809cf4f3c", 16, "070a16b46b4d4144f79bdd9dd04a287c"},
		{"2b7e151628aed2a6abf7158809cf4f3c", 40, "dfa66747de9ae63030ca32611497c827"},
		{"2b7e151628aed2a6abf7158809cf4f3c", 64, "51f0bebf7e3b9d92fc49741779363cfe"},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 0, "028962f61b7bf89efc6b551f4667d983"},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 16, "28a7023f452e8f82bd4bf28d8c37c35c"},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 40, "aaf3d8f1de5640c232f5b169b9c911e6"},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", 64, "e1992190549f6ed5696a2c056c315410"},
	}
	m := unhex(t, msg)
	for _, tt := range tests {
		c, err := newCMAC(unhex(t, tt.key))
		if err != nil {
			t.Fatal(err)
		}
		var got [16]byte
		c.sum(&got, m[:tt.n])
		if want := unhex(t, tt.want); !bytes.Equal(got[:], want) {
			t.Errorf("CMAC(%d-octet key, %d octets) = %x, want %x", len(unhex(t, tt.key)), tt.n, got, want)
		}
		// Any split of the message into parts gives the same MAC.
		for cut := 0; cut <= tt.n; cut += 7 {
			var split [16]byte
			c.sum(&split, m[:cut], nil, m[cut:tt.n])
			if split != got {
				t.Errorf("CMAC split at %d of %d = %x, want %x", cut, tt.n, split, got)
			}
		}
	}
	if _, err := newCMAC(make([]byte, 24)); err == nil {
		t.Error("newCMAC(24-octet key) succeeded, want an error (802.1X uses 16 or 32)")
	}
}

// TestKeyWrapVectors checks AES Key Wrap against RFC 3394 section 4
// (4.1-4.6).
func TestKeyWrapVectors(t *testing.T) {
	const kek256 = "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"
	tests := []struct {
		name, kek, key, want string
	}{
		{"4.1", kek256[:32], "00112233445566778899AABBCCDDEEFF", "1FA68B0A8112B447AEF34BD8FB5A7B829D3E862371D2CFE5"},
		{"4.2", kek256[:48], "00112233445566778899AABBCCDDEEFF", "96778B25AE6CA435F92B5B97C050AED2468AB8A17AD84E5D"},
		{"4.3", kek256, "00112233445566778899AABBCCDDEEFF", "64E8C3F9CE0F5BA263E9777905818A2A93C8191E7D6E8AE7"},
		{"4.4", kek256[:48], "00112233445566778899AABBCCDDEEFF0001020304050607", "031D33264E15D33268F24EC260743EDCE1C6C7DDEE725A936BA814915C6762D2"},
		{"4.5", kek256, "00112233445566778899AABBCCDDEEFF0001020304050607", "A8F9BC1612C68B3FF6E6F4FBE30E71E4769C8B80A32CB8958CD5D17D6B254DA1"},
		{"4.6", kek256, "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F", "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kek, key, want := unhex(t, tt.kek), unhex(t, tt.key), unhex(t, tt.want)
			got, err := wrapKey(kek, key)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("wrapKey = %x, %v, want %x", got, err, want)
			}
			back, err := unwrapKey(kek, want)
			if err != nil || !bytes.Equal(back, key) {
				t.Fatalf("unwrapKey = %x, %v, want %x", back, err, key)
			}
			bad := append([]byte(nil), want...)
			bad[len(bad)-1] ^= 1
			if k, err := unwrapKey(kek, bad); err != errUnwrap || k != nil {
				t.Errorf("unwrapKey(damaged) = %x, %v, want nil, errUnwrap", k, err)
			}
		})
	}
	for _, n := range []int{0, 8, 17, 23} {
		if _, err := unwrapKey(make([]byte, 16), make([]byte, n)); err == nil {
			t.Errorf("unwrapKey(%d octets) succeeded", n)
		}
	}
}

// Annex G of IEEE Std 802.1X-2020 gives example values for the KDF (G.1),
// KEK (G.4), ICK (G.5) and SAK (G.6) derivations. The standard is not in
// our corpus; the values are as reproduced in Technica Engineering's
// MKAdaemon, test/crypto/test-aes-kdf.cpp (tests KDF_ANNEX_G_1_1 ...
// SAK_ANNEX_G_6_2), an independent implementation.
const (
	annexGCAK128 = "135bd758b0ee5c11c55ff6ab19fdb199"
	annexGCKN128 = "96437a93ccf10d9dfe347846cce52c7d"
	annexGCAK256 = "a29efdb63d6fba73c65daab2295340a837a8886e94a905b5c9c7ef1d9dbb297e"
	annexGCKN256 = "7888f5d48ba8b24e96bb95bd8c7304ec"
)

func TestKDFAnnexG(t *testing.T) {
	tests := []struct {
		name, key string
		n         int
		want      string
	}{
		{"G.1.1", "1ab9024fa04a03feb9024fa04a03fe11", 16, "b57a0b05f43e9600c3c4d15c1e3c26e8"},
		{"G.1.2", "3946ec36f59017f1267e914abed2dbf6633f52ae7e20309d3eefdda4073adfad", 32, "0efd01e5b03a0951a6df9bbffe419016ee40fdbfc3335ebf92ea03802214a307"},
	}
	for _, tt := range tests {
		got, err := kdf(unhex(t, tt.key), "HI THERE", []byte{1, 2, 1, 4}, tt.n)
		if want := unhex(t, tt.want); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: kdf = %x, %v, want %x", tt.name, got, err, want)
		}
	}
	for _, n := range []int{0, 8, 17} {
		if _, err := kdf(make([]byte, 16), "x", nil, n); err == nil {
			t.Errorf("kdf(%d octets) succeeded", n)
		}
	}
}

func TestICKKEKAnnexG(t *testing.T) {
	tests := []struct {
		name, cak, ckn, ick, kek string
	}{
		{"128", annexGCAK128, annexGCKN128, "8f1c5cb1c8ed2e5f047906e0473aad4d", "8f5a384c15d6ae9302b462e363d03ca6"},
		{"256", annexGCAK256, annexGCKN256,
			"98b8544d7390a41e50ef72e25b4a036523c919e8129188719 49b48123eab526e",
			"71340e454c84a1232aa7977d5ed86f78f250f3f9d53584b9337ff0c6dfdc9f96"},
	}
	for _, tt := range tests {
		cak, err := NewCAK(unhex(t, tt.cak), unhex(t, tt.ckn))
		if err != nil {
			t.Fatal(err)
		}
		ick, err := cak.deriveICK()
		if want := unhex(t, tt.ick); err != nil || !bytes.Equal(ick, want) {
			t.Errorf("%s (G.5): ICK = %x, %v, want %x", tt.name, ick, err, want)
		}
		kek, err := cak.deriveKEK()
		if want := unhex(t, tt.kek); err != nil || !bytes.Equal(kek, want) {
			t.Errorf("%s (G.4): KEK = %x, %v, want %x", tt.name, kek, err, want)
		}
	}
}

func TestSAKAnnexG(t *testing.T) {
	var mi1, mi2 [12]byte
	copy(mi1[:], unhex(t, "cd421cf86ba4579386576 75b"))
	copy(mi2[:], unhex(t, "0102030405060708 0d1f36cf"))
	nonce := unhex(t, "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f00")
	tests := []struct {
		name, cak, want string
		n               int
	}{
		{"G.6.1", annexGCAK128, "04520592 5831ae59c14550ed59cc003d", 16},
		{"G.6.2", annexGCAK256, "bb692568b287484a5f3f4793b09732270d13dd818373c15b3f2793fdc1948a37", 32},
	}
	for _, tt := range tests {
		cak, err := NewCAK(unhex(t, tt.cak), []byte{1})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cak.deriveSAK(nonce[:tt.n], [][12]byte{mi1, mi2}, 1)
		if want := unhex(t, tt.want); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: SAK = %x, %v, want %x", tt.name, got, err, want)
		}
	}
}

// TestCAKChecks covers NewCAK's length rules.
func TestCAKChecks(t *testing.T) {
	tests := []struct {
		key, ckn int
		ok       bool
	}{
		{16, 1, true}, {32, 32, true}, {16, 16, true},
		{15, 16, false}, {24, 16, false}, {33, 16, false}, {16, 0, false}, {16, 33, false},
	}
	for _, tt := range tests {
		_, err := NewCAK(make([]byte, tt.key), make([]byte, tt.ckn))
		if (err == nil) != tt.ok {
			t.Errorf("NewCAK(%d-octet key, %d-octet ckn) error = %v, want ok %v", tt.key, tt.ckn, err, tt.ok)
		}
	}
	if _, err := ParseCAK("zz", "01"); err == nil || strings.Contains(err.Error(), "zz") {
		t.Errorf("ParseCAK(bad hex) = %v, want an error that does not quote the key", err)
	}
}
