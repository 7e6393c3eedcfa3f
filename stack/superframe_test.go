package stack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// recWriter records the frames written to it (copies) and, if gso, takes
// superframes whole as a port with vnet headers does (hw.GSOWriter).
type recWriter struct {
	gso    bool
	mu     sync.Mutex
	frames [][]byte
	metas  []hw.GSO
	calls  int
}

func (w *recWriter) WriteFrames(frames [][]byte) (int, error) {
	return w.WriteFramesGSO(frames, nil)
}

func (w *recWriter) GSOMaxSize() int {
	if w.gso {
		return hw.MaxGSOFrameLen
	}
	return 0
}

func (w *recWriter) WriteFramesGSO(frames [][]byte, gso []hw.GSO) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	for i, f := range frames {
		w.frames = append(w.frames, bytes.Clone(f))
		var g hw.GSO
		if gso != nil {
			g = gso[i]
		}
		w.metas = append(w.metas, g)
	}
	return len(frames), nil
}

func (w *recWriter) take() ([][]byte, []hw.GSO) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f, m := w.frames, w.metas
	w.frames, w.metas = nil, nil
	return f, m
}

// decoded is a frame as gopacket, an independent decoder, reads it.
type decoded struct {
	src, dst netip.Addr
	tcp      *layers.TCP
	udp      *layers.UDP
	payload  []byte
}

// decodeSegment decodes an Ethernet frame (tags allowed) with gopacket and
// fails t unless it is IPv4 or IPv6 with TCP or UDP whose checksums
// (IPv4 header and L4) gopacket finds right.
func decodeSegment(t *testing.T, frame []byte) decoded {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	var d decoded
	switch n := p.NetworkLayer().(type) {
	case *layers.IPv4:
		d.src, _ = netip.AddrFromSlice(n.SrcIP)
		d.dst, _ = netip.AddrFromSlice(n.DstIP)
	case *layers.IPv6:
		d.src, _ = netip.AddrFromSlice(n.SrcIP)
		d.dst, _ = netip.AddrFromSlice(n.DstIP)
	default:
		t.Fatalf("no IP layer in % x", frame[:min(len(frame), 64)])
	}
	if l := p.Layer(layers.LayerTypeTCP); l != nil {
		d.tcp = l.(*layers.TCP)
		d.tcp.SetNetworkLayerForChecksum(p.NetworkLayer())
		d.payload = d.tcp.Payload
	} else if l := p.Layer(layers.LayerTypeUDP); l != nil {
		d.udp = l.(*layers.UDP)
		d.udp.SetNetworkLayerForChecksum(p.NetworkLayer())
		d.payload = d.udp.Payload
	} else {
		t.Fatal("neither TCP nor UDP")
	}
	if err, bad := p.VerifyChecksums(); err != nil || len(bad) != 0 {
		t.Fatalf("gopacket finds checksums wrong: %v %v", err, bad)
	}
	return d
}

// superLab is a NAT lab with an established TCP flow from B to A through
// the port forward wanIP4:8080 → aIP4:80 (DNAT: the rewrite changes a
// port; the address change of the lab's two addresses happens to leave
// the checksum as it was), offloaded, the LAN interface writing to w.
// Superframes are B's, built from scratch at sequence numbers far from
// the real connection's (whose retransmissions, now that A no longer
// answers, ours filters out).
type superLab struct {
	l     *lab
	nat   *natengine.Engine
	w     *recWriter
	bport uint16
	mss   int
	seq   uint32
}

func newSuperLab(t *testing.T, gso bool) *superLab {
	t.Helper()
	l, nat := newNATLab(t, []natengine.Forward{{Proto: natengine.ProtoTCP, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(aIP4, 80)}})
	peers := remoteServer(t, l.a, netip.AddrPortFrom(aIP4, 80))
	c := dial(t, l.b, netip.AddrPortFrom(wanIP4, 8080))
	exchange(t, c, 64<<10)
	peer(t, peers)
	s := &superLab{l: l, nat: nat, w: &recWriter{gso: gso}, mss: 1460, seq: 0x40000000}
	s.bport = netip.MustParseAddrPort(c.LocalAddr().String()).Port()
	cfg := l.config()
	cfg.Interfaces[0].Writer = s.w
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	// One segment of B's through the slow path offloads the flow again
	// (Apply made it stale).
	c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("offload again")); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; {
		if out, _ := s.w.take(); len(out) > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("B's segment did not reach the LAN writer")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// B's real stack must send nothing more: its segment is never
	// acknowledged (the LAN writer took it), and a retransmission would
	// both count on the router and enter the WAN interface on queue 0
	// while a test injects there (calls for one queue must not overlap).
	if err := l.b.Stack.DisableNIC(l.b.NIC); err != nil {
		t.Fatalf("DisableNIC: %s", err)
	}
	// What B queued before that still arrives: wait until 50 ms pass
	// without a frame at the LAN writer.
	for quiet := 0; quiet < 10; {
		time.Sleep(5 * time.Millisecond)
		if out, _ := s.w.take(); len(out) > 0 {
			quiet = 0
		} else {
			quiet++
		}
	}
	return s
}

// superframe builds a superframe of B's flow to the port forward: n
// pseudo-random payload bytes at sequence number s.seq, with the
// partial checksum a TSO sender leaves (the pseudo-header sum), and its
// GSO metadata; flags are the TCP flags.
func (s *superLab) superframe(n int, flags uint8, seed uint64) ([]byte, hw.GSO) {
	const h = 14 + 20 + 20
	f := make([]byte, h+n)
	copy(f, wanMAC)
	copy(f[6:], bMAC)
	binary.BigEndian.PutUint16(f[12:], uint16(header.IPv4ProtocolNumber))
	ip := header.IPv4(f[14:])
	ip.Encode(&header.IPv4Fields{
		TotalLength: uint16(len(ip)), ID: 0x1234, Flags: header.IPv4FlagDontFragment, TTL: 64,
		Protocol: uint8(header.TCPProtocolNumber),
		SrcAddr:  tcpip.AddrFrom4(bIP4.As4()), DstAddr: tcpip.AddrFrom4(wanIP4.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	tcp := header.TCP(ip[20:])
	tcp.Encode(&header.TCPFields{
		SrcPort: s.bport, DstPort: 8080, SeqNum: s.seq, AckNum: 1,
		DataOffset: 20, Flags: header.TCPFlags(flags), WindowSize: 65535,
	})
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	rng.Read(f[h:])
	tcp.SetChecksum(header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(tcp))))
	return f, hw.GSO{Type: hw.GSOTCPv4, Size: uint16(s.mss), HdrLen: h, NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
}

func (s *superLab) inject(f []byte, g hw.GSO) {
	s.l.r.Interface("wan").HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f), CsumPartial: g.NeedsCsum, GSO: g}})
}

// ours takes what the LAN writer got, without the real connection's
// frames (retransmissions of B's, at its own sequence numbers).
func (s *superLab) ours(t *testing.T) ([][]byte, []hw.GSO) {
	t.Helper()
	f, m, _ := s.oursAndOthers(t)
	return f, m
}

// oursAndOthers is ours, and how many frames of the real connection the
// LAN writer got besides (each a fast-path hit or a packet through
// netstack of the router's: B's delayed ACK may still arrive).
func (s *superLab) oursAndOthers(t *testing.T) (ours [][]byte, metas []hw.GSO, others int) {
	t.Helper()
	frames, gsos := s.w.take()
	for i, fr := range frames {
		if len(fr) < 14+20+20 || fr[14+9] != protoTCP || binary.BigEndian.Uint32(fr[14+20+4:])-s.seq >= 1<<24 {
			others++
			continue
		}
		ours, metas = append(ours, fr), append(metas, gsos[i])
	}
	return ours, metas, others
}

// checkSegments checks that segs, decoded by gopacket, are the wire
// frames of superframe orig (sent by B) after the port forward's DNAT:
// each fits the MTU, has right checksums, the translated destination,
// consecutive sequence numbers and the flags TCP segmentation gives, and
// together they carry orig's payload.
func (s *superLab) checkSegments(t *testing.T, segs [][]byte, orig []byte) {
	t.Helper()
	const h = 14 + 20 + 20
	want := orig[h:]
	if n := (len(want) + s.mss - 1) / s.mss; len(segs) != n {
		t.Fatalf("%d segments, want %d", len(segs), n)
	}
	flags := orig[14+20+13]
	var payload []byte
	for i, f := range segs {
		if len(f) > 14+1500 {
			t.Fatalf("segment %d is %d bytes, over the MTU", i, len(f))
		}
		d := decodeSegment(t, f)
		if d.src != bIP4 || d.dst != aIP4 || uint16(d.tcp.SrcPort) != s.bport || d.tcp.DstPort != 80 {
			t.Fatalf("segment %d: %s:%d → %s:%d, want %s:%d → %s:80", i, d.src, d.tcp.SrcPort, d.dst, d.tcp.DstPort, bIP4, s.bport, aIP4)
		}
		if d.tcp.Seq != s.seq+uint32(len(payload)) {
			t.Fatalf("segment %d: seq %d, want %d", i, d.tcp.Seq, s.seq+uint32(len(payload)))
		}
		last := i == len(segs)-1
		if d.tcp.PSH != (last && flags&0x08 != 0) || d.tcp.FIN || !d.tcp.ACK {
			t.Errorf("segment %d: PSH %v FIN %v ACK %v", i, d.tcp.PSH, d.tcp.FIN, d.tcp.ACK)
		}
		payload = append(payload, d.payload...)
	}
	if !bytes.Equal(payload, want) {
		t.Fatalf("segments carry %d payload bytes differing from the superframe's %d", len(payload), len(want))
	}
}

// TestSuperframeFastPathSegmented: a superframe of an offloaded flow
// takes the fast path whole and, the WAN writer taking no superframes,
// leaves as wire frames cut in software with complete checksums.
func TestSuperframeFastPathSegmented(t *testing.T) {
	s := newSuperLab(t, false)
	hits := s.nat.Stats().FastPathHits.Load()
	rx := s.l.r.Stack().Stats().IP.PacketsReceived.Value()
	f, g := s.superframe(30*s.mss+100, 0x18, 1) // ACK, PSH
	orig := bytes.Clone(f)
	s.inject(f, g)
	segs, metas, others := s.oursAndOthers(t)
	s.checkSegments(t, segs, orig)
	for i, m := range metas {
		if m != (hw.GSO{}) {
			t.Errorf("segment %d sent with metadata %+v", i, m)
		}
	}
	// Each frame of the real connection's the writer got (some maybe
	// before hits was read) took the fast path or netstack; the
	// superframe took the fast path once.
	hitsD := s.nat.Stats().FastPathHits.Load() - hits
	rxD := s.l.r.Stack().Stats().IP.PacketsReceived.Value() - rx
	if hitsD < 1 || hitsD+rxD > 1+uint64(others) {
		t.Errorf("fast-path hits +%d, netstack +%d, with %d frames of the real connection: want the superframe as one hit", hitsD, rxD, others)
	}
	lan, wan := s.l.r.Interface("lan").Stats(), s.l.r.Interface("wan").Stats()
	if wan.GSO.Received != 1 || lan.GSO.Segmented != 1 || lan.GSO.SentWhole != 0 {
		t.Errorf("GSO counters wan %+v lan %+v; want 1 received on wan, 1 segmented on lan", wan.GSO, lan.GSO)
	}
}

// TestSuperframeFastPathWhole: with a WAN writer that takes superframes
// (a port with vnet headers), the fast path sends the superframe on
// whole, NATed, with its virtio-net header: the segment size it came
// with and the partial checksum at the TCP checksum, which must be the
// pseudo-header sum of the new addresses (completed over the segment it
// is right).
func TestSuperframeFastPathWhole(t *testing.T) {
	s := newSuperLab(t, true)
	f, g := s.superframe(40*s.mss, 0x10, 2)
	orig := bytes.Clone(f)
	s.inject(f, g)
	out, metas := s.ours(t)
	if len(out) != 1 {
		t.Fatalf("%d frames sent, want the superframe whole", len(out))
	}
	got, m := out[0], metas[0]
	want := hw.GSO{Type: hw.GSOTCPv4, Size: uint16(s.mss), HdrLen: g.HdrLen, NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
	if m != want {
		t.Errorf("sent with %+v, want %+v", m, want)
	}
	if len(got) != len(orig) || !bytes.Equal(got[g.HdrLen:], orig[g.HdrLen:]) {
		t.Fatalf("superframe of %d bytes sent as %d, or its payload changed", len(orig), len(got))
	}
	// Complete the checksum as the segmenting kernel would, then let
	// gopacket judge the whole superframe.
	l4 := got[34:]
	binary.BigEndian.PutUint16(l4[16:], ^checksumOf(l4))
	d := decodeSegment(t, got)
	if d.dst != aIP4 || d.tcp.DstPort != 80 {
		t.Errorf("sent to %s:%d, want %s:80", d.dst, d.tcp.DstPort, aIP4)
	}
	if lan := s.l.r.Interface("lan").Stats(); lan.GSO.SentWhole != 1 || lan.GSO.Segmented != 0 {
		t.Errorf("lan GSO counters %+v, want 1 sent whole", lan.GSO)
	}
}

// TestSuperframeSlowPathSegmented: a superframe whose flow is not
// offloaded (the fast path was invalidated) is cut into wire frames
// before anything else sees it; the first segment goes through netstack,
// which offloads the flow again, and the rest take the fast path. All
// leave in order, intact.
func TestSuperframeSlowPathSegmented(t *testing.T) {
	s := newSuperLab(t, true)
	s.nat.InvalidateFastPath()
	rx := s.l.r.Stack().Stats().IP.PacketsReceived.Value()
	f, g := s.superframe(12*s.mss+1, 0x18, 3)
	orig := bytes.Clone(f)
	s.inject(f, g)
	segs, metas := s.ours(t)
	s.checkSegments(t, segs, orig)
	for i, m := range metas {
		if m != (hw.GSO{}) {
			t.Errorf("segment %d sent with metadata %+v", i, m)
		}
	}
	if d := s.l.r.Stack().Stats().IP.PacketsReceived.Value() - rx; d < 1 || d >= uint64(len(segs)) {
		t.Errorf("netstack received %d of the %d segments, want the first few only", d, len(segs))
	}
	if wan := s.l.r.Interface("wan").Stats(); wan.GSO.Received != 1 || wan.GSO.Segmented != 1 {
		t.Errorf("wan GSO counters %+v, want 1 received and segmented", wan.GSO)
	}
}

// TestSuperframeMalformed: superframes whose headers disagree with their
// virtio-net header are counted drops, and nothing leaves.
func TestSuperframeMalformed(t *testing.T) {
	s := newSuperLab(t, true)
	for _, tc := range []struct {
		name string
		edit func(f []byte, g *hw.GSO)
	}{
		{"type tcpv6 on IPv4", func(f []byte, g *hw.GSO) { g.Type = hw.GSOTCPv6 }},
		{"udp type on TCP", func(f []byte, g *hw.GSO) { g.Type = hw.GSOUDPL4 }},
		{"checksum offset", func(f []byte, g *hw.GSO) { g.CsumOffset = 6 }},
		{"checksum start", func(f []byte, g *hw.GSO) { g.CsumStart = 14 }},
		{"IPv4 options", func(f []byte, g *hw.GSO) { f[14] = 0x46 }},
		{"IPv4 fragment", func(f []byte, g *hw.GSO) { f[14+6] |= 0x20 }},
		{"length past the frame", func(f []byte, g *hw.GSO) { binary.BigEndian.PutUint16(f[14+2:], 65000) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := s.l.r.Interface("wan").Stats().Drops["gso_malformed"]
			f, g := s.superframe(5*s.mss, 0x10, 4)
			tc.edit(f, &g)
			s.inject(f, g)
			if out, _ := s.ours(t); len(out) != 0 {
				t.Errorf("%d frames sent, want none", len(out))
			}
			if d := s.l.r.Interface("wan").Stats().Drops["gso_malformed"] - before; d != 1 {
				t.Errorf("gso_malformed +%d, want +1", d)
			}
		})
	}
}

// countWriter counts frames over 1000 bytes (not B's retransmissions of
// its last small segment, which A no longer acknowledges) and keeps
// nothing; gso as recWriter.
type countWriter struct {
	gso    bool
	frames atomic.Int64
}

func (w *countWriter) WriteFrames(frames [][]byte) (int, error) {
	for _, f := range frames {
		if len(f) > 1000 {
			w.frames.Add(1)
		}
	}
	return len(frames), nil
}

func (w *countWriter) GSOMaxSize() int {
	if w.gso {
		return hw.MaxGSOFrameLen
	}
	return 0
}

func (w *countWriter) WriteFramesGSO(frames [][]byte, _ []hw.GSO) (int, error) {
	return w.WriteFrames(frames)
}

// TestSuperframeAllocs: a superframe through the fast path allocates
// nothing, sent whole or cut in software.
func TestSuperframeAllocs(t *testing.T) {
	for _, whole := range []bool{true, false} {
		s := newSuperLab(t, whole)
		w := &countWriter{gso: whole}
		cfg := s.l.config()
		cfg.Interfaces[0].Writer = w
		if err := s.l.r.Apply(cfg); err != nil {
			t.Fatal(err)
		}
		wan := s.l.r.Interface("wan")
		// A plain frame of the flow through the slow path offloads it
		// again (Apply made it stale).
		plain, _ := s.superframe(100, 0x10, 6)
		wan.HandleBatch(0, []hw.Frame{{Data: plain, WireLen: len(plain), CsumPartial: true}})
		f, g := s.superframe(40*s.mss, 0x10, 5)
		orig := bytes.Clone(f)
		frames := []hw.Frame{{Data: f, WireLen: len(f), CsumPartial: true, GSO: g}}
		hits := s.nat.Stats().FastPathHits.Load()
		sent := w.frames.Load()
		a := testing.AllocsPerRun(50, func() {
			copy(f, orig)
			wan.HandleBatch(0, frames)
		})
		switch {
		case raceEnabled && !whole:
			// 40 pooled buffers per call, a quarter of them dropped.
			t.Logf("whole %v: %v allocations per superframe under -race", whole, a)
		case a != 0:
			t.Errorf("whole %v: %v allocations per superframe, want 0", whole, a)
		}
		if d := s.nat.Stats().FastPathHits.Load() - hits; d < 51 {
			t.Errorf("whole %v: fast-path hits +%d, want +51 (and B's retransmissions)", whole, d)
		}
		per := 40
		if whole {
			per = 1
		}
		if d := w.frames.Load() - sent; d != int64(51*per) {
			t.Errorf("whole %v: %d frames sent, want %d", whole, d, 51*per)
		}
	}
}

// checksumOf is the one's complement sum of b.
func checksumOf(b []byte) uint16 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// rawSuperframe builds an untagged superframe from scratch: IPv4 or IPv6,
// TCP or UDP, n pseudo-random payload bytes, the partial checksum, and
// its GSO metadata with segment size size.
func rawSuperframe(v6, udp bool, n, size int) ([]byte, hw.GSO) {
	ipLen, l4Len := 20, 20
	et := header.IPv4ProtocolNumber
	if v6 {
		ipLen, et = 40, header.IPv6ProtocolNumber
	}
	proto := header.TCPProtocolNumber
	if udp {
		l4Len, proto = 8, header.UDPProtocolNumber
	}
	h := 14 + ipLen + l4Len
	f := make([]byte, h+n)
	copy(f, bMAC)
	copy(f[6:], wanMAC)
	binary.BigEndian.PutUint16(f[12:], uint16(et))
	ip := f[14:]
	var src, dst tcpip.Address
	if v6 {
		src, dst = tcpip.AddrFrom16(aIP6.As16()), tcpip.AddrFrom16(bIP6.As16())
		header.IPv6(ip).Encode(&header.IPv6Fields{PayloadLength: uint16(len(ip) - 40), TransportProtocol: proto, HopLimit: 63, SrcAddr: src, DstAddr: dst})
	} else {
		src, dst = tcpip.AddrFrom4(wanIP4.As4()), tcpip.AddrFrom4(bIP4.As4())
		h4 := header.IPv4(ip)
		h4.Encode(&header.IPv4Fields{TotalLength: uint16(len(ip)), ID: 7, TTL: 63, Protocol: uint8(proto), SrcAddr: src, DstAddr: dst})
		h4.SetChecksum(^h4.CalculateChecksum())
	}
	l4 := ip[ipLen:]
	rng := rand.NewChaCha8([32]byte{9})
	rng.Read(f[h:])
	ps := header.PseudoHeaderChecksum(proto, src, dst, uint16(len(l4)))
	g := hw.GSO{Size: uint16(size), HdrLen: uint16(h), NeedsCsum: true, CsumStart: uint16(14 + ipLen)}
	if udp {
		header.UDP(l4).Encode(&header.UDPFields{SrcPort: 4433, DstPort: 443, Length: uint16(len(l4))})
		header.UDP(l4).SetChecksum(ps)
		g.Type, g.CsumOffset = hw.GSOUDPL4, 6
	} else {
		header.TCP(l4).Encode(&header.TCPFields{SrcPort: 40000, DstPort: 5201, SeqNum: 1000, AckNum: 1, DataOffset: 20, Flags: header.TCPFlagAck | header.TCPFlagPsh, WindowSize: 1000})
		header.TCP(l4).SetChecksum(ps)
		g.Type, g.CsumOffset = hw.GSOTCPv4, 16
		if v6 {
			g.Type = hw.GSOTCPv6
		}
	}
	return f, g
}

// TestSuperframeEgress: appendSuperLocked on an endpoint with a VLAN tag
// (PCP from the ingress kept), for IPv4 and IPv6 TCP and UDP: a writer
// that takes superframes gets TCP whole, tagged, its checksum offsets
// moved by the tag; UDP (USO) and any superframe for a writer without
// vnet headers leave as wire frames, each tagged and with complete
// checksums (gopacket), UDP as datagrams of exactly the segment size.
func TestSuperframeEgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v6, udp bool
		size    int
	}{
		{"tcpv4", false, false, 1448},
		{"tcpv6", true, false, 1428},
		{"udpv4", false, true, 1200},
		{"udpv6", true, true, 1000},
	} {
		for _, gso := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/gso=%v", tc.name, gso), func(t *testing.T) {
				w := &recWriter{gso: gso}
				var local atomic.Pointer[localSet]
				e := newEndpoint(wanMAC, 1500, w, &local)
				e.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{7}, PCP: 1}))
				n := 20*tc.size + 333
				f, g := rawSuperframe(tc.v6, tc.udp, n, tc.size)
				orig := bytes.Clone(f)
				e.txMu.Lock()
				fw := e.writer.Load()
				e.appendSuperLocked(fw, f, 5, &g, true)
				e.sendPendingLocked(fw)
				e.txMu.Unlock()
				out, metas := w.take()
				tag := func(i int, fr []byte) {
					t.Helper()
					if binary.BigEndian.Uint16(fr[12:]) != TPID8021Q || binary.BigEndian.Uint16(fr[14:]) != 5<<13|7 || !bytes.Equal(fr[16:18], orig[12:14]) {
						t.Fatalf("frame %d: tag % x, want 81 00 and PCP 5 VID 7 before the Ethertype", i, fr[12:18])
					}
				}
				if gso && !tc.udp {
					if len(out) != 1 {
						t.Fatalf("%d frames, want the superframe whole", len(out))
					}
					tag(0, out[0])
					want := g
					want.CsumStart += 4
					want.HdrLen += 4
					if metas[0] != want {
						t.Errorf("metadata %+v, want %+v", metas[0], want)
					}
					if !bytes.Equal(out[0][18:], orig[14:]) {
						t.Error("superframe changed beyond the tag")
					}
					return
				}
				hdr := int(g.HdrLen) - 14
				var payload []byte
				for i, fr := range out {
					if metas[i] != (hw.GSO{}) || len(fr) > 18+1500 {
						t.Fatalf("frame %d: %d bytes with %+v, want a plain frame of the MTU", i, len(fr), metas[i])
					}
					tag(i, fr)
					d := decodeSegment(t, fr)
					if tc.udp && i < len(out)-1 && len(d.payload) != tc.size {
						t.Errorf("datagram %d carries %d bytes, want %d", i, len(d.payload), tc.size)
					}
					if d.tcp != nil && d.tcp.Seq != 1000+uint32(len(payload)) {
						t.Errorf("segment %d seq %d, want %d", i, d.tcp.Seq, 1000+len(payload))
					}
					payload = append(payload, d.payload...)
				}
				if len(out) != (n+tc.size-1)/tc.size || !bytes.Equal(payload, orig[14+hdr:]) {
					t.Errorf("%d frames carrying %d bytes, want %d carrying the superframe's %d", len(out), len(payload), (n+tc.size-1)/tc.size, n)
				}
				if e.stats.gsoSegmented.Load() != 1 {
					t.Errorf("segmented %d, want 1", e.stats.gsoSegmented.Load())
				}
			})
		}
	}
}

// TestSuperframeEgressMTUSmaller: a superframe whose segments do not fit
// the egress MTU is not the fast path's (SlowMTU): it is cut at the
// ingress and netstack, seeing segments with DF over the egress MTU,
// answers each with Fragmentation Needed quoting the LAN's MTU, as Linux
// does for GSO packets it cannot forward (ip_exceeds_mtu on the
// segments' size); nothing goes out to the LAN.
func TestSuperframeEgressMTUSmaller(t *testing.T) {
	s := newSuperLab(t, true)
	lanID, _ := s.l.r.NATIface("lan")
	wanID, _ := s.l.r.NATIface("wan")
	if err := s.nat.SetRules(natengine.Rules{
		Ifaces: []natengine.IfaceConfig{
			{ID: lanID, Name: "lan", Addrs: []netip.Addr{lanIP4, lanIP6}, MTU: 1400},
			{ID: wanID, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanIP4, netip.MustParseAddr("fd00:2::1")}, MTU: 1500},
		},
		Forwards: []natengine.Forward{{Proto: natengine.ProtoTCP, In: wanID, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(aIP4, 80)}},
		Hairpin:  true,
	}); err != nil {
		t.Fatal(err)
	}
	cfg := s.l.config()
	cfg.Interfaces[0].Writer = s.w
	cfg.Interfaces[0].MTU = 1400
	if err := s.l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	// A small segment of the flow through the slow path offloads it
	// again, now with the LAN's 1400-byte MTU (Apply made it stale).
	small, _ := s.superframe(100, 0x10, 8)
	s.l.r.Interface("wan").HandleBatch(0, []hw.Frame{{Data: small, WireLen: len(small), CsumPartial: true}})
	if out, _ := s.ours(t); len(out) != 1 {
		t.Fatalf("the small segment: %d frames to the LAN, want 1", len(out))
	}
	mtu0 := s.nat.Stats().Slow[natengine.SlowMTU].Load()
	f, g := s.superframe(8*s.mss, 0x10, 7)
	s.inject(f, g)
	if out, _ := s.ours(t); len(out) != 0 {
		t.Errorf("%d frames sent to the LAN over its 1400-byte MTU, want none", len(out))
	}
	if s.nat.Stats().Slow[natengine.SlowMTU].Load() == mtu0 {
		t.Error("the fast path did not hand the superframe back for its MTU")
	}
	icmp := s.l.tapB.Wait(ctxTimeout(t, 5*time.Second), icmpFrom(wanIP4, header.ICMPv4DstUnreachable))
	if icmp == nil {
		t.Fatal("no Fragmentation Needed reached B")
	}
	if m := header.ICMPv4(icmp[14+20:]); m.Code() != header.ICMPv4FragmentationNeeded || m.MTU() != 1400 {
		t.Errorf("ICMP code %d MTU %d, want Fragmentation Needed with MTU 1400", m.Code(), m.MTU())
	}
}

// gsoLendWriter is a port with vnet headers that sends from the memory
// frames are received in (an AF_PACKET port's rings, hw.Port.ExtendFrame):
// it takes superframes whole and records where each one lay in mem.
type gsoLendWriter struct {
	recWriter
	lend *lendWriter
	offs []int
}

func (w *gsoLendWriter) ExtendFrame(f []byte, head int) []byte { return w.lend.ExtendFrame(f, head) }

func (w *gsoLendWriter) WriteFramesGSO(frames [][]byte, gso []hw.GSO) (int, error) {
	for _, f := range frames {
		w.offs = append(w.offs, w.lend.offset(f))
	}
	return w.recWriter.WriteFramesGSO(frames, gso)
}

// TestSuperframeTagsInPlace: inside a receive batch, a superframe that
// leaves a tagged interface whole gets its tag pushed in front of it
// where it lies when the writer lends the room (4 octets before where it
// arrived), as appendFastLocked does for plain frames, and is copied
// when it comes from other memory; the same bytes and metadata leave
// either way.
func TestSuperframeTagsInPlace(t *testing.T) {
	const at = 256
	f, g := rawSuperframe(false, false, 20*1448+333, 1448)
	var sent [][]byte
	for _, inMem := range []bool{true, false} {
		w := &gsoLendWriter{recWriter: recWriter{gso: true}, lend: &lendWriter{mem: make([]byte, at+len(f))}}
		var local atomic.Pointer[localSet]
		e := newEndpoint(wanMAC, 1500, w, &local)
		e.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{7}, PCP: 1}))
		e.tx = new(txBatcher)
		e.tx.begin()
		in := bytes.Clone(f)
		if inMem {
			in = w.lend.received(f, at)
		}
		gg := g
		e.txMu.Lock()
		fw := e.writer.Load()
		e.appendSuperLocked(fw, in, 5, &gg, false)
		e.sendPendingLocked(fw)
		e.txMu.Unlock()
		out, metas := w.take()
		if len(out) != 1 || metas[0].Type != g.Type || metas[0].CsumStart != g.CsumStart+4 {
			t.Fatalf("in memory %v: %d frames (%+v), want the superframe whole with its offsets 4 on", inMem, len(out), metas)
		}
		wantOff := -1
		if inMem {
			wantOff = at - 4
		}
		if w.offs[0] != wantOff {
			t.Errorf("in memory %v: superframe sent from offset %d of the receive memory, want %d (-1: a copy)", inMem, w.offs[0], wantOff)
		}
		sent = append(sent, out[0])
	}
	if !bytes.Equal(sent[0], sent[1]) {
		t.Error("the superframe tagged in place differs from the copied one")
	}
}
