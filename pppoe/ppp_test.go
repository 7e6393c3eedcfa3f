package pppoe

import (
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Control
		err  error
	}{
		{"conf-req", []byte{1, 7, 0, 8, 1, 4, 5, 0xdc}, Control{1, 7, []byte{1, 4, 5, 0xdc}}, nil},
		{"padding cut", []byte{9, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0}, Control{9, 1, []byte{0, 0, 0, 1}}, nil},
		{"short", []byte{1, 1, 0}, Control{}, ErrControlShort},
		{"length below header", []byte{1, 1, 0, 3}, Control{}, ErrControlLength},
		{"length past packet", []byte{1, 1, 0, 9, 0}, Control{}, ErrControlShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseControl(tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("ParseControl(%x) = %v, want %v", tc.in, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); err == nil && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		n    int
		err  error
	}{
		{"mru and magic", []byte{1, 4, 5, 0xd4, 5, 6, 1, 2, 3, 4}, 2, nil},
		{"empty", nil, 0, nil},
		{"length 0 (would loop)", []byte{1, 0}, 0, ErrOptionTruncated},
		{"length 1", []byte{1, 1}, 0, ErrOptionTruncated},
		{"past end", []byte{1, 4, 5}, 0, ErrOptionTruncated},
		{"lone type byte", []byte{1, 2, 7}, 1, ErrOptionTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeOptions(tc.in, nil)
			if !errors.Is(err, tc.err) || (err == nil && len(got) != tc.n) {
				t.Errorf("DecodeOptions(%x) = %d options, %v; want %d, %v", tc.in, len(got), err, tc.n, tc.err)
			}
		})
	}
	many := make([]byte, 0, 2*(MaxOptions+1))
	for range MaxOptions + 1 {
		many = append(many, 99, 2)
	}
	if _, err := DecodeOptions(many, nil); !errors.Is(err, ErrTooManyOptions) {
		t.Errorf("DecodeOptions(%d options) = %v", MaxOptions+1, err)
	}
}

func TestLCPCheck(t *testing.T) {
	opt := func(typ uint8, data ...byte) []byte { return AppendOption(nil, typ, data) }
	cat := func(bs ...[]byte) (out []byte) {
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		in       []byte
		failures int
		want     verdict
		resp     []byte
	}{
		{"mru 1492 + chap + magic", cat(opt(1, 5, 0xd4), opt(3, 0xc2, 0x23, 5), opt(5, 1, 2, 3, 4)), 0, verdictAck, nil},
		{"pap", opt(3, 0xc0, 0x23), 0, verdictAck, nil},
		{"ACCM barred on PPPoE (RFC 2516 §7)", cat(opt(1, 5, 0xd4), opt(2, 0, 0, 0, 0)), 0, verdictRej, opt(2, 0, 0, 0, 0)},
		{"ACFC and PFC rejected", cat(opt(7), opt(8)), 0, verdictRej, cat(opt(7), opt(8))},
		{"unknown option", opt(200, 1), 0, verdictRej, opt(200, 1)},
		{"mru wrong length", opt(1, 5), 0, verdictRej, opt(1, 5)},
		{"mru 0", opt(1, 0, 0), 0, verdictNak, opt(1, 5, 0xd4)},
		{"mru 65535", opt(1, 0xff, 0xff), 0, verdictNak, opt(1, 5, 0xd4)},
		{"mru 1500 on a 1492 link", opt(1, 5, 0xdc), 0, verdictNak, opt(1, 5, 0xd4)},
		{"magic 0", opt(5, 0, 0, 0, 0), 0, verdictNak, nil},
		{"ms-chapv2 naks to chap-md5", opt(3, 0xc2, 0x23, 0x81), 0, verdictNak, opt(3, 0xc2, 0x23, 5)},
		{"eap naks to chap-md5", opt(3, 0xc2, 0x27), 0, verdictNak, opt(3, 0xc2, 0x23, 5)},
		{"max-failure turns nak into reject (RFC 1661 §4.6)", cat(opt(5, 9, 9, 9, 9), opt(1, 0, 1)), maxFailure, verdictRej, opt(1, 0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n counter
			l := lcp{rand: seqRand(), linkMax: DefaultMRU, authCHAP: true, authPAP: true, loopbacks: &n, badMRU: &n}
			l.reset()
			opts, err := DecodeOptions(tc.in, nil)
			if err != nil {
				t.Fatal(err)
			}
			v, resp := l.check(opts, nil, tc.failures)
			if v != tc.want {
				t.Fatalf("check(%x) = %v %x, want %v", tc.in, v, resp, tc.want)
			}
			if tc.resp != nil && string(resp) != string(tc.resp) {
				t.Errorf("check(%x) response = %x, want %x", tc.in, resp, tc.resp)
			}
		})
	}
}

func TestLCPNoCredentialsRejectsAuth(t *testing.T) {
	var n counter
	l := lcp{rand: seqRand(), linkMax: DefaultMRU, loopbacks: &n, badMRU: &n}
	l.reset()
	opts, _ := DecodeOptions(AppendOption(nil, lcpOptAuth, []byte{0xc2, 0x23, 5}), nil)
	if v, _ := l.check(opts, nil, 0); v != verdictRej {
		t.Errorf("check(auth) without credentials = %v, want reject", v)
	}
}

// fsmRecorder records what the automaton sends and signals.
type fsmRecorder struct {
	sent     []Control
	finished []string
	up, down int
}

func (r *fsmRecorder) send(proto uint16, code, id uint8, data []byte) {
	r.sent = append(r.sent, Control{code, id, append([]byte(nil), data...)})
}
func (r *fsmRecorder) layerUp(uint16)                     { r.up++ }
func (r *fsmRecorder) layerDown(uint16)                   { r.down++ }
func (r *fsmRecorder) layerFinished(_ uint16, why string) { r.finished = append(r.finished, why) }

func newTestFSM() (*fsm, *fsmRecorder, *fsmStats) {
	r := &fsmRecorder{}
	st := &fsmStats{}
	var n counter
	f := newFSM(ProtoLCP, &lcp{rand: seqRand(), linkMax: DefaultMRU, loopbacks: &n, badMRU: &n}, r, st)
	return f, r, st
}

func TestFSMMaxConfigure(t *testing.T) {
	f, r, _ := newTestFSM()
	now := time.Unix(0, 0)
	f.open(now)
	for i := range 20 {
		now = now.Add(restartTimeout)
		f.tick(now)
		if len(r.finished) > 0 {
			// RFC 1661 §4.6: Max-Configure (10) requests, then give up.
			if len(r.sent) != maxConfigure || i != maxConfigure-1 {
				t.Errorf("gave up after %d requests (tick %d), want %d", len(r.sent), i, maxConfigure)
			}
			if f.state != stStopped {
				t.Errorf("state %v, want stopped", f.state)
			}
			return
		}
	}
	t.Fatalf("never gave up; sent %d", len(r.sent))
}

func TestFSMOpenAndCodeReject(t *testing.T) {
	f, r, st := newTestFSM()
	now := time.Unix(0, 0)
	f.open(now)
	req := r.sent[0]
	f.input(now, Control{CodeConfReq, 50, AppendOption(nil, lcpOptMagic, []byte{1, 2, 3, 4})})
	if f.state != stAckSent || r.sent[1].Code != CodeConfAck || r.sent[1].ID != 50 {
		t.Fatalf("after RCR+: %v %+v", f.state, r.sent[1])
	}
	// An Ack with the wrong Identifier is discarded (§5.2).
	f.input(now, Control{CodeConfAck, req.ID + 1, req.Data})
	if f.state != stAckSent || st.BadPacket.Load() != 1 {
		t.Fatalf("mismatched Ack accepted: %v", f.state)
	}
	// So is one whose options differ from the request, e.g. a 1-byte MRU.
	f.input(now, Control{CodeConfAck, req.ID, []byte{1, 3, 5}})
	if f.state != stAckSent || st.BadPacket.Load() != 2 {
		t.Fatalf("Ack with other options accepted: %v", f.state)
	}
	f.input(now, Control{CodeConfAck, req.ID, req.Data})
	if f.state != stOpened || r.up != 1 {
		t.Fatalf("state %v up %d, want opened", f.state, r.up)
	}
	// Unknown code: Code-Reject carrying the packet (§5.6).
	f.input(now, Control{42, 9, []byte{1, 2}})
	last := r.sent[len(r.sent)-1]
	if last.Code != CodeCodeRej || string(last.Data) != string([]byte{42, 9, 0, 6, 1, 2}) {
		t.Errorf("Code-Reject = %+v", last)
	}
	// A Code-Reject of Echo is harmless (RXJ+); one of Configure-Request is not (RXJ-).
	f.input(now, Control{CodeCodeRej, 1, []byte{CodeEchoReq, 1, 0, 4}})
	if f.state != stOpened {
		t.Fatalf("RXJ+ closed the layer")
	}
	f.input(now, Control{CodeCodeRej, 2, []byte{CodeConfReq, 1, 0, 4}})
	if f.state != stClosing || r.sent[len(r.sent)-1].Code != CodeTermReq {
		t.Fatalf("RXJ- state %v", f.state)
	}
}

func TestFSMPeerRequestLoop(t *testing.T) {
	// A peer that keeps sending options we reject, ignoring our Rejects.
	f, r, st := newTestFSM()
	now := time.Unix(0, 0)
	f.open(now)
	for i := range 100 {
		f.input(now, Control{CodeConfReq, uint8(i), AppendOption(nil, 99, nil)})
		if len(r.finished) > 0 {
			break
		}
	}
	if len(r.finished) != 1 || st.LoopsEnded.Load() != 1 || st.ConfReqRx.Load() > maxRounds {
		t.Fatalf("finished %v, loops %d after %d requests", r.finished, st.LoopsEnded.Load(), st.ConfReqRx.Load())
	}
}

func TestIPCPCheckAndNak(t *testing.T) {
	var p ipcp
	p.reset()
	req := p.request(nil)
	want := []byte{3, 6, 0, 0, 0, 0, 129, 6, 0, 0, 0, 0, 131, 6, 0, 0, 0, 0}
	if string(req) != string(want) {
		t.Fatalf("request = %x, want %x", req, want)
	}
	nak, _ := DecodeOptions([]byte{3, 6, 10, 0, 0, 2, 129, 6, 8, 8, 8, 8, 131, 6, 0, 0, 0, 0}, nil)
	p.naked(nak)
	rej, _ := DecodeOptions([]byte{131, 6, 0, 0, 0, 0}, nil)
	p.rejected(rej)
	if string(p.request(nil)) != string([]byte{3, 6, 10, 0, 0, 2, 129, 6, 8, 8, 8, 8}) {
		t.Errorf("request after nak+rej = %x", p.request(nil))
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want verdict
	}{
		{"peer address", []byte{3, 6, 10, 0, 0, 1}, verdictAck},
		{"peer asks us for an address", []byte{3, 6, 0, 0, 0, 0}, verdictRej},
		{"broadcast address", []byte{3, 6, 255, 255, 255, 255}, verdictRej},
		{"VJ compression", []byte{2, 6, 0, 0x2d, 0x0f, 1}, verdictRej},
		{"peer asks us for DNS", []byte{129, 6, 0, 0, 0, 0}, verdictRej},
		{"address wrong length", []byte{3, 4, 10, 0}, verdictRej},
	} {
		opts, _ := DecodeOptions(tc.in, nil)
		if v, _ := p.check(opts, nil, 0); v != tc.want {
			t.Errorf("%s: check = %v, want %v", tc.name, v, tc.want)
		}
	}
}

func TestIPv6CPCheck(t *testing.T) {
	p := ipv6cp{rand: seqRand()}
	p.reset()
	ours := p.iid
	for _, tc := range []struct {
		name string
		in   []byte
		want verdict
	}{
		{"distinct id", AppendOption(nil, 1, []byte{0, 0, 0, 0, 0, 0, 0, 1}), verdictAck},
		{"zero id naked", AppendOption(nil, 1, make([]byte, 8)), verdictNak},
		{"our id naked (RFC 5072 §4.1)", AppendOption(nil, 1, ours[:]), verdictNak},
		{"compression rejected", AppendOption(nil, 2, []byte{0, 0x61}), verdictRej},
		{"short id rejected", AppendOption(nil, 1, []byte{1, 2}), verdictRej},
	} {
		opts, _ := DecodeOptions(tc.in, nil)
		v, resp := p.check(opts, nil, 0)
		if v != tc.want {
			t.Errorf("%s: check = %v %x, want %v", tc.name, v, resp, tc.want)
		}
		if v == verdictNak {
			if s := [8]byte(resp[2:10]); s == [8]byte{} || s == p.iid {
				t.Errorf("%s: Nak suggests %x (ours %x)", tc.name, s, p.iid)
			}
		}
	}
	if p.iid == ours {
		t.Errorf("our id unchanged after a clash")
	}
}

func TestCHAPResponseRFC1994(t *testing.T) {
	// MD5(0x01 || "secret" || 0x00..0x0f), computed by hand with
	// python3 -c "import hashlib;print(hashlib.md5(b'\x01secret'+bytes(range(16))).hexdigest())"
	got := chapResponseValue(1, "secret", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	const want = "740e86463bda3a4d7017d6e0fba0699d"
	if hex.EncodeToString(got[:]) != want {
		t.Errorf("chapResponseValue = %x, want %s", got, want)
	}
}
