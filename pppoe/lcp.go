package pppoe

import "encoding/binary"

// LCP option types (RFC 1661 §6, RFC 1570).
const (
	lcpOptMRU   = 1
	lcpOptACCM  = 2
	lcpOptAuth  = 3
	lcpOptQual  = 4
	lcpOptMagic = 5
	lcpOptPFC   = 7
	lcpOptACFC  = 8
)

// MRU bounds.
const (
	// DefaultMRU is the PPP MRU over PPPoE: 1500 Ethernet payload minus
	// the 6-byte PPPoE header and 2-byte protocol field (RFC 2516 §7).
	DefaultMRU = 1492
	// MaxMRU is the largest MRU we negotiate, with RFC 4638 on a
	// baby-jumbo (1508-byte payload) link: a full 1500-byte IP packet.
	MaxMRU = 1500
	// MinMRU is the smallest MRU we accept from a peer; below it a peer
	// is broken or hostile (pppd's MINMRU is 128 too) and is Nak'd.
	MinMRU = 128
)

// chapMD5 is CHAP's MD5 algorithm number (RFC 1994 §3).
const chapMD5 = 5

// lcp is the LCP option logic: MRU, magic number and the peer's
// authentication protocol.
type lcp struct {
	rand     func() uint64
	linkMax  uint16 // largest MRU the PPPoE session carries: 1492, or up to 1500 with RFC 4638
	authPAP  bool   // credentials allow PAP
	authCHAP bool   // credentials allow CHAP-MD5

	// Our request.
	wantMRU   bool
	mru       uint16
	wantMagic bool
	magic     uint32

	// Agreed values, valid once LCP is opened.
	localMRU  uint16 // what we receive
	peerMRU   uint16 // what we may send
	peerMagic uint32
	authProto uint16 // 0, ProtoPAP or ProtoCHAP

	loopbacks *counter // peer's magic equal to ours (RFC 1661 §6.4)
	badMRU    *counter // peer's MRU outside [MinMRU, linkMax], Nak'd
}

func (l *lcp) newMagic() uint32 {
	for {
		if m := uint32(l.rand()); m != 0 && m != l.magic {
			return m
		}
	}
}

func (l *lcp) reset() {
	l.wantMRU = l.linkMax != DefaultMRU
	l.mru = l.linkMax
	l.wantMagic = true
	l.magic = l.newMagic()
	l.localMRU, l.peerMRU, l.peerMagic, l.authProto = DefaultMRU, l.defaultPeerMRU(), 0, 0
}

// defaultPeerMRU is the peer's MRU when its Configure-Request has no MRU
// option: RFC 1661's default, 1500 (§6.1), as far as the session carries
// it: 1492 (RFC 2516 §7), or up to 1500 with RFC 4638. pppd with mtu
// 1500 sends no MRU option for that reason.
func (l *lcp) defaultPeerMRU() uint16 {
	if l.linkMax < DefaultMRU {
		return DefaultMRU // no session yet
	}
	return min(MaxMRU, l.linkMax)
}

func (l *lcp) request(b []byte) []byte {
	if l.wantMRU {
		b = AppendOption(b, lcpOptMRU, []byte{byte(l.mru >> 8), byte(l.mru)})
	}
	if l.wantMagic {
		b = AppendOption(b, lcpOptMagic, binary.BigEndian.AppendUint32(nil, l.magic))
	}
	return b
}

// check judges the peer's LCP options (RFC 1661 §5.1-5.4: any option we
// do not know or cannot use is rejected; the rejects go alone; values we
// dislike are Nak'd with a value we would accept).
func (l *lcp) check(opts []Option, out []byte, failures int) (verdict, []byte) {
	// Pass 1: rejects.
	rej := out
	for _, o := range opts {
		if l.reject(o) {
			rej = AppendOption(rej, o.Type, o.Data)
		}
	}
	if len(rej) > len(out) {
		return verdictRej, rej
	}
	// Pass 2: naks.
	nak := out
	var naked uint32 // bit i: opts[i] was Nak'd
	for i, o := range opts {
		n := len(nak)
		switch o.Type {
		case lcpOptMRU:
			if v := binary.BigEndian.Uint16(o.Data); v < MinMRU || v > l.linkMax {
				l.badMRU.Add(1)
				nak = AppendOption(nak, o.Type, []byte{byte(l.linkMax >> 8), byte(l.linkMax)})
			}
		case lcpOptMagic:
			if v := binary.BigEndian.Uint32(o.Data); v == 0 || (l.wantMagic && v == l.magic) {
				if v != 0 {
					l.loopbacks.Add(1)
					l.magic = l.newMagic()
				}
				nak = AppendOption(nak, o.Type, binary.BigEndian.AppendUint32(nil, l.newMagic()))
			}
		case lcpOptAuth:
			if !l.authOK(o.Data) {
				nak = AppendOption(nak, o.Type, l.preferredAuth())
			}
		}
		if len(nak) > n {
			naked |= 1 << i
		}
	}
	if naked != 0 {
		return nakOrReject(opts, naked, nak, out, failures)
	}
	// Ack: record the peer's side.
	l.peerMRU, l.peerMagic, l.authProto = l.defaultPeerMRU(), 0, 0
	for _, o := range opts {
		switch o.Type {
		case lcpOptMRU:
			l.peerMRU = binary.BigEndian.Uint16(o.Data)
		case lcpOptMagic:
			l.peerMagic = binary.BigEndian.Uint32(o.Data)
		case lcpOptAuth:
			l.authProto = binary.BigEndian.Uint16(o.Data)
		}
	}
	return verdictAck, out
}

// reject reports whether an option is one we reject outright: unknown,
// malformed, or barred on PPPoE (RFC 2516 §7: no ACCM, ACFC, FCS
// alternatives; we do not implement PFC or quality protocols).
func (l *lcp) reject(o Option) bool {
	switch o.Type {
	case lcpOptMRU:
		return len(o.Data) != 2
	case lcpOptMagic:
		return len(o.Data) != 4
	case lcpOptAuth:
		if len(o.Data) < 2 {
			return true
		}
		return !l.authPAP && !l.authCHAP // no credentials: cannot authenticate
	}
	return true
}

func (l *lcp) authOK(d []byte) bool {
	switch binary.BigEndian.Uint16(d) {
	case ProtoPAP:
		return l.authPAP && len(d) == 2
	case ProtoCHAP:
		return l.authCHAP && len(d) == 3 && d[2] == chapMD5
	}
	return false
}

func (l *lcp) preferredAuth() []byte {
	if l.authCHAP {
		return []byte{byte(ProtoCHAP >> 8), byte(ProtoCHAP & 0xff), chapMD5}
	}
	return []byte{byte(ProtoPAP >> 8), byte(ProtoPAP & 0xff)}
}

// acked takes the agreed values from the Ack, which repeats our request
// (the automaton checked that): a magic number changed by a clash after
// the request went out is not the one the peer knows (RFC 1661 §6.4).
func (l *lcp) acked(opts []Option) {
	l.localMRU = DefaultMRU
	for _, o := range opts {
		switch {
		case o.Type == lcpOptMRU && len(o.Data) == 2:
			l.localMRU = binary.BigEndian.Uint16(o.Data)
		case o.Type == lcpOptMagic && len(o.Data) == 4:
			l.magic = binary.BigEndian.Uint32(o.Data)
		}
	}
}

// naked takes the peer's suggestions where they are sane; an absurd MRU
// suggestion is ignored (we ask again and the round limit ends a loop).
func (l *lcp) naked(opts []Option) {
	for _, o := range opts {
		switch o.Type {
		case lcpOptMRU:
			if len(o.Data) == 2 {
				if v := binary.BigEndian.Uint16(o.Data); v >= MinMRU && v <= l.linkMax {
					l.mru, l.wantMRU = v, true
				} else {
					l.badMRU.Add(1)
				}
			}
		case lcpOptMagic:
			l.magic = l.newMagic() // §6.4: pick a new random number
		}
	}
}

func (l *lcp) rejected(opts []Option) {
	for _, o := range opts {
		switch o.Type {
		case lcpOptMRU:
			l.wantMRU = false
		case lcpOptMagic:
			l.wantMagic, l.magic = false, 0
		}
	}
}

// mtu is the largest PPP payload we send: the peer's MRU, never more than
// the session carries.
func (l *lcp) mtu() uint16 { return min(l.peerMRU, l.linkMax) }
