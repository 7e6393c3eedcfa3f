package natengine

import (
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
)

// Test topology: LAN iface 1, WAN iface 2 (masquerade), both dual-stack.
const (
	lanIf Iface = 1
	wanIf Iface = 2
)

var (
	lanAddr  = netip.MustParseAddr("192.168.1.1")
	wanAddr  = netip.MustParseAddr("203.0.113.2")
	hostA    = netip.MustParseAddr("192.168.1.10")
	hostB    = netip.MustParseAddr("192.168.1.20")
	remote   = netip.MustParseAddr("198.51.100.7")
	remote2  = netip.MustParseAddr("198.51.100.8")
	lan6     = netip.MustParseAddr("fd00:1::1")
	wan6     = netip.MustParseAddr("2001:db8::2")
	host6    = netip.MustParseAddr("2001:db8:1::10")
	remote6  = netip.MustParseAddr("2001:db8:ffff::7")
	macA     = [6]byte{2, 0, 0, 0, 0, 0xa}
	macRtrL  = [6]byte{2, 0, 0, 0, 0, 1}
	macRtrW  = [6]byte{2, 0, 0, 0, 0, 2}
	macGw    = [6]byte{2, 0, 0, 0, 0, 0xf}
	testMTU  = 1500
	baseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func testRules() Rules {
	return Rules{
		Ifaces: []IfaceConfig{
			{ID: lanIf, Name: "eth0.1", Addrs: []netip.Addr{lanAddr, lan6}, MTU: testMTU},
			{ID: wanIf, Name: "eth0.2", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanAddr, wan6}, MTU: testMTU},
		},
		Hairpin: true,
	}
}

// newTestEngine returns an engine with the test topology and a fake clock.
func newTestEngine(t testing.TB, max int, mod func(*Rules)) (*Engine, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.NewAt(baseTime)
	var n atomic.Uint32
	e := New(Config{MaxConns: max, TimeNow: clk.Now, Rand: func() uint32 { return n.Add(7919) }})
	r := testRules()
	if mod != nil {
		mod(&r)
	}
	if err := e.SetRules(r); err != nil {
		t.Fatalf("SetRules: %v", err)
	}
	return e, clk
}

// pk describes a packet to build with correct checksums.
type pk struct {
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16 // ICMP: sport is the identifier
	flags        uint8  // TCP flags
	typ, code    uint8  // ICMP
	payload      []byte // L4 payload (ICMP errors: the embedded packet)
	ttl          uint8
	id           uint16
	df           bool
	tcpOpts      []byte
	noUDPCsum    bool
}

func (k pk) build() []byte {
	v6 := k.src.Is6()
	ttl := k.ttl
	if ttl == 0 {
		ttl = 64
	}
	var l4 []byte
	switch k.proto {
	case ProtoTCP:
		hl := 20 + len(k.tcpOpts)
		l4 = make([]byte, hl+len(k.payload))
		binary.BigEndian.PutUint16(l4, k.sport)
		binary.BigEndian.PutUint16(l4[2:], k.dport)
		binary.BigEndian.PutUint32(l4[4:], 1000)
		l4[12] = byte(hl/4) << 4
		l4[13] = k.flags
		binary.BigEndian.PutUint16(l4[14:], 65535)
		copy(l4[20:], k.tcpOpts)
		copy(l4[hl:], k.payload)
	case ProtoUDP:
		l4 = make([]byte, 8+len(k.payload))
		binary.BigEndian.PutUint16(l4, k.sport)
		binary.BigEndian.PutUint16(l4[2:], k.dport)
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		copy(l4[8:], k.payload)
	case ProtoICMP, ProtoICMPv6:
		l4 = make([]byte, 8+len(k.payload))
		l4[0], l4[1] = k.typ, k.code
		if icmpIsQuery(k.typ, v6) {
			binary.BigEndian.PutUint16(l4[4:], k.sport)
			binary.BigEndian.PutUint16(l4[6:], 1)
		}
		copy(l4[8:], k.payload)
	default:
		l4 = append([]byte(nil), k.payload...)
	}
	var ip []byte
	if v6 {
		ip = make([]byte, 40+len(l4))
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = k.proto
		ip[7] = ttl
		s, d := k.src.As16(), k.dst.As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		copy(ip[40:], l4)
	} else {
		ip = make([]byte, 20+len(l4))
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[4:], k.id)
		if k.df {
			ip[6] = 0x40
		}
		ip[8] = ttl
		ip[9] = k.proto
		s, d := k.src.As4(), k.dst.As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		copy(ip[20:], l4)
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:20], 0))
	}
	off := 20
	if v6 {
		off = 40
	}
	fillL4Checksum(ip, off, v6, k.proto, k.noUDPCsum)
	return ip
}

// fillL4Checksum computes a full L4 checksum (the reference implementation
// is gVisor's, independent of the engine's).
func fillL4Checksum(ip []byte, off int, v6 bool, proto uint8, noUDP bool) {
	l4 := ip[off:]
	src, dst := ip[12:16], ip[16:20]
	if v6 {
		src, dst = ip[8:24], ip[24:40]
	}
	pseudo := func() uint16 {
		s := checksum.Checksum(src, 0)
		s = checksum.Checksum(dst, s)
		s = checksum.Combine(s, uint16(proto))
		return checksum.Combine(s, uint16(len(l4)))
	}
	switch proto {
	case ProtoTCP:
		binary.BigEndian.PutUint16(l4[16:], 0)
		binary.BigEndian.PutUint16(l4[16:], ^checksum.Checksum(l4, pseudo()))
	case ProtoUDP:
		binary.BigEndian.PutUint16(l4[6:], 0)
		if noUDP && !v6 {
			return
		}
		c := ^checksum.Checksum(l4, pseudo())
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(l4[6:], c)
	case ProtoICMP:
		binary.BigEndian.PutUint16(l4[2:], 0)
		binary.BigEndian.PutUint16(l4[2:], ^checksum.Checksum(l4, 0))
	case ProtoICMPv6:
		binary.BigEndian.PutUint16(l4[2:], 0)
		binary.BigEndian.PutUint16(l4[2:], ^checksum.Checksum(l4, pseudo()))
	}
}

// checks returns the validity of every checksum in pkt that can be
// verified by full recomputation: the IPv4 header, the L4 checksum of a
// complete unfragmented packet, and for ICMP errors the embedded IPv4
// header and (if the embedded packet is complete) its L4 checksum.
func checks(pkt []byte) []bool {
	var out []bool
	var walk func(b []byte, depth int)
	walk = func(b []byte, depth int) {
		if len(b) < 20 {
			return
		}
		v6 := b[0]>>4 == 6
		var off, total int
		var proto uint8
		if v6 {
			if len(b) < 40 {
				return
			}
			off, total, proto = 40, 40+int(binary.BigEndian.Uint16(b[4:])), b[6]
		} else if b[0]>>4 == 4 {
			off, total, proto = int(b[0]&0xf)*4, int(binary.BigEndian.Uint16(b[2:])), b[9]
			if off < 20 || len(b) < off {
				return
			}
			out = append(out, checksum.Checksum(b[:off], 0) == 0xffff)
			if binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
				return
			}
		} else {
			return
		}
		if total > len(b) || total < off {
			return // truncated (embedded)
		}
		l4 := b[off:total]
		src, dst := b[12:16], b[16:20]
		if v6 {
			src, dst = b[8:24], b[24:40]
		}
		pseudo := checksum.Combine(checksum.Combine(checksum.Checksum(dst, checksum.Checksum(src, 0)), uint16(proto)), uint16(len(l4)))
		switch proto {
		case ProtoTCP:
			if len(l4) >= 20 {
				out = append(out, checksum.Checksum(l4, pseudo) == 0xffff)
			}
		case ProtoUDP:
			if len(l4) >= 8 && !(binary.BigEndian.Uint16(l4[6:]) == 0 && !v6) {
				out = append(out, checksum.Checksum(l4, pseudo) == 0xffff)
			}
		case ProtoICMP, ProtoICMPv6:
			if len(l4) < 8 {
				return
			}
			if proto == ProtoICMP {
				out = append(out, checksum.Checksum(l4, 0) == 0xffff)
			} else {
				out = append(out, checksum.Checksum(l4, pseudo) == 0xffff)
			}
			if depth == 0 && icmpIsError(l4[0], v6) {
				walk(l4[8:], 1)
			}
		}
	}
	walk(pkt, 0)
	return out
}

// mustVerify fails t unless every checksum in pkt verifies.
func mustVerify(t testing.TB, pkt []byte) {
	t.Helper()
	for i, ok := range checks(pkt) {
		if !ok {
			t.Fatalf("checksum %d of packet does not verify: % x", i, pkt)
		}
	}
}

// addrs returns pkt's source and destination as address:port.
func addrs(pkt []byte) (netip.AddrPort, netip.AddrPort) {
	var p Parsed
	if !parse(pkt, &p, false) { // lenient: embedded packets may be truncated
		return netip.AddrPort{}, netip.AddrPort{}
	}
	tu := p.tuple(pkt)
	return netip.AddrPortFrom(tu.SrcAddr(), tu.SrcPort), netip.AddrPortFrom(tu.DstAddr(), tu.DstPort)
}

func ap(a netip.Addr, p uint16) netip.AddrPort { return netip.AddrPortFrom(a, p) }

// fwd runs pkt through Prerouting and Postrouting, as a forwarded packet.
func fwd(t testing.TB, e *Engine, pkt []byte, in, out Iface) Verdict {
	t.Helper()
	if v := e.Prerouting(pkt, in); v != Accept {
		return v
	}
	v := e.Postrouting(pkt, out)
	if v == Accept {
		mustVerify(t, pkt)
	}
	return v
}

// expectAddrs fails unless pkt goes from src to dst.
func expectAddrs(t testing.TB, pkt []byte, src, dst netip.AddrPort) {
	t.Helper()
	s, d := addrs(pkt)
	if s != src || d != dst {
		t.Fatalf("packet %v -> %v, want %v -> %v", s, d, src, dst)
	}
}

// outboundUDP sends one UDP packet from host:hp to dst:dp through the NAT and
// returns the external source port.
func outboundUDP(t testing.TB, e *Engine, host netip.Addr, hp uint16, dst netip.Addr, dp uint16) uint16 {
	t.Helper()
	pkt := pk{src: host, dst: dst, proto: ProtoUDP, sport: hp, dport: dp, payload: []byte("hello")}.build()
	if v := fwd(t, e, pkt, lanIf, wanIf); v != Accept {
		t.Fatalf("outbound UDP %v:%d -> %v:%d: %v", host, hp, dst, dp, v)
	}
	s, _ := addrs(pkt)
	if s.Addr() != wanAddr {
		t.Fatalf("outbound source %v, want %v", s, wanAddr)
	}
	return s.Port()
}

// eth wraps an IP packet in an Ethernet frame.
func eth(dst, src [6]byte, ip []byte) []byte {
	f := make([]byte, 14+len(ip))
	copy(f, dst[:])
	copy(f[6:], src[:])
	et := uint16(ethTypeIPv4)
	if ip[0]>>4 == 6 {
		et = ethTypeIPv6
	}
	binary.BigEndian.PutUint16(f[12:], et)
	copy(f[14:], ip)
	return f
}

// establishTCP completes a handshake from host:hp to dst:dp and returns the
// external port.
func establishTCP(t testing.TB, e *Engine, host netip.Addr, hp uint16, dst netip.Addr, dp uint16) uint16 {
	t.Helper()
	syn := pk{src: host, dst: dst, proto: ProtoTCP, sport: hp, dport: dp, flags: tcpSYN}.build()
	if v := fwd(t, e, syn, lanIf, wanIf); v != Accept {
		t.Fatalf("SYN: %v", v)
	}
	s, _ := addrs(syn)
	sa := pk{src: dst, dst: s.Addr(), proto: ProtoTCP, sport: dp, dport: s.Port(), flags: tcpSYN | tcpACK}.build()
	if v := fwd(t, e, sa, wanIf, lanIf); v != Accept {
		t.Fatalf("SYN-ACK: %v", v)
	}
	ack := pk{src: host, dst: dst, proto: ProtoTCP, sport: hp, dport: dp, flags: tcpACK}.build()
	if v := fwd(t, e, ack, lanIf, wanIf); v != Accept {
		t.Fatalf("ACK: %v", v)
	}
	return s.Port()
}

// fragment4 splits an IPv4 packet (20-byte header) into fragments whose
// payload is at most size bytes (a multiple of 8).
func fragment4(pkt []byte, size int) [][]byte {
	payload := pkt[20:]
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := off + size
		mf := uint16(0x2000)
		if end >= len(payload) {
			end, mf = len(payload), 0
		}
		f := make([]byte, 20+end-off)
		copy(f, pkt[:20])
		copy(f[20:], payload[off:end])
		binary.BigEndian.PutUint16(f[2:], uint16(len(f)))
		binary.BigEndian.PutUint16(f[6:], mf|uint16(off/8))
		binary.BigEndian.PutUint16(f[10:], 0)
		binary.BigEndian.PutUint16(f[10:], ^checksum.Checksum(f[:20], 0))
		out = append(out, f)
	}
	return out
}

// reassemble4 rebuilds an IPv4 packet from fragments (any order).
func reassemble4(t testing.TB, frags [][]byte) []byte {
	t.Helper()
	var payload []byte
	var hdr []byte
	for _, f := range frags {
		mustVerify(t, f)
		off := int(binary.BigEndian.Uint16(f[6:])&0x1fff) * 8
		if off == 0 {
			hdr = append([]byte(nil), f[:20]...)
		}
		if need := off + len(f) - 20; need > len(payload) {
			payload = append(payload, make([]byte, need-len(payload))...)
		}
		copy(payload[off:], f[20:])
	}
	if hdr == nil {
		t.Fatal("no first fragment")
	}
	for _, f := range frags {
		if string(f[12:20]) != string(hdr[12:20]) {
			t.Fatalf("fragments disagree on addresses: % x vs % x", f[12:20], hdr[12:20])
		}
	}
	out := append(hdr, payload...)
	binary.BigEndian.PutUint16(out[2:], uint16(len(out)))
	binary.BigEndian.PutUint16(out[6:], 0)
	binary.BigEndian.PutUint16(out[10:], 0)
	binary.BigEndian.PutUint16(out[10:], ^checksum.Checksum(out[:20], 0))
	return out
}

type offloadedFlow struct {
	ext uint16 // external port of hostA:5000 -> remote:53
}

// offloadedUDP sets up an assured UDP flow hostA:5000 <-> remote:53 with
// both directions offloaded to the fast path.
func offloadedUDP(t testing.TB) (*Engine, *fakeclock.Clock, offloadedFlow) {
	t.Helper()
	e, clk := newTestEngine(t, 0, nil)
	ext := outboundUDP(t, e, hostA, 5000, remote, 53)
	reply := pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: ext}.build()
	fwd(t, e, reply, wanIf, lanIf)
	clk.Forward(3 * time.Second) // UDP is assured once it has lived 2 s with replies
	out := pk{src: hostA, dst: remote, proto: ProtoUDP, sport: 5000, dport: 53}.build()
	fwd(t, e, out, lanIf, wanIf)
	if !e.Offload(out, wanIf, macGw, macRtrW) {
		t.Fatalf("Offload(original direction) = false")
	}
	reply = pk{src: remote, dst: wanAddr, proto: ProtoUDP, sport: 53, dport: ext}.build()
	fwd(t, e, reply, wanIf, lanIf)
	if !e.Offload(reply, lanIf, macA, macRtrL) {
		t.Fatalf("Offload(reply direction) = false")
	}
	return e, clk, offloadedFlow{ext: ext}
}
