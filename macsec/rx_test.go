package macsec

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"testing"
)

const peerSCI SCI = 0x020000000002_0001

// sealFrame builds a protected frame from plain (DA SA EtherType payload)
// by hand: SecTAG with SCI, PN pn, AN an.
func sealFrame(t testing.TB, cs CipherSuite, key Key, an uint8, pn uint64, encrypt bool, plain []byte) []byte {
	t.Helper()
	aead, err := newAEAD(cs, key)
	if err != nil {
		t.Fatal(err)
	}
	var iv [12]byte
	dst := make([]byte, 0, SecTAGSCILen+len(plain)+ICVLen)
	return sealInto(dst, aead, cs.XPN(), &iv, an, pn, encrypt, plain)
}

// sealInto is sealFrame into dst's memory (length 0, capacity for the
// protected frame) with a ready AEAD and scratch for the IV; it allocates
// nothing.
func sealInto(dst []byte, aead cipher.AEAD, xpn bool, iv *[12]byte, an uint8, pn uint64, encrypt bool, plain []byte) []byte {
	data := plain[12:]
	f := append(dst[:0], plain[:12]...)
	f = f[:12+SecTAGSCILen]
	fl := SecTAGFields{TCI: TCISCIPresent, AN: an, PN: uint32(pn), SCI: peerSCI}
	if encrypt {
		fl.TCI |= TCIEncrypted | TCIChanged
	}
	if len(data) < ShortLenLimit {
		fl.SL = uint8(len(data))
	}
	SecTAG(f[12:]).Encode(&fl)
	salt := testSalt
	nv := nonce(iv, xpn, peerSCI, pn, testSSCI, &salt)
	if encrypt {
		return aead.Seal(f, nv, data, f)
	}
	f = append(f, data...)
	return aead.Seal(f, nv, nil, f)
}

var testSalt = [12]byte{0xe6, 0x30, 0xe8, 0x1a, 0x48, 0xde, 0x86, 0xa2, 0x1c, 0x66, 0xfa, 0x6d}

const testSSCI = 0x7a30c118

// rxHarness is a receiving SecY with one RX SC (peerSCI) and SA 0.
func rxHarness(t *testing.T, cs CipherSuite, mode ValidateFrames, replay bool, window uint32, pn uint64) (*SecY, *sink) {
	t.Helper()
	var out sink
	cfg := testConfig(cs, false, out.handler, out.handler)
	cfg.Validate = mode
	cfg.ReplayProtect = replay
	cfg.ReplayWindow = window
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddRXSC(peerSCI); err != nil {
		t.Fatal(err)
	}
	if err := s.InstallRXSA(peerSCI, SAConfig{AN: 0, PN: pn, Key: testKey(cs), SSCI: testSSCI, Salt: testSalt}); err != nil {
		t.Fatal(err)
	}
	return s, &out
}

func wrongKey(cs CipherSuite) Key {
	b := make([]byte, cs.KeyLen())
	b[0] = 1
	return NewKey(b)
}

func TestVerifyWrongKey(t *testing.T) { bothModes(t, testVerifyWrongKey) }

func testVerifyWrongKey(t *testing.T) {
	goroutineLeakCheck(t)
	plain := testFrame(100, 1)
	for _, cs := range allSuites {
		for _, mode := range []ValidateFrames{ValidateStrict, ValidateCheck, ValidateDisabled} {
			for _, enc := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%v/encrypt=%v", cs, mode, enc), func(t *testing.T) {
					s, out := rxHarness(t, cs, mode, true, 0, 1)
					f := sealFrame(t, cs, wrongKey(cs), 0, 1, enc, plain)
					s.Verify([][]byte{f})
					s.Close()
					sc := s.RXSCStats(peerSCI)
					sa := s.RXSAStats(peerSCI, 0)
					got := map[string]uint64{
						"NotValid": sc.InPktsNotValid.Load(), "Invalid": sc.InPktsInvalid.Load(),
						"Unchecked": sc.InPktsUnchecked.Load(), "OK": sc.InPktsOK.Load(),
						"SA.NotValid": sa.InPktsNotValid.Load(), "SA.Invalid": sa.InPktsInvalid.Load(),
						"delivered": uint64(len(out.get())),
					}
					want := map[string]uint64{"NotValid": 0, "Invalid": 0, "Unchecked": 0, "OK": 0, "SA.NotValid": 0, "SA.Invalid": 0, "delivered": 0}
					switch {
					case enc || mode == ValidateStrict:
						want["NotValid"], want["SA.NotValid"] = 1, 1
					case mode == ValidateCheck:
						want["Invalid"], want["SA.Invalid"], want["delivered"] = 1, 1, 1
					default: // disabled, integrity only: not checked
						want["Unchecked"], want["delivered"] = 1, 1
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("counters = %v, want %v", got, want)
					}
					if want["delivered"] == 1 && !bytes.Equal(out.get()[0], plain) {
						t.Errorf("delivered %x, want %x", out.get()[0], plain)
					}
				})
			}
		}
	}
}

// TestReplayWindow feeds PN sequences and checks which frames are
// delivered and how they are counted.
func TestReplayWindow(t *testing.T) { bothModes(t, testReplayWindow) }

func testReplayWindow(t *testing.T) {
	goroutineLeakCheck(t)
	tests := []struct {
		name      string
		replay    bool
		window    uint32
		start     uint64
		pns       []uint64
		delivered []uint64
		late      uint64
		delayed   uint64
	}{
		{"window 0 strictly increasing", true, 0, 1, []uint64{1, 2, 3, 3, 2, 5, 4, 6}, []uint64{1, 2, 3, 5, 6}, 3, 0},
		{"window 0 start at 10", true, 0, 10, []uint64{9, 10, 11}, []uint64{10, 11}, 1, 0},
		{"window 2", true, 2, 1, []uint64{1, 5, 4, 3, 2, 5, 6}, []uint64{1, 5, 4, 5, 6}, 2, 0},
		{"window 2 duplicates inside window accepted", true, 2, 1, []uint64{10, 9, 9, 8, 7}, []uint64{10, 9, 9}, 2, 0},
		{"replay off delivers late frames as delayed", false, 0, 1, []uint64{5, 3, 6, 6}, []uint64{5, 3, 6, 6}, 0, 2},
	}
	for _, cs := range []CipherSuite{GCMAES128, GCMAESXPN128} {
		for _, tt := range tests {
			t.Run(cs.String()+"/"+tt.name, func(t *testing.T) {
				s, out := rxHarness(t, cs, ValidateStrict, tt.replay, tt.window, tt.start)
				for _, pn := range tt.pns {
					// One Verify call per frame: order must hold across calls too.
					s.Verify([][]byte{sealFrame(t, cs, testKey(cs), 0, pn, false, testFrame(80, uint32(pn)))})
				}
				s.Close()
				var got []uint64
				for _, f := range out.get() {
					got = append(got, uint64(binary.BigEndian.Uint32(f[14:18])))
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.delivered) {
					t.Errorf("delivered PNs = %v, want %v", got, tt.delivered)
				}
				sc := s.RXSCStats(peerSCI)
				if sc.InPktsLate.Load() != tt.late || sc.InPktsDelayed.Load() != tt.delayed {
					t.Errorf("InPktsLate, InPktsDelayed = %d, %d, want %d, %d", sc.InPktsLate.Load(), sc.InPktsDelayed.Load(), tt.late, tt.delayed)
				}
			})
		}
	}
}

// TestXPNRecovery checks 64-bit PN recovery across the 2^32 boundary.
func TestXPNRecovery(t *testing.T) { bothModes(t, testXPNRecovery) }

func testXPNRecovery(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAESXPN256
	start := uint64(1)<<32 - 2
	s, out := rxHarness(t, cs, ValidateStrict, true, 0, start)
	for pn := start; pn < start+5; pn++ {
		s.Verify([][]byte{sealFrame(t, cs, testKey(cs), 0, pn, true, testFrame(80, uint32(pn)))})
	}
	s.Close()
	if n := len(out.get()); n != 5 {
		t.Fatalf("delivered %d frames, want 5 (stats OK %d NotValid %d)", n, s.RXSCStats(peerSCI).InPktsOK.Load(), s.RXSCStats(peerSCI).InPktsNotValid.Load())
	}
	if got, want := s.RXSAStats(peerSCI, 0).NextPN.Load(), start+5; got != want {
		t.Errorf("NextPN = %#x, want %#x", got, want)
	}
	for _, tt := range []struct {
		low        uint32
		next, want uint64
	}{
		{5, 1, 5}, {0xffffffff, 0xfffffff0, 0xffffffff}, {1, 0xfffffff0, 0x100000001}, {7, 0x3_00000005, 0x3_00000007},
		{4, 0x3_00000005, 0x3_00000004}, {0x80000006, 0x3_00000005, 0x3_80000006}, {0x7ffffff0, 0x3_fffffff0, 0x4_7ffffff0}, {0x80000000, 0x3_fffffff0, 0x3_80000000},
	} {
		if got := recoverPN(tt.low, tt.next); got != tt.want {
			t.Errorf("recoverPN(%#x, %#x) = %#x, want %#x", tt.low, tt.next, got, tt.want)
		}
	}
}

func TestVerifyNoSAAndUntagged(t *testing.T) { bothModes(t, testVerifyNoSAAndUntagged) }

func testVerifyNoSAAndUntagged(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAES128
	plain := testFrame(100, 1)
	otherSCI := func(f []byte) []byte { binary.BigEndian.PutUint64(f[20:28], 0x0300000000030001); return f }
	tests := []struct {
		name      string
		mode      ValidateFrames
		frame     func() []byte
		secy      map[string]uint64
		sc        map[string]uint64
		delivered bool
	}{
		{"unknown SCI strict", ValidateStrict, func() []byte { return otherSCI(sealFrame(t, cs, testKey(cs), 0, 1, false, plain)) },
			map[string]uint64{"NoSA": 0, "NoSAError": 1}, map[string]uint64{"NoSA": 0, "NoSAError": 0}, false},
		{"unknown SCI check integrity", ValidateCheck, func() []byte { return otherSCI(sealFrame(t, cs, testKey(cs), 0, 1, false, plain)) },
			map[string]uint64{"NoSA": 1, "NoSAError": 0}, map[string]uint64{"NoSA": 0, "NoSAError": 0}, true},
		{"unknown SCI check encrypted", ValidateCheck, func() []byte { return otherSCI(sealFrame(t, cs, testKey(cs), 0, 1, true, plain)) },
			map[string]uint64{"NoSA": 0, "NoSAError": 1}, map[string]uint64{"NoSA": 0, "NoSAError": 0}, false},
		{"unused AN strict", ValidateStrict, func() []byte { return sealFrame(t, cs, testKey(cs), 2, 1, false, plain) },
			map[string]uint64{"NoSA": 0, "NoSAError": 0}, map[string]uint64{"NoSA": 0, "NoSAError": 1}, false},
		{"unused AN disabled integrity", ValidateDisabled, func() []byte { return sealFrame(t, cs, testKey(cs), 2, 1, false, plain) },
			map[string]uint64{"NoSA": 0, "NoSAError": 0}, map[string]uint64{"NoSA": 1, "NoSAError": 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, out := rxHarness(t, cs, tt.mode, true, 0, 1)
			s.Verify([][]byte{tt.frame()})
			s.Close()
			st, sc := s.Stats(), s.RXSCStats(peerSCI)
			gotY := map[string]uint64{"NoSA": st.InPktsNoSA.Load(), "NoSAError": st.InPktsNoSAError.Load()}
			gotC := map[string]uint64{"NoSA": sc.InPktsNoSA.Load(), "NoSAError": sc.InPktsNoSAError.Load()}
			if fmt.Sprint(gotY) != fmt.Sprint(tt.secy) || fmt.Sprint(gotC) != fmt.Sprint(tt.sc) {
				t.Errorf("SecY %v SC %v, want SecY %v SC %v", gotY, gotC, tt.secy, tt.sc)
			}
			d := out.get()
			if tt.delivered != (len(d) == 1) {
				t.Fatalf("delivered %d frames, want delivered=%v", len(d), tt.delivered)
			}
			if tt.delivered && !bytes.Equal(d[0], plain) {
				t.Errorf("delivered %x, want %x", d[0], plain)
			}
		})
	}

	for _, mode := range []ValidateFrames{ValidateStrict, ValidateCheck, ValidateDisabled} {
		t.Run("untagged "+mode.String(), func(t *testing.T) {
			s, out := rxHarness(t, cs, mode, true, 0, 1)
			s.Verify([][]byte{testFrame(60, 1)})
			s.Close()
			wantNoTag, wantUntagged := uint64(0), uint64(1)
			if mode == ValidateStrict {
				wantNoTag, wantUntagged = 1, 0
			}
			if s.Stats().InPktsNoTag.Load() != wantNoTag || s.Stats().InPktsUntagged.Load() != wantUntagged || uint64(len(out.get())) != wantUntagged {
				t.Errorf("NoTag %d Untagged %d delivered %d, want %d %d %d", s.Stats().InPktsNoTag.Load(), s.Stats().InPktsUntagged.Load(), len(out.get()), wantNoTag, wantUntagged, wantUntagged)
			}
		})
	}
}

func TestVerifyBadTag(t *testing.T) { bothModes(t, testVerifyBadTag) }

func testVerifyBadTag(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAES128
	good := sealFrame(t, cs, testKey(cs), 0, 1, false, testFrame(100, 1))
	short := sealFrame(t, cs, testKey(cs), 0, 1, false, testFrame(40, 1)) // SL = 28
	mod := func(f []byte, fn func([]byte) []byte) func() []byte {
		return func() []byte { return fn(append([]byte(nil), f...)) }
	}
	tests := []struct {
		name  string
		frame func() []byte
	}{
		{"ethertype only", mod(good, func(f []byte) []byte { return f[:14] })},
		{"truncated tci", mod(good, func(f []byte) []byte { return f[:15] })},
		{"truncated pn", mod(good, func(f []byte) []byte { return f[:19] })},
		{"truncated sci", mod(good, func(f []byte) []byte { return f[:24] })},
		{"no icv", mod(good, func(f []byte) []byte { return f[:28] })},
		{"V bit", mod(good, func(f []byte) []byte { f[14] |= TCIVersion; return f })},
		{"ES with SC", mod(good, func(f []byte) []byte { f[14] |= TCIEndStation; return f })},
		{"SCB with SC", mod(good, func(f []byte) []byte { f[14] |= TCISCB; return f })},
		{"E without C", mod(good, func(f []byte) []byte { f[14] |= TCIEncrypted; return f })},
		{"SL reserved bits", mod(good, func(f []byte) []byte { f[15] |= 0x40; return f })},
		{"PN 0", mod(good, func(f []byte) []byte { binary.BigEndian.PutUint32(f[16:20], 0); return f })},
		{"SL 0 with short data", mod(short, func(f []byte) []byte { f[15] = 0; return f })},
		{"SL beyond frame", mod(short, func(f []byte) []byte { f[15] = 47; return f })},
		{"long frame truncated to short", mod(good, func(f []byte) []byte { return f[:28+16+20] })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []ValidateFrames{ValidateStrict, ValidateCheck, ValidateDisabled} {
				s, out := rxHarness(t, cs, mode, true, 0, 1)
				s.Verify([][]byte{tt.frame()})
				s.Close()
				if n := s.Stats().InPktsBadTag.Load(); n != 1 || len(out.get()) != 0 {
					t.Errorf("%v: InPktsBadTag = %d, delivered %d, want 1, 0", mode, n, len(out.get()))
				}
			}
		})
	}

	t.Run("padding after ICV ignored", func(t *testing.T) {
		s, out := rxHarness(t, cs, ValidateStrict, true, 0, 1)
		f := append(append([]byte(nil), short...), make([]byte, 10)...)
		s.Verify([][]byte{f})
		s.Close()
		if d := out.get(); len(d) != 1 || !bytes.Equal(d[0], testFrame(40, 1)) {
			t.Errorf("padded short frame: delivered %x, want %x", d, testFrame(40, 1))
		}
	})
}

func TestParseFrameRoundTrip(t *testing.T) {
	for _, v := range loadVectors(t) {
		f := mustHex(t, v.ProtectedFrame)
		p, isMS, ok := ParseFrame(f, v.SSCI != "")
		if !isMS || !ok {
			t.Fatalf("%s: ParseFrame = %v, %v, want true, true", v.Name, isMS, ok)
		}
		if p.Tag.SL() != uint8(v.ShortLength) || p.Tag.AN() != v.AN || p.SCI != v.sci(t) || p.End != len(f) {
			t.Errorf("%s: ParseFrame = %+v", v.Name, p)
		}
		fl := SecTAGFields{TCI: p.Tag.TCI(), AN: p.Tag.AN(), SL: p.Tag.SL(), PN: p.Tag.PN(), SCI: p.SCI}
		b := make([]byte, 16)
		if n := SecTAG(b).Encode(&fl); !bytes.Equal(b[:n], f[12:12+p.TagLen]) {
			t.Errorf("%s: Encode = %x, want %x", v.Name, b[:n], f[12:12+p.TagLen])
		}
	}
}

func TestSnapshot(t *testing.T) { bothModes(t, testSnapshot) }

func testSnapshot(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAES128
	s, _ := rxHarness(t, cs, ValidateStrict, true, 0, 1)
	if err := s.InstallTXSA(SAConfig{AN: 2, Key: testKey(cs)}); err != nil {
		t.Fatal(err)
	}
	s.Verify([][]byte{sealFrame(t, cs, testKey(cs), 0, 1, false, testFrame(100, 1)), testFrame(60, 0)})
	s.Close()
	snap := s.Snapshot()
	if got := snap.RXSC[peerSCI.String()].Counters["InPktsOK"]; got != 1 {
		t.Errorf("RXSC InPktsOK = %d, want 1", got)
	}
	if got := snap.RXSC[peerSCI.String()].SA[0]["InPktsOK"]; got != 1 {
		t.Errorf("RXSA InPktsOK = %d, want 1", got)
	}
	if got := snap.SecY["InPktsNoTag"]; got != 1 {
		t.Errorf("SecY InPktsNoTag = %d, want 1", got)
	}
	if _, ok := snap.TXSA[2]["NextPN"]; !ok || len(snap.SecY) != 14 {
		t.Errorf("snapshot misses fields: %+v", snap)
	}
}

// TestInactiveRXSA switches an SA off: its frames are counted on the SA as
// InPktsNotUsingSA (strict) or InPktsUnusedSA (delivered unverified).
func TestInactiveRXSA(t *testing.T) { bothModes(t, testInactiveRXSA) }

func testInactiveRXSA(t *testing.T) {
	goroutineLeakCheck(t)
	cs := GCMAES128
	for _, mode := range []ValidateFrames{ValidateStrict, ValidateCheck} {
		s, out := rxHarness(t, cs, mode, true, 0, 1)
		if err := s.SetRXSAActive(peerSCI, 0, false); err != nil {
			t.Fatal(err)
		}
		s.Verify([][]byte{sealFrame(t, cs, testKey(cs), 0, 1, false, testFrame(100, 1))})
		s.Close()
		sa, sc := s.RXSAStats(peerSCI, 0), s.RXSCStats(peerSCI)
		got := []uint64{sa.InPktsNotUsingSA.Load(), sa.InPktsUnusedSA.Load(), sc.InPktsNoSAError.Load(), sc.InPktsNoSA.Load(), uint64(len(out.get()))}
		want := []uint64{1, 0, 1, 0, 0}
		if mode == ValidateCheck {
			want = []uint64{0, 1, 0, 1, 1}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%v: NotUsingSA, UnusedSA, SC NoSAError, SC NoSA, delivered = %v, want %v", mode, got, want)
		}
	}
}
