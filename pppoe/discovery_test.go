package pppoe

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDiscovery(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Discovery
		err  error
	}{
		{"PADI with service and host-uniq", []byte{0x11, 0x09, 0, 0, 0, 12, 0x01, 0x01, 0, 0, 0x01, 0x03, 0, 4, 1, 2, 3, 4},
			Discovery{Code: CodePADI, Tags: []Tag{{TagServiceName, []byte{}}, {TagHostUniq, []byte{1, 2, 3, 4}}}}, nil},
		{"ethernet padding after length ignored", []byte{0x11, 0xa7, 0x12, 0x34, 0, 0, 0xde, 0xad},
			Discovery{Code: CodePADT, SessionID: 0x1234, Tags: []Tag{}}, nil},
		{"end-of-list stops", []byte{0x11, 0x07, 0, 0, 0, 8, 0, 0, 0, 0, 0x01, 0x02, 0, 0},
			Discovery{Code: CodePADO, Tags: []Tag{}}, nil},
		{"short header", []byte{0x11, 0x09, 0, 0, 0}, Discovery{}, ErrShort},
		{"version 2", []byte{0x21, 0x09, 0, 0, 0, 0}, Discovery{}, ErrVersion},
		{"length past frame", []byte{0x11, 0x09, 0, 0, 0, 5, 1, 1, 0, 0}, Discovery{}, ErrLength},
		{"tag header truncated", []byte{0x11, 0x09, 0, 0, 0, 3, 1, 1, 0}, Discovery{}, ErrTagTruncated},
		{"tag value truncated", []byte{0x11, 0x09, 0, 0, 0, 6, 1, 3, 0, 9, 1, 2}, Discovery{}, ErrTagTruncated},
		{"tag length 0xffff", []byte{0x11, 0x09, 0, 0, 0, 4, 1, 3, 0xff, 0xff}, Discovery{}, ErrTagTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tags [MaxTags]Tag
			got, err := ParseDiscovery(tc.in, tags[:])
			if !errors.Is(err, tc.err) {
				t.Fatalf("ParseDiscovery(%x) error = %v, want %v", tc.in, err, tc.err)
			}
			if err == nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("ParseDiscovery(%x) (-want +got):\n%s", tc.in, diff)
				}
			}
		})
	}
}

func TestTooManyTags(t *testing.T) {
	var b []byte
	for range MaxTags + 1 {
		b = AppendTag(b, TagVendorSpecific, []byte{0, 0, 0, 1})
	}
	var tags [MaxTags]Tag
	if _, err := DecodeTags(b, tags[:]); !errors.Is(err, ErrTooManyTags) {
		t.Errorf("DecodeTags(%d tags) = %v, want ErrTooManyTags", MaxTags+1, err)
	}
	if _, err := DecodeTags(b[:len(b)-8], tags[:]); err != nil {
		t.Errorf("DecodeTags(%d tags) = %v", MaxTags, err)
	}
}

func TestAppendDiscoveryRoundTrip(t *testing.T) {
	b := AppendDiscovery([]byte{0xee}, CodePADR, 0, Tag{TagServiceName, []byte("internet")}, Tag{TagACCookie, []byte{9, 8}})
	var tags [MaxTags]Tag
	d, err := ParseDiscovery(b[1:], tags[:])
	if err != nil || d.Code != CodePADR || len(d.Tags) != 2 || string(d.Tags[0].Value) != "internet" {
		t.Fatalf("round trip = %+v, %v", d, err)
	}
}

func TestJudgePADO(t *testing.T) {
	hu := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	pado := func(tags ...Tag) *Discovery { return &Discovery{Code: CodePADO, Tags: tags} }
	name := Tag{TagACName, []byte("ac1")}
	svc := Tag{TagServiceName, []byte("internet")}
	huTag := Tag{TagHostUniq, hu}
	for _, tc := range []struct {
		name            string
		d               *Discovery
		src             [6]byte
		service, acName string
		want            padoVerdict
	}{
		{"taken", pado(name, svc, huTag, Tag{TagACCookie, []byte("c")}), acMAC, "internet", "", padoTaken},
		{"any service, offer lists another", pado(name, Tag{TagServiceName, []byte("voip")}, huTag), acMAC, "", "", padoTaken},
		{"no host-uniq", pado(name, svc), acMAC, "internet", "", padoWrongHostUniq},
		{"other host's host-uniq", pado(name, svc, Tag{TagHostUniq, []byte{9}}), acMAC, "internet", "", padoWrongHostUniq},
		{"no AC-Name (RFC 2516 §5.2 MUST)", pado(svc, huTag), acMAC, "internet", "", padoNoACName},
		{"service not offered", pado(name, Tag{TagServiceName, []byte("voip")}, huTag), acMAC, "internet", "", padoWrongService},
		{"AC name not wanted", pado(name, svc, huTag), acMAC, "internet", "ac2", padoWrongACName},
		{"AC-System-Error", pado(name, svc, huTag, Tag{TagACSystemError, []byte("full")}), acMAC, "internet", "", padoError},
		{"multicast source", pado(name, svc, huTag), broadcast, "internet", "", padoBadSource},
		{"zero source", pado(name, svc, huTag), [6]byte{}, "internet", "", padoBadSource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, v := judgePADO(tc.d, tc.src, hu, tc.service, tc.acName)
			if v != tc.want {
				t.Fatalf("judgePADO = %v, want %v", v, tc.want)
			}
			if v == padoTaken && (o.mac != tc.src || o.acName != "ac1") {
				t.Errorf("offer = %+v", o)
			}
		})
	}
}

func TestPADOErrorsAreCounted(t *testing.T) {
	h := newHarness(t, Config{})
	h.s.Start(h.now)
	frame := func(p []byte) []byte {
		return append(append(append(append([]byte{}, clientMAC[:]...), acMAC[:]...), 0x88, 0x63), p...)
	}
	for _, p := range [][]byte{
		{0x11, 0x07, 0, 0, 0, 9, 1, 2},    // length past frame
		{0x11, 0x07, 0, 0, 0, 3, 1, 2, 0}, // tag truncated
		{0x22, 0x07, 0, 0, 0, 0},          // version
		{0x11},                            // short
	} {
		h.s.Handle(h.now, frame(p))
	}
	h.s.Handle(h.now, []byte{1, 2, 3}) // not even Ethernet
	st := h.s.Stats()
	if st.DiscoveryMalformed.Load() != 4 || st.FrameMalformed.Load() != 1 {
		t.Errorf("DiscoveryMalformed %d FrameMalformed %d, want 4, 1", st.DiscoveryMalformed.Load(), st.FrameMalformed.Load())
	}
	if s := h.s.Status(h.now); s.State != "discovery" {
		t.Errorf("state %q", s.State)
	}
}
