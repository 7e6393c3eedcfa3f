package pcp

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	"github.com/gvrouter/gvrouter/portmap/pmpd"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// The test's client writes requests byte by byte from RFC 6887's figures
// (sections 7.1, 11.1, 12.1, 7.3), not with this package's encoder.

// rfcHeader is figure 2: version, R|opcode, reserved, lifetime, client IP.
func rfcHeader(version, op uint8, life uint32, client netip.Addr) []byte {
	b := make([]byte, 24)
	b[0], b[1] = version, op
	binary.BigEndian.PutUint32(b[4:], life)
	a := client.As16()
	copy(b[8:], a[:])
	return b
}

// rfcMap is figure 9 (MAP) after a header; peer adds figure 10's fields.
func rfcMap(nonce byte, proto uint8, in, ext uint16, extAddr netip.Addr) []byte {
	b := make([]byte, 36)
	for i := range 12 {
		b[i] = nonce
	}
	b[12] = proto
	binary.BigEndian.PutUint16(b[16:], in)
	binary.BigEndian.PutUint16(b[18:], ext)
	if extAddr.IsValid() {
		a := extAddr.As16()
		copy(b[20:], a[:])
	}
	return b
}

func rfcPeer(nonce byte, proto uint8, in uint16, peer netip.AddrPort) []byte {
	b := append(rfcMap(nonce, proto, in, in, netip.Addr{}), make([]byte, 20)...)
	binary.BigEndian.PutUint16(b[36:], peer.Port())
	a := peer.Addr().As16()
	copy(b[40:], a[:])
	return b
}

// rfcOption is figure 4: code, reserved, length, data padded to 4.
func rfcOption(code uint8, data []byte) []byte {
	b := []byte{code, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(len(data)))
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func mapReq(client netip.Addr, nonce byte, proto uint8, in, ext uint16, life uint32, opts ...[]byte) []byte {
	b := append(rfcHeader(2, OpMap, life, client), rfcMap(nonce, proto, in, ext, netip.Addr{})...)
	for _, o := range opts {
		b = append(b, o...)
	}
	return b
}

func v4mapped(a netip.Addr) []byte { v := a.As16(); return v[:] }

func newHandler(t testing.TB, p portmap.Policy) (*Handler, *natengine.Engine, *pt.Clock) {
	tb, e, clk := pt.Table(t, p)
	return &Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet, netip.MustParsePrefix("127.0.0.0/8")}}, e, clk
}

func ask(t *testing.T, h *Handler, src netip.Addr, req []byte) Response {
	t.Helper()
	out := h.Handle(req, netip.AddrPortFrom(src, 5350), nil)
	r, ok := ParseResponse(out)
	if !ok {
		t.Fatalf("Handle(% x): answer % x does not parse", req, out)
	}
	return r
}

// TestMapAndNonce follows RFC 6887 section 11: a MAP creates a mapping
// (a DNAT entry), a renewal with the same nonce keeps its port, one with
// another nonce is NOT_AUTHORIZED (section 11.3, as miniupnpd), and so
// is a delete with another nonce; a delete with the nonce removes it.
func TestMapAndNonce(t *testing.T) {
	h, e, clk := newHandler(t, portmap.Policy{Secure: true})
	clk.Add(7 * time.Second)
	r := ask(t, h, pt.HostA, mapReq(pt.HostA, 0xaa, natengine.ProtoUDP, 5000, 5000, 3600))
	if r.Result != Success || r.Op != OpMap || r.External != 5000 || r.Lifetime != 3600 || r.Epoch != 7 ||
		r.ExtAddr != pt.WANAddr || r.Nonce[0] != 0xaa || r.Internal != 5000 || r.Protocol != natengine.ProtoUDP {
		t.Fatalf("MAP: %+v", r)
	}
	if !pt.Installed(e, natengine.ProtoUDP, 5000, netip.AddrPortFrom(pt.HostA, 5000)) {
		t.Fatal("MAP not in the NAT engine")
	}
	if r := ask(t, h, pt.HostA, mapReq(pt.HostA, 0xaa, natengine.ProtoUDP, 5000, 0, 7200)); r.Result != Success || r.External != 5000 || r.Lifetime != 7200 {
		t.Errorf("renewal with the nonce: %+v", r)
	}
	if r := ask(t, h, pt.HostA, mapReq(pt.HostA, 0xbb, natengine.ProtoUDP, 5000, 5000, 3600)); r.Result != NotAuthorized || r.Lifetime != longErrorLifetime {
		t.Errorf("renewal with another nonce: result %d lifetime %d, want NOT_AUTHORIZED (2), %d", r.Result, r.Lifetime, longErrorLifetime)
	}
	if r := ask(t, h, pt.HostA, mapReq(pt.HostA, 0xbb, natengine.ProtoUDP, 5000, 0, 0)); r.Result != NotAuthorized {
		t.Errorf("delete with another nonce: result %d, want NOT_AUTHORIZED (2)", r.Result)
	}
	if !pt.Installed(e, natengine.ProtoUDP, 5000, netip.AddrPortFrom(pt.HostA, 5000)) {
		t.Fatal("a wrong nonce removed the mapping")
	}
	if r := ask(t, h, pt.HostA, mapReq(pt.HostA, 0xaa, natengine.ProtoUDP, 5000, 0, 0)); r.Result != Success || r.Lifetime != 0 {
		t.Errorf("delete with the nonce: %+v", r)
	}
	if pt.Installed(e, natengine.ProtoUDP, 5000, netip.AddrPortFrom(pt.HostA, 5000)) {
		t.Error("deleted mapping still in the NAT engine")
	}
	if got := h.Table.Stats().Nonce.Load(); got != 2 {
		t.Errorf("nonce refusals counted %d, want 2", got)
	}
}

// TestResultCodes: each result code of RFC 6887 section 7.4 from the
// request that earns it.
func TestResultCodes(t *testing.T) {
	h, _, _ := newHandler(t, portmap.Policy{Secure: true, MaxPerHost: 2})
	a := pt.HostA
	third := rfcOption(OptThirdParty, v4mapped(pt.HostB))
	// Host B holds udp 6000, so A's exact request for it cannot be met.
	if r := ask(t, h, pt.HostB, mapReq(pt.HostB, 1, natengine.ProtoUDP, 6000, 6000, 600)); r.Result != Success {
		t.Fatal(r)
	}
	for _, tc := range []struct {
		name string
		src  netip.Addr
		req  []byte
		want uint8
	}{
		{"unsupported version 1", a, append(rfcHeader(1, OpMap, 600, a), rfcMap(1, 17, 5000, 5000, netip.Addr{})...), UnsuppVersion},
		{"unsupported version 3", a, rfcHeader(3, OpMap, 600, a), UnsuppVersion},
		{"unsupported opcode", a, rfcHeader(2, 5, 600, a), UnsuppOpcode},
		{"not a multiple of 4", a, append(mapReq(a, 1, 17, 5000, 5000, 600), 0), MalformedRequest},
		{"MAP payload cut short", a, mapReq(a, 1, 17, 5000, 5000, 600)[:48], MalformedRequest},
		{"header only", a, rfcHeader(2, OpMap, 600, a)[:20], MalformedRequest},
		{"client address mismatch", a, mapReq(pt.HostB, 1, 17, 5000, 5000, 600), AddressMismatch},
		{"from the WAN side", pt.Remote, mapReq(pt.Remote, 1, 17, 5000, 5000, 600), NotAuthorized},
		{"THIRD_PARTY in secure mode", a, mapReq(a, 1, 17, 5000, 5000, 600, third), NotAuthorized},
		{"internal port below 1024", a, mapReq(a, 1, 6, 80, 80, 600), NotAuthorized},
		{"unknown mandatory option", a, mapReq(a, 1, 17, 5000, 5000, 600, rfcOption(0x7f, nil)), UnsuppOption},
		{"FILTER not offered", a, mapReq(a, 1, 17, 5000, 5000, 600, rfcOption(OptFilter, make([]byte, 20))), UnsuppOption},
		{"THIRD_PARTY of 4 bytes", a, mapReq(a, 1, 17, 5000, 5000, 600, rfcOption(OptThirdParty, []byte{1, 2, 3, 4})), MalformedOption},
		{"option overruns", a, append(mapReq(a, 1, 17, 5000, 5000, 600), OptThirdParty, 0, 0, 16), MalformedOption},
		{"ICMP", a, mapReq(a, 1, 1, 5000, 5000, 600), UnsuppProtocol},
		{"all protocols with a port", a, mapReq(a, 1, 0, 5000, 5000, 600), MalformedRequest},
		{"PREFER_FAILURE on a taken port", a, mapReq(a, 1, 17, 6000, 6000, 600, rfcOption(OptPreferFailure, nil)), CannotProvideExternal},
		{"unknown optional option ignored", a, mapReq(a, 2, 17, 5000, 5000, 600, rfcOption(0x80, []byte{9})), Success},
		{"second mapping", a, mapReq(a, 3, 17, 5001, 5001, 600), Success},
		{"past the host's quota", a, mapReq(a, 4, 17, 5002, 5002, 600), UserExQuota},
		{"announce", a, rfcHeader(2, OpAnnounce, 0, a), Success},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := h.Handle(tc.req, netip.AddrPortFrom(tc.src, 5350), nil)
			r, ok := ParseResponse(out)
			if !ok {
				t.Fatalf("answer % x does not parse", out)
			}
			if r.Result != tc.want {
				t.Errorf("result %d, want %d", r.Result, tc.want)
			}
			if out[0] != Version || len(out)%4 != 0 || len(out) < HeaderLen || len(out) > MaxLen {
				t.Errorf("answer version %d length %d", out[0], len(out))
			}
		})
	}
	for _, req := range [][]byte{{2}, append(rfcHeader(2, OpMap|ResponseBit, 0, a), rfcMap(1, 17, 1, 1, netip.Addr{})...)} {
		if out := h.Handle(req, netip.AddrPortFrom(a, 5350), nil); out != nil {
			t.Errorf("Handle(% x) answered, want silence (section 8.3)", req)
		}
	}
}

// TestThirdPartyAndPeer: without secure mode THIRD_PARTY maps another
// host (echoing the option); PEER makes a mapping that admits only its
// peer, and a PEER from a mapped endpoint reuses the MAP's port.
func TestThirdPartyAndPeer(t *testing.T) {
	h, e, _ := newHandler(t, portmap.Policy{})
	out := h.Handle(mapReq(pt.HostA, 1, 6, 7000, 7000, 600, rfcOption(OptThirdParty, v4mapped(pt.HostB))), netip.AddrPortFrom(pt.HostA, 5350), nil)
	if r, _ := ParseResponse(out); r.Result != Success || len(out) != 24+36+20 || out[60] != OptThirdParty {
		t.Fatalf("THIRD_PARTY: %+v, % x", r, out)
	}
	if !pt.Installed(e, natengine.ProtoTCP, 7000, netip.AddrPortFrom(pt.HostB, 7000)) {
		t.Error("third-party mapping not to host B")
	}
	peer := netip.AddrPortFrom(pt.Remote, 9000)
	req := append(rfcHeader(2, OpPeer, 600, pt.HostA), rfcPeer(5, 17, 8000, peer)...)
	r := ask(t, h, pt.HostA, req)
	if r.Result != Success || r.Op != OpPeer || r.External != 8000 || r.PeerPort != 9000 || r.PeerAddr != pt.Remote {
		t.Fatalf("PEER: %+v", r)
	}
	var found bool
	for _, m := range e.PortMappings() {
		if m.Port == 8000 && len(m.Peers) == 1 && m.Peers[0] == peer {
			found = true
		}
	}
	if !found {
		t.Errorf("PEER mapping with its peer not in the NAT engine: %+v", e.PortMappings())
	}
	ask(t, h, pt.HostA, mapReq(pt.HostA, 6, 17, 8100, 8100, 600))
	r = ask(t, h, pt.HostA, append(rfcHeader(2, OpPeer, 600, pt.HostA), rfcPeer(6, 17, 8100, peer)...))
	if r.Result != Success || r.External != 8100 {
		t.Errorf("PEER from a MAP's endpoint: %+v, want its port 8100", r)
	}
}

// TestOverUDP: the test's client talks to the server through pmpd on a
// loopback socket.
func TestOverUDP(t *testing.T) {
	h, e, _ := newHandler(t, portmap.Policy{})
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); (&pmpd.Server{Conn: conn, PCP: h}).Serve(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	c, err := net.Dial("udp4", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	c.Write(mapReq(lo, 9, natengine.ProtoTCP, 4000, 4000, 600))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1200)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := ParseResponse(buf[:n]); r.Result != Success || r.External != 4000 {
		t.Errorf("over UDP: %+v", r)
	}
	if !pt.Installed(e, natengine.ProtoTCP, 4000, netip.AddrPortFrom(lo, 4000)) {
		t.Error("not in the NAT engine")
	}
}
