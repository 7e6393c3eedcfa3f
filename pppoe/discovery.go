package pppoe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"
)

// EtherTypes of PPPoE (RFC 2516 §4).
const (
	EtherTypeDiscovery = 0x8863
	EtherTypeSession   = 0x8864
)

// Discovery codes (RFC 2516 §5).
const (
	CodeSession = 0x00
	CodePADI    = 0x09
	CodePADO    = 0x07
	CodePADR    = 0x19
	CodePADS    = 0x65
	CodePADT    = 0xa7
)

// Tag types (RFC 2516 Appendix A, RFC 4638 §4).
const (
	TagEndOfList        = 0x0000
	TagServiceName      = 0x0101
	TagACName           = 0x0102
	TagHostUniq         = 0x0103
	TagACCookie         = 0x0104
	TagVendorSpecific   = 0x0105
	TagRelaySessionID   = 0x0110
	TagPPPMaxPayload    = 0x0120
	TagServiceNameError = 0x0201
	TagACSystemError    = 0x0202
	TagGenericError     = 0x0203
)

// pppoeHeaderLen is the PPPoE header: VER/TYPE, CODE, SESSION_ID, LENGTH
// (RFC 2516 §4).
const pppoeHeaderLen = 6

// verType is VER=1, TYPE=1 in one octet (RFC 2516 §4: both MUST be 1).
const verType = 0x11

// MaxTags bounds how many tags one discovery packet may carry. A PADO
// from a real AC carries under ten; the bound keeps the decoder's work and
// the caller's array fixed.
const MaxTags = 32

// Errors of the discovery codec. Each is counted by the Session as a
// malformed discovery packet.
var (
	// ErrShort: the packet is shorter than the 6-byte PPPoE header.
	ErrShort = errors.New("pppoe: packet shorter than its header")
	// ErrVersion: VER or TYPE is not 1.
	ErrVersion = errors.New("pppoe: version/type not 1/1")
	// ErrLength: the LENGTH field runs past the end of the frame.
	ErrLength = errors.New("pppoe: length field past end of frame")
	// ErrTagTruncated: a tag header or value runs past the payload.
	ErrTagTruncated = errors.New("pppoe: tag truncated")
	// ErrTooManyTags: more than MaxTags tags.
	ErrTooManyTags = errors.New("pppoe: too many tags")
)

// Tag is one discovery TLV. Value aliases the decoded packet.
type Tag struct {
	Type  uint16
	Value []byte
}

// Discovery is a decoded discovery packet. Tags alias the decoded bytes
// and are valid while they are.
type Discovery struct {
	Code      uint8
	SessionID uint16
	Tags      []Tag
}

// Tag returns the value of the first tag of type t and whether there was
// one.
func (d *Discovery) Tag(t uint16) ([]byte, bool) {
	for _, tag := range d.Tags {
		if tag.Type == t {
			return tag.Value, true
		}
	}
	return nil, false
}

// ParseDiscovery decodes a PPPoE discovery payload (the bytes after the
// Ethernet header). Trailing bytes past LENGTH (Ethernet padding) are
// ignored. The tags are appended to dst[:0] so a caller with a fixed
// array decodes without allocating.
func ParseDiscovery(b []byte, dst []Tag) (Discovery, error) {
	if len(b) < pppoeHeaderLen {
		return Discovery{}, ErrShort
	}
	if b[0] != verType {
		return Discovery{}, ErrVersion
	}
	n := int(binary.BigEndian.Uint16(b[4:6]))
	if n > len(b)-pppoeHeaderLen {
		return Discovery{}, ErrLength
	}
	tags, err := DecodeTags(b[pppoeHeaderLen:pppoeHeaderLen+n], dst)
	if err != nil {
		return Discovery{}, err
	}
	return Discovery{Code: b[1], SessionID: binary.BigEndian.Uint16(b[2:4]), Tags: tags}, nil
}

// DecodeTags decodes a tag list (RFC 2516 Appendix A). An End-Of-List tag
// ends the list early. Every malformed case is an error; nothing is read
// past len(b).
func DecodeTags(b []byte, dst []Tag) ([]Tag, error) {
	dst = dst[:0]
	for len(b) > 0 {
		if len(b) < 4 {
			return dst, ErrTagTruncated
		}
		t := binary.BigEndian.Uint16(b[0:2])
		l := int(binary.BigEndian.Uint16(b[2:4]))
		if l > len(b)-4 {
			return dst, ErrTagTruncated
		}
		if t == TagEndOfList {
			return dst, nil
		}
		if len(dst) == MaxTags {
			return dst, ErrTooManyTags
		}
		dst = append(dst, Tag{Type: t, Value: b[4 : 4+l : 4+l]})
		b = b[4+l:]
	}
	return dst, nil
}

// AppendTag appends one encoded tag to b.
func AppendTag(b []byte, t uint16, value []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, t)
	b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
	return append(b, value...)
}

// AppendDiscovery appends a PPPoE discovery packet (header and tags) to
// b.
func AppendDiscovery(b []byte, code uint8, sessionID uint16, tags ...Tag) []byte {
	start := len(b)
	b = append(b, verType, code, byte(sessionID>>8), byte(sessionID), 0, 0)
	for _, t := range tags {
		b = AppendTag(b, t.Type, t.Value)
	}
	binary.BigEndian.PutUint16(b[start+4:], uint16(len(b)-start-pppoeHeaderLen))
	return b
}

// Discovery timing (RFC 2516 §5.1-5.3: on no answer the host resends and
// doubles its wait, "as many times as desired").
const (
	// discoveryTimeout is the first wait for a PADO or PADS; pppd's
	// rp-pppoe plugin waits 5 s, we start lower because a lost PADI on a
	// home link is rare and a fast first retry shortens a reconnect.
	discoveryTimeout = 2 * time.Second
	// discoveryAttempts is how many PADIs (or PADRs) are sent, each wait
	// doubled, before the attempt counts as failed (2+4+8 = 14 s).
	discoveryAttempts = 3
)

// offer is the PADO the client chose.
type offer struct {
	mac        [6]byte
	acName     string
	service    []byte
	cookie     []byte
	relayID    []byte
	hasCookie  bool
	hasRelayID bool
}

// padoVerdict says why a PADO was or was not taken.
type padoVerdict int

const (
	padoTaken padoVerdict = iota
	padoWrongHostUniq
	padoNoACName
	padoWrongService
	padoWrongACName
	padoError
	padoBadSource
)

// judgePADO checks a PADO against the client's Host-Uniq and the
// configured service and AC names (RFC 2516 §5.2: a PADO MUST carry the
// AC-Name and the Service-Name the host asked for; §5.1: a host may pick
// among several offers).
func judgePADO(d *Discovery, src [6]byte, hostUniq []byte, service, acName string) (offer, padoVerdict) {
	if src[0]&1 != 0 || src == [6]byte{} {
		return offer{}, padoBadSource
	}
	hu, ok := d.Tag(TagHostUniq)
	if !ok || !bytes.Equal(hu, hostUniq) {
		return offer{}, padoWrongHostUniq
	}
	for _, t := range d.Tags {
		switch t.Type {
		case TagServiceNameError, TagACSystemError, TagGenericError:
			return offer{}, padoError
		}
	}
	name, ok := d.Tag(TagACName)
	if !ok {
		return offer{}, padoNoACName
	}
	if acName != "" && string(name) != acName {
		return offer{}, padoWrongACName
	}
	// The requested service must be among the offered ones; an empty
	// request means any service, and the PADR then asks for "" too.
	found := false
	for _, t := range d.Tags {
		if t.Type == TagServiceName && string(t.Value) == service {
			found = true
			break
		}
	}
	if !found && service != "" {
		return offer{}, padoWrongService
	}
	o := offer{mac: src, acName: string(name), service: []byte(service)}
	if c, ok := d.Tag(TagACCookie); ok {
		o.cookie, o.hasCookie = bytes.Clone(c), true
	}
	if r, ok := d.Tag(TagRelaySessionID); ok {
		o.relayID, o.hasRelayID = bytes.Clone(r), true
	}
	return o, padoTaken
}

// maxPayloadTag encodes a PPP-Max-Payload value (RFC 4638 §4).
func maxPayloadTag(n uint16) Tag {
	return Tag{Type: TagPPPMaxPayload, Value: []byte{byte(n >> 8), byte(n)}}
}
