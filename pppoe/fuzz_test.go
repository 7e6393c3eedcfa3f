package pppoe

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// Seeds live in testdata/fuzz/<FuzzName>/ and run as plain tests.

func FuzzDiscoveryTags(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var tags [MaxTags]Tag
		d, err := ParseDiscovery(b, tags[:])
		if err != nil {
			return
		}
		if len(d.Tags) > MaxTags {
			t.Fatalf("%d tags", len(d.Tags))
		}
		// Round trip: re-encoding the tags and decoding again gives the
		// same tags.
		enc := AppendDiscovery(nil, d.Code, d.SessionID, d.Tags...)
		var tags2 [MaxTags]Tag
		d2, err := ParseDiscovery(enc, tags2[:])
		if err != nil {
			t.Fatalf("re-encoded %x does not parse: %v", enc, err)
		}
		if d2.Code != d.Code || d2.SessionID != d.SessionID || len(d2.Tags) != len(d.Tags) {
			t.Fatalf("round trip %+v != %+v", d2, d)
		}
		for i := range d.Tags {
			if d.Tags[i].Type != d2.Tags[i].Type || !bytes.Equal(d.Tags[i].Value, d2.Tags[i].Value) {
				t.Fatalf("tag %d: %+v != %+v", i, d2.Tags[i], d.Tags[i])
			}
		}
		// A Session in discovery takes any of it as a PADO/PADS/PADT
		// without panicking; what it ignores it counts.
		h := newHarness(t, Config{})
		h.s.Start(h.now)
		frame := append(append(append([]byte{}, clientMAC[:]...), acMAC[:]...), 0x88, 0x63)
		h.s.Handle(h.now, append(frame, b...))
	})
}

// fuzzOptions checks a negotiator's handling of arbitrary option bytes.
func fuzzOptions(t *testing.T, neg negotiator, b []byte, failures int) {
	opts, err := DecodeOptions(b, nil)
	if err != nil {
		return
	}
	var enc []byte
	for _, o := range opts {
		enc = AppendOption(enc, o.Type, o.Data)
	}
	if !bytes.Equal(enc, b) {
		t.Fatalf("options round trip %x != %x", enc, b)
	}
	v, resp := neg.check(opts, nil, failures)
	r, err := DecodeOptions(resp, nil)
	if err != nil {
		t.Fatalf("response %x does not decode: %v", resp, err)
	}
	switch v {
	case verdictAck:
		if len(resp) != 0 {
			t.Fatalf("Ack with a response %x", resp)
		}
	case verdictRej:
		// RFC 1661 §5.4: a Reject carries options from the request,
		// unmodified.
		for _, o := range r {
			if !bytes.Contains(b, AppendOption(nil, o.Type, o.Data)) {
				t.Fatalf("rejected option %+v not in request %x", o, b)
			}
		}
	case verdictNak:
		if len(r) == 0 {
			t.Fatalf("empty Nak")
		}
	}
	// Feeding the same bytes as a Nak or Reject of our request keeps our
	// request well-formed.
	neg.naked(opts)
	neg.rejected(opts)
	if _, err := DecodeOptions(neg.request(nil), nil); err != nil {
		t.Fatalf("our request is malformed after nak/rej: %v", err)
	}
}

func FuzzLCPOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, failures uint8) {
		var n counter
		l := &lcp{rand: seqRand(), linkMax: DefaultMRU, authCHAP: true, authPAP: true, loopbacks: &n, badMRU: &n}
		l.reset()
		fuzzOptions(t, l, b, int(failures%8))
		opts, _ := DecodeOptions(l.request(nil), nil)
		for _, o := range opts {
			if o.Type == lcpOptMRU {
				if v := binary.BigEndian.Uint16(o.Data); v < MinMRU || v > DefaultMRU {
					t.Fatalf("we request MRU %d", v)
				}
			}
		}
		if m := l.mtu(); m > DefaultMRU {
			t.Fatalf("MTU %d above what the link carries", m)
		}
	})
}

func FuzzIPCPOptions(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		if v6 {
			p := &ipv6cp{rand: seqRand()}
			p.reset()
			fuzzOptions(t, p, b, 0)
			if p.iid == [8]byte{} && p.wantIID {
				t.Fatalf("zero interface identifier requested")
			}
			return
		}
		var p ipcp
		p.reset()
		fuzzOptions(t, &p, b, 0)
		if l, _, _ := p.result(); l.IsValid() && !usableIPv4(l.AsSlice()) {
			t.Fatalf("took unusable address %v", l)
		}
	})
}

// upSession is a Session brought up against the test AC, for FuzzPPPFrame.
func upSession(t *testing.T) (*harness, *testAC) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds, IPv6: true}, ac)
	h.start()
	if st := h.s.Status(h.now); st.State != "up" {
		t.Fatalf("setup: %q", st.State)
	}
	return h, ac
}

func FuzzPPPFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, raw bool) {
		h, ac := upSession(t)
		if raw {
			// b is a whole Ethernet frame.
			h.s.Handle(h.now, b)
		} else {
			// b is the PPPoE payload (PPP protocol + packet) of a frame
			// from the AC in the right session, with LENGTH from b.
			frame := append(append(append([]byte{}, clientMAC[:]...), acMAC[:]...), 0x88, 0x64, 0x11, 0, 0x12, 0x34)
			frame = binary.BigEndian.AppendUint16(frame, uint16(len(b)))
			frame = append(frame, b...)
			h.s.Handle(h.now, frame)
		}
		h.cap.take()
		_ = ac
		h.advance(10, 1) // timers run once more
		st := h.s.Status(h.now)
		if st.State != "up" && st.State != "establish" && st.State != "network" && st.State != "auth" && st.LastDownReason == "" {
			t.Fatalf("session left %q without a reason", st.State)
		}
		if st.State != "idle" && st.State != "stopped" && h.s.NextDeadline().IsZero() && st.State != "up" {
			t.Fatalf("state %q with no timer running: stuck", st.State)
		}
		if _, err := json.Marshal(st); err != nil {
			t.Fatal(err)
		}
	})
}
