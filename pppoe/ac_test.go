package pppoe

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"testing"
	"time"
)

// This file holds a test double: a small access concentrator that answers
// the client's frames, just enough of RFC 2516 and PPP to bring a session
// up. The independent peer is scapy (scapy_test.go).

var (
	clientMAC = [6]byte{0x02, 0, 0, 0, 0, 0x01}
	acMAC     = [6]byte{0x02, 0, 0, 0, 0, 0xac}
	acMAC2    = [6]byte{0x02, 0, 0, 0, 0, 0xad}
	broadcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// capture is a FrameSender that keeps copies of what the client sent.
type capture struct{ frames [][]byte }

func (c *capture) SendFrame(b []byte) { c.frames = append(c.frames, bytes.Clone(b)) }

func (c *capture) take() [][]byte { f := c.frames; c.frames = nil; return f }

type testAC struct {
	mac        [6]byte
	name       string
	services   []string
	cookie     []byte
	sid        uint16
	maxPayload uint16 // echo PPP-Max-Payload up to this; 0 ignores the tag
	auth       uint16 // 0, ProtoPAP, ProtoCHAP
	user, pass string
	addr, peer [4]byte
	dns        [][4]byte
	mru        uint16 // MRU the AC requests; 0 none
	magic      uint32
	silent     bool // stops answering echoes
	// mirrorMagic makes the AC request the client's own magic number,
	// as a looped-back link would.
	mirrorMagic  bool
	noChallenge  bool     // asks for CHAP, never challenges
	clientMagics []uint32 // magic numbers of the client's LCP requests
	// lcpNakAll makes the AC Nak every LCP Configure-Request with
	// lcpNakMRU as the MRU: a Nak loop.
	lcpNakAll bool
	lcpNakMRU uint16

	// Observed.
	client             [6]byte
	lastPADR           Discovery
	padr, padt         int
	clientLCPOpts      []Option
	clientMRU          uint16
	sentLCP, lcpGotAck bool
	lcpAckedClient     bool
	authed             bool
	chapID             uint8
	challenge          []byte
	ncpStarted         bool
	id                 uint8
	termAckRx, echoRx  int
	lcpReqs            int
	ipcpReqs, ipv6Reqs int
	protoRejs          [][]byte
	ipv6IID            [8]byte
}

func newAC() *testAC {
	return &testAC{
		mac: acMAC, name: "test-ac", services: []string{"internet"}, cookie: []byte("cookie-123"),
		sid: 0x1234, magic: 0x0a0b0c0d, auth: ProtoCHAP, user: "alice", pass: "s3cret",
		addr: [4]byte{100, 64, 0, 10}, peer: [4]byte{100, 64, 0, 1}, dns: [][4]byte{{9, 9, 9, 9}, {1, 1, 1, 1}},
	}
}

func (ac *testAC) disc(dst [6]byte, code uint8, sid uint16, tags ...Tag) []byte {
	b := append(append(append([]byte{}, dst[:]...), ac.mac[:]...), 0x88, 0x63)
	return AppendDiscovery(b, code, sid, tags...)
}

func (ac *testAC) ctl(proto uint16, code, id uint8, data []byte) []byte {
	b := append(append(append([]byte{}, ac.client[:]...), ac.mac[:]...), 0x88, 0x64)
	b = append(b, 0x11, 0, byte(ac.sid>>8), byte(ac.sid), 0, 0)
	b = binary.BigEndian.AppendUint16(b, proto)
	b = AppendControl(b, code, id, data)
	binary.BigEndian.PutUint16(b[18:], uint16(len(b)-20))
	return b
}

func (ac *testAC) nextID() uint8 { ac.id++; return ac.id }

// handle returns the AC's answers to one client frame.
func (ac *testAC) handle(frame []byte) [][]byte {
	src, _, et, p, ok := ethernet(frame)
	if !ok {
		return nil
	}
	dst := [6]byte(frame[0:6])
	if dst != ac.mac && dst != broadcast {
		return nil
	}
	switch et {
	case EtherTypeDiscovery:
		var tags [MaxTags]Tag
		d, err := ParseDiscovery(p, tags[:])
		if err != nil {
			return nil
		}
		hu, _ := d.Tag(TagHostUniq)
		reply := []Tag{{TagACName, []byte(ac.name)}, {TagHostUniq, hu}}
		if mp, ok := d.Tag(TagPPPMaxPayload); ok && ac.maxPayload != 0 {
			reply = append(reply, maxPayloadTag(min(binary.BigEndian.Uint16(mp), ac.maxPayload)))
		}
		switch d.Code {
		case CodePADI:
			for _, s := range ac.services {
				reply = append(reply, Tag{TagServiceName, []byte(s)})
			}
			reply = append(reply, Tag{TagACCookie, ac.cookie})
			return [][]byte{ac.disc(src, CodePADO, 0, reply...)}
		case CodePADR:
			if dst != ac.mac {
				return nil
			}
			ac.padr++
			ac.lastPADR = Discovery{Code: d.Code, Tags: cloneTags(d.Tags)}
			if c, _ := d.Tag(TagACCookie); !bytes.Equal(c, ac.cookie) {
				return [][]byte{ac.disc(src, CodePADS, 0, Tag{TagGenericError, []byte("bad cookie")})}
			}
			ac.client = src
			ac.sentLCP, ac.lcpGotAck, ac.lcpAckedClient, ac.authed, ac.challenge, ac.ncpStarted = false, false, false, false, nil, false
			sn, _ := d.Tag(TagServiceName)
			return [][]byte{ac.disc(src, CodePADS, ac.sid, append(reply, Tag{TagServiceName, sn})...)}
		case CodePADT:
			ac.padt++
		}
		return nil
	case EtherTypeSession:
		l := Link{Local: ac.mac, Peer: ac.client, SessionID: ac.sid}
		proto, pkt, r := l.Decap(frame)
		if r != DecapOK {
			return nil
		}
		c, err := ParseControl(pkt)
		if err != nil {
			return nil
		}
		return ac.ppp(proto, c)
	}
	return nil
}

func (ac *testAC) lcpRequest() []byte {
	var b []byte
	if ac.mru != 0 {
		b = AppendOption(b, lcpOptMRU, binary.BigEndian.AppendUint16(nil, ac.mru))
	}
	switch ac.auth {
	case ProtoPAP:
		b = AppendOption(b, lcpOptAuth, []byte{0xc0, 0x23})
	case ProtoCHAP:
		b = AppendOption(b, lcpOptAuth, []byte{0xc2, 0x23, 5})
	}
	return AppendOption(b, lcpOptMagic, binary.BigEndian.AppendUint32(nil, ac.magic))
}

func (ac *testAC) ppp(proto uint16, c Control) [][]byte {
	var out [][]byte
	switch proto {
	case ProtoLCP:
		switch c.Code {
		case CodeConfReq:
			ac.lcpReqs++
			opts, _ := DecodeOptions(c.Data, nil)
			ac.clientLCPOpts = cloneOpts(opts)
			ac.clientMRU = 0
			for _, o := range opts {
				if o.Type == lcpOptMRU {
					ac.clientMRU = binary.BigEndian.Uint16(o.Data)
				}
				if o.Type == lcpOptMagic {
					ac.clientMagics = append(ac.clientMagics, binary.BigEndian.Uint32(o.Data))
				}
				if o.Type == lcpOptMagic && ac.mirrorMagic && !ac.sentLCP {
					ac.magic = binary.BigEndian.Uint32(o.Data)
				}
			}
			if ac.lcpNakAll {
				out = append(out, ac.ctl(ProtoLCP, CodeConfNak, c.ID, AppendOption(nil, lcpOptMRU, binary.BigEndian.AppendUint16(nil, ac.lcpNakMRU))))
			} else {
				out = append(out, ac.ctl(ProtoLCP, CodeConfAck, c.ID, c.Data))
				ac.lcpAckedClient = true
			}
			if !ac.sentLCP {
				ac.sentLCP = true
				out = append(out, ac.ctl(ProtoLCP, CodeConfReq, ac.nextID(), ac.lcpRequest()))
			}
		case CodeConfAck:
			ac.lcpGotAck = true
		case CodeConfNak:
			// Take the client's MRU suggestion and ask again.
			opts, _ := DecodeOptions(c.Data, nil)
			for _, o := range opts {
				if o.Type == lcpOptMRU {
					ac.mru = binary.BigEndian.Uint16(o.Data)
				}
				if o.Type == lcpOptMagic {
					ac.magic++
				}
			}
			out = append(out, ac.ctl(ProtoLCP, CodeConfReq, ac.nextID(), ac.lcpRequest()))
		case CodeEchoReq:
			ac.echoRx++
			if !ac.silent {
				out = append(out, ac.ctl(ProtoLCP, CodeEchoReply, c.ID, binary.BigEndian.AppendUint32(nil, ac.magic)))
			}
		case CodeTermAck:
			ac.termAckRx++
		case CodeTermReq:
			out = append(out, ac.ctl(ProtoLCP, CodeTermAck, c.ID, nil))
		case CodeProtoRej:
			ac.protoRejs = append(ac.protoRejs, bytes.Clone(c.Data))
		}
		if ac.lcpGotAck && ac.lcpAckedClient && !ac.authed && ac.challenge == nil {
			switch ac.auth {
			case ProtoCHAP:
				if ac.noChallenge {
					break
				}
				ac.challenge = []byte("0123456789abcdef")
				ac.chapID = ac.nextID()
				out = append(out, ac.ctl(ProtoCHAP, chapChallenge, ac.chapID, append(append([]byte{16}, ac.challenge...), ac.name...)))
			case 0:
				ac.authed = true
				out = append(out, ac.startNCP()...)
			}
		}
	case ProtoCHAP:
		if c.Code == chapResponse && c.ID == ac.chapID && len(c.Data) >= 17 {
			want := md5.Sum(append(append([]byte{c.ID}, ac.pass...), ac.challenge...))
			if !bytes.Equal(c.Data[1:17], want[:]) || string(c.Data[17:]) != ac.user {
				return [][]byte{ac.ctl(ProtoCHAP, chapFailure, c.ID, []byte("wrong secret"))}
			}
			ac.authed = true
			out = append(out, ac.ctl(ProtoCHAP, chapSuccess, c.ID, []byte("welcome")))
			out = append(out, ac.startNCP()...)
		}
	case ProtoPAP:
		if c.Code == papAuthReq {
			d := c.Data
			user := string(d[1 : 1+d[0]])
			pass := string(d[2+d[0] : 2+int(d[0])+int(d[1+d[0]])])
			if user != ac.user || pass != ac.pass {
				return [][]byte{ac.ctl(ProtoPAP, papAuthNak, c.ID, []byte{3, 'b', 'a', 'd'})}
			}
			ac.authed = true
			out = append(out, ac.ctl(ProtoPAP, papAuthAck, c.ID, []byte{0}))
			out = append(out, ac.startNCP()...)
		}
	case ProtoIPCP:
		if c.Code == CodeConfReq {
			ac.ipcpReqs++
			opts, _ := DecodeOptions(c.Data, nil)
			var nak []byte
			for _, o := range opts {
				switch o.Type {
				case ipcpOptAddress:
					if [4]byte(o.Data) != ac.addr {
						nak = AppendOption(nak, o.Type, ac.addr[:])
					}
				case ipcpOptPrimaryDNS, ipcpOptSecondaryDNS:
					i := 0
					if o.Type == ipcpOptSecondaryDNS {
						i = 1
					}
					if i < len(ac.dns) && [4]byte(o.Data) != ac.dns[i] {
						nak = AppendOption(nak, o.Type, ac.dns[i][:])
					}
				}
			}
			if nak != nil {
				out = append(out, ac.ctl(ProtoIPCP, CodeConfNak, c.ID, nak))
			} else {
				out = append(out, ac.ctl(ProtoIPCP, CodeConfAck, c.ID, c.Data))
			}
		}
	case ProtoIPv6CP:
		if c.Code == CodeConfReq {
			ac.ipv6Reqs++
			opts, _ := DecodeOptions(c.Data, nil)
			for _, o := range opts {
				if o.Type == ipv6cpOptInterfaceID {
					ac.ipv6IID = [8]byte(o.Data)
				}
			}
			out = append(out, ac.ctl(ProtoIPv6CP, CodeConfAck, c.ID, c.Data))
		}
	}
	return out
}

func (ac *testAC) startNCP() [][]byte {
	if ac.ncpStarted {
		return nil
	}
	ac.ncpStarted = true
	return [][]byte{
		ac.ctl(ProtoIPCP, CodeConfReq, ac.nextID(), AppendOption(nil, ipcpOptAddress, ac.peer[:])),
		ac.ctl(ProtoIPv6CP, CodeConfReq, ac.nextID(), AppendOption(nil, ipv6cpOptInterfaceID, []byte{0, 0, 0, 0, 0, 0, 0, 1})),
	}
}

func cloneTags(ts []Tag) []Tag {
	out := make([]Tag, len(ts))
	for i, t := range ts {
		out[i] = Tag{t.Type, bytes.Clone(t.Value)}
	}
	return out
}

func cloneOpts(os []Option) []Option {
	out := make([]Option, len(os))
	for i, o := range os {
		out[i] = Option{o.Type, bytes.Clone(o.Data)}
	}
	return out
}

// harness drives a Session against test ACs at a settable time.
type harness struct {
	t   *testing.T
	s   *Session
	cap *capture
	acs []*testAC
	now time.Time
	// sent is every frame the client sent, in order.
	sent [][]byte
}

func seqRand() func() uint64 {
	var n uint64
	return func() uint64 { n++; return n * 0x9e3779b97f4a7c15 }
}

func newHarness(t *testing.T, cfg Config, acs ...*testAC) *harness {
	t.Helper()
	if cfg.Local == [6]byte{} {
		cfg.Local = clientMAC
	}
	if cfg.Rand == nil {
		cfg.Rand = seqRand()
	}
	c := &capture{}
	s, err := New(cfg, c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{t: t, s: s, cap: c, acs: acs, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// pump exchanges frames between the client and the ACs until quiet.
func (h *harness) pump() {
	h.t.Helper()
	for range 10000 {
		fs := h.cap.take()
		if len(fs) == 0 {
			return
		}
		for _, f := range fs {
			h.sent = append(h.sent, f)
			for _, ac := range h.acs {
				for _, r := range ac.handle(f) {
					h.s.Handle(h.now, r)
				}
			}
		}
	}
	h.t.Fatalf("frame exchange did not settle")
}

// advance moves time in steps of at most step, ticking and pumping.
func (h *harness) advance(d, step time.Duration) {
	end := h.now.Add(d)
	for h.now.Before(end) {
		next := h.now.Add(step)
		if dl := h.s.NextDeadline(); !dl.IsZero() && dl.Before(next) && dl.After(h.now) {
			next = dl
		}
		if next.After(end) {
			next = end
		}
		h.now = next
		h.s.Tick(h.now)
		h.pump()
	}
}

func (h *harness) start() {
	h.s.Start(h.now)
	h.pump()
}
