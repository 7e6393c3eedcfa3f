package pppoe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"
)

// PPP protocol numbers (RFC 1661 §2, RFC 1332, RFC 5072, RFC 1334, RFC 1994).
const (
	ProtoIPv4   = 0x0021
	ProtoIPv6   = 0x0057
	ProtoLCP    = 0xc021
	ProtoPAP    = 0xc023
	ProtoCHAP   = 0xc223
	ProtoIPCP   = 0x8021
	ProtoIPv6CP = 0x8057
)

// Control packet codes (RFC 1661 §5).
const (
	CodeConfReq   = 1
	CodeConfAck   = 2
	CodeConfNak   = 3
	CodeConfRej   = 4
	CodeTermReq   = 5
	CodeTermAck   = 6
	CodeCodeRej   = 7
	CodeProtoRej  = 8
	CodeEchoReq   = 9
	CodeEchoReply = 10
	CodeDiscard   = 11
)

// Restart timer and counters (RFC 1661 §4.6 suggested values).
const (
	restartTimeout = 3 * time.Second
	maxTerminate   = 2
	maxConfigure   = 10
	// maxFailure is how many Configure-Naks we send for one option
	// before we Configure-Reject it instead, which ends a Nak loop.
	maxFailure = 5
	// maxRounds bounds the Configure-Requests sent and received in one
	// negotiation. RFC 1661's counters do not end a peer that Naks every
	// request forever (an RCN re-initialises the restart counter) or that
	// keeps asking for what we reject, so a negotiation that has not
	// opened after this many requests is closed; a clean one needs 2-6.
	maxRounds = 3 * maxConfigure
)

// Errors of the PPP codec; each is counted as a malformed PPP frame.
var (
	// ErrControlShort: the control packet is shorter than its 4-byte
	// header or than its Length field says.
	ErrControlShort = errors.New("ppp: control packet truncated")
	// ErrControlLength: the Length field is below the 4-byte header.
	ErrControlLength = errors.New("ppp: control packet length below header")
	// ErrOptionTruncated: an option's length is below 2 or runs past
	// the packet.
	ErrOptionTruncated = errors.New("ppp: option malformed or truncated")
	// ErrTooManyOptions: more than MaxOptions options.
	ErrTooManyOptions = errors.New("ppp: too many options")
)

// MaxOptions bounds the options of one Configure packet; LCP defines
// fewer than 32 option types.
const MaxOptions = 32

// Control is a decoded LCP/NCP/auth packet (RFC 1661 §5). Data aliases
// the decoded bytes; Ethernet padding past Length is cut off.
type Control struct {
	Code uint8
	ID   uint8
	Data []byte
}

// ParseControl decodes a control packet (the bytes after the PPP
// protocol field).
func ParseControl(b []byte) (Control, error) {
	if len(b) < 4 {
		return Control{}, ErrControlShort
	}
	n := int(binary.BigEndian.Uint16(b[2:4]))
	if n < 4 {
		return Control{}, ErrControlLength
	}
	if n > len(b) {
		return Control{}, ErrControlShort
	}
	return Control{Code: b[0], ID: b[1], Data: b[4:n:n]}, nil
}

// AppendControl appends an encoded control packet to b.
func AppendControl(b []byte, code, id uint8, data []byte) []byte {
	b = append(b, code, id)
	b = binary.BigEndian.AppendUint16(b, uint16(4+len(data)))
	return append(b, data...)
}

// Option is one configuration option (RFC 1661 §6). Data aliases the
// decoded packet.
type Option struct {
	Type uint8
	Data []byte
}

// DecodeOptions decodes a Configure packet's option list into dst[:0].
func DecodeOptions(b []byte, dst []Option) ([]Option, error) {
	dst = dst[:0]
	for len(b) > 0 {
		if len(b) < 2 {
			return dst, ErrOptionTruncated
		}
		l := int(b[1])
		if l < 2 || l > len(b) {
			return dst, ErrOptionTruncated
		}
		if len(dst) == MaxOptions {
			return dst, ErrTooManyOptions
		}
		dst = append(dst, Option{Type: b[0], Data: b[2:l:l]})
		b = b[l:]
	}
	return dst, nil
}

// AppendOption appends one encoded option to b.
func AppendOption(b []byte, t uint8, data []byte) []byte {
	b = append(b, t, byte(2+len(data)))
	return append(b, data...)
}

// fsmState is an RFC 1661 §4.2 automaton state.
type fsmState uint8

const (
	stInitial fsmState = iota
	stStarting
	stClosed
	stStopped
	stClosing
	stStopping
	stReqSent
	stAckRcvd
	stAckSent
	stOpened
)

var fsmStateNames = [...]string{"initial", "starting", "closed", "stopped", "closing", "stopping", "req-sent", "ack-rcvd", "ack-sent", "opened"}

func (s fsmState) String() string { return fsmStateNames[s] }

// verdict is how we answer a peer's Configure-Request.
type verdict uint8

const (
	verdictAck verdict = iota
	verdictNak
	verdictRej
)

// negotiator is the option logic of one control protocol (LCP, IPCP,
// IPv6CP) under the generic automaton.
type negotiator interface {
	// request appends our current options to b.
	request(b []byte) []byte
	// check judges the peer's options and appends the Nak'd or
	// Rejected options (or nothing for an Ack) to out. failures is how
	// many Naks we sent in a row: at maxFailure, Nak becomes Reject.
	check(opts []Option, out []byte, failures int) (verdict, []byte)
	// acked applies a Configure-Ack of our last request.
	acked(opts []Option)
	// naked adjusts our request to the peer's Configure-Nak.
	naked(opts []Option)
	// rejected drops what the peer rejected from our request.
	rejected(opts []Option)
	// reset restores the initial request before a new negotiation.
	reset()
}

// layerEvents is how the automaton tells its owner about this-layer-up,
// -down and -finished (RFC 1661 §4.4), and how it sends.
type layerEvents interface {
	send(proto uint16, code, id uint8, data []byte)
	layerUp(proto uint16)
	layerDown(proto uint16)
	layerFinished(proto uint16, reason string)
}

// fsm is the RFC 1661 §4 option negotiation automaton for one protocol.
// It is not safe for concurrent use; the Session serialises it.
type fsm struct {
	proto    uint16
	neg      negotiator
	ev       layerEvents
	state    fsmState
	restart  int       // restart counter (§4.6)
	deadline time.Time // restart timer; zero when stopped
	reqID    uint8     // identifier of our last Configure-Request
	lastReq  []byte    // options of our last Configure-Request
	nextID   uint8
	failures int // Naks sent in a row
	rounds   int // requests sent in this negotiation
	reason   string
	scratch  [MaxOptions]Option
	buf      []byte
	stats    *fsmStats
}

// fsmStats counts what the automaton saw.
type fsmStats struct {
	ConfReqRx, ConfAckRx, ConfNakRx, ConfRejRx, ConfReqTx, NakTx, RejTx counter
	TermReqRx, CodeRejRx, BadPacket, LoopsEnded                         counter
}

func newFSM(proto uint16, neg negotiator, ev layerEvents, st *fsmStats) *fsm {
	return &fsm{proto: proto, neg: neg, ev: ev, stats: st, buf: make([]byte, 0, 256)}
}

// open is the Up+Open events: the lower layer (PPPoE session, or LCP for
// an NCP) is ready and we want the link.
func (f *fsm) open(now time.Time) {
	f.neg.reset()
	f.rounds, f.failures = 0, 0
	f.restart = maxConfigure
	f.sendConfReq(now)
	f.state = stReqSent
}

// down is the Down event: the lower layer went away.
func (f *fsm) down() {
	if f.state == stOpened {
		f.ev.layerDown(f.proto)
	}
	f.state = stInitial
	f.deadline = time.Time{}
}

// close is the Close event: we want the link down (sends
// Terminate-Request, §4.1).
func (f *fsm) close(now time.Time, reason string) {
	switch f.state {
	case stOpened, stReqSent, stAckRcvd, stAckSent:
		if f.state == stOpened {
			f.ev.layerDown(f.proto)
		}
		f.reason = reason
		f.restart = maxTerminate
		f.nextID++
		f.ev.send(f.proto, CodeTermReq, f.nextID, nil)
		f.deadline = now.Add(restartTimeout)
		f.state = stClosing
	case stStopped, stStopping:
		f.state = stClosed
	}
}

func (f *fsm) opened() bool { return f.state == stOpened }

func (f *fsm) sendConfReq(now time.Time) {
	f.rounds++
	f.nextID++
	f.reqID = f.nextID
	f.buf = f.neg.request(f.buf[:0])
	f.lastReq = append(f.lastReq[:0], f.buf...)
	f.ev.send(f.proto, CodeConfReq, f.reqID, f.buf)
	f.stats.ConfReqTx.Add(1)
	f.deadline = now.Add(restartTimeout)
}

// finish is this-layer-finished.
func (f *fsm) finish(reason string) {
	f.deadline = time.Time{}
	f.ev.layerFinished(f.proto, reason)
}

// tick runs the restart timer (TO+ / TO-, §4.1).
func (f *fsm) tick(now time.Time) {
	if f.deadline.IsZero() || now.Before(f.deadline) {
		return
	}
	f.deadline = time.Time{}
	switch f.state {
	case stClosing, stStopping:
		f.restart--
		if f.restart > 0 {
			f.nextID++
			f.ev.send(f.proto, CodeTermReq, f.nextID, nil)
			f.deadline = now.Add(restartTimeout)
			return
		}
		if f.state == stClosing {
			f.state = stClosed
		} else {
			f.state = stStopped
		}
		f.finish(f.reason)
	case stReqSent, stAckRcvd, stAckSent:
		f.restart--
		if f.restart > 0 {
			f.sendConfReq(now)
			if f.state == stAckRcvd {
				f.state = stReqSent
			}
			return
		}
		f.state = stStopped
		f.finish("no answer to configure-request")
	}
}

// input handles one received control packet of this protocol.
func (f *fsm) input(now time.Time, c Control) {
	switch c.Code {
	case CodeConfReq:
		f.stats.ConfReqRx.Add(1)
		f.rcr(now, c)
	case CodeConfAck:
		f.stats.ConfAckRx.Add(1)
		f.rca(now, c)
	case CodeConfNak, CodeConfRej:
		if c.Code == CodeConfNak {
			f.stats.ConfNakRx.Add(1)
		} else {
			f.stats.ConfRejRx.Add(1)
		}
		f.rcn(now, c)
	case CodeTermReq:
		f.stats.TermReqRx.Add(1)
		f.ev.send(f.proto, CodeTermAck, c.ID, nil)
		switch f.state {
		case stOpened:
			f.ev.layerDown(f.proto)
			f.restart = 0
			f.deadline = now.Add(restartTimeout)
			f.reason = "peer sent terminate-request"
			f.state = stStopping
		case stAckRcvd, stAckSent:
			f.state = stReqSent
		}
	case CodeTermAck:
		switch f.state {
		case stClosing:
			f.state = stClosed
			f.finish(f.reason)
		case stStopping:
			f.state = stStopped
			f.finish(f.reason)
		case stAckRcvd:
			f.state = stReqSent
		case stOpened:
			f.ev.layerDown(f.proto)
			f.restart = maxConfigure
			f.sendConfReq(now)
			f.state = stReqSent
		}
	case CodeCodeRej, CodeProtoRej:
		// RXJ: a rejected code or protocol we cannot do without ends
		// the layer (RXJ-); rejects of Echo or Discard are fine (RXJ+).
		f.stats.CodeRejRx.Add(1)
		if c.Code == CodeCodeRej && len(c.Data) >= 1 {
			switch c.Data[0] {
			case CodeEchoReq, CodeEchoReply, CodeDiscard, CodeCodeRej, CodeProtoRej:
				return
			}
		}
		if c.Code == CodeProtoRej {
			return // the Session handles Protocol-Reject for its NCPs
		}
		f.rxjMinus(now, "peer rejected a required code")
	default:
		// RUC: send Code-Reject with the rejected packet (§5.6).
		f.stats.BadPacket.Add(1)
		f.buf = AppendControl(f.buf[:0], c.Code, c.ID, c.Data)
		f.nextID++
		f.ev.send(f.proto, CodeCodeRej, f.nextID, f.buf)
	}
}

func (f *fsm) rxjMinus(now time.Time, reason string) {
	switch f.state {
	case stOpened:
		f.close(now, reason)
	case stReqSent, stAckRcvd, stAckSent, stClosing, stStopping:
		f.state = stStopped
		f.finish(reason)
	}
}

// rcr handles a Configure-Request (RCR+ / RCR-).
func (f *fsm) rcr(now time.Time, c Control) {
	switch f.state {
	case stClosed:
		f.ev.send(f.proto, CodeTermAck, c.ID, nil)
		return
	case stReqSent, stAckRcvd, stAckSent, stOpened:
	default:
		return
	}
	opts, err := DecodeOptions(c.Data, f.scratch[:])
	if err != nil {
		f.stats.BadPacket.Add(1)
		return
	}
	f.rounds++
	if f.state == stOpened {
		// The peer renegotiates: this-layer-down, send our request.
		f.ev.layerDown(f.proto)
		f.neg.reset()
		f.restart = maxConfigure
		f.rounds = 0
		f.sendConfReq(now)
		f.state = stReqSent
	}
	if f.loopGuard(now) {
		return
	}
	v, resp := f.neg.check(opts, f.buf[:0], f.failures)
	switch v {
	case verdictAck:
		f.failures = 0
		f.ev.send(f.proto, CodeConfAck, c.ID, c.Data)
		switch f.state {
		case stReqSent:
			f.state = stAckSent
		case stAckRcvd:
			f.state = stOpened
			f.ev.layerUp(f.proto)
		}
	case verdictNak, verdictRej:
		code := uint8(CodeConfNak)
		if v == verdictRej {
			code = CodeConfRej
			f.stats.RejTx.Add(1)
		} else {
			f.failures++
			f.stats.NakTx.Add(1)
		}
		f.buf = resp
		f.ev.send(f.proto, code, c.ID, resp)
		if f.state == stAckSent {
			f.state = stReqSent
		}
	}
}

// loopGuard ends a negotiation that has gone on for maxRounds exchanges
// without opening, and reports whether it did.
func (f *fsm) loopGuard(now time.Time) bool {
	if f.rounds < maxRounds {
		return false
	}
	f.stats.LoopsEnded.Add(1)
	f.rxjMinus(now, "negotiation did not converge")
	return true
}

// rca handles a Configure-Ack.
func (f *fsm) rca(now time.Time, c Control) {
	if c.ID != f.reqID || !bytes.Equal(c.Data, f.lastReq) {
		// §5.2: an Ack whose Identifier or options do not match our
		// last request exactly is invalid and silently discarded.
		f.stats.BadPacket.Add(1)
		return
	}
	opts, err := DecodeOptions(c.Data, f.scratch[:])
	if err != nil {
		f.stats.BadPacket.Add(1)
		return
	}
	switch f.state {
	case stReqSent:
		f.neg.acked(opts)
		f.restart = maxConfigure
		f.deadline = time.Time{}
		f.state = stAckRcvd
	case stAckSent:
		f.neg.acked(opts)
		f.restart = maxConfigure
		f.deadline = time.Time{}
		f.state = stOpened
		f.ev.layerUp(f.proto)
	case stAckRcvd, stOpened:
		// Crossed connection (§4.1 RCA in Ack-Rcvd/Opened): start over.
		if f.state == stOpened {
			f.ev.layerDown(f.proto)
		}
		f.sendConfReq(now)
		f.state = stReqSent
	}
}

// rcn handles a Configure-Nak or Configure-Reject.
func (f *fsm) rcn(now time.Time, c Control) {
	if c.ID != f.reqID {
		f.stats.BadPacket.Add(1)
		return
	}
	opts, err := DecodeOptions(c.Data, f.scratch[:])
	if err != nil {
		f.stats.BadPacket.Add(1)
		return
	}
	switch f.state {
	case stReqSent, stAckSent, stAckRcvd, stOpened:
	default:
		return
	}
	if f.state == stOpened {
		f.ev.layerDown(f.proto)
	}
	if c.Code == CodeConfNak {
		f.neg.naked(opts)
	} else {
		f.neg.rejected(opts)
	}
	if f.loopGuard(now) {
		return
	}
	f.restart = maxConfigure
	f.sendConfReq(now)
	if f.state != stAckSent {
		f.state = stReqSent
	}
}

// nakOrReject returns the Nak, or past Max-Failure Naks in a row
// (RFC 1661 §4.6) a Reject of the options the Nak was about.
func nakOrReject(opts []Option, naked uint32, nak, out []byte, failures int) (verdict, []byte) {
	if failures < maxFailure {
		return verdictNak, nak
	}
	rej := out[:0]
	for i, o := range opts {
		if naked&(1<<i) != 0 {
			rej = AppendOption(rej, o.Type, o.Data)
		}
	}
	return verdictRej, rej
}
