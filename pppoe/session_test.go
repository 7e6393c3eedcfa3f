package pppoe

import (
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var creds = NewCredentials("alice", "s3cret")

func TestSessionCHAPFullExchange(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Service: "internet", Credentials: creds, IPv6: true}, ac)
	h.start()
	st := h.s.Status(h.now.Add(5 * time.Second))
	if st.State != "up" {
		t.Fatalf("state = %q, want up (reason %q, counters %v)", st.State, st.LastDownReason, st.Counters)
	}
	want := Status{
		State: "up", SessionID: 0x1234, ACMAC: "02:00:00:00:00:ac", ACName: "test-ac", Service: "internet",
		UptimeSeconds: 5, MTU: 1492, MRU: 1492, Auth: "chap-md5",
		IPv4: &IPv4Status{Local: netip.MustParseAddr("100.64.0.10"), Peer: netip.MustParseAddr("100.64.0.1"),
			DNS: []netip.Addr{netip.MustParseAddr("9.9.9.9"), netip.MustParseAddr("1.1.1.1")}},
		IPv6: &IPv6Status{Local: linkLocal(ac.ipv6IID), Peer: netip.MustParseAddr("fe80::1")},
	}
	st.Counters = nil
	if diff := cmp.Diff(want, st, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Status (-want +got):\n%s", diff)
	}
	// RFC 2516 §5.3: the PADR echoes the AC-Cookie and the Service-Name.
	if c, _ := ac.lastPADR.Tag(TagACCookie); string(c) != "cookie-123" {
		t.Errorf("PADR AC-Cookie = %q, want cookie-123", c)
	}
	if sn, ok := ac.lastPADR.Tag(TagServiceName); !ok || string(sn) != "internet" {
		t.Errorf("PADR Service-Name = %q, %v", sn, ok)
	}
	// RFC 2516 §7: no MRU above 1492 is requested without RFC 4638.
	if ac.clientMRU != 0 && ac.clientMRU > DefaultMRU {
		t.Errorf("client requested MRU %d", ac.clientMRU)
	}
	l, up := h.s.Link()
	if !up || l.SessionID != 0x1234 || l.Peer != acMAC {
		t.Errorf("Link() = %+v, %v", l, up)
	}
	// Data: an IPv4 packet in the session comes out of Handle.
	ip := []byte{0x45, 0, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	frame := sessionFrameFrom(acMAC, clientMAC, 0x1234, ProtoIPv4, ip)
	if proto, pkt := h.s.Handle(h.now, frame); proto != ProtoIPv4 || string(pkt) != string(ip) {
		t.Errorf("Handle(data) = %#x, %x", proto, pkt)
	}
}

func sessionFrameFrom(src, dst [6]byte, sid, proto uint16, payload []byte) []byte {
	b := make([]byte, 22+len(payload))
	copy(b[22:], payload)
	l := Link{Local: src, Peer: dst, SessionID: sid}
	f, _ := l.Encap(b, 22, proto)
	return f
}

func TestSessionPAP(t *testing.T) {
	ac := newAC()
	ac.auth = ProtoPAP
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	if st := h.s.Status(h.now); st.State != "up" || st.Auth != "pap" || st.IPv6 != nil {
		t.Fatalf("Status = %+v", st)
	}
	// IPv6CP is off: the AC's IPv6CP request got an LCP Protocol-Reject.
	if len(ac.protoRejs) != 1 || binary.BigEndian.Uint16(ac.protoRejs[0]) != ProtoIPv6CP {
		t.Errorf("protocol rejects = %x, want one for 0x8057", ac.protoRejs)
	}
}

func TestSessionRefusePAPNaksToCHAP(t *testing.T) {
	ac := newAC()
	ac.auth = ProtoPAP
	h := newHarness(t, Config{Credentials: creds, RefusePAP: true}, ac)
	h.start()
	// The test AC does not switch to CHAP on a Nak; what matters is that
	// we never sent the password in clear.
	for _, f := range h.sent {
		if strings.Contains(string(f), "s3cret") {
			t.Fatalf("password sent in clear after refusing PAP: %x", f)
		}
	}
	if got := h.s.Stats().LCP.NakTx.Load(); got == 0 {
		t.Errorf("LCP NakTx = 0, want the PAP request Nak'd")
	}
}

func TestSessionCHAPWrongSecret(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: NewCredentials("alice", "wrong")}, ac)
	h.start()
	st := h.s.Status(h.now)
	if st.State != "backoff" || !strings.Contains(st.LastDownReason, "authentication failed") {
		t.Fatalf("Status = %q %q, want backoff after auth failure", st.State, st.LastDownReason)
	}
	if h.s.Stats().AuthFailures.Load() != 1 || ac.padt != 1 {
		t.Errorf("AuthFailures = %d, PADTs at AC = %d; want 1, 1", h.s.Stats().AuthFailures.Load(), ac.padt)
	}
}

func TestMaxPayloadRFC4638(t *testing.T) {
	for _, tc := range []struct {
		name      string
		acEchoes  uint16
		acMRU     uint16 // 0: the AC's ConfReq has no MRU option
		wantMTU   int
		wantMaxPL int
	}{
		{"AC agrees 1500", 1500, 1500, 1500, 1500},
		{"AC ignores the tag", 0, 1500, 1492, 0},
		{"AC agrees 1496 only", 1496, 1500, 1496, 1496},
		// pppd with mtu 1500 sends no MRU option: 1500 is RFC 1661's
		// default (§6.1), which the agreed payload carries.
		{"AC agrees 1500, no MRU option", 1500, 0, 1500, 1500},
		{"AC agrees 1496, no MRU option", 1496, 0, 1496, 1496},
		{"no RFC 4638, no MRU option", 0, 0, 1492, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ac := newAC()
			ac.maxPayload = tc.acEchoes
			ac.mru = tc.acMRU // what the AC asks to receive; clamped to what the link carries
			h := newHarness(t, Config{Credentials: creds, MaxPayload: 1500}, ac)
			h.start()
			st := h.s.Status(h.now)
			if st.State != "up" || st.MTU != tc.wantMTU || st.MaxPayload != tc.wantMaxPL {
				t.Fatalf("state %q MTU %d MaxPayload %d, want up %d %d", st.State, st.MTU, st.MaxPayload, tc.wantMTU, tc.wantMaxPL)
			}
			if tc.acEchoes != 0 && int(ac.clientMRU) != tc.wantMTU {
				t.Errorf("client MRU request = %d, want %d", ac.clientMRU, tc.wantMTU)
			}
			if tc.acEchoes == 0 && ac.clientMRU > DefaultMRU {
				t.Errorf("client requested MRU %d without the AC's PPP-Max-Payload", ac.clientMRU)
			}
		})
	}
}

func TestSeveralPADOs(t *testing.T) {
	a1, a2 := newAC(), newAC()
	a2.mac, a2.name, a2.sid = acMAC2, "other-ac", 0x77
	a1.services = []string{"voip"}
	t.Run("by service", func(t *testing.T) {
		a1.services, a2.services = []string{"voip"}, []string{"internet"}
		h := newHarness(t, Config{Service: "internet", Credentials: creds}, newAC2(a1), newAC2(a2))
		h.start()
		st := h.s.Status(h.now)
		if st.ACName != "other-ac" || st.State != "up" {
			t.Fatalf("chose %q (%s), want other-ac up", st.ACName, st.State)
		}
		if h.s.Stats().PADOIgnored.Load() != 1 {
			t.Errorf("PADOIgnored = %d, want 1", h.s.Stats().PADOIgnored.Load())
		}
	})
	t.Run("by AC name, first offer wins otherwise", func(t *testing.T) {
		a1.services, a2.services = []string{"internet"}, []string{"internet"}
		h := newHarness(t, Config{ACName: "other-ac", Credentials: creds}, newAC2(a1), newAC2(a2))
		h.start()
		if st := h.s.Status(h.now); st.ACName != "other-ac" || st.SessionID != 0x77 {
			t.Fatalf("chose %q session %#x", st.ACName, st.SessionID)
		}
		h2 := newHarness(t, Config{Credentials: creds}, newAC2(a1), newAC2(a2))
		h2.start()
		if st := h2.s.Status(h2.now); st.ACName != "test-ac" || h2.s.Stats().PADOIgnored.Load() != 1 {
			t.Fatalf("chose %q, PADOIgnored %d; want the first offer and the second counted", st.ACName, h2.s.Stats().PADOIgnored.Load())
		}
	})
}

// newAC2 copies an AC's settings into a fresh one (no shared state).
func newAC2(a *testAC) *testAC {
	b := newAC()
	b.mac, b.name, b.sid, b.services = a.mac, a.name, a.sid, a.services
	return b
}

func TestPADT(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	padt := func(src [6]byte, sid uint16) []byte {
		b := append(append(append([]byte{}, clientMAC[:]...), src[:]...), 0x88, 0x63)
		return AppendDiscovery(b, CodePADT, sid)
	}
	h.s.Handle(h.now, padt(acMAC, 0x9999))      // wrong session id
	h.s.Handle(h.now, padt(acMAC2, 0x1234))     // wrong MAC
	h.s.Handle(h.now, padt([6]byte{1}, 0x1234)) // multicast source
	if st := h.s.Status(h.now); st.State != "up" {
		t.Fatalf("spoofed PADT ended the session: %q", st.LastDownReason)
	}
	if got := h.s.Stats().PADTSpoofed.Load(); got != 3 {
		t.Errorf("PADTSpoofed = %d, want 3", got)
	}
	h.s.Handle(h.now, padt(acMAC, 0x1234))
	st := h.s.Status(h.now)
	if st.State != "backoff" || st.LastDownReason != "access concentrator sent PADT" || st.Reconnects != 1 {
		t.Fatalf("after PADT: %q %q reconnects %d", st.State, st.LastDownReason, st.Reconnects)
	}
	if h.s.Stats().PADTTx.Load() != 0 {
		t.Errorf("client answered a PADT with a PADT")
	}
	// Reconnect after the backoff.
	h.advance(2*time.Second, 500*time.Millisecond)
	if st := h.s.Status(h.now); st.State != "up" {
		t.Fatalf("not reconnected: %q %q", st.State, st.LastDownReason)
	}
}

func TestEchoKeepalive(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds, EchoInterval: 5 * time.Second, EchoFailures: 3}, ac)
	h.start()
	h.advance(12*time.Second, time.Second)
	if ac.echoRx != 2 || h.s.Stats().EchoReplyRx.Load() != 2 {
		t.Fatalf("echoes at AC %d, replies %d; want 2, 2", ac.echoRx, h.s.Stats().EchoReplyRx.Load())
	}
	if st := h.s.Status(h.now); st.State != "up" {
		t.Fatalf("state %q", st.State)
	}
	ac.silent = true
	// Echoes at 15, 20, 25 go unanswered; at 30 the third miss ends it.
	h.advance(17*time.Second, time.Second)
	if st := h.s.Status(h.now); st.State != "up" {
		t.Fatalf("ended before the third miss: %q", st.LastDownReason)
	}
	h.advance(time.Second, time.Second)
	st := h.s.Status(h.now)
	if st.State != "backoff" || !strings.Contains(st.LastDownReason, "3 LCP echo") {
		t.Fatalf("silent AC: state %q reason %q", st.State, st.LastDownReason)
	}
	if ac.padt != 1 {
		t.Errorf("PADTs to the silent AC = %d, want 1", ac.padt)
	}
}

func TestEchoRTT(t *testing.T) {
	ac := newAC()
	ac.silent = true
	h := newHarness(t, Config{Credentials: creds, EchoInterval: 5 * time.Second}, ac)
	h.start()
	h.advance(5*time.Second, time.Second)
	var id uint8
	last := h.sent[len(h.sent)-1]
	_, _, r := (&Link{Local: acMAC, Peer: clientMAC, SessionID: 0x1234}).Decap(last)
	if r != DecapOK || last[22] != CodeEchoReq {
		t.Fatalf("last frame is not an echo request: %x", last)
	}
	id = last[23]
	h.now = h.now.Add(37 * time.Millisecond)
	h.s.Handle(h.now, ac.ctl(ProtoLCP, CodeEchoReply, id, []byte{1, 2, 3, 4}))
	if st := h.s.Status(h.now); st.EchoRTTMillis != 37 {
		t.Errorf("EchoRTTMillis = %v, want 37", st.EchoRTTMillis)
	}
}

func TestDiscoveryRetransmitAndBackoff(t *testing.T) {
	h := newHarness(t, Config{}) // no AC: nobody answers
	h.s.Start(h.now)
	start := h.now
	var padiAt []time.Duration
	for range 400 {
		for _, f := range h.cap.take() {
			if f[12] == 0x88 && f[13] == 0x63 && f[15] == CodePADI {
				padiAt = append(padiAt, h.now.Sub(start))
			}
		}
		if len(padiAt) >= 7 {
			break
		}
		h.now = h.s.NextDeadline()
		h.s.Tick(h.now)
	}
	// RFC 2516 §5.1: resend, doubling the wait (2, 4, 8 s); then back
	// off 1 s, then 2 s (doubling) before the next round.
	want := []time.Duration{0, 2 * time.Second, 6 * time.Second, 15 * time.Second, 17 * time.Second, 21 * time.Second, 31 * time.Second}
	if diff := cmp.Diff(want, padiAt); diff != "" {
		t.Errorf("PADI times (-want +got):\n%s", diff)
	}
	if st := h.s.Status(h.now); st.Reconnects != 2 || !strings.Contains(st.LastDownReason, "no PADO") {
		t.Errorf("Status %+v", st)
	}
}

func TestLCPNakLoopEnds(t *testing.T) {
	ac := newAC()
	ac.lcpNakAll, ac.lcpNakMRU = true, 1400 // sane value, Nak'd forever
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	st := h.s.Status(h.now)
	if st.State != "backoff" || !strings.Contains(st.LastDownReason, "did not converge") {
		t.Fatalf("Nak loop: state %q reason %q", st.State, st.LastDownReason)
	}
	if h.s.Stats().LCP.LoopsEnded.Load() != 1 || ac.lcpReqs > maxRounds+1 {
		t.Errorf("LoopsEnded %d, requests seen by AC %d (bound %d)", h.s.Stats().LCP.LoopsEnded.Load(), ac.lcpReqs, maxRounds)
	}
}

func TestAbsurdMRU(t *testing.T) {
	for _, mru := range []uint16{1, 64, 127, 1493, 9000, 65535} {
		ac := newAC()
		ac.mru = mru
		h := newHarness(t, Config{Credentials: creds}, ac)
		h.start()
		st := h.s.Status(h.now)
		// RFC 1661 §5.3: Nak with an acceptable value; the AC takes
		// it and the session comes up at 1492.
		if st.State != "up" || st.MTU != DefaultMRU || ac.mru != DefaultMRU {
			t.Errorf("AC MRU %d: state %q MTU %d AC now asks %d", mru, st.State, st.MTU, ac.mru)
		}
		if h.s.Stats().MRURejected.Load() != 1 {
			t.Errorf("AC MRU %d: MRURejected = %d, want 1", mru, h.s.Stats().MRURejected.Load())
		}
	}
	// A Nak of our MRU with an absurd value is not taken.
	ac := newAC()
	ac.maxPayload, ac.lcpNakAll, ac.lcpNakMRU = 1500, true, 40000
	h := newHarness(t, Config{Credentials: creds, MaxPayload: 1500}, ac)
	h.start()
	if ac.clientMRU != 1500 || h.s.Stats().MRURejected.Load() == 0 {
		t.Errorf("client MRU after absurd Naks = %d, MRURejected %d", ac.clientMRU, h.s.Stats().MRURejected.Load())
	}
}

func TestMagicLoopback(t *testing.T) {
	ac := newAC()
	ac.mirrorMagic = true
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	// RFC 1661 §6.4: an equal magic number means a possible loop; the
	// client Naks it with another value and picks a new one itself.
	var clientMagic uint32
	for _, o := range ac.clientLCPOpts {
		if o.Type == lcpOptMagic {
			clientMagic = binary.BigEndian.Uint32(o.Data)
		}
	}
	if h.s.Stats().Loopbacks.Load() != 1 || h.s.Stats().LCP.NakTx.Load() != 1 {
		t.Errorf("Loopbacks %d, LCP Naks %d; want 1, 1", h.s.Stats().Loopbacks.Load(), h.s.Stats().LCP.NakTx.Load())
	}
	if clientMagic == ac.magic || clientMagic == 0 {
		t.Errorf("client magic %#x, AC magic %#x: still equal", clientMagic, ac.magic)
	}
	if st := h.s.Status(h.now); st.State != "up" {
		t.Errorf("state %q %q", st.State, st.LastDownReason)
	}
}

func TestMagicClashNewRequest(t *testing.T) {
	// RFC 1661 §6.4: after a clash our next Configure-Request carries a
	// new magic number; the one the peer acked is what we use.
	var n counter
	l := lcp{rand: seqRand(), loopbacks: &n, badMRU: &n, linkMax: DefaultMRU}
	l.reset()
	first := l.request(nil)
	opts, _ := DecodeOptions(first, nil)
	l.check(opts, nil, 0)
	if next := l.request(nil); string(next) == string(first) {
		t.Errorf("request after a clash = %x, unchanged", next)
	}
	acked, _ := DecodeOptions(first, nil)
	l.acked(acked)
	if got := binary.BigEndian.Uint32(first[2:]); l.magic != got {
		t.Errorf("magic after Ack = %#x, want the acked %#x", l.magic, got)
	}
}

func TestPeerTerminates(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	h.s.Handle(h.now, ac.ctl(ProtoLCP, CodeTermReq, 99, nil))
	h.pump()
	// RFC 1661 §5.5: Terminate-Ack right away, then wait a restart
	// period before the layer is finished.
	if last := h.sent[len(h.sent)-1]; last[22] != CodeTermAck || last[23] != 99 {
		t.Fatalf("no Terminate-Ack: %x", last)
	}
	h.advance(restartTimeout, time.Second)
	st := h.s.Status(h.now)
	if st.State != "backoff" || !strings.Contains(st.LastDownReason, "terminate-request") || ac.padt != 1 {
		t.Fatalf("state %q reason %q PADTs %d", st.State, st.LastDownReason, ac.padt)
	}
}

func TestStopSendsTerminateAndPADT(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	h.s.Stop(h.now)
	h.pump()
	if ac.padt != 1 || ac.termAckRx != 0 {
		t.Errorf("PADTs %d", ac.padt)
	}
	if st := h.s.Status(h.now); st.State != "stopped" {
		t.Errorf("state %q", st.State)
	}
	h.advance(time.Minute, 10*time.Second)
	if len(h.cap.frames) != 0 || h.s.Status(h.now).State != "stopped" {
		t.Errorf("stopped session sent %d frames", len(h.cap.frames))
	}
}

func TestUnknownProtocolRejected(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	h.s.Handle(h.now, ac.ctl(0x8281, 1, 1, []byte{1, 2}))
	h.pump()
	if len(ac.protoRejs) != 2 || binary.BigEndian.Uint16(ac.protoRejs[1]) != 0x8281 || h.s.Stats().ProtoRejTx.Load() != 2 {
		t.Errorf("Protocol-Rejects = %x", ac.protoRejs)
	}
}

func TestStatusJSONHasNoPassword(t *testing.T) {
	ac := newAC()
	var last Status
	h := newHarness(t, Config{Credentials: creds, OnChange: func(s Status) { last = s }}, ac)
	h.start()
	if last.State != "up" {
		t.Fatalf("OnChange last state %q, want up", last.State)
	}
	b, err := json.Marshal(h.s.Status(h.now))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"state":"up"`, `"session_id":4660`, `"dns":["9.9.9.9","1.1.1.1"]`, `"padt_spoofed":0`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("status JSON lacks %s: %s", key, b)
		}
	}
	if strings.Contains(string(b), "s3cret") {
		t.Errorf("status JSON has the password")
	}
}

func TestVLANTaggedSession(t *testing.T) {
	ac := newAC()
	h := newHarness(t, Config{Credentials: creds, VLAN: 7}, ac)
	// The AC double speaks untagged; strip the tag on the way to it, as
	// a switch port would, and check every client frame carries VID 7.
	orig := h.acs
	h.acs = nil
	h.s.Start(h.now)
	for range 100 {
		fs := h.cap.take()
		if len(fs) == 0 {
			break
		}
		for _, f := range fs {
			if f[12] != 0x81 || f[13] != 0 || binary.BigEndian.Uint16(f[14:])&0xfff != 7 {
				t.Fatalf("frame without VLAN 7: %x", f)
			}
			untagged := append(append([]byte{}, f[:12]...), f[16:]...)
			for _, r := range orig[0].handle(untagged) {
				tagged := append(append(append([]byte{}, r[:12]...), 0x81, 0, 0, 7), r[12:]...)
				h.s.Handle(h.now, tagged)
			}
		}
	}
	if st := h.s.Status(h.now); st.State != "up" {
		t.Fatalf("state %q %q", st.State, st.LastDownReason)
	}
	// A frame on another VLAN is dropped and counted.
	other := append(append(append([]byte{}, clientMAC[:]...), acMAC[:]...), 0x81, 0, 0, 8, 0x88, 0x63)
	other = AppendDiscovery(other, CodePADT, 0x1234)
	h.s.Handle(h.now, other)
	if h.s.Stats().WrongVLAN.Load() != 1 || h.s.Status(h.now).State != "up" {
		t.Errorf("WrongVLAN = %d", h.s.Stats().WrongVLAN.Load())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"ok", Config{Local: clientMAC}, ""},
		{"multicast mac", Config{Local: [6]byte{1}}, "not a unicast"},
		{"vlan", Config{Local: clientMAC, VLAN: 4095}, "vlan 4095"},
		{"max payload", Config{Local: clientMAC, MaxPayload: 9000}, "max_payload 9000"},
		{"bad creds", Config{Local: clientMAC, Credentials: NewCredentials("", "x")}, "credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestIPCPWithoutAddress(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		ac := newAC()
		ac.addr = [4]byte{} // the AC acks 0.0.0.0 and never names an address
		h := newHarness(t, Config{Credentials: creds, IPv6: v6}, ac)
		h.start()
		h.advance(2*restartTimeout, time.Second)
		st := h.s.Status(h.now)
		if !v6 {
			// Nothing left to carry: the session ends and redials.
			if st.State == "up" || !strings.Contains(st.LastDownReason, "IPCP: peer gave no IPv4 address") {
				t.Errorf("IPv4 only: state %q reason %q", st.State, st.LastDownReason)
			}
			continue
		}
		// IPv6 still works: the session stays up without IPv4.
		if st.State != "up" || st.IPv4 != nil || st.IPv6 == nil {
			t.Errorf("dual stack: state %q IPv4 %+v IPv6 %+v", st.State, st.IPv4, st.IPv6)
		}
	}
}

func TestNCPBeforeNetworkPhaseDiscarded(t *testing.T) {
	ac := newAC()
	ac.noChallenge = true // we wait in the auth phase
	h := newHarness(t, Config{Credentials: creds}, ac)
	h.start()
	if st := h.s.Status(h.now); st.State != "auth" {
		t.Fatalf("state %q, want auth", st.State)
	}
	// RFC 1661 §3.4: NCP packets before the network phase are silently
	// discarded (and counted here).
	h.s.Handle(h.now, ac.ctl(ProtoIPCP, CodeConfReq, 1, AppendOption(nil, ipcpOptAddress, ac.peer[:])))
	if fs := h.cap.take(); len(fs) != 0 || h.s.Stats().FrameMalformed.Load() != 1 {
		t.Errorf("answered %d frames, FrameMalformed %d; want 0, 1", len(fs), h.s.Stats().FrameMalformed.Load())
	}
	// The auth phase has a time limit.
	h.advance(authTimeout, 5*time.Second)
	if st := h.s.Status(h.now); !strings.Contains(st.LastDownReason, "authentication timed out") {
		t.Errorf("after %v in auth: %q %q", authTimeout, st.State, st.LastDownReason)
	}
}
