package macsec

import (
	"bytes"
	"testing"
)

// TestAnnexCVectors runs all 32 IEEE 802.1AE Annex C vectors through a
// SecY in both directions: plaintext -> Protect -> the protected frame,
// and protected frame -> Verify -> the plaintext, byte-exact.
func TestAnnexCVectors(t *testing.T) {
	goroutineLeakCheck(t)
	vs := loadVectors(t)
	if len(vs) != 32 {
		t.Fatalf("got %d vectors, want 32", len(vs))
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			plain := mustHex(t, v.PlaintextFrame)
			prot := mustHex(t, v.ProtectedFrame)
			sci := v.sci(t)
			es := mustHex(t, v.TCIAN)[0]&TCIEndStation != 0

			for _, inPlace := range []bool{false, true} {
				var out sink
				cfg := Config{SCI: sci, Cipher: v.suite(t), Encrypt: v.Confidential, Protect: true,
					SendSCI: v.SCIInFrame, EndStation: es, TX: out.handler, RX: out.handler, Workers: 2}
				tx, err := New(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.InstallTXSA(v.sa(t)); err != nil {
					t.Fatal(err)
				}
				if err := tx.SetEncodingSA(v.AN); err != nil {
					t.Fatal(err)
				}
				if inPlace {
					buf := make([]byte, Headroom+len(plain), Headroom+len(plain)+Tailroom)
					copy(buf[Headroom:], plain)
					tx.ProtectInPlace([][]byte{buf})
				} else {
					tx.Protect([][]byte{append([]byte(nil), plain...)})
				}
				tx.Close()
				got := out.get()
				if len(got) != 1 || !bytes.Equal(got[0], prot) {
					t.Fatalf("Protect(%x) (in place %v) = %x, want %x", plain, inPlace, got, prot)
				}
				if n := tx.TXSCStats().OutPktsProtected.Load() + tx.TXSCStats().OutPktsEncrypted.Load(); n != 1 {
					t.Errorf("OutPkts = %d, want 1", n)
				}
			}

			var in sink
			rcfg := DefaultConfig(0x0a0b0c0d0e0f0001)
			rcfg.Cipher = v.suite(t)
			rcfg.ReplayProtect = true
			rcfg.TX, rcfg.RX = in.handler, in.handler
			rx, err := New(rcfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := rx.AddRXSC(sci); err != nil {
				t.Fatal(err)
			}
			if err := rx.InstallRXSA(sci, v.sa(t)); err != nil {
				t.Fatal(err)
			}
			rx.Verify([][]byte{append([]byte(nil), prot...)})
			rx.Close()
			got := in.get()
			if len(got) != 1 || !bytes.Equal(got[0], plain) {
				t.Fatalf("Verify(%x) = %x, want %x", prot, got, plain)
			}
			if n := rx.RXSCStats(sci).InPktsOK.Load(); n != 1 {
				t.Errorf("InPktsOK = %d, want 1", n)
			}
			if n := rx.RXSAStats(sci, v.AN).InPktsOK.Load(); n != 1 {
				t.Errorf("SA InPktsOK = %d, want 1", n)
			}
		})
	}
}
