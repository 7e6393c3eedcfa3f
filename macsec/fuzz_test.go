package macsec

import (
	"bytes"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	for _, v := range loadVectors(f) {
		b := mustHex(f, v.ProtectedFrame)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	for _, cs := range []CipherSuite{GCMAES128} {
		for _, enc := range []bool{false, true} {
			f.Add(sealFrame(f, cs, testKey(cs), 0, 5, enc, testFrame(100, 1)))
			f.Add(sealFrame(f, cs, testKey(cs), 1, 5, enc, testFrame(30, 1)))
			f.Add(append(sealFrame(f, cs, testKey(cs), 0, 5, enc, testFrame(20, 1)), 0, 0, 0, 0))
		}
	}
	f.Add(testFrame(60, 0))
	f.Add([]byte{})
	f.Add(make([]byte, 14))
}

// FuzzParseFrame checks ParseFrame's invariants and that re-encoding the
// parsed fields gives back the SecTAG.
func FuzzParseFrame(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, xpn := range []bool{false, true} {
			p, isMS, ok := ParseFrame(b, xpn)
			if ok && !isMS {
				t.Fatal("ok without isMACsec")
			}
			if !ok {
				continue
			}
			if p.DataOff != 12+p.TagLen || p.End != p.DataOff+p.DataLen+ICVLen || p.End > len(b) || p.DataLen < 0 {
				t.Fatalf("ParseFrame(%x) = %+v: inconsistent", b, p)
			}
			if sl := int(p.Tag.SL()); (sl != 0 && p.DataLen != sl) || (sl == 0 && p.DataLen < ShortLenLimit) {
				t.Fatalf("ParseFrame(%x): SL %d, DataLen %d", b, sl, p.DataLen)
			}
			if !xpn && p.Tag.PN() == 0 {
				t.Fatalf("ParseFrame(%x) accepted PN 0", b)
			}
			fl := SecTAGFields{TCI: p.Tag.TCI(), AN: p.Tag.AN(), SL: p.Tag.SL(), PN: p.Tag.PN(), SCI: p.SCI}
			var tag [16]byte
			if n := SecTAG(tag[:]).Encode(&fl); !bytes.Equal(tag[:n], b[12:12+p.TagLen]) {
				t.Fatalf("Encode(%+v) = %x, want %x", fl, tag[:n], b[12:12+p.TagLen])
			}
		}
	})
}

// FuzzVerify feeds arbitrary frames to the receive path in every
// validateFrames mode: nothing panics and every frame is counted exactly
// once.
func FuzzVerify(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mode := range []ValidateFrames{ValidateStrict, ValidateCheck, ValidateDisabled} {
			var delivered int
			cfg := testConfig(GCMAES128, false, func([][]byte) {}, func(fr [][]byte) { delivered += len(fr) })
			cfg.Validate = mode
			cfg.ReplayProtect = true
			cfg.Workers = 1
			s, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.AddRXSC(peerSCI); err != nil {
				t.Fatal(err)
			}
			for an := range uint8(2) {
				if err := s.InstallRXSA(peerSCI, SAConfig{AN: an, PN: 3, Key: testKey(GCMAES128)}); err != nil {
					t.Fatal(err)
				}
			}
			in := append([]byte(nil), b...)
			s.Verify([][]byte{in, append([]byte(nil), b...)})
			s.Close()
			st, sc := s.Stats(), s.RXSCStats(peerSCI)
			total := st.InPktsNoTag.Load() + st.InPktsUntagged.Load() + st.InPktsBadTag.Load() + st.InPktsNoSA.Load() +
				st.InPktsNoSAError.Load() + sc.InPktsNoSA.Load() + sc.InPktsNoSAError.Load() + sc.InPktsLate.Load() +
				sc.InPktsOK.Load() + sc.InPktsInvalid.Load() + sc.InPktsNotValid.Load() + sc.InPktsUnchecked.Load() + sc.InPktsDelayed.Load()
			if total != 2 {
				t.Fatalf("%v: %d counter increments for 2 frames", mode, total)
			}
			if delivered > 2 {
				t.Fatalf("%v: delivered %d frames of 2", mode, delivered)
			}
		}
	})
}
