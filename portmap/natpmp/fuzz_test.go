package natpmp

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// FuzzHandle: any datagram gets no answer or a well-formed response no
// longer than 16 bytes whose opcode is the request's plus 128; a request
// that decodes encodes back to the same bytes.
func FuzzHandle(f *testing.F) {
	for _, s := range [][]byte{
		{0, 0}, {0, 1, 0, 0, 0x13, 0x88, 0x13, 0x88, 0, 0, 0x0e, 0x10}, {0, 2, 0, 0, 0, 80, 0, 80, 0, 0, 0, 0},
		{0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 0}, {0, 9}, {0, 128}, {0},
	} {
		f.Add(s, true)
	}
	tb, _, _ := pt.Table(f, portmap.Policy{MaxPerHost: 4, MaxTotal: 8})
	h := &Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet}}
	f.Fuzz(func(t *testing.T, b []byte, inside bool) {
		src := pt.Remote
		if inside {
			src = pt.HostA
		}
		out := h.Handle(b, netip.AddrPortFrom(src, 5350), nil)
		if out != nil {
			r, err := ParseResponse(out)
			if err != nil || len(out) > mapResponseLen || r.Op != b[1]+OpResponse {
				t.Fatalf("Handle(% x) = % x (%+v, %v)", b, out, r, err)
			}
		}
		if req, err := ParseRequest(b); err == nil && req.Version == Version && (req.Op == OpMapUDP || req.Op == OpMapTCP) {
			enc := AppendRequest(nil, req)
			if got, _ := ParseRequest(enc); got != req {
				t.Fatalf("round trip % x: %+v != %+v", b, got, req)
			}
		}
	})
}
