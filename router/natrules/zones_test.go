package natrules

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
)

// probe is one packet of the legacy equivalence matrix.
type probe struct {
	src, dst netip.Addr
	proto    uint8
	dport    uint16
	syn      bool  // TCP: SYN, else ACK
	typ      uint8 // ICMP type
	in, out  natengine.Iface
}

func (p probe) String() string {
	return fmt.Sprintf("%d->%d %s->%s proto %d port %d type %d syn %v", p.in, p.out, p.src, p.dst, p.proto, p.dport, p.typ, p.syn)
}

func (p probe) build() []byte {
	var l4 []byte
	switch p.proto {
	case natengine.ProtoTCP:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4, 40000)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		l4[12] = 5 << 4
		l4[13] = 0x10 // ACK
		if p.syn {
			l4[13] = 0x02
		}
	case natengine.ProtoUDP:
		l4 = make([]byte, 12)
		binary.BigEndian.PutUint16(l4, 40000)
		binary.BigEndian.PutUint16(l4[2:], p.dport)
		binary.BigEndian.PutUint16(l4[4:], 12)
	case natengine.ProtoICMP, natengine.ProtoICMPv6:
		l4 = make([]byte, 8)
		l4[0] = p.typ
		binary.BigEndian.PutUint16(l4[4:], 77)
	default:
		l4 = make([]byte, 8)
	}
	var ip []byte
	if p.src.Is6() {
		ip = make([]byte, 40+len(l4))
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6], ip[7] = p.proto, 64
		s, d := p.src.As16(), p.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		copy(ip[40:], l4)
	} else {
		ip = make([]byte, 20+len(l4))
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		ip[8], ip[9] = 64, p.proto
		s, d := p.src.As4(), p.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		copy(ip[20:], l4)
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
	}
	off := 20
	src, dst := ip[12:16], ip[16:20]
	if p.src.Is6() {
		off, src, dst = 40, ip[8:24], ip[24:40]
	}
	b := ip[off:]
	pseudo := checksum.Combine(checksum.Combine(checksum.Checksum(dst, checksum.Checksum(src, 0)), uint16(p.proto)), uint16(len(b)))
	switch p.proto {
	case natengine.ProtoTCP:
		binary.BigEndian.PutUint16(b[16:], ^checksum.Checksum(b, pseudo))
	case natengine.ProtoUDP:
		binary.BigEndian.PutUint16(b[6:], ^checksum.Checksum(b, pseudo))
	case natengine.ProtoICMP:
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, 0))
	case natengine.ProtoICMPv6:
		binary.BigEndian.PutUint16(b[2:], ^checksum.Checksum(b, pseudo))
	}
	return ip
}

// probes is the matrix: every source interface (lan 1, wan 2, wan2 3)
// to the router and through it, TCP SYN and ACK, UDP, ICMP echo, GRE and
// ESP, IPv4 and IPv6, to ports the configs below open and others.
func probes() []probe {
	a := netip.MustParseAddr
	const lan, wan, wan2 natengine.Iface = 1, 2, 3
	type end struct {
		addr netip.Addr
		in   natengine.Iface // where packets from it arrive
	}
	srcs4 := []end{{a("192.168.1.10"), lan}, {a("198.51.100.9"), wan}, {a("192.0.2.9"), wan2}}
	srcs6 := []end{{a("fd00:1::10"), lan}, {a("2001:db8:ffff::9"), wan}}
	// Destinations: the router's own addresses (out 0) and hosts
	// beyond each interface.
	type dest struct {
		addr netip.Addr
		out  natengine.Iface
	}
	dsts4 := []dest{{a("192.168.1.1"), 0}, {a("203.0.113.2"), 0}, {a("198.51.100.2"), 0}, {a("192.168.1.20"), lan}, {a("198.51.100.50"), wan}, {a("192.0.2.50"), wan2}}
	dsts6 := []dest{{a("fd00:1::1"), 0}, {a("2001:db8::2"), 0}, {a("fd00:1::20"), lan}, {a("fd00:1::10"), lan}, {a("fd00:1::30"), lan}, {a("2001:db8:ffff::50"), wan}}
	type l4 struct {
		proto uint8
		port  uint16
		syn   bool
		typ   uint8
	}
	l4s := func(v6 bool) []l4 {
		out := []l4{
			{natengine.ProtoTCP, 22, true, 0}, {natengine.ProtoTCP, 8080, true, 0}, {natengine.ProtoTCP, 22, false, 0},
			{natengine.ProtoTCP, 23, true, 0}, {natengine.ProtoUDP, 53, false, 0}, {natengine.ProtoUDP, 60500, false, 0},
			{47, 0, false, 0}, {50, 0, false, 0},
		}
		if v6 {
			return append(out, l4{natengine.ProtoICMPv6, 0, false, 128})
		}
		return append(out, l4{natengine.ProtoICMP, 0, false, 8})
	}
	var out []probe
	add := func(srcs []end, dsts []dest, v6 bool) {
		for _, s := range srcs {
			for _, d := range dsts {
				if d.addr == s.addr {
					continue
				}
				for _, x := range l4s(v6) {
					out = append(out, probe{src: s.addr, dst: d.addr, proto: x.proto, dport: x.port, syn: x.syn, typ: x.typ, in: s.in, out: d.out})
				}
			}
		}
	}
	add(srcs4, dsts4, false)
	add(srcs6, dsts6, true)
	return out
}

// verdict runs p through an engine as the router does: Prerouting, then
// for a packet to the router the stack's wan input policy (inputDrop, a
// CTNew packet to the router arriving on a wan interface), else
// Postrouting on its way out.
func verdict(e *natengine.Engine, p probe, inputDrop bool) natengine.Verdict {
	pkt := p.build()
	v, st, _ := e.PreroutingCT(pkt, p.in, false)
	if v != natengine.Accept {
		return v
	}
	out := p.out
	if out == 0 && string(pkt[dstOff(pkt):dstOff(pkt)+p.dst.BitLen()/8]) == string(p.dst.AsSlice()) {
		if inputDrop && st == natengine.CTNew {
			return natengine.Drop
		}
		return v
	}
	if out == 0 {
		out = 1 // a forward rewrote the destination to a lan host
	}
	return e.Postrouting(pkt, out)
}

func dstOff(ip []byte) int {
	if ip[0]>>4 == 6 {
		return 24
	}
	return 16
}

// TestLegacyZonesMeanTheSame: for configs written before zones
// existed, the router with their implicit zone set (LegacyPolicy) gives
// every probe the verdict the engine's built-in wan defaults give it,
// with the stack's wan input policy applied as before.
func TestLegacyZonesMeanTheSame(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"defaults", ""},
		{"wan_input accept", "firewall:\n  wan_input: accept\n"},
		{"masquerade and forwards", `nat:
  masquerade: [wan, wan2]
  forwards:
    - {proto: tcp, port: 8080, to: "192.168.1.20:80"}
    - {proto: udp, port: 60000-61000, to: 192.168.1.20, on: wan2}
`},
		{"allow6", `firewall:
  allow6:
    - {proto: tcp, to: fd00:1::10, port: 22}
    - {to: fd00:1::/64, port: 60000-61000}
    - {proto: 47, to: fd00:1::20}
    - {proto: any, to: fd00:1::30}
    - {proto: tcp, suffix: "::20", port: 23}
`},
		{"hairpin off, wan_input accept, allow6", `nat:
  hairpin: off
  masquerade: [wan]
firewall:
  wan_input: accept
  allow6:
    - {proto: udp, to: fd00:1::/64}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("legacy.yaml", []byte(natBase+tc.in))
			if err != nil {
				t.Fatal(err)
			}
			zoned := Compile(cfg, seqIDs(cfg), func(string) int { return 1500 }, nil)
			if zoned.Zones == nil {
				t.Fatal("no zone set")
			}
			builtin := zoned
			builtin.Zones = nil
			ez, eb := natengine.New(EngineConfig(cfg)), natengine.New(EngineConfig(cfg))
			if err := ez.SetRules(zoned); err != nil {
				t.Fatal(err)
			}
			if err := eb.SetRules(builtin); err != nil {
				t.Fatal(err)
			}
			wanDrop := cfg.Firewall.WANInputDrop()
			ps := probes()
			var mismatches []string
			counts := map[natengine.Verdict]int{}
			for _, p := range ps {
				wantV := verdict(eb, p, wanDrop && p.in != 1)
				gotV := verdict(ez, p, DropNewInput(cfg, *cfg.Interface(cfg.Interfaces[p.in-1].Name)))
				counts[wantV]++
				if gotV != wantV {
					mismatches = append(mismatches, fmt.Sprintf("%v: zones %v, built-in %v", p, gotV, wantV))
				}
			}
			if len(mismatches) > 0 {
				t.Errorf("%d of %d probes differ:\n%s", len(mismatches), len(ps), strings.Join(mismatches, "\n"))
			}
			// The matrix must exercise both outcomes, or it proves nothing.
			if counts[natengine.Accept] == 0 || counts[natengine.Drop] == 0 {
				t.Errorf("verdicts %v: want accepts and drops", counts)
			}
			t.Logf("%d probes: %d accepted, %d dropped", len(ps), counts[natengine.Accept], counts[natengine.Drop])
		})
	}
}
