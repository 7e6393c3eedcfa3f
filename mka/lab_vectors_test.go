package mka

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"

	"github.com/gvrouter/gvrouter/macsec"
)

// readPcap returns the frames of a classic little-endian pcap file.
func readPcap(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 {
		t.Fatalf("%s: not a little-endian pcap", path)
	}
	var frames [][]byte
	for off := 24; off+16 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		off += 16
		if off+n > len(b) {
			t.Fatalf("%s: truncated record", path)
		}
		frames = append(frames, b[off:off+n])
		off += n
	}
	return frames
}

// TestMACsecLabCaptures checks our key derivation, ICV and SAK unwrap
// against MKPDUs made by another implementation (testdata/macsec-lab,
// from johnfu-ai/MACsec_Lab): every MKPDU must decode and verify, our ICK
// and KEK must equal the ones it published, and each Distributed SAK must
// unwrap to its published SAK.
func TestMACsecLabCaptures(t *testing.T) {
	psk := struct{ cak, ckn, ick, kek string }{"00112233445566778899aabbccddeeff", "4d41435345432d4c41422d434b4e3031",
		"fe740aa3f51cbdbb4e36d273b644ea8d", "4adf6a4df4146c154a8b5f5ae7c6f10d"}
	eap := struct{ cak, ckn, ick, kek string }{"9414a9434321fde7334cfd5356542f2c", "3a4c35b14d5ffb90dd69687cf15fac47",
		"70f53e4b7a70206aac62678b91084eed", "74f2ded3c2cac7a47493731736da2415"}
	tests := []struct {
		file   string
		keys   struct{ cak, ckn, ick, kek string }
		saks   map[uint32]string // by KN
		suites map[uint32]macsec.CipherSuite
		mkpdus int
	}{
		{"mka-handshake", psk, map[uint32]string{1: "a1a2a3a4a5a6a7a8a9aaabacadaeafb0"}, map[uint32]macsec.CipherSuite{1: macsec.GCMAES128}, 6},
		{"mka-rekey", psk, map[uint32]string{2: "c1c2c3c4c5c6c7c8c9cacbcccdcecfd0"}, map[uint32]macsec.CipherSuite{2: macsec.GCMAES128}, 0},
		{"mka-xpn", psk, map[uint32]string{4: "e1e2e3e4e5e6e7e8e9eaebecedeeeff0"}, map[uint32]macsec.CipherSuite{4: macsec.GCMAESXPN128}, 0},
		{"mka-after-eap", eap, map[uint32]string{1: "b1b2b3b4b5b6b7b8b9babbbcbdbebfc0"}, map[uint32]macsec.CipherSuite{1: macsec.GCMAES128}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cak, err := ParseCAK(tt.keys.cak, tt.keys.ckn)
			if err != nil {
				t.Fatal(err)
			}
			ick, _ := cak.deriveICK()
			kek, _ := cak.deriveKEK()
			if !bytes.Equal(ick, unhex(t, tt.keys.ick)) || !bytes.Equal(kek, unhex(t, tt.keys.kek)) {
				t.Errorf("ICK %x KEK %x, want %s %s", ick, kek, tt.keys.ick, tt.keys.kek)
			}
			k, err := NewICVKey(cak)
			if err != nil {
				t.Fatal(err)
			}
			n, unwrapped := 0, 0
			for i, f := range readPcap(t, "testdata/macsec-lab/"+tt.file+".pcap") {
				if len(f) < 14 || f[12] != 0x88 || f[13] != 0x8e || f[15] != EAPOLTypeMKA {
					continue // MACsec data frames, EAPOL-EAP
				}
				n++
				var m MKPDU
				if err := Decode(f, &m); err != nil {
					t.Fatalf("frame %d: Decode = %v", i+1, err)
				}
				if !k.Verify(f, &m) {
					t.Errorf("frame %d: ICV does not verify", i+1)
				}
				if string(m.Basic.CKN) != string(cak.ckn) || m.Basic.AlgorithmAgility != AlgorithmAgility {
					t.Errorf("frame %d: ckn %x agility %#x", i+1, m.Basic.CKN, m.Basic.AlgorithmAgility)
				}
				if !m.HasDistSAK {
					continue
				}
				want, ok := tt.saks[m.DistSAK.KN]
				if !ok {
					t.Fatalf("frame %d: unexpected KN %d", i+1, m.DistSAK.KN)
				}
				sak, err := unwrapKey(kek, m.DistSAK.WrappedKey)
				if err != nil || !bytes.Equal(sak, unhex(t, want)) || m.DistSAK.CipherSuite != tt.suites[m.DistSAK.KN] {
					t.Errorf("frame %d: SAK %x (%v) suite %v, want %s %v", i+1, sak, err, m.DistSAK.CipherSuite, want, tt.suites[m.DistSAK.KN])
				}
				unwrapped++
			}
			if n == 0 || unwrapped == 0 || (tt.mkpdus != 0 && n != tt.mkpdus) {
				t.Errorf("%d MKPDUs, %d SAKs unwrapped", n, unwrapped)
			}
		})
	}
}
