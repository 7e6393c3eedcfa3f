package pcp

import (
	"net/netip"
	"testing"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// TestRefusedZone: a guest zone's MAP, PEER and ANNOUNCE are answered
// NOT_AUTHORIZED, counted in the table's refused/zone, and map nothing.
func TestRefusedZone(t *testing.T) {
	h, _, _ := newHandler(t, portmap.Policy{Secure: true})
	guest := netip.MustParseAddr("192.168.2.10")
	h.Refused = []netip.Prefix{netip.MustParsePrefix("192.168.2.0/24")}
	for name, req := range map[string][]byte{
		"map":      mapReq(guest, 0xaa, natengine.ProtoTCP, 5000, 5000, 3600),
		"peer":     append(rfcHeader(Version, OpPeer, 3600, guest), rfcPeer(0xab, natengine.ProtoUDP, 5001, netip.MustParseAddrPort("198.51.100.7:9"))...),
		"announce": rfcHeader(Version, OpAnnounce, 0, guest),
	} {
		if r := ask(t, h, guest, req); r.Result != NotAuthorized {
			t.Errorf("guest %s: result %d, want NOT_AUTHORIZED (2)", name, r.Result)
		}
	}
	if n := len(h.Table.Mappings()); n != 0 {
		t.Errorf("%d mappings after the guest's requests, want 0", n)
	}
	if z, o := h.Table.Stats().Zone.Load(), h.Stats().Outside.Load(); z != 3 || o != 0 {
		t.Errorf("refused/zone %d, drops/outside %d; want 3 and 0", z, o)
	}
	if r := ask(t, h, pt.HostA, mapReq(pt.HostA, 0xaa, natengine.ProtoTCP, 5000, 5000, 3600)); r.Result != Success {
		t.Errorf("lan host after the guest: %+v", r)
	}
}
