package stack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// linkSeg is a decrypted TCP segment as the link fast path holds it: an
// untagged Ethernet frame in a buffer of wireguard-go's size, so that a
// superframe may grow into its capacity.
type linkSeg struct {
	v6         bool
	sport      uint16
	flags      header.TCPFlags
	seq, ack   uint32
	win        uint16
	opts       []byte
	payload    int
	ipID       uint16
	frag       bool
	shortCap   bool // a buffer without room to grow
	badCsum    bool // a wrong TCP checksum
	pattern    byte
	wantJoined bool // joins the frame before it
}

func (s linkSeg) frame() []byte {
	data := make([]byte, s.payload)
	for i := range data {
		data[i] = s.pattern + byte(i)
	}
	flags := s.flags
	if flags == 0 {
		flags = header.TCPFlagAck
	}
	win := s.win
	if win == 0 {
		win = 512
	}
	l4 := tcpSeg(s.sport, 22, flags, s.seq, s.ack, s.opts, data)
	binary.BigEndian.PutUint16(l4[14:], win)
	var ip []byte
	et := header.IPv4ProtocolNumber
	if s.v6 {
		et = header.IPv6ProtocolNumber
		ip = ipv6Packet(netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00:1::2"), 63, header.TCPProtocolNumber, l4)
	} else {
		ip = ipv4Packet(netip.MustParseAddr("10.8.0.2"), netip.MustParseAddr("192.168.1.2"), 63, header.TCPProtocolNumber, l4)
		binary.BigEndian.PutUint16(ip[4:], s.ipID)
		ip[6] = 0x40 // DF
		if s.frag {
			ip[7] = 1
		}
		header.IPv4(ip).SetChecksum(0)
		header.IPv4(ip).SetChecksum(^header.IPv4(ip).CalculateChecksum())
	}
	if s.badCsum {
		ip[len(ip)-s.payload] ^= 0xff // the first payload byte, after the checksum
	}
	size := 65535
	if s.shortCap {
		size = header.EthernetMinimumSize + len(ip) + 100
	}
	f := make([]byte, header.EthernetMinimumSize+len(ip), size)
	copy(f, []byte{2, 0, 0, 0, 0, 0xa, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], uint16(et))
	copy(f[header.EthernetMinimumSize:], ip)
	return f
}

// forwardLinkSegs is ForwardBatch's coalescing (its loop's end) over
// frames already through NAT, all bound for e.
func forwardLinkSegs(e *Endpoint, frames [][]byte) {
	var run fastRun
	tcp := tcpRun{idx: -1}
	for _, f := range frames {
		if tcp.join(&run, e, f) {
			continue
		}
		run.add(e, f, -1)
		tcp.start(&run, e, f)
	}
	run.flush()
	run.sendWaiting()
}

// TestLinkTCPCoalesce: which of a link's decrypted TCP segments join
// into one superframe for an egress with vnet headers, and what ends a
// run. Each superframe, cut by the router's own segmenter at its
// gso_size, gives back the segments that joined it, byte for byte but
// for the IPv4 ID (counting up from the first's, as the kernel cuts it)
// and PSH (the last segment's only).
func TestLinkTCPCoalesce(t *testing.T) {
	const mss = 1380
	ts := func(v byte) []byte { return []byte{1, 1, 8, 10, 0, 0, 0, v, 0, 0, 0, 9} }
	// full returns n full segments of flow 40000 from seq 1000.
	full := func(n int) []linkSeg {
		var s []linkSeg
		for i := range n {
			s = append(s, linkSeg{sport: 40000, seq: 1000 + uint32(i*mss), ack: 7, payload: mss, ipID: uint16(i), pattern: byte(i), wantJoined: i > 0})
		}
		return s
	}
	next := func(s []linkSeg) uint32 { l := s[len(s)-1]; return l.seq + uint32(l.payload) }
	with := func(s []linkSeg, more ...linkSeg) []linkSeg {
		for _, m := range more {
			if m.sport == 0 {
				m.sport = 40000
			}
			if m.seq == 0 {
				m.seq = next(s)
			}
			if m.ack == 0 {
				m.ack = 7
			}
			if m.payload == 0 {
				m.payload = mss
			}
			s = append(s, m)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		segs []linkSeg
	}{
		{"run of full segments and a short last", with(full(4), linkSeg{payload: 200, wantJoined: true})},
		{"a short segment ends the run", with(full(2), linkSeg{payload: 200, wantJoined: true}, linkSeg{})},
		{"PSH joins and ends the run", with(full(2), linkSeg{flags: header.TCPFlagAck | header.TCPFlagPsh, wantJoined: true}, linkSeg{})},
		{"PSH on the first", with([]linkSeg{{sport: 40000, seq: 1000, ack: 7, payload: mss, flags: header.TCPFlagAck | header.TCPFlagPsh}}, linkSeg{})},
		{"a gap in sequence", with(full(2), linkSeg{seq: next(full(2)) + 1})},
		{"a retransmission", with(full(2), linkSeg{seq: 1000})},
		{"another ACK", with(full(2), linkSeg{ack: 8})},
		{"another window", with(full(2), linkSeg{win: 1024})},
		{"other options", with(full(1), linkSeg{opts: ts(1)}, linkSeg{opts: ts(1), wantJoined: true}, linkSeg{opts: ts(2)})},
		{"longer than the first", with(full(2), linkSeg{payload: mss + 1})},
		{"FIN", with(full(2), linkSeg{flags: header.TCPFlagAck | header.TCPFlagFin, payload: 10})},
		{"FIN first", with([]linkSeg{{sport: 40000, seq: 1000, ack: 7, payload: mss, flags: header.TCPFlagAck | header.TCPFlagFin}}, linkSeg{})},
		{"RST", with(full(2), linkSeg{flags: header.TCPFlagAck | header.TCPFlagRst})},
		{"URG", with(full(2), linkSeg{flags: header.TCPFlagAck | header.TCPFlagUrg})},
		{"CWR", with(full(2), linkSeg{flags: header.TCPFlagAck | header.TCPFlagCwr})},
		{"ECE on all joins", with([]linkSeg{{sport: 40000, seq: 1000, ack: 7, payload: mss, flags: header.TCPFlagAck | header.TCPFlagEce}},
			linkSeg{flags: header.TCPFlagAck | header.TCPFlagEce, wantJoined: true}, linkSeg{})},
		{"a pure ACK", with(full(2), linkSeg{payload: -1})},
		{"a bad checksum", with(full(2), linkSeg{badCsum: true}, linkSeg{})},
		{"a bad checksum first", with([]linkSeg{{sport: 40000, seq: 1000, ack: 7, payload: mss, badCsum: true}}, linkSeg{})},
		{"a fragment", with(full(2), linkSeg{frag: true})},
		{"another flow between", with(full(1), linkSeg{sport: 40001, seq: 5}, linkSeg{seq: 1000 + mss})},
		{"no room in the first buffer", with([]linkSeg{{sport: 40000, seq: 1000, ack: 7, payload: mss, shortCap: true}}, linkSeg{})},
		{"IPv6", []linkSeg{{v6: true, sport: 1, seq: 1, ack: 2, payload: 1000}, {v6: true, sport: 1, seq: 1001, ack: 2, payload: 1000, wantJoined: true},
			{v6: true, sport: 1, seq: 2001, ack: 2, payload: 10, wantJoined: true}}},
		{"an egress without vnet headers", func() []linkSeg {
			s := full(3)
			for i := range s {
				s[i].wantJoined = false
			}
			return s
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &gsoRecorder{}
			var w hw.FrameWriter = rec
			if tc.name == "an egress without vnet headers" {
				w = plainRecorder{rec}
			}
			e := newEndpoint(mustMAC("02:00:00:00:00:0b"), 1500, w, nil)
			var frames, want [][]byte
			var groups []int
			for _, s := range tc.segs {
				if s.payload < 0 {
					s.payload = 0
				}
				f := s.frame()
				frames = append(frames, f)
				want = append(want, bytes.Clone(f))
				if s.wantJoined {
					groups[len(groups)-1]++
				} else {
					groups = append(groups, 1)
				}
			}
			forwardLinkSegs(e, frames)
			var got []int
			k := 0
			for i, f := range rec.frames {
				g := rec.gso[i]
				if g.Type == hw.GSONone {
					got = append(got, 1)
					if k < len(want) && !bytes.Equal(f, want[k]) {
						t.Errorf("frame %d (segment %d) changed:\n got %x\nwant %x", i, k, f, want[k])
					}
					k++
					continue
				}
				wantType := hw.GSOTCPv4
				if tc.segs[0].v6 {
					wantType = hw.GSOTCPv6
				}
				if g.Type != wantType || !g.NeedsCsum {
					t.Errorf("superframe %d: %+v, want type %v with a partial checksum", i, g, wantType)
				}
				seg, ok := newSegmenter(f, header.EthernetMinimumSize, int(g.Size), 1500)
				if !ok {
					t.Fatalf("superframe %d: the segmenter refuses it (%+v)", i, g)
				}
				got = append(got, seg.count())
				buf := make([]byte, 2048)
				for j := range seg.count() {
					n := seg.segment(j, buf)
					if k >= len(want) {
						t.Fatalf("superframe %d: more segments than were sent", i)
					}
					w := bytes.Clone(want[k])
					if !tc.segs[0].v6 {
						// The kernel's IDs count up from the first's.
						binary.BigEndian.PutUint16(w[18:], tc.segs[k-j].ipID+uint16(j))
						header.IPv4(w[14:]).SetChecksum(0)
						header.IPv4(w[14:]).SetChecksum(^header.IPv4(w[14:]).CalculateChecksum())
					}
					if !bytes.Equal(buf[:n], w) {
						t.Errorf("superframe %d segment %d (sent as %d):\n got %x\nwant %x", i, j, k, buf[:n], w)
					}
					k++
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(groups) {
				t.Errorf("segments per frame sent: %v, want %v", got, groups)
			}
		})
	}
}

// plainRecorder is a writer without vnet headers (the boards' profiles).
type plainRecorder struct{ r *gsoRecorder }

func (p plainRecorder) WriteFrames(f [][]byte) (int, error) { return p.r.WriteFrames(f) }

// TestLinkTCPCoalesceAllocs: coalescing a batch of 64 segments costs no
// allocation.
func TestLinkTCPCoalesceAllocs(t *testing.T) {
	e := newEndpoint(mustMAC("02:00:00:00:00:0b"), 1500, nopGSOWriter{}, nil)
	var in, frames [][]byte
	for i := range 64 {
		f := linkSeg{sport: 40000, seq: uint32(i * 1380), ack: 7, payload: 1380, ipID: uint16(i)}.frame()
		in = append(in, f)
		frames = append(frames, make([]byte, len(f), cap(f)))
	}
	run := func() {
		for i, f := range in {
			frames[i] = frames[i][:len(f)]
			copy(frames[i], f)
		}
		before := e.stats.gsoSent.Load()
		forwardLinkSegs(e, frames)
		if e.stats.gsoSent.Load() == before {
			t.Fatal("no superframe sent")
		}
	}
	run()
	if allocs := testing.AllocsPerRun(100, run); allocs > 0 && !raceEnabled {
		t.Errorf("%.1f allocations per batch of %d segments, want 0", allocs, len(in))
	}
}
