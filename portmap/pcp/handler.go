package pcp

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
)

// Error lifetimes (RFC 6887 section 7.4 divides errors into short-lived,
// which may clear soon, and long-lived, which will not): how long the
// client should take the answer to hold.
const (
	shortErrorLifetime = 30
	longErrorLifetime  = 1800
)

// Stats are the server's counters (`counter:"GROUP/NAME"`, services/svcstats).
type Stats struct {
	Announce atomic.Uint64 `counter:"requests/announce"`
	Map      atomic.Uint64 `counter:"requests/map"`
	Peer     atomic.Uint64 `counter:"requests/peer"`
	Delete   atomic.Uint64 `counter:"requests/delete"`

	Short   atomic.Uint64 `counter:"drops/short"`   // under 2 bytes: no answer (section 8.3)
	Reply   atomic.Uint64 `counter:"drops/reply"`   // the R bit set: no answer (section 8.3)
	Outside atomic.Uint64 `counter:"drops/outside"` // from outside the inside prefixes (answered NOT_AUTHORIZED)

	Results [ExcessiveRemotePeers + 1]atomic.Uint64 // answers by result code
}

// Handler answers PCP requests from the table. It is safe for
// concurrent use.
type Handler struct {
	Table *portmap.Table
	// Inside are the prefixes requests may come from, e.g.
	// [192.168.1.0/24]; others are answered NOT_AUTHORIZED.
	Inside []netip.Prefix
	// Refused are the prefixes of the inside zones that may not map
	// ports (a guest zone's): every request from one is answered
	// NOT_AUTHORIZED and counted in the table's refused/zone.
	Refused []netip.Prefix
	stats   Stats
}

// Stats returns the handler's counters.
func (h *Handler) Stats() *Stats { return &h.stats }

func (h *Handler) inside(a netip.Addr) bool {
	for _, p := range h.Inside {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Handle answers the request b from from, appending the response to out
// and returning it; nil means no answer (counted).
func (h *Handler) Handle(b []byte, from netip.AddrPort, out []byte) []byte {
	if len(b) < 2 {
		h.stats.Short.Add(1)
		return nil
	}
	if b[1]&ResponseBit != 0 {
		h.stats.Reply.Add(1)
		return nil
	}
	src := from.Addr().Unmap()
	switch {
	case b[0] != Version:
		return h.errorResponse(b, UnsuppVersion, out)
	case len(b) < HeaderLen || len(b) > MaxLen || len(b)%4 != 0:
		return h.errorResponse(b, MalformedRequest, out)
	case portmap.InPrefixes(h.Refused, src):
		h.Table.RefuseZone()
		return h.errorResponse(b, NotAuthorized, out)
	case !h.inside(src):
		h.stats.Outside.Add(1)
		return h.errorResponse(b, NotAuthorized, out)
	}
	r, res := Parse(b)
	switch {
	case res != Success:
		return h.errorResponse(b, res, out)
	case r.Client != src:
		// RFC 6887 section 8.3: a NAT between client and server.
		return h.errorResponse(b, AddressMismatch, out)
	case r.Op == OpAnnounce:
		h.stats.Announce.Add(1)
		return h.response(b[:HeaderLen], Success, 0, out)
	}
	return h.mapOrPeer(b, &r, src, out)
}

func (h *Handler) mapOrPeer(b []byte, r *Request, src netip.Addr, out []byte) []byte {
	internal := src
	if r.ThirdParty.IsValid() {
		// RFC 6887 section 13.1: mapping for another host; secure mode
		// (a host maps only to itself) refuses it.
		if h.Table.Policy().Secure && r.ThirdParty != src {
			h.Table.Stats().Secure.Add(1)
			return h.errorResponse(b, NotAuthorized, out)
		}
		internal = r.ThirdParty
	}
	if r.Filter {
		return h.errorResponse(b, UnsuppOption, out) // FILTER is not offered
	}
	if r.Protocol != natengine.ProtoTCP && r.Protocol != natengine.ProtoUDP {
		if r.Protocol == 0 && r.Internal != 0 {
			return h.errorResponse(b, MalformedRequest, out) // section 11.1: all protocols needs port 0
		}
		return h.errorResponse(b, UnsuppProtocol, out)
	}
	ext := h.Table.External()
	if !ext.Is4() {
		return h.errorResponse(b, NetworkFailure, out)
	}
	if r.Op == OpPeer {
		h.stats.Peer.Add(1)
		if r.Internal == 0 || r.PeerPort == 0 || !r.PeerAddr.Is4() {
			return h.errorResponse(b, MalformedRequest, out)
		}
	} else if r.Lifetime == 0 {
		return h.delete(b, r, src, internal, out)
	} else {
		h.stats.Map.Add(1)
		if r.Internal == 0 {
			return h.errorResponse(b, MalformedRequest, out)
		}
	}
	if r.PreferFailure && r.ExtAddr.IsValid() && !r.ExtAddr.IsUnspecified() && r.ExtAddr != ext {
		return h.errorResponse(b, CannotProvideExternal, out)
	}
	req := portmap.Request{
		Owner: portmap.PCP, Client: src, Proto: r.Protocol,
		Internal: netip.AddrPortFrom(internal, r.Internal), External: r.External,
		Exact: r.PreferFailure, Lifetime: time.Duration(max(r.Lifetime, 1)) * time.Second, Nonce: r.Nonce,
	}
	if r.Op == OpPeer {
		req.Peer = netip.AddrPortFrom(r.PeerAddr, r.PeerPort)
	}
	m, err := h.Table.Map(req)
	if err != nil {
		return h.errorResponse(b, result(err, r.PreferFailure), out)
	}
	life := m.LifetimeSecs(h.Table.Now())
	n := HeaderLen + mapLen
	if r.Op == OpPeer {
		n = HeaderLen + peerLen
	}
	resp := h.response(b[:n], Success, life, out)
	body := resp[len(out)+HeaderLen:]
	binary.BigEndian.PutUint16(body[18:], m.External)
	put16(body[20:], ext)
	if r.ThirdParty.IsValid() {
		// The option is echoed in the response (section 13.1).
		o := [optHdrLen + thirdLen]byte{OptThirdParty, 0, 0, thirdLen}
		put16(o[optHdrLen:], r.ThirdParty)
		resp = append(resp, o[:]...)
	}
	return resp
}

// delete handles a MAP with lifetime 0 (RFC 6887 section 15): it removes
// the client's mapping if the nonce matches; a mapping that does not
// exist is deleted already.
func (h *Handler) delete(b []byte, r *Request, src, internal netip.Addr, out []byte) []byte {
	h.stats.Delete.Add(1)
	if r.Internal == 0 {
		h.Table.DeleteAll(portmap.PCP, internal, r.Protocol)
		return h.response(b, Success, 0, out)
	}
	err := h.Table.Delete(portmap.PCP, src, r.Protocol, netip.AddrPortFrom(internal, r.Internal), r.Nonce)
	if err != nil && !errors.Is(err, portmap.ErrNotFound) {
		return h.errorResponse(b, result(err, false), out)
	}
	return h.response(b, Success, 0, out)
}

// result maps a table refusal to its PCP result code (section 7.4).
func result(err error, preferFailure bool) uint8 {
	switch {
	case errors.Is(err, portmap.ErrHostLimit):
		return UserExQuota
	case errors.Is(err, portmap.ErrConflict) && preferFailure:
		return CannotProvideExternal
	case errors.Is(err, portmap.ErrTotalLimit), errors.Is(err, portmap.ErrNoPort), errors.Is(err, portmap.ErrConflict):
		return NoResources
	case errors.Is(err, portmap.ErrNoExternal):
		return NetworkFailure
	case errors.Is(err, portmap.ErrInvalid):
		return MalformedRequest
	}
	return NotAuthorized // secure mode, permission rules, nonce, another host's mapping
}

// errorResponse answers b with result code res: a copy of the request
// (at most MaxLen bytes, at least the header) with the response header
// (section 7.2 and 8.3), with the error's lifetime.
func (h *Handler) errorResponse(b []byte, res uint8, out []byte) []byte {
	life := uint32(longErrorLifetime)
	switch res {
	case NetworkFailure, NoResources, UserExQuota, CannotProvideExternal:
		life = shortErrorLifetime
	}
	return h.response(b, res, life, out)
}

// response appends to out b (truncated to MaxLen, zero-padded to the
// header's length) with the response header written over its first
// HeaderLen bytes.
func (h *Handler) response(b []byte, res uint8, life uint32, out []byte) []byte {
	h.stats.Results[res].Add(1)
	b = b[:min(len(b), MaxLen)]
	start := len(out)
	out = append(out, b...)
	if n := len(out) - start; n < HeaderLen {
		out = append(out, make([]byte, HeaderLen-n)...)
	}
	if n := len(out) - start; n%4 != 0 {
		out = append(out, make([]byte, 4-n%4)...)
	}
	hdr := out[start : start+HeaderLen]
	hdr[0] = Version
	hdr[1] |= ResponseBit
	hdr[2], hdr[3] = 0, res
	binary.BigEndian.PutUint32(hdr[4:], life)
	binary.BigEndian.PutUint32(hdr[8:], h.Table.Epoch())
	clear(hdr[12:])
	return out
}

// Announcement is the unsolicited ANNOUNCE response a server multicasts
// when it starts or loses its state (RFC 6887 section 14.1.3): success,
// lifetime 0, the epoch, so clients renew their mappings.
func (h *Handler) Announcement() []byte {
	hdr := make([]byte, HeaderLen)
	hdr[0], hdr[1] = Version, OpAnnounce|ResponseBit
	binary.BigEndian.PutUint32(hdr[8:], h.Table.Epoch())
	return hdr
}
