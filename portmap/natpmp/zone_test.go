package natpmp

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// TestRefusedZone: a guest zone's host gets NotAuthorized (2) for every
// request, counted in the table's refused/zone and not as outside; no
// mapping is made; an address in no zone is still "outside".
func TestRefusedZone(t *testing.T) {
	h, e, _ := newHandler(t, portmap.Policy{Secure: true})
	guest := netip.MustParseAddr("192.168.2.10")
	h.Refused = []netip.Prefix{netip.MustParsePrefix("192.168.2.0/24")}
	for _, req := range [][]byte{
		{0, 0}, // external address
		AppendRequest(nil, Request{Op: OpMapTCP, Internal: 5000, External: 5000, Lifetime: 3600}),
		AppendRequest(nil, Request{Op: OpMapUDP, Internal: 5000, External: 5000, Lifetime: 3600}),
	} {
		if r := ask(t, h, guest, req); r.Result != ResultNotAuthorized || r.External.IsValid() && !r.External.IsUnspecified() || r.Mapped != 0 {
			t.Errorf("guest % x: %+v, want NotAuthorized and nothing else", req, r)
		}
	}
	if pt.Installed(e, 6, 5000, netip.AddrPortFrom(guest, 5000)) || len(h.Table.Mappings()) != 0 {
		t.Error("the guest's request made a mapping")
	}
	ask(t, h, netip.MustParseAddr("10.0.0.1"), []byte{0, 0})
	if z, o := h.Table.Stats().Zone.Load(), h.Stats().Outside.Load(); z != 3 || o != 1 {
		t.Errorf("refused/zone %d, drops/outside %d; want 3 and 1", z, o)
	}
	// The LAN still maps.
	if r := ask(t, h, pt.HostA, AppendRequest(nil, Request{Op: OpMapTCP, Internal: 5000, External: 5000, Lifetime: 3600})); r.Result != ResultSuccess {
		t.Errorf("lan host after the guest: %+v", r)
	}
}
