package stack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// tcpFlow builds n consecutive TCP segments of size payload bytes each,
// with a timestamp option, from src to dst (both IPv4 or both IPv6), as
// network-layer packets with correct checksums. Payload byte j of the flow
// is byte(j*7 + j/251).
func tcpFlow(src, dst netip.Addr, seq uint32, n, size int) [][]byte {
	var pkts [][]byte
	for i := range n {
		tcp := make([]byte, 32+size)
		header.TCP(tcp).Encode(&header.TCPFields{
			SrcPort: 40000, DstPort: 5201, SeqNum: seq + uint32(i*size), AckNum: 77,
			DataOffset: 32, Flags: header.TCPFlagAck, WindowSize: 500,
		})
		copy(tcp[20:], []byte{1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 3})
		for j := range size {
			k := i*size + j
			tcp[32+j] = byte(k*7 + k/251)
		}
		if src.Is4() {
			pkts = append(pkts, ipv4Packet(src, dst, 64, header.TCPProtocolNumber, tcp))
		} else {
			pkts = append(pkts, ipv6Packet(src, dst, 64, header.TCPProtocolNumber, tcp))
		}
	}
	return pkts
}

func flowFrames(pkts [][]byte) []hw.Frame {
	var frames []hw.Frame
	for _, p := range pkts {
		et := header.IPv4ProtocolNumber
		if p[0]>>4 == 6 {
			et = header.IPv6ProtocolNumber
		}
		f := ethFrame(routerMAC, hostMAC, et, p)
		frames = append(frames, hw.Frame{Data: f, WireLen: len(f)})
	}
	return frames
}

// checkTCPPacket fails t unless ip (an IPv4 or IPv6 packet carrying TCP)
// has a correct IPv4 header checksum and TCP checksum, both recomputed in
// full here, and returns its TCP header and payload.
func checkTCPPacket(t *testing.T, ip []byte) (tcp header.TCP, payload []byte) {
	t.Helper()
	var src, dst, l4 []byte
	if ip[0]>>4 == 4 {
		h := header.IPv4(ip)
		if int(h.TotalLength()) != len(ip) {
			t.Fatalf("IPv4 total length %d, packet %d bytes", h.TotalLength(), len(ip))
		}
		var c [20]byte
		copy(c[:], ip[:20])
		c[10], c[11] = 0, 0
		if want := ^checksum.Checksum(c[:], 0); h.Checksum() != want {
			t.Errorf("IPv4 header checksum %#04x, want %#04x", h.Checksum(), want)
		}
		src, dst, l4 = ip[12:16], ip[16:20], ip[20:]
	} else {
		if n := 40 + int(binary.BigEndian.Uint16(ip[4:])); n != len(ip) {
			t.Fatalf("IPv6 length %d, packet %d bytes", n, len(ip))
		}
		src, dst, l4 = ip[8:24], ip[24:40], ip[40:]
	}
	c := bytes.Clone(l4)
	setL4Checksum(src, dst, protoTCP, c)
	tcp = header.TCP(l4)
	if got, want := tcp.Checksum(), header.TCP(c).Checksum(); got != want {
		t.Errorf("TCP checksum %#04x, want %#04x", got, want)
	}
	return tcp, l4[tcp.DataOffset():]
}

// TestGROModes feeds one batch of a TCP flow to the router's own address
// and one to a forwarded address, for each mode and IP version.
func TestGROModes(t *testing.T) {
	const n = 8
	for _, v6 := range []bool{false, true} {
		src, local, far, size := hostIP4, routerIP4, farIP4, 1448
		if v6 {
			src, local, far, size = hostIP6, routerIP6, farIP6, 1428
		}
		for _, tc := range []struct {
			mode              GROMode
			dst               netip.Addr
			wantPkts          int
			coalesced, bypass uint64
		}{
			{GROOff, local, n, 0, 0},
			{GROOff, far, n, 0, 0},
			{GROSelective, local, 1, n - 1, 0},
			{GROSelective, far, n, 0, n},
			{GROOn, local, 1, n - 1, 0},
			{GROOn, far, 1, n - 1, 0},
		} {
			forwarded := tc.dst == far
			t.Run(fmt.Sprintf("v6=%v/%s/forwarded=%v", v6, tc.mode, forwarded), func(t *testing.T) {
				var d recordingDispatcher
				e := testEndpoint(&d)
				e.gro.Store(uint32(tc.mode))
				in := tcpFlow(src, tc.dst, 1000, n, size)
				e.HandleBatch(0, flowFrames(in))
				if len(d.pkts) != tc.wantPkts {
					t.Fatalf("delivered %d packets, want %d", len(d.pkts), tc.wantPkts)
				}
				var s InterfaceStats
				e.stats.fill(&s)
				if s.GRO.Coalesced != tc.coalesced || s.GRO.BypassedForward != tc.bypass {
					t.Errorf("GRO stats = %+v, want coalesced %d, bypassed %d", s.GRO, tc.coalesced, tc.bypass)
				}
				// Terminated packets are verified in software (the port
				// did not validate them); forwarded ones only under GROOn,
				// which rewrites their checksums.
				wantVerified := uint64(0)
				if !forwarded || tc.mode == GROOn {
					wantVerified = n
				}
				if s.GRO.ChecksumVerified != wantVerified || s.GRO.ChecksumBad != 0 {
					t.Errorf("checksums verified %d, bad %d; want %d, 0", s.GRO.ChecksumVerified, s.GRO.ChecksumBad, wantVerified)
				}
				if tc.wantPkts == n {
					// Per packet, headers and all untouched.
					for i := range in {
						if !bytes.Equal(d.pkts[i].l3, in[i]) {
							t.Fatalf("packet %d changed:\n got %x\nwant %x", i, d.pkts[i].l3, in[i])
						}
					}
					return
				}
				tcp, payload := checkTCPPacket(t, d.pkts[0].l3)
				if tcp.SequenceNumber() != 1000 || len(payload) != n*size {
					t.Errorf("merged seq %d, %d payload bytes; want 1000, %d", tcp.SequenceNumber(), len(payload), n*size)
				}
				for i := range in {
					if want := in[i][len(in[i])-size:]; !bytes.Equal(payload[i*size:(i+1)*size], want) {
						t.Fatalf("merged payload of segment %d differs", i)
					}
				}
				if s.GRO.Flushed != 1 {
					t.Errorf("flushed = %d, want 1", s.GRO.Flushed)
				}
			})
		}
	}
}

// TestGROFlushesEveryFlow: one batch of segments of more flows than
// gVisor's GRO has buckets (so two share one) all reach netstack in that
// batch (found by FuzzRouter: gVisor's Flush leaves all but the first
// packet of a bucket behind).
func TestGROFlushesEveryFlow(t *testing.T) {
	const flows = 12
	var frames []hw.Frame
	for i := range flows {
		tcp := make([]byte, 20+100)
		header.TCP(tcp).Encode(&header.TCPFields{SrcPort: 40000 + uint16(i), DstPort: 5201, SeqNum: 1, AckNum: 1, DataOffset: 20, Flags: header.TCPFlagAck, WindowSize: 500})
		frames = append(frames, flowFrames([][]byte{ipv4Packet(hostIP4, routerIP4, 64, header.TCPProtocolNumber, tcp)})...)
	}
	var d recordingDispatcher
	e := testEndpoint(&d)
	e.gro.Store(uint32(GROSelective))
	e.HandleBatch(0, frames)
	if len(d.pkts) != flows {
		t.Errorf("delivered %d packets of %d flows in their batch, want %d", len(d.pkts), flows, flows)
	}
}

// TestGROOnBadChecksumNotMerged checks that GROOn verifies forwarded
// segments and forwards a corrupt one untouched rather than give it a new
// checksum.
func TestGROOnBadChecksumNotMerged(t *testing.T) {
	var d recordingDispatcher
	e := testEndpoint(&d)
	e.gro.Store(uint32(GROOn))
	in := tcpFlow(hostIP4, farIP4, 1, 4, 1000)
	corrupt(in[1], 20+40)
	e.HandleBatch(0, flowFrames(in))
	var s InterfaceStats
	e.stats.fill(&s)
	if s.GRO.ChecksumVerified != 4 || s.GRO.ChecksumBad != 1 {
		t.Errorf("GRO stats = %+v, want 4 verified, 1 bad", s.GRO)
	}
	found := false
	for _, p := range d.pkts {
		if bytes.Equal(p.l3, in[1]) {
			found = true
		}
	}
	if !found {
		t.Errorf("corrupt segment not delivered as it came")
	}
}

// TestTCPSegmenter splits merged packets and checks every segment.
func TestTCPSegmenter(t *testing.T) {
	for _, tc := range []struct {
		v6             bool
		n, size        int
		mss, mtu       int
		flags          header.TCPFlags
		wantSegs       int
		wantLastLength int
	}{
		{false, 8, 1448, 1448, 1500, header.TCPFlagAck | header.TCPFlagPsh, 8, 1448},
		{false, 8, 1448, 1448, 1280, header.TCPFlagAck | header.TCPFlagFin | header.TCPFlagCwr, 10, 8*1448 - 9*1228},
		{true, 5, 1000, 1000, 9000, header.TCPFlagAck, 5, 1000},
		{true, 3, 1428, 1428, 1280, header.TCPFlagAck | header.TCPFlagPsh, 4, 3*1428 - 3*1208},
	} {
		t.Run(fmt.Sprintf("v6=%v/mtu=%d", tc.v6, tc.mtu), func(t *testing.T) {
			src, dst := hostIP4, farIP4
			if tc.v6 {
				src, dst = hostIP6, farIP6
			}
			// Merge by hand: the first packet's headers, all payloads.
			in := tcpFlow(src, dst, 0xfffff000, tc.n, tc.size)
			big := bytes.Clone(in[0])
			for _, p := range in[1:] {
				big = append(big, p[len(p)-tc.size:]...)
			}
			ipLen := 20
			if tc.v6 {
				ipLen = 40
				binary.BigEndian.PutUint16(big[4:], uint16(len(big)-40))
			} else {
				binary.BigEndian.PutUint16(big[2:], uint16(len(big)))
			}
			big[ipLen+13] = uint8(tc.flags)
			et := header.IPv4ProtocolNumber
			if tc.v6 {
				et = header.IPv6ProtocolNumber
			}
			frame := ethFrame(routerMAC, hostMAC, et, big)
			s, ok := newSegmenter(frame, 14, tc.mss, tc.mtu)
			if !ok {
				t.Fatal("newSegmenter refused the frame")
			}
			if s.count() != tc.wantSegs {
				t.Fatalf("count() = %d, want %d", s.count(), tc.wantSegs)
			}
			var payload []byte
			seq := uint32(0xfffff000)
			buf := make([]byte, 14+tc.mtu)
			for i := range s.count() {
				m := s.segment(i, buf)
				seg := buf[:m]
				if m > 14+tc.mtu {
					t.Fatalf("segment %d is %d bytes, MTU %d", i, m, tc.mtu)
				}
				if !bytes.Equal(seg[:14], frame[:14]) {
					t.Errorf("segment %d link header changed", i)
				}
				tcp, p := checkTCPPacket(t, seg[14:])
				if tcp.SequenceNumber() != seq {
					t.Errorf("segment %d seq %d, want %d", i, tcp.SequenceNumber(), seq)
				}
				seq += uint32(len(p))
				last := i == s.count()-1
				want := tc.flags
				if !last {
					want &^= header.TCPFlagFin | header.TCPFlagPsh
				}
				if i > 0 {
					want &^= header.TCPFlagCwr
				}
				if tcp.Flags() != want {
					t.Errorf("segment %d flags %s, want %s", i, tcp.Flags(), want)
				}
				if last && len(p) != tc.wantLastLength {
					t.Errorf("last segment %d bytes, want %d", len(p), tc.wantLastLength)
				}
				if !tc.v6 && header.IPv4(seg[14:]).ID() != 0x1234+uint16(i) {
					t.Errorf("segment %d IPv4 ID %#x, want %#x", i, header.IPv4(seg[14:]).ID(), 0x1234+i)
				}
				payload = append(payload, p...)
			}
			if want := big[ipLen+32:]; !bytes.Equal(payload, want) {
				t.Errorf("segments carry %d payload bytes, differing from the %d merged", len(payload), len(want))
			}
		})
	}
}

// forwardBatch injects one batch of a TCP flow from A to B into the lab's
// lan interface and returns the TCP frames B gets for it, in order, once
// want payload bytes have arrived (or after 5 s).
func (l *lab) forwardBatch(t *testing.T, in [][]byte, want int) [][]byte {
	t.Helper()
	var frames []hw.Frame
	for _, p := range in {
		et := header.IPv4ProtocolNumber
		if p[0]>>4 == 6 {
			et = header.IPv6ProtocolNumber
		}
		f := ethFrame(lanMAC, aMAC, et, p)
		frames = append(frames, hw.Frame{Data: f, WireLen: len(f)})
	}
	l.r.Interface("lan").HandleBatch(0, frames)
	var out [][]byte
	got := 0
	l.tapB.Wait(ctxTimeout(t, 5*time.Second), func(f []byte) bool {
		if len(f) < 14+20 {
			return false
		}
		var tcp []byte
		switch be16(f[12:]) {
		case uint16(header.IPv4ProtocolNumber):
			if f[14+9] != protoTCP {
				return false
			}
			tcp = f[14+20:]
		case uint16(header.IPv6ProtocolNumber):
			if f[14+6] != protoTCP {
				return false
			}
			tcp = f[14+40:]
		default:
			return false
		}
		if header.TCP(tcp).DestinationPort() != 5201 {
			return false
		}
		out = append(out, f)
		got += len(tcp) - int(header.TCP(tcp).DataOffset())
		return got >= want
	})
	if got != want {
		t.Fatalf("B got %d payload bytes, want %d", got, want)
	}
	return out
}

// TestGROOnSegmentsForwarded runs GROOn on the router: a forwarded batch
// is merged on lan and split again on wan to wan's smaller MTU, with
// correct checksums and sequence numbers; GROSelective passes the same
// batch on per packet with the TCP header and payload untouched.
func TestGROOnSegmentsForwarded(t *testing.T) {
	const n, wanMTU = 8, 1280
	for _, v6 := range []bool{false, true} {
		for _, mode := range []GROMode{GROOn, GROSelective} {
			t.Run(fmt.Sprintf("v6=%v/%s", v6, mode), func(t *testing.T) {
				l := newLab(t)
				src, dst, size, ipLen := aIP4, bIP4, 1448, 20
				if v6 {
					src, dst, size, ipLen = aIP6, bIP6, 1428, 40
				}
				ping(t, l.a, dst)
				cfg := l.config()
				for i := range cfg.Interfaces {
					cfg.Interfaces[i].GRO = mode
				}
				cfg.Interfaces[1].MTU = wanMTU
				if err := l.r.Apply(cfg); err != nil {
					t.Fatal(err)
				}
				in := tcpFlow(src, dst, 5000, n, size)
				if mode == GROSelective {
					// Both MTUs must fit a per-packet forward.
					in = tcpFlow(src, dst, 5000, n, 1200)
				}
				out := l.forwardBatch(t, in, payloadLen(in))
				seq := uint32(5000)
				for i, f := range out {
					if len(f) > 14+wanMTU {
						t.Errorf("frame %d is %d bytes, over MTU %d", i, len(f), wanMTU)
					}
					tcp, p := checkTCPPacket(t, f[14:])
					if tcp.SequenceNumber() != seq {
						t.Errorf("frame %d seq %d, want %d", i, tcp.SequenceNumber(), seq)
					}
					seq += uint32(len(p))
					if mode == GROSelective {
						if !bytes.Equal(f[14+ipLen:], in[i][ipLen:]) {
							t.Errorf("frame %d: TCP header or payload changed", i)
						}
					}
				}
				lan, wan := l.r.Interface("lan").Stats().GRO, l.r.Interface("wan").Stats().GRO
				switch mode {
				case GROOn:
					if lan.Coalesced != n-1 || wan.Segmented != 1 {
						t.Errorf("lan %+v, wan %+v; want lan coalesced %d, wan segmented 1", lan, wan, n-1)
					}
					mss := wanMTU - ipLen - 32
					if want := (n*size + mss - 1) / mss; len(out) != want {
						t.Errorf("B got %d segments, want %d", len(out), want)
					}
				case GROSelective:
					if lan.Coalesced != 0 || lan.BypassedForward != n || wan.Segmented != 0 || len(out) != n {
						t.Errorf("lan %+v, wan %+v, %d frames; want %d bypassed, %d frames", lan, wan, len(out), n, n)
					}
				}
			})
		}
	}
}

func payloadLen(pkts [][]byte) int {
	n := 0
	for _, p := range pkts {
		ipLen := 20
		if p[0]>>4 == 6 {
			ipLen = 40
		}
		n += len(p) - ipLen - 32
	}
	return n
}

// TestGROTCPLocal runs a real TCP transfer to the router in every mode.
func TestGROTCPLocal(t *testing.T) {
	for _, mode := range []GROMode{GROOff, GROSelective, GROOn} {
		t.Run(mode.String(), func(t *testing.T) {
			l := newLab(t)
			cfg := l.config()
			for i := range cfg.Interfaces {
				cfg.Interfaces[i].GRO = mode
			}
			if err := l.r.Apply(cfg); err != nil {
				t.Fatal(err)
			}
			if got := l.r.Interface("lan").GRO(); got != mode {
				t.Fatalf("GRO() = %s, want %s", got, mode)
			}
			ln, err := l.r.ListenTCP(netip.AddrPortFrom(lanIP4, 8080))
			if err != nil {
				t.Fatal(err)
			}
			echoServer(t, ln)
			exchange(t, dial(t, l.a, netip.AddrPortFrom(lanIP4, 8080)), 100000)
		})
	}
}

func TestParseGROMode(t *testing.T) {
	for _, m := range []GROMode{GROOff, GROOn, GROSelective} {
		if got, err := ParseGROMode(m.String()); err != nil || got != m {
			t.Errorf("ParseGROMode(%q) = %v, %v, want %v", m.String(), got, err, m)
		}
	}
	if _, err := ParseGROMode("maybe"); err == nil {
		t.Error(`ParseGROMode("maybe") succeeded`)
	}
}

// FuzzTCPSegmenter splits arbitrary frames: nothing may panic, and when
// newSegmenter accepts a frame every segment fits the MTU, has correct
// checksums and the next sequence number, and the payloads add up to the
// original's.
func FuzzTCPSegmenter(f *testing.F) {
	for _, v6 := range []bool{false, true} {
		src, dst, et := hostIP4, farIP4, header.IPv4ProtocolNumber
		if v6 {
			src, dst, et = hostIP6, farIP6, header.IPv6ProtocolNumber
		}
		in := tcpFlow(src, dst, 1, 3, 1000)
		big := bytes.Clone(in[0])
		for _, p := range in[1:] {
			big = append(big, p[len(p)-1000:]...)
		}
		if v6 {
			binary.BigEndian.PutUint16(big[4:], uint16(len(big)-40))
		} else {
			binary.BigEndian.PutUint16(big[2:], uint16(len(big)))
		}
		f.Add(ethFrame(routerMAC, hostMAC, et, big), uint16(1000), uint16(1500))
		f.Add(ethFrame(routerMAC, hostMAC, et, big), uint16(1448), uint16(576))
		f.Add(ethFrame(routerMAC, hostMAC, et, in[0]), uint16(1), uint16(68))
	}
	f.Add([]byte{0x08, 0x00, 0x45}, uint16(1), uint16(1))
	f.Fuzz(func(t *testing.T, frame []byte, mss, mtu uint16) {
		s, ok := newSegmenter(frame, header.EthernetMinimumSize, int(mss), int(mtu))
		if !ok {
			return
		}
		h := s.hdrLen()
		buf := make([]byte, h+s.mss)
		seq := header.TCP(frame[header.EthernetMinimumSize+s.ipLen:]).SequenceNumber()
		var payload []byte
		for i := range s.count() {
			seg := buf[:s.segment(i, buf)]
			if len(seg) > header.EthernetMinimumSize+int(mtu) {
				t.Fatalf("segment %d: %d bytes, MTU %d", i, len(seg), mtu)
			}
			tcp, p := checkTCPPacket(t, seg[header.EthernetMinimumSize:])
			if tcp.SequenceNumber() != seq {
				t.Fatalf("segment %d: seq %d, want %d", i, tcp.SequenceNumber(), seq)
			}
			seq += uint32(len(p))
			payload = append(payload, p...)
		}
		if want := s.frame[h:]; !bytes.Equal(payload, want) {
			t.Fatalf("payloads: %d bytes, want %d", len(payload), len(want))
		}
	})
}

// BenchmarkGRODecision measures classify plus groDecide per frame, the
// per-packet cost of choosing what GRO gets, for each mode. It must not
// allocate.
func BenchmarkGRODecision(b *testing.B) {
	e := testEndpoint(&nopDispatcher{})
	local := e.local.Load()
	for _, mode := range []GROMode{GROOff, GROSelective, GROOn} {
		for _, dst := range []struct {
			name string
			addr netip.Addr
		}{{"local", routerIP4}, {"forward", farIP4}} {
			frames := flowFrames(tcpFlow(hostIP4, dst.addr, 1, 1, 1448))
			b.Run(fmt.Sprintf("%s/%s", mode, dst.name), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(frames[0].Data)))
				r := &rxRun{mac: e.mac, mtu: 1500, local: local}
				for b.Loop() {
					v := classify(&frames[0], r)
					groDecide(mode, &frames[0], &v)
					if v.dropped {
						b.Fatal(v.drop)
					}
				}
			})
		}
	}
}

// TestGRODecisionAllocs checks the GRO decision allocates nothing.
func TestGRODecisionAllocs(t *testing.T) {
	e := testEndpoint(&nopDispatcher{})
	local := e.local.Load()
	frames := flowFrames(tcpFlow(hostIP4, farIP4, 1, 1, 1448))
	r := &rxRun{mac: e.mac, mtu: 1500, local: local}
	for _, mode := range []GROMode{GROOff, GROSelective, GROOn} {
		got := testing.AllocsPerRun(1000, func() {
			v := classify(&frames[0], r)
			groDecide(mode, &frames[0], &v)
		})
		if got != 0 {
			t.Errorf("%s: %v allocs per frame, want 0", mode, got)
		}
	}
}

// BenchmarkGRO measures HandleBatch of 128-frame batches of one TCP flow
// to the router's address into a no-op dispatcher, per frame, by mode.
func BenchmarkGRO(b *testing.B) {
	for _, mode := range []GROMode{GROOff, GROSelective, GROOn} {
		b.Run(mode.String(), func(b *testing.B) {
			e := testEndpoint(&nopDispatcher{})
			e.gro.Store(uint32(mode))
			frames := flowFrames(tcpFlow(hostIP4, routerIP4, 1, benchBatch, 1448))
			runBatches(b, frames, func(f []hw.Frame) { e.HandleBatch(0, f) })
		})
	}
}
