package natengine

import (
	"encoding/binary"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
)

// fuzzEngine returns an engine with a few flows of every kind, and packets
// of those flows for seeds.
func fuzzEngine(t testing.TB) (*Engine, [][]byte) {
	e, _ := newTestEngine(t, 256, func(r *Rules) {
		r.Forwards = []Forward{{Proto: ProtoTCP, In: wanIf, FirstPort: 8080, LastPort: 8081, To: ap(hostB, 80)}}
	})
	ext := establishTCP(t, e, hostA, 40000, remote, 80)
	u := outboundUDP(t, e, hostA, 5000, remote, 53)
	req := pk{src: hostA, dst: remote, proto: ProtoICMP, typ: 8, sport: 77}.build()
	fwd(t, e, req, lanIf, wanIf)
	id, _ := addrs(req)
	fwd(t, e, pk{src: host6, dst: remote6, proto: ProtoUDP, sport: 1, dport: 2}.build(), lanIf, wanIf)
	out := pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpACK}.build()
	fwd(t, e, out, lanIf, wanIf)
	e.Offload(out, wanIf, macGw, macRtrW)
	seeds := [][]byte{
		pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 80, dport: ext, flags: tcpACK, payload: []byte("x")}.build(),
		pk{src: hostA, dst: remote, proto: ProtoTCP, sport: 40000, dport: 80, flags: tcpSYN, tcpOpts: []byte{2, 4, 0x22, 0x22}}.build(),
		pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: u, payload: []byte("answer")}.build(),
		pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 0, sport: id.Port()}.build(),
		pk{src: remote, dst: wanAddr, proto: ProtoTCP, sport: 1234, dport: 8080, flags: tcpSYN}.build(),
		pk{src: remote6, dst: host6, proto: ProtoUDP, sport: 2, dport: 1}.build(),
		pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 3, code: 3, payload: pk{src: wanAddr, dst: remote, proto: ProtoUDP, sport: u, dport: 53}.build()}.build(),
		pk{src: remote, dst: wanAddr, proto: ProtoICMP, typ: 11, payload: pk{src: wanAddr, dst: remote, proto: ProtoTCP, sport: ext, dport: 80}.build()[:28]}.build(),
	}
	frag := fragment4(pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53, id: 7, payload: make([]byte, 100)}.build(), 64)
	seeds = append(seeds, frag...)
	return e, seeds
}

func allValid(c []bool) bool {
	for _, ok := range c {
		if !ok {
			return false
		}
	}
	return true
}

// FuzzClassify feeds arbitrary packets to the classifier, every hook and
// InsideHost.
// Invariants: no panic; a packet whose checksums all verified before a hook
// rewrote it still verifies by full recomputation after.
func FuzzClassify(f *testing.F) {
	_, seeds := fuzzEngine(f)
	for i, s := range seeds {
		f.Add(s, uint8(i%3))
	}
	f.Add([]byte{0x45}, uint8(0))
	f.Add([]byte{0x60, 0, 0, 0, 0, 8, 44, 64}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, how uint8) {
		Classify(data)
		var p Parsed
		parse(data, &p, false)
		e, _ := fuzzEngine(t)
		valid := allValid(checks(data))
		in, out := wanIf, lanIf
		if how&1 == 1 {
			in, out = lanIf, wanIf
		}
		pkt := append([]byte(nil), data...)
		v := e.Prerouting(pkt, in)
		if v == Accept {
			v = e.Postrouting(pkt, out)
		}
		if v == Accept && valid && !allValid(checks(pkt)) {
			t.Fatalf("checksums broken by the hooks:\nin  % x\nout % x", data, pkt)
		}
		e.DrainHeld(func(b []byte, in Iface) { e.Postrouting(b, out) })
		frame := make([]byte, ethHdrLen+len(data))
		et := uint16(ethTypeIPv4)
		if len(data) > 0 && data[0]>>4 == 6 {
			et = ethTypeIPv6
		}
		binary.BigEndian.PutUint16(frame[12:], et)
		copy(frame[ethHdrLen:], data)
		if _, ok := e.FastPath(frame, in); ok && valid && !allValid(checks(frame[14:])) {
			t.Fatalf("checksums broken by the fast path: % x", frame)
		}
		e.Offload(pkt, out, macA, macRtrL)
		// sqm's per-host key: both directions, on the raw input and on
		// what the hooks made of it (a confirmed flow by now).
		e.InsideHost(data, how&1 == 1)
		e.InsideHost(pkt, how&1 == 1)
		e.Sweep()
	})
}

// FuzzICMPError wraps arbitrary embedded packets in ICMP errors with a
// valid ICMP checksum, from outside or inside. Invariants: no panic; the
// translated error's outer IP and ICMP checksums, and the embedded IP/L4
// checksums that were valid, verify by full recomputation.
func FuzzICMPError(f *testing.F) {
	_, seeds := fuzzEngine(f)
	for _, s := range seeds {
		p, ok := Classify(s)
		if ok && p.Kind == KindICMPError {
			emb := s[p.Inner:]
			f.Add(append([]byte(nil), emb...), uint8(3), uint8(3), false)
			f.Add(append([]byte(nil), emb[:28]...), uint8(11), uint8(0), false)
		}
	}
	f.Add(pk{src: remote, dst: hostA, proto: ProtoUDP, sport: 53, dport: 5000}.build(), uint8(3), uint8(3), true)
	f.Add(pk{src: remote6, dst: host6, proto: ProtoUDP, sport: 2, dport: 1}.build(), uint8(1), uint8(4), true)
	f.Add([]byte{0x45, 0, 0, 20}, uint8(3), uint8(1), false)
	f.Fuzz(func(t *testing.T, inner []byte, typ, code uint8, inside bool) {
		e, _ := fuzzEngine(t)
		v6 := len(inner) > 0 && inner[0]>>4 == 6
		var k pk
		switch {
		case v6 && inside:
			k = pk{src: host6, dst: remote6, proto: ProtoICMPv6}
		case v6:
			k = pk{src: remote6, dst: host6, proto: ProtoICMPv6}
		case inside:
			k = pk{src: hostA, dst: remote, proto: ProtoICMP}
		default:
			k = pk{src: remote, dst: wanAddr, proto: ProtoICMP}
		}
		k.typ, k.code, k.payload = typ, code, inner
		pkt := k.build()
		before := checks(pkt)
		in, out := wanIf, lanIf
		if inside {
			in, out = lanIf, wanIf
		}
		if v := e.Prerouting(pkt, in); v != Accept {
			return
		}
		e.Postrouting(pkt, out)
		after := checks(pkt)
		if len(after) != len(before) {
			t.Fatalf("structure changed: %v -> %v", before, after)
		}
		for i := range before {
			if before[i] && !after[i] {
				t.Fatalf("checksum %d broken by translation:\nin  % x\nout % x", i, k.build(), pkt)
			}
		}
		// The outer ICMP checksum is always recomputable.
		off := 20
		if v6 {
			off = 40
		}
		icmp := pkt[off:]
		if !v6 && checksum.Checksum(icmp, 0) != 0xffff {
			t.Fatalf("ICMP checksum invalid: % x", pkt)
		}
	})
}
