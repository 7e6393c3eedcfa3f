package pcp

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// FuzzHandle: any datagram gets no answer or a response that parses,
// has the request's opcode, a length that is a multiple of 4 and at
// most MaxLen plus an echoed option; a request that parses cleanly
// encodes back to one that parses the same.
func FuzzHandle(f *testing.F) {
	a := pt.HostA
	f.Add(mapReq(a, 1, 17, 5000, 5000, 600))
	f.Add(mapReq(a, 1, 6, 5000, 0, 0))
	f.Add(mapReq(a, 1, 17, 5000, 5000, 600, rfcOption(OptThirdParty, v4mapped(pt.HostB)), rfcOption(OptPreferFailure, nil)))
	f.Add(append(rfcHeader(2, OpPeer, 600, a), rfcPeer(5, 17, 8000, netip.AddrPortFrom(pt.Remote, 9000))...))
	f.Add(rfcHeader(2, OpAnnounce, 0, a))
	f.Add(rfcHeader(1, OpMap, 0, a))
	f.Add([]byte{2})
	tb, _, _ := pt.Table(f, portmap.Policy{MaxPerHost: 4, MaxTotal: 8})
	h := &Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet}}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := h.Handle(b, netip.AddrPortFrom(a, 5350), nil)
		if out != nil {
			r, ok := ParseResponse(out)
			if !ok || r.Op != b[1]&^ResponseBit || len(out)%4 != 0 || len(out) > MaxLen+optHdrLen+thirdLen {
				t.Fatalf("Handle(% x) = % x (%+v)", b, out, r)
			}
		}
		if len(b) < HeaderLen {
			return
		}
		r, res := Parse(b)
		if res != Success || r.Filter {
			return
		}
		r2, res2 := Parse(AppendRequest(nil, r))
		if res2 != Success || r2 != r {
			t.Fatalf("round trip of % x: %+v (%d), want %+v", b, r2, res2, r)
		}
	})
}
