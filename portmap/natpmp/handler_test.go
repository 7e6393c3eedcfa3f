package natpmp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

func newHandler(t *testing.T, p portmap.Policy) (*Handler, *natengine.Engine, *pt.Clock) {
	tb, e, clk := pt.Table(t, p)
	return &Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet}}, e, clk
}

func from(a netip.Addr) netip.AddrPort { return netip.AddrPortFrom(a, 40000) }

func ask(t *testing.T, h *Handler, src netip.Addr, req []byte) Response {
	t.Helper()
	out := h.Handle(req, from(src), nil)
	if out == nil {
		t.Fatalf("Handle(% x) from %v: no answer", req, src)
	}
	r, err := ParseResponse(out)
	if err != nil {
		t.Fatalf("ParseResponse(% x): %v", out, err)
	}
	return r
}

// TestHandle follows RFC 6886 section 3: the external address, mapping
// and renewing a UDP and a TCP port, the result codes, delete by
// lifetime 0 (one mapping, then all of a host's), the epoch.
func TestHandle(t *testing.T) {
	h, e, clk := newHandler(t, portmap.Policy{Secure: true})
	clk.Add(42 * time.Second)
	mapReq := func(op uint8, in, ext uint16, life uint32) []byte {
		return AppendRequest(nil, Request{Op: op, Internal: in, External: ext, Lifetime: life})
	}
	for _, tc := range []struct {
		name string
		src  netip.Addr
		req  []byte
		want Response
	}{
		{"external address (3.2)", pt.HostA, []byte{0, 0},
			Response{Op: 128, Epoch: 42, External: pt.WANAddr}},
		{"map udp (3.3)", pt.HostA, mapReq(OpMapUDP, 5000, 5000, 3600),
			Response{Op: 129, Epoch: 42, Internal: 5000, Mapped: 5000, Lifetime: 3600}},
		{"map tcp, lifetime clamped to 120 s", pt.HostA, mapReq(OpMapTCP, 6000, 6000, 10),
			Response{Op: 130, Epoch: 42, Internal: 6000, Mapped: 6000, Lifetime: 120}},
		{"renewal keeps the port", pt.HostA, mapReq(OpMapUDP, 5000, 7777, 7200),
			Response{Op: 129, Epoch: 42, Internal: 5000, Mapped: 5000, Lifetime: 7200}},
		{"another host, same port: another external port", pt.HostB, mapReq(OpMapUDP, 5000, 5000, 3600),
			Response{Op: 129, Epoch: 42, Internal: 5000, Mapped: 5001, Lifetime: 3600}},
		{"port below 1024: not authorized", pt.HostA, mapReq(OpMapTCP, 80, 80, 3600),
			Response{Op: 130, Result: ResultNotAuthorized, Epoch: 42, Internal: 80}},
		{"from the WAN side: not authorized", pt.Remote, mapReq(OpMapTCP, 6000, 6000, 3600),
			Response{Op: 130, Result: ResultNotAuthorized, Epoch: 42, Internal: 6000}},
		{"external address from the WAN side: not authorized", pt.Remote, []byte{0, 0},
			Response{Op: 128, Result: ResultNotAuthorized, Epoch: 42, External: netip.IPv4Unspecified()}},
		{"unsupported version (3.5)", pt.HostA, []byte{1, 0},
			Response{Op: 128, Result: ResultUnsupportedVersion, Epoch: 42, External: netip.IPv4Unspecified()}},
		{"unsupported opcode (3.5)", pt.HostA, []byte{0, 3, 0, 0},
			Response{Op: 131, Result: ResultUnsupportedOpcode, Epoch: 42}},
		{"delete (3.4)", pt.HostA, mapReq(OpMapUDP, 5000, 0, 0),
			Response{Op: 129, Epoch: 42, Internal: 5000}},
		{"delete of none is success", pt.HostA, mapReq(OpMapUDP, 5000, 0, 0),
			Response{Op: 129, Epoch: 42, Internal: 5000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ask(t, h, tc.src, tc.req)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("response (-want +got):\n%s", d)
			}
		})
	}
	if pt.Installed(e, natengine.ProtoUDP, 5000, netip.AddrPortFrom(pt.HostA, 5000)) {
		t.Error("deleted mapping still in the NAT engine")
	}
	if !pt.Installed(e, natengine.ProtoTCP, 6000, netip.AddrPortFrom(pt.HostA, 6000)) {
		t.Error("TCP mapping not in the NAT engine")
	}
	// Delete all TCP mappings of host A: internal and external port 0.
	ask(t, h, pt.HostA, mapReq(OpMapTCP, 0, 0, 0))
	if pt.Installed(e, natengine.ProtoTCP, 6000, netip.AddrPortFrom(pt.HostA, 6000)) {
		t.Error("delete-all left the TCP mapping")
	}
	if h.Stats().NotAuthorized.Load() != 3 || h.Stats().UnsupportedOpcode.Load() != 1 || h.Stats().Outside.Load() != 2 {
		t.Errorf("counters: not authorized %d, unsupported opcode %d, outside %d; want 3, 1, 2",
			h.Stats().NotAuthorized.Load(), h.Stats().UnsupportedOpcode.Load(), h.Stats().Outside.Load())
	}
}

// TestHandleDrops: what gets no answer, counted.
func TestHandleDrops(t *testing.T) {
	h, _, _ := newHandler(t, portmap.Policy{})
	for _, tc := range []struct {
		name string
		src  netip.Addr
		req  []byte
	}{
		{"one byte", pt.HostA, []byte{0}},
		{"short map", pt.HostA, []byte{0, 1, 0, 0, 0x13}},
		{"a response", pt.HostA, []byte{0, 128, 0, 0, 0, 0, 0, 0}},
	} {
		if out := h.Handle(tc.req, from(tc.src), nil); out != nil {
			t.Errorf("%s: answered % x, want nothing", tc.name, out)
		}
	}
	s := h.Stats()
	if s.Short.Load() != 2 || s.Reply.Load() != 1 {
		t.Errorf("drops: short %d reply %d, want 2 1", s.Short.Load(), s.Reply.Load())
	}
}

// TestOutOfResources: a host past its limit gets result 4 (RFC 6886
// section 3.5), and 10,000 requests leave it at its limit.
func TestOutOfResources(t *testing.T) {
	h, e, _ := newHandler(t, portmap.Policy{MaxPerHost: 8})
	for i := range 10000 {
		p := uint16(10000 + i)
		r := ask(t, h, pt.HostA, AppendRequest(nil, Request{Op: OpMapUDP, Internal: p, External: p, Lifetime: 3600}))
		if want := uint16(ResultSuccess); i >= 8 && r.Result != ResultOutOfResources || i < 8 && r.Result != want {
			t.Fatalf("request %d: result %d", i, r.Result)
		}
	}
	if n := len(e.PortMappings()); n != 8 {
		t.Errorf("%d mappings in the NAT engine, want 8", n)
	}
	if got := h.Stats().OutOfResources.Load(); got != 10000-8 {
		t.Errorf("out of resources counted %d, want %d", got, 10000-8)
	}
}

// TestAnnouncement: the restart announcement is an external address
// response with the epoch (RFC 6886 section 3.2.1).
func TestAnnouncement(t *testing.T) {
	h, _, clk := newHandler(t, portmap.Policy{})
	clk.Add(3 * time.Second)
	got, err := ParseResponse(h.Announcement())
	if err != nil || got.Op != 128 || got.Result != 0 || got.Epoch != 3 || got.External != pt.WANAddr {
		t.Errorf("Announcement() = %+v, %v", got, err)
	}
}
