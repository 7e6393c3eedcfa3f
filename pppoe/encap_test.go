package pppoe

import (
	"bytes"
	"encoding/hex"
	"testing"
)

func TestEncapGolden(t *testing.T) {
	l := Link{Local: clientMAC, Peer: acMAC, SessionID: 0x1234}
	buf := make([]byte, 64)
	ip := []byte{0x45, 0, 0, 4}
	copy(buf[22:], ip)
	f, ok := l.Encap(buf[:26], 22, ProtoIPv4)
	if !ok {
		t.Fatal("Encap failed")
	}
	// dst, src, 0x8864, ver/type 0x11, code 0, session 0x1234, length 6
	// (2 protocol + 4 payload), protocol 0x0021, payload.
	const want = "0200000000ac" + "020000000001" + "8864" + "1100" + "1234" + "0006" + "0021" + "45000004"
	if got := hex.EncodeToString(f); got != want {
		t.Errorf("Encap = %s\nwant   %s", got, want)
	}
	lv := l
	lv.VLAN = 7
	if _, ok := lv.Encap(buf[:26], 22, ProtoIPv6); ok || lv.HeaderLen() != 26 {
		t.Fatalf("VLAN Encap with 22 bytes of headroom (needs %d) succeeded", lv.HeaderLen())
	}
	vb := make([]byte, 30)
	copy(vb[26:], ip)
	f, ok = lv.Encap(vb, 26, ProtoIPv6)
	const wantV = "0200000000ac" + "020000000001" + "8100" + "0007" + "8864" + "1100" + "1234" + "0006" + "0057" + "45000004"
	if got := hex.EncodeToString(f); !ok || got != wantV {
		t.Errorf("VLAN Encap = %s\nwant        %s", got, wantV)
	}
}

func TestDecap(t *testing.T) {
	// The AC's view: frames from the AC to the client.
	l := Link{Local: clientMAC, Peer: acMAC, SessionID: 0x1234}
	good := sessionFrameFrom(acMAC, clientMAC, 0x1234, ProtoIPv4, []byte{0x45, 1, 2, 3})
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	vlanOf := func(vid byte) []byte {
		return append(append(append([]byte{}, good[:12]...), 0x81, 0, 0, vid), good[12:]...)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want DecapResult
		pkt  []byte
	}{
		{"ok", good, DecapOK, []byte{0x45, 1, 2, 3}},
		{"ethernet padding cut", append(bytes.Clone(good), 0, 0, 0, 0), DecapOK, []byte{0x45, 1, 2, 3}},
		{"tagged, link untagged", vlanOf(9), DecapOK, []byte{0x45, 1, 2, 3}},
		{"discovery", mod(func(b []byte) []byte { b[13] = 0x63; return b }), DecapNotSession, nil},
		{"short ethernet", good[:10], DecapShort, nil},
		{"short pppoe", good[:19], DecapShort, nil},
		{"version", mod(func(b []byte) []byte { b[14] = 0x21; return b }), DecapBadHeader, nil},
		{"code not 0", mod(func(b []byte) []byte { b[15] = CodePADT; return b }), DecapBadHeader, nil},
		{"length past frame", mod(func(b []byte) []byte { b[19] = 7; return b }), DecapBadLength, nil},
		{"length 1", mod(func(b []byte) []byte { b[19] = 1; return b }), DecapBadLength, nil},
		{"compressed protocol field (RFC 1661 §2)", mod(func(b []byte) []byte {
			b = append(b[:20], b[21:]...) // drop the 0x00 of 0x0021
			b[19]--
			return b
		}), DecapOK, []byte{0x45, 1, 2, 3}},
		{"wrong session", mod(func(b []byte) []byte { b[17] = 0x35; return b }), DecapWrongSession, nil},
		{"wrong source", mod(func(b []byte) []byte { b[11] = 0xae; return b }), DecapWrongSource, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proto, pkt, r := l.Decap(tc.in)
			if r != tc.want || (r == DecapOK && (proto != ProtoIPv4 || !bytes.Equal(pkt, tc.pkt))) {
				t.Errorf("Decap(%x) = %#x %x %v, want %v %x", tc.in, proto, pkt, r, tc.want, tc.pkt)
			}
		})
	}
	lv := l
	lv.VLAN = 7
	if _, _, r := lv.Decap(vlanOf(8)); r != DecapWrongVLAN {
		t.Errorf("Decap(VLAN 8) on VLAN 7 = %v", r)
	}
	if _, _, r := lv.Decap(vlanOf(7)); r != DecapOK {
		t.Errorf("Decap(VLAN 7) = %v", r)
	}
}

func TestEncapDecapAllocs(t *testing.T) {
	l := Link{Local: clientMAC, Peer: acMAC, SessionID: 0x1234, VLAN: 7}
	back := Link{Local: acMAC, Peer: clientMAC, SessionID: 0x1234, VLAN: 7}
	buf := make([]byte, 26+1400)
	n := testing.AllocsPerRun(1000, func() {
		f, ok := l.Encap(buf, 26, ProtoIPv4)
		if !ok {
			panic("encap")
		}
		if _, _, r := back.Decap(f); r != DecapOK {
			panic(r.String())
		}
	})
	if n != 0 {
		t.Errorf("Encap+Decap allocate %v per packet, want 0", n)
	}
}

func BenchmarkEncap(b *testing.B) {
	l := Link{Local: clientMAC, Peer: acMAC, SessionID: 0x1234}
	buf := make([]byte, 22+1400)
	b.ReportAllocs()
	b.SetBytes(1400)
	for b.Loop() {
		l.Encap(buf, 22, ProtoIPv4)
	}
}

func BenchmarkDecap(b *testing.B) {
	l := Link{Local: clientMAC, Peer: acMAC, SessionID: 0x1234}
	f := sessionFrameFrom(acMAC, clientMAC, 0x1234, ProtoIPv4, make([]byte, 1400))
	b.ReportAllocs()
	b.SetBytes(1400)
	for b.Loop() {
		l.Decap(f)
	}
}
