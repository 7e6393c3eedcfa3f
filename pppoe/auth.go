package pppoe

import (
	"crypto/md5"
	"time"
)

// PAP codes (RFC 1334 §2.2) and CHAP codes (RFC 1994 §4).
const (
	papAuthReq = 1
	papAuthAck = 2
	papAuthNak = 3

	chapChallenge = 1
	chapResponse  = 2
	chapSuccess   = 3
	chapFailure   = 4
)

// authTimeout bounds the whole authentication phase: an AC that asked
// for CHAP and never challenges, or never answers, must not hold the
// session in limbo (pppd's default auth timeout is also tens of seconds).
const authTimeout = 30 * time.Second

// authResult is what one auth packet or tick produced.
type authResult uint8

const (
	authPending authResult = iota
	authOK
	authFailed
)

// auth is the client side of PAP or CHAP-MD5, as LCP agreed.
type auth struct {
	proto    uint16
	creds    Credentials
	id       uint8
	tries    int
	resend   time.Time // PAP retransmission
	deadline time.Time // end of the phase
	message  string    // the peer's failure message, for Status
	buf      []byte
}

func (a *auth) start(now time.Time, proto uint16, send func(proto uint16, code, id uint8, data []byte)) {
	a.proto, a.tries, a.message = proto, 0, ""
	a.deadline = now.Add(authTimeout)
	a.resend = time.Time{}
	if proto == ProtoPAP {
		a.id++
		a.sendPAP(now, send)
	}
}

// sendPAP sends Authenticate-Request (RFC 1334 §2.2.1); the client
// retransmits until acknowledged, like a Configure-Request.
func (a *auth) sendPAP(now time.Time, send func(uint16, uint8, uint8, []byte)) {
	b := a.buf[:0]
	b = append(b, byte(len(a.creds.Username)))
	b = append(b, a.creds.Username...)
	b = append(b, byte(len(a.creds.password)))
	b = append(b, a.creds.password...)
	a.buf = b
	a.tries++
	a.resend = now.Add(restartTimeout)
	send(ProtoPAP, papAuthReq, a.id, b)
	clear(b) // the password does not linger in the scratch buffer
}

// chapResponseValue is MD5(Identifier || secret || Challenge) (RFC 1994 §4.1).
func chapResponseValue(id uint8, secret string, challenge []byte) [16]byte {
	h := md5.New()
	h.Write([]byte{id})
	h.Write([]byte(secret))
	h.Write(challenge)
	var out [16]byte
	h.Sum(out[:0])
	return out
}

// input handles one PAP or CHAP packet.
func (a *auth) input(now time.Time, proto uint16, c Control, send func(uint16, uint8, uint8, []byte)) authResult {
	if proto != a.proto {
		return authPending
	}
	switch proto {
	case ProtoPAP:
		if c.ID != a.id {
			return authPending
		}
		switch c.Code {
		case papAuthAck:
			return authOK
		case papAuthNak:
			a.message = authMessage(c.Data)
			return authFailed
		}
	case ProtoCHAP:
		switch c.Code {
		case chapChallenge:
			// Value-Size, Value, Name. Every challenge, including a
			// rechallenge once the link is up, gets a fresh response.
			if len(c.Data) < 1 || int(c.Data[0]) == 0 || int(c.Data[0]) > len(c.Data)-1 {
				return authPending
			}
			v := chapResponseValue(c.ID, a.creds.password, c.Data[1:1+int(c.Data[0])])
			b := append(a.buf[:0], 16)
			b = append(b, v[:]...)
			b = append(b, a.creds.Username...)
			a.buf = b
			a.id = c.ID
			send(ProtoCHAP, chapResponse, c.ID, b)
		case chapSuccess:
			if c.ID == a.id {
				return authOK
			}
		case chapFailure:
			if c.ID == a.id {
				a.message = string(c.Data)
				return authFailed
			}
		}
	}
	return authPending
}

// authMessage returns a PAP Ack/Nak message (Msg-Length, Message).
func authMessage(d []byte) string {
	if len(d) < 1 || int(d[0]) > len(d)-1 {
		return ""
	}
	return string(d[1 : 1+int(d[0])])
}

// tick retransmits PAP and ends a phase that ran out of time.
func (a *auth) tick(now time.Time, send func(uint16, uint8, uint8, []byte)) authResult {
	if !a.deadline.IsZero() && !now.Before(a.deadline) {
		a.message = "authentication timed out"
		return authFailed
	}
	if a.proto == ProtoPAP && !a.resend.IsZero() && !now.Before(a.resend) {
		if a.tries >= maxConfigure {
			a.message = "no answer to PAP authenticate-request"
			return authFailed
		}
		a.sendPAP(now, send)
	}
	return authPending
}
