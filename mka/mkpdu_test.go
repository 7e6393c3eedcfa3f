package mka

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gvrouter/gvrouter/macsec"
)

func testCAK(t testing.TB) CAK {
	t.Helper()
	cak, err := ParseCAK("0123456789abcdef0123456789abcdef", "6162636465666768696a6b6c6d6e6f707172737475767778797a303132333435")
	if err != nil {
		t.Fatal(err)
	}
	return cak
}

func testICVKey(t testing.TB) *ICVKey {
	t.Helper()
	k, err := NewICVKey(testCAK(t))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var (
	testMI1 = MI{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	testMI2 = MI{0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac}
	testMI3 = MI{0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xbb, 0xbc}
)

// fullMKPDU has every parameter set we encode.
func fullMKPDU(t testing.TB) *MKPDU {
	m := &MKPDU{
		DA:           PAEGroupAddress,
		SA:           [6]byte{0x52, 0x54, 0x00, 0x12, 0x34, 0x56},
		EAPOLVersion: 3,
		Basic: BasicParams{Version: 3, KeyServerPriority: 16, KeyServer: true, MACsecDesired: true,
			Capability: CapabilityConfidentiality, SCI: 0x5254001234560001, MI: testMI1, MN: 7,
			AlgorithmAgility: AlgorithmAgility, CKN: []byte("abc")},
		HasSAKUse: true,
		SAKUse: SAKUse{LatestAN: 2, LatestTX: true, LatestRX: true, OldAN: 1, OldRX: true, DelayProtect: true,
			Latest: KI{testMI1, 5}, LatestLowestPN: 0x1234, Old: KI{testMI1, 4}, OldLowestPN: 0xfffffff0},
		HasDistSAK: true,
		DistSAK:    DistributedSAK{AN: 2, Offset: Offset0, KN: 5, CipherSuite: macsec.GCMAESXPN256, WrappedKey: make([]byte, 40)},
		HasXPN:     true,
		XPN:        XPNParams{SuspensionTime: 0, LatestLowestPNHigh: 1, OldLowestPNHigh: 2},
	}
	for i := range m.DistSAK.WrappedKey {
		m.DistSAK.WrappedKey[i] = byte(i)
	}
	m.Live = AppendPeer(nil, testMI2, 99)
	m.Potential = AppendPeer(AppendPeer(nil, testMI3, 1), testMI2, 2)
	m.Announcement = []byte{0xe0, 0x01, 0x05}
	return m
}

var mkpduOpts = cmp.Options{cmp.AllowUnexported(MKPDU{}), cmpopts.IgnoreFields(MKPDU{}, "ICV", "icvAt"), cmpopts.EquateEmpty()}

func TestRoundTrip(t *testing.T) {
	k := testICVKey(t)
	for _, ind := range []bool{false, true} {
		for _, cs := range []macsec.CipherSuite{macsec.GCMAES128, macsec.GCMAES256, macsec.GCMAESXPN256} {
			want := fullMKPDU(t)
			want.ICVIndicator = ind
			want.DistSAK.CipherSuite = cs
			want.DistSAK.WrappedKey = want.DistSAK.WrappedKey[:cs.KeyLen()+8]
			frame, err := want.Append(nil, k)
			if err != nil {
				t.Fatal(err)
			}
			var got MKPDU
			if err := Decode(frame, &got); err != nil {
				t.Fatalf("Decode(Append(%v)) = %v", cs, err)
			}
			if d := cmp.Diff(want, &got, mkpduOpts); d != "" {
				t.Errorf("round trip %v, indicator %v (-want +got):\n%s", cs, ind, d)
			}
			if !k.Verify(frame, &got) {
				t.Errorf("Verify(own frame) = false")
			}
			// Ethernet padding after the EAPOL body is ignored.
			padded := append(append([]byte(nil), frame...), 0, 0, 0, 0)
			if err := Decode(padded, &got); err != nil || !k.Verify(padded, &got) {
				t.Errorf("padded frame: Decode = %v, verify %v", err, k.Verify(padded, &got))
			}
			for i := 0; i < len(frame); i++ {
				f := append([]byte(nil), frame...)
				f[i] ^= 0x04
				if Decode(f, &got) == nil && k.Verify(f, &got) {
					t.Fatalf("frame with octet %d changed still verifies", i)
				}
			}
		}
	}
	other, _ := ParseCAK("00112233445566778899aabbccddeeff", "616263")
	ok, _ := NewICVKey(other)
	frame, _ := fullMKPDU(t).Append(nil, k)
	var m MKPDU
	if err := Decode(frame, &m); err != nil || ok.Verify(frame, &m) {
		t.Errorf("frame verifies under another CAK")
	}
}

// TestWireLayout pins the encoding of a small MKPDU to a hex dump written
// from 802.1X-2020 Figures 11-8 (Basic Parameter Set) and 11-9 (peer
// lists), octet by octet.
func TestWireLayout(t *testing.T) {
	m := &MKPDU{
		DA: PAEGroupAddress, SA: [6]byte{2, 0, 0, 0, 0, 1},
		Basic: BasicParams{Version: 1, KeyServerPriority: 0x80, MACsecDesired: true, Capability: CapabilityConfidentiality,
			SCI: 0x0200000000010001, MI: testMI1, MN: 2, AlgorithmAgility: AlgorithmAgility, CKN: []byte{0xaa}},
		Live: AppendPeer(nil, testMI2, 3),
	}
	frame, err := m.Append(nil, testICVKey(t))
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, ""+
		"0180c2000003 020000000001 888e"+ // DA SA EtherType
		"03 05 0048"+ // EAPOL v3, type 5 (MKA), body 72 octets
		"01 80 60 1d"+ // version 1, priority 128, desired + capability 2, length 29
		"0200000000010001 0102030405060708090a0b0c 00000002 0080c201 aa 000000"+ // SCI MI MN agility CKN pad
		"01 00 00 10 a1a2a3a4a5a6a7a8a9aaabac 00000003") // live peer list, one entry
	if got := frame[:len(frame)-ICVLen]; !cmp.Equal(got, want) {
		t.Errorf("Append = %x, want %x", got, want)
	}
}

func TestDecodeMalformed(t *testing.T) {
	k := testICVKey(t)
	good, err := fullMKPDU(t).Append(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	// Offsets in good: 18 basic header, 22 basic body (SCI), 50 CKN,
	// 54 live peer list header, ...
	set := func(off int, v ...byte) func([]byte) []byte {
		return func(f []byte) []byte { copy(f[off:], v); return f }
	}
	bodyLen := func(n int) func([]byte) []byte { return set(16, byte(n>>8), byte(n)) }
	firstAfterBasic := 18 + 4 + 28 + 4 // 54
	tests := []struct {
		name string
		mod  func([]byte) []byte
		want Reason
	}{
		{"empty", func([]byte) []byte { return nil }, ReasonShortFrame},
		{"17 octets", func(f []byte) []byte { return f[:17] }, ReasonShortFrame},
		{"ethertype", set(12, 0x88, 0xe5), ReasonEtherType},
		{"eapol-start", set(15, 1), ReasonNotMKA},
		{"eapol version 0", set(14, 0), ReasonEAPOLVersion},
		{"eapol version 2", set(14, 2), ReasonEAPOLVersion},
		{"body longer than frame", bodyLen(len(good) - 17), ReasonEAPOLLength},
		{"body too short", bodyLen(48), ReasonEAPOLLength},
		{"truncated frame", func(f []byte) []byte { return f[:len(f)-1] }, ReasonEAPOLLength},
		{"mka version 0", set(18, 0), ReasonBasicParams},
		{"basic without ckn", set(20, 0x60, 28), ReasonBasicParams},
		{"ckn 33 octets", set(20, 0x60, 28+33), ReasonCKNLength},
		{"basic past body", set(20, 0x60|0x0f, 0xff), ReasonCKNLength},
		{"peer list 15 octets", set(firstAfterBasic+2, 0, 15), ReasonPeerList},
		{"peer list past body", set(firstAfterBasic+2, 0x0f, 0xf0), ReasonTruncated},
		{"duplicate live list", set(firstAfterBasic+20, paramLivePeerList), ReasonDuplicate},
		{"icv indicator too short", set(firstAfterBasic, paramICVIndicator, 0, 0, 12), ReasonICV},
		{"icv indicator not last", set(firstAfterBasic, paramICVIndicator, 0, 0, 16), ReasonICV},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.mod(append([]byte(nil), good...))
			var m MKPDU
			err := Decode(f, &m)
			var de *DecodeError
			if !errors.As(err, &de) || de.Reason != tt.want {
				t.Fatalf("Decode = %v, want reason %q", err, tt.want)
			}
		})
	}
	// Parameter sets with bad bodies, each in a minimal MKPDU.
	sets := []struct {
		name string
		set  []byte
		want Reason
	}{
		{"sak use 20 octets", append([]byte{paramSAKUse, 0, 0, 20}, make([]byte, 20)...), ReasonSAKUse},
		{"dist sak 24 octets", append([]byte{paramDistributedSAK, 0, 0, 24}, make([]byte, 24)...), ReasonDistSAK},
		{"dist sak 256-bit suite with 128-bit key", append([]byte{paramDistributedSAK, 0, 0, 36, 0, 0, 0, 1,
			0x00, 0x80, 0xc2, 0x00, 0x01, 0x00, 0x00, 0x02}, make([]byte, 24)...), ReasonDistSAK},
		{"dist sak 128-bit suite with 256-bit key", append([]byte{paramDistributedSAK, 0, 0, 52, 0, 0, 0, 1,
			0x00, 0x80, 0xc2, 0x00, 0x01, 0x00, 0x00, 0x01}, make([]byte, 40)...), ReasonDistSAK},
		{"xpn 4 octets", []byte{paramXPN, 0, 0, 4, 0, 0, 0, 0}, ReasonXPN},
		{"header cut", []byte{paramSAKUse, 0}, ReasonTruncated},
		{"unknown set past body", []byte{0x42, 0, 0, 8, 0, 0, 0, 0}, ReasonTruncated},
	}
	for _, tt := range sets {
		t.Run(tt.name, func(t *testing.T) {
			f := withSet(t, k, tt.set)
			var m MKPDU
			err := Decode(f, &m)
			var de *DecodeError
			if !errors.As(err, &de) || de.Reason != tt.want {
				t.Fatalf("Decode = %v, want reason %q", err, tt.want)
			}
		})
	}
	// Unknown, Distributed CAK and KMD parameter sets are skipped.
	f := withSet(t, k, []byte{paramKMD, 0, 0, 3, 'k', 'm', 'd', 0, 0x42, 0, 0, 0, paramDistributedCAK, 0, 0, 0})
	var m MKPDU
	if err := Decode(f, &m); err != nil || !k.Verify(f, &m) {
		t.Errorf("Decode(unknown sets) = %v, verify %v", err, k.Verify(f, &m))
	}
}

// withSet returns a minimal MKPDU with raw parameter sets appended after
// the Basic Parameter Set, ICV included.
func withSet(t testing.TB, k *ICVKey, raw []byte) []byte {
	t.Helper()
	m := &MKPDU{Basic: BasicParams{Version: 1, MI: testMI1, MN: 1, AlgorithmAgility: AlgorithmAgility, CKN: []byte("abcd")}}
	f, err := m.Append(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	f = append(f[:len(f)-ICVLen], raw...)
	n := len(f) - 18 + ICVLen
	f[16], f[17] = byte(n>>8), byte(n)
	k.c.sum(&k.out, f)
	return append(f, k.out[:]...)
}

func TestDecodeAllocs(t *testing.T) {
	k := testICVKey(t)
	frame, err := fullMKPDU(t).Append(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	var m MKPDU
	bad := append([]byte(nil), frame...)
	bad[20] = 0x6f
	n := testing.AllocsPerRun(100, func() {
		if Decode(frame, &m) != nil || !k.Verify(frame, &m) {
			t.Fatal("decode failed")
		}
		_ = Decode(bad, &m)
	})
	if n != 0 {
		t.Errorf("Decode+Verify allocates %v times per frame, want 0", n)
	}
}

func BenchmarkDecode(b *testing.B) {
	k := testICVKey(b)
	frame, err := fullMKPDU(b).Append(nil, k)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		var m MKPDU
		for b.Loop() {
			if err := Decode(frame, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode+verify", func(b *testing.B) {
		b.ReportAllocs()
		var m MKPDU
		for b.Loop() {
			if err := Decode(frame, &m); err != nil || !k.Verify(frame, &m) {
				b.Fatal("bad")
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		m := fullMKPDU(b)
		buf := make([]byte, 0, 256)
		for b.Loop() {
			if _, err := m.Append(buf[:0], k); err != nil {
				b.Fatal(err)
			}
		}
	})
}
