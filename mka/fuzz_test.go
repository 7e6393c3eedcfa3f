package mka

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecode checks that Decode never panics, that it either accepts a
// frame or names a Reason, and that an accepted MKPDU re-encodes to one
// that decodes to the same fields (a round trip modulo padding, skipped
// parameter sets and the ICV). Seeds are in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	k := testICVKey(f)
	seed, err := fullMKPDU(f).Append(nil, k)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var m MKPDU
		err := Decode(frame, &m)
		if err != nil {
			de, ok := err.(*DecodeError)
			if !ok || de.Reason >= numReasons {
				t.Fatalf("Decode error %v is not a DecodeError with a known reason", err)
			}
			return
		}
		_ = k.Verify(frame, &m)
		if m.EAPOLVersion == 0 {
			m.EAPOLVersion = EAPOLVersion // Append sends 0 as 3
		}
		again, err := m.Append(nil, k)
		if err != nil {
			t.Fatalf("Append(Decode(%x)) = %v", frame, err)
		}
		var m2 MKPDU
		if err := Decode(again, &m2); err != nil {
			t.Fatalf("Decode(Append(Decode(%x))) = %v", frame, err)
		}
		if !k.Verify(again, &m2) {
			t.Fatalf("re-encoded frame does not verify")
		}
		if m.HasXPN && m2.HasXPN {
			m.XPN = m2.XPN // an empty XPN body re-encodes as zeros
		}
		if d := cmp.Diff(&m, &m2, mkpduOpts); d != "" {
			t.Fatalf("round trip of %x (-first +second):\n%s", frame, d)
		}
	})
}
