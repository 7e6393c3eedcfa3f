// Package pcp is a Port Control Protocol server (RFC 6887) on the port
// mapping table of package portmap: the MAP and PEER opcodes (and
// ANNOUNCE), the options THIRD_PARTY and PREFER_FAILURE, the nonce check,
// and every result code's condition. Package portmap/pmpd serves it on
// UDP port 5351 beside NAT-PMP.
package pcp

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// Version is PCP's version number (RFC 6887 section 7.1).
const Version = 2

// MaxLen is the largest PCP message (RFC 6887 section 7).
const MaxLen = 1100

// Opcodes (RFC 6887 section 19.2); a response sets ResponseBit.
const (
	OpAnnounce  = 0
	OpMap       = 1
	OpPeer      = 2
	ResponseBit = 0x80
)

// Result codes (RFC 6887 section 7.4).
const (
	Success               = 0
	UnsuppVersion         = 1
	NotAuthorized         = 2
	MalformedRequest      = 3
	UnsuppOpcode          = 4
	UnsuppOption          = 5
	MalformedOption       = 6
	NetworkFailure        = 7
	NoResources           = 8
	UnsuppProtocol        = 9
	UserExQuota           = 10
	CannotProvideExternal = 11
	AddressMismatch       = 12
	ExcessiveRemotePeers  = 13
)

// Options (RFC 6887 section 13). Codes below 128 must be understood:
// an unknown one is UNSUPP_OPTION; 128-255 may be ignored.
const (
	OptThirdParty    = 1
	OptPreferFailure = 2
	OptFilter        = 3
	optOptional      = 128
)

// Sizes (RFC 6887 sections 7.1, 7.2, 11.1, 12.1).
const (
	HeaderLen  = 24
	mapLen     = 36
	peerLen    = 56
	optHdrLen  = 4
	nonceLen   = 12
	thirdLen   = 16
	filterLen  = 20
	addrOffset = 8 // the client's IP address in a request header
)

// Request is a decoded MAP or PEER request.
type Request struct {
	Op       uint8
	Lifetime uint32
	Client   netip.Addr // the client IP address field (IPv4-mapped for IPv4), unmapped
	Nonce    [nonceLen]byte
	Protocol uint8
	Internal uint16
	External uint16     // suggested external port
	ExtAddr  netip.Addr // suggested external address, unmapped; zero: none
	PeerPort uint16
	PeerAddr netip.Addr // unmapped

	ThirdParty    netip.Addr // the THIRD_PARTY option's address, valid iff present
	PreferFailure bool
	Filter        bool
}

// Parse decodes the request b. It returns the result code a server
// answers a bad request with (Success when b is good), and never reads
// past b. The caller has checked the version and length limits.
func Parse(b []byte) (Request, uint8) {
	var r Request
	if len(b) < HeaderLen {
		return r, MalformedRequest
	}
	r.Op = b[1] &^ ResponseBit
	r.Lifetime = binary.BigEndian.Uint32(b[4:])
	r.Client = addr16(b[addrOffset:])
	body := b[HeaderLen:]
	n := 0
	switch r.Op {
	case OpAnnounce:
	case OpMap, OpPeer:
		n = mapLen
		if r.Op == OpPeer {
			n = peerLen
		}
		if len(body) < n {
			return r, MalformedRequest
		}
		copy(r.Nonce[:], body)
		r.Protocol = body[12]
		r.Internal = binary.BigEndian.Uint16(body[16:])
		r.External = binary.BigEndian.Uint16(body[18:])
		r.ExtAddr = addr16(body[20:])
		if r.Op == OpPeer {
			r.PeerPort = binary.BigEndian.Uint16(body[36:])
			r.PeerAddr = addr16(body[40:])
		}
	default:
		return r, UnsuppOpcode
	}
	return r, r.parseOptions(body[n:])
}

// parseOptions reads the options after the opcode's payload (RFC 6887
// section 7.3): each a code, a reserved byte, a length and the data
// padded to four bytes.
func (r *Request) parseOptions(b []byte) uint8 {
	for len(b) > 0 {
		if len(b) < optHdrLen {
			return MalformedOption
		}
		code, n := b[0], int(binary.BigEndian.Uint16(b[2:]))
		padded := (n + 3) &^ 3
		if len(b)-optHdrLen < padded {
			return MalformedOption
		}
		data := b[optHdrLen : optHdrLen+n]
		b = b[optHdrLen+padded:]
		switch {
		case code == OptThirdParty && r.Op != OpAnnounce:
			if n != thirdLen || r.ThirdParty.IsValid() {
				return MalformedOption
			}
			r.ThirdParty = addr16(data)
		case code == OptPreferFailure && r.Op == OpMap:
			if n != 0 {
				return MalformedOption
			}
			r.PreferFailure = true
		case code == OptFilter && r.Op == OpMap:
			if n != filterLen {
				return MalformedOption
			}
			r.Filter = true
		case code < optOptional:
			return UnsuppOption
		}
	}
	return Success
}

// addr16 reads a 16-byte address field, unmapping an IPv4-mapped one.
func addr16(b []byte) netip.Addr {
	return netip.AddrFrom16([16]byte(b[:16])).Unmap()
}

// put16 writes a as a 16-byte address field (IPv4 as IPv4-mapped).
func put16(b []byte, a netip.Addr) {
	if !a.IsValid() {
		clear(b[:16])
		return
	}
	v := a.As16() // an IPv4 address comes out IPv4-mapped
	copy(b, v[:])
}

// AppendRequest appends r's wire form to b (for tests and clients);
// options: THIRD_PARTY, PREFER_FAILURE.
func AppendRequest(b []byte, r Request) []byte {
	start := len(b)
	b = append(b, make([]byte, HeaderLen)...)
	h := b[start:]
	h[0], h[1] = Version, r.Op
	binary.BigEndian.PutUint32(h[4:], r.Lifetime)
	put16(h[addrOffset:], r.Client)
	if r.Op == OpMap || r.Op == OpPeer {
		n := mapLen
		if r.Op == OpPeer {
			n = peerLen
		}
		p := make([]byte, n)
		copy(p, r.Nonce[:])
		p[12] = r.Protocol
		binary.BigEndian.PutUint16(p[16:], r.Internal)
		binary.BigEndian.PutUint16(p[18:], r.External)
		put16(p[20:], r.ExtAddr)
		if r.Op == OpPeer {
			binary.BigEndian.PutUint16(p[36:], r.PeerPort)
			put16(p[40:], r.PeerAddr)
		}
		b = append(b, p...)
	}
	if r.ThirdParty.IsValid() {
		o := make([]byte, optHdrLen+thirdLen)
		o[0] = OptThirdParty
		binary.BigEndian.PutUint16(o[2:], thirdLen)
		put16(o[optHdrLen:], r.ThirdParty)
		b = append(b, o...)
	}
	if r.PreferFailure {
		b = append(b, OptPreferFailure, 0, 0, 0)
	}
	return b
}

// Response is a decoded PCP response (for tests and clients).
type Response struct {
	Op       uint8 // without ResponseBit
	Result   uint8
	Lifetime uint32
	Epoch    uint32
	Nonce    [nonceLen]byte
	Protocol uint8
	Internal uint16
	External uint16 // assigned external port
	ExtAddr  netip.Addr
	PeerPort uint16
	PeerAddr netip.Addr
}

// ParseResponse decodes a response.
func ParseResponse(b []byte) (Response, bool) {
	var r Response
	if len(b) < HeaderLen || b[0] != Version || b[1]&ResponseBit == 0 {
		return r, false
	}
	r.Op, r.Result = b[1]&^ResponseBit, b[3]
	r.Lifetime = binary.BigEndian.Uint32(b[4:])
	r.Epoch = binary.BigEndian.Uint32(b[8:])
	body := b[HeaderLen:]
	if (r.Op == OpMap && len(body) >= mapLen) || (r.Op == OpPeer && len(body) >= peerLen) {
		copy(r.Nonce[:], body)
		r.Protocol = body[12]
		r.Internal = binary.BigEndian.Uint16(body[16:])
		r.External = binary.BigEndian.Uint16(body[18:])
		r.ExtAddr = addr16(body[20:])
		if r.Op == OpPeer {
			r.PeerPort = binary.BigEndian.Uint16(body[36:])
			r.PeerAddr = addr16(body[40:])
		}
	}
	return r, true
}

// resultNames are the result codes' names (RFC 6887 section 7.4), lower
// case, for counters.
var resultNames = [...]string{
	Success: "success", UnsuppVersion: "unsupp_version", NotAuthorized: "not_authorized",
	MalformedRequest: "malformed_request", UnsuppOpcode: "unsupp_opcode", UnsuppOption: "unsupp_option",
	MalformedOption: "malformed_option", NetworkFailure: "network_failure", NoResources: "no_resources",
	UnsuppProtocol: "unsupp_protocol", UserExQuota: "user_ex_quota", CannotProvideExternal: "cannot_provide_external",
	AddressMismatch: "address_mismatch", ExcessiveRemotePeers: "excessive_remote_peers",
}

// ResultName returns result code r's name in lower case, e.g.
// "not_authorized", or "result_N" for a code RFC 6887 does not define.
func ResultName(r int) string {
	if r >= 0 && r < len(resultNames) {
		return resultNames[r]
	}
	return "result_" + strconv.Itoa(r)
}
