// Package natpmp is a NAT-PMP server (RFC 6886) on the port mapping
// table of package portmap: the message codecs, a request handler that
// turns one request into one response, and the restart announcements.
// It takes no socket of its own beyond what the caller gives (package
// portmap/pmpd serves UDP port 5351, where PCP shares it).
package natpmp

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// Ports (RFC 6886 section 3.1): the server listens on 5351; clients and
// announcements use 5350.
const (
	ServerPort = 5351
	ClientPort = 5350
)

// Version is NAT-PMP's version number (RFC 6886 section 3.2); PCP, which
// shares the port, is version 2.
const Version = 0

// Opcodes (RFC 6886 sections 3.2, 3.3). A response's opcode is the
// request's plus OpResponse.
const (
	OpExternalAddress = 0
	OpMapUDP          = 1
	OpMapTCP          = 2
	OpResponse        = 128
)

// Result codes (RFC 6886 section 3.5).
const (
	ResultSuccess            = 0
	ResultUnsupportedVersion = 1
	ResultNotAuthorized      = 2 // refused: not authorized or refused by policy
	ResultNetworkFailure     = 3 // e.g. no external address yet
	ResultOutOfResources     = 4 // no ports left, or a limit
	ResultUnsupportedOpcode  = 5
)

// Message sizes (RFC 6886 sections 3.2, 3.3).
const (
	externalRequestLen  = 2
	externalResponseLen = 12
	mapRequestLen       = 12
	mapResponseLen      = 16
	headerLen           = 8 // version, opcode, result, epoch: an error response without a body
)

// ErrShort is returned for a message shorter than its opcode's format.
var ErrShort = errors.New("natpmp: message too short")

// Request is a decoded NAT-PMP request.
type Request struct {
	Version  uint8
	Op       uint8
	Internal uint16 // map requests: the internal port, e.g. 3074
	External uint16 // map requests: the suggested external port
	Lifetime uint32 // map requests: seconds asked for; 0 deletes
}

// ParseRequest decodes b. It needs the two-byte header; a map request
// needs its twelve bytes (extra bytes are ignored, RFC 6886 leaves them
// undefined). It never reads past b.
func ParseRequest(b []byte) (Request, error) {
	if len(b) < 2 {
		return Request{}, ErrShort
	}
	r := Request{Version: b[0], Op: b[1]}
	if r.Version == Version && (r.Op == OpMapUDP || r.Op == OpMapTCP) {
		if len(b) < mapRequestLen {
			return r, ErrShort
		}
		r.Internal = binary.BigEndian.Uint16(b[4:])
		r.External = binary.BigEndian.Uint16(b[6:])
		r.Lifetime = binary.BigEndian.Uint32(b[8:])
	}
	return r, nil
}

// AppendRequest appends r's wire form to b (for tests and clients).
func AppendRequest(b []byte, r Request) []byte {
	b = append(b, r.Version, r.Op)
	if r.Op == OpMapUDP || r.Op == OpMapTCP {
		b = append(b, 0, 0)
		b = binary.BigEndian.AppendUint16(b, r.Internal)
		b = binary.BigEndian.AppendUint16(b, r.External)
		b = binary.BigEndian.AppendUint32(b, r.Lifetime)
	}
	return b
}

// Response is a NAT-PMP response.
type Response struct {
	Op       uint8 // the request's opcode plus OpResponse
	Result   uint16
	Epoch    uint32     // seconds since the start of the epoch
	External netip.Addr // external address responses
	Internal uint16     // map responses
	Mapped   uint16     // map responses: the external port, 0 after a delete
	Lifetime uint32     // map responses: seconds granted
}

// AppendResponse appends r's wire form to b: twelve bytes for an
// external address response, sixteen for a map response, eight (the
// header) for any other opcode.
func AppendResponse(b []byte, r Response) []byte {
	b = append(b, Version, r.Op)
	b = binary.BigEndian.AppendUint16(b, r.Result)
	b = binary.BigEndian.AppendUint32(b, r.Epoch)
	switch r.Op {
	case OpResponse + OpExternalAddress:
		a := [4]byte{}
		if r.External.Is4() {
			a = r.External.As4()
		}
		b = append(b, a[:]...)
	case OpResponse + OpMapUDP, OpResponse + OpMapTCP:
		b = binary.BigEndian.AppendUint16(b, r.Internal)
		b = binary.BigEndian.AppendUint16(b, r.Mapped)
		b = binary.BigEndian.AppendUint32(b, r.Lifetime)
	}
	return b
}

// ParseResponse decodes a response (for tests and clients).
func ParseResponse(b []byte) (Response, error) {
	if len(b) < headerLen || b[0] != Version || b[1] < OpResponse {
		return Response{}, ErrShort
	}
	r := Response{Op: b[1], Result: binary.BigEndian.Uint16(b[2:]), Epoch: binary.BigEndian.Uint32(b[4:])}
	switch r.Op {
	case OpResponse + OpExternalAddress:
		if len(b) < externalResponseLen {
			return r, ErrShort
		}
		r.External = netip.AddrFrom4([4]byte(b[8:12]))
	case OpResponse + OpMapUDP, OpResponse + OpMapTCP:
		if len(b) < mapResponseLen {
			return r, ErrShort
		}
		r.Internal = binary.BigEndian.Uint16(b[8:])
		r.Mapped = binary.BigEndian.Uint16(b[10:])
		r.Lifetime = binary.BigEndian.Uint32(b[12:])
	}
	return r, nil
}
