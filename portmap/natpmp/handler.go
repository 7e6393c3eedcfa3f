package natpmp

import (
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
)

// Stats are the server's counters (`counter:"GROUP/NAME"`, services/svcstats).
type Stats struct {
	External atomic.Uint64 `counter:"requests/external_address"`
	Map      atomic.Uint64 `counter:"requests/map"`
	Delete   atomic.Uint64 `counter:"requests/delete"`

	Short   atomic.Uint64 `counter:"drops/short"`   // shorter than its format: no answer
	Outside atomic.Uint64 `counter:"drops/outside"` // from an address outside the inside prefixes
	Reply   atomic.Uint64 `counter:"drops/reply"`   // a response (opcode >= 128) sent to the server

	Success            atomic.Uint64 `counter:"results/success"`
	UnsupportedVersion atomic.Uint64 `counter:"results/unsupported_version"`
	NotAuthorized      atomic.Uint64 `counter:"results/not_authorized"`
	NetworkFailure     atomic.Uint64 `counter:"results/network_failure"`
	OutOfResources     atomic.Uint64 `counter:"results/out_of_resources"`
	UnsupportedOpcode  atomic.Uint64 `counter:"results/unsupported_opcode"`
}

// Handler answers NAT-PMP requests from the table. It is safe for
// concurrent use.
type Handler struct {
	Table *portmap.Table
	// Inside are the prefixes requests may come from, e.g.
	// [192.168.1.0/24]: a LAN zone's. A request from elsewhere is
	// refused (NotAuthorized, external address 0.0.0.0): the socket is
	// on a LAN address, so only a packet routed to that address from
	// outside gets here, and the zones' input policy drops those first.
	Inside []netip.Prefix
	// Refused are the prefixes of the inside zones that may not map
	// ports (a guest zone's, e.g. [192.168.2.0/24]): every request from
	// one is answered NotAuthorized (2) and counted in the table's
	// refused/zone, not as outside.
	Refused []netip.Prefix
	stats   Stats
}

// Stats returns the handler's counters.
func (h *Handler) Stats() *Stats { return &h.stats }

func (h *Handler) inside(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range h.Inside {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// refuse counts a request from outside the inside prefixes: a refused
// zone's in the table, any other as outside.
func (h *Handler) refuse(client netip.Addr) {
	if portmap.InPrefixes(h.Refused, client) {
		h.Table.RefuseZone()
		return
	}
	h.stats.Outside.Add(1)
}

func (h *Handler) count(result uint16) {
	switch result {
	case ResultSuccess:
		h.stats.Success.Add(1)
	case ResultUnsupportedVersion:
		h.stats.UnsupportedVersion.Add(1)
	case ResultNotAuthorized:
		h.stats.NotAuthorized.Add(1)
	case ResultNetworkFailure:
		h.stats.NetworkFailure.Add(1)
	case ResultOutOfResources:
		h.stats.OutOfResources.Add(1)
	case ResultUnsupportedOpcode:
		h.stats.UnsupportedOpcode.Add(1)
	}
}

// Handle answers the request b from from, appending the response to out
// and returning it; a nil result means no answer (counted).
func (h *Handler) Handle(b []byte, from netip.AddrPort, out []byte) []byte {
	req, err := ParseRequest(b)
	if len(b) >= 2 && b[1] >= OpResponse {
		h.stats.Reply.Add(1)
		return nil
	}
	if err != nil {
		h.stats.Short.Add(1)
		return nil
	}
	client := from.Addr().Unmap()
	inside := h.inside(client)
	resp := Response{Op: req.Op + OpResponse, Epoch: h.Table.Epoch()}
	switch {
	case req.Version != Version:
		resp.Result = ResultUnsupportedVersion
	case req.Op == OpExternalAddress:
		if !inside {
			h.refuse(client)
			resp.Result = ResultNotAuthorized
			break
		}
		h.stats.External.Add(1)
		resp.External = h.Table.External()
		if !resp.External.Is4() {
			resp.Result, resp.External = ResultNetworkFailure, netip.Addr{}
		}
	case req.Op == OpMapUDP || req.Op == OpMapTCP:
		resp.Internal = req.Internal
		if !inside {
			h.refuse(client)
			resp.Result = ResultNotAuthorized
			break
		}
		h.mapRequest(&req, client, &resp)
	default:
		resp.Result = ResultUnsupportedOpcode
	}
	h.count(resp.Result)
	return AppendResponse(out, resp)
}

func (h *Handler) mapRequest(req *Request, client netip.Addr, resp *Response) {
	proto := uint8(natengine.ProtoUDP)
	if req.Op == OpMapTCP {
		proto = natengine.ProtoTCP
	}
	if req.Lifetime == 0 {
		// RFC 6886 section 3.4: a delete; internal port 0 (with
		// external port 0) deletes all of the client's mappings of the
		// protocol. The answer is success whether or not one existed.
		h.stats.Delete.Add(1)
		if req.Internal == 0 {
			h.Table.DeleteAll(portmap.NATPMP, client, proto)
			return
		}
		err := h.Table.Delete(portmap.NATPMP, client, proto, netip.AddrPortFrom(client, req.Internal), [portmap.NonceLen]byte{})
		if err != nil && !errors.Is(err, portmap.ErrNotFound) {
			resp.Result = result(err)
		}
		return
	}
	h.stats.Map.Add(1)
	if req.Internal == 0 {
		resp.Result = ResultNotAuthorized
		return
	}
	if !h.Table.External().Is4() {
		resp.Result = ResultNetworkFailure
		return
	}
	m, err := h.Table.Map(portmap.Request{
		Owner: portmap.NATPMP, Client: client, Proto: proto,
		Internal: netip.AddrPortFrom(client, req.Internal), External: req.External,
		Lifetime: time.Duration(req.Lifetime) * time.Second,
	})
	if err != nil {
		resp.Result = result(err)
		return
	}
	resp.Mapped = m.External
	resp.Lifetime = m.LifetimeSecs(h.Table.Now())
}

// result maps a table refusal to its NAT-PMP result code.
func result(err error) uint16 {
	switch {
	case errors.Is(err, portmap.ErrHostLimit), errors.Is(err, portmap.ErrTotalLimit),
		errors.Is(err, portmap.ErrNoPort), errors.Is(err, portmap.ErrConflict):
		return ResultOutOfResources
	case errors.Is(err, portmap.ErrNoExternal):
		return ResultNetworkFailure
	}
	return ResultNotAuthorized
}

// Announcement is the unsolicited external address response a server
// multicasts to 224.0.0.1:5350 when it starts and when its external
// address changes (RFC 6886 section 3.2.1).
func (h *Handler) Announcement() []byte {
	resp := Response{Op: OpResponse + OpExternalAddress, Epoch: h.Table.Epoch(), External: h.Table.External()}
	if !resp.External.Is4() {
		resp.Result, resp.External = ResultNetworkFailure, netip.Addr{}
	}
	return AppendResponse(nil, resp)
}
