package natengine

import (
	"net/netip"
	"testing"
)

// TestInsideHost: a per-host scheduler on the WAN finds the LAN host of a
// masqueraded flow from the packet as it leaves (already SNATed) and as it
// arrives (not yet de-NATed), and the server behind a port forward.
func TestInsideHost(t *testing.T) {
	e, _ := newTestEngine(t, 64, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoUDP, In: wanIf, FirstPort: 6000, LastPort: 6000, To: ap(hostB, 7000)}}
	})
	check := func(what string, pkt []byte, egress bool, want netip.Addr) {
		t.Helper()
		got, ok := e.InsideHost(pkt, egress)
		if ok != want.IsValid() || got != want {
			t.Errorf("%s: InsideHost = %v, %v; want %v", what, got, ok, want)
		}
	}
	// Masquerade: hostA's flow leaves as wanAddr:ext.
	ext := outboundUDP(t, e, hostA, 1234, remote, 53)
	out := pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: ext, dport: 53}.build()
	check("upload, masqueraded", out, true, hostA)
	in := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: ext}.build()
	check("download, masqueraded", in, false, hostA)
	// The same packets the wrong way round match nothing.
	check("upload read as download", out, false, netip.Addr{})

	// Port forward: remote opens wanAddr:6000, answered by hostB:7000.
	req := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 999, dport: 6000}.build()
	if v := fwd(t, e, req, wanIf, lanIf); v != Accept {
		t.Fatalf("forwarded request: %v", v)
	}
	check("download, port forward", pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 999, dport: 6000}.build(), false, hostB)
	check("upload, port forward", pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: 6000, dport: 999}.build(), true, hostB)

	// Untracked and malformed packets: no answer, the caller keys by the header.
	check("untracked", pk{src: wanAddr, dst: remote2, proto: ProtoUDP, sport: 1, dport: 2}.build(), true, netip.Addr{})
	check("truncated", out[:10], true, netip.Addr{})

	if n := testing.AllocsPerRun(100, func() { e.InsideHost(out, true) }); n != 0 {
		t.Errorf("InsideHost allocates %v per call", n)
	}
}
