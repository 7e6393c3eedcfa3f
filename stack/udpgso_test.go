package stack

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// gsoRecorder is a hw.GSOWriter that takes UDP superframes (a port with
// vnet headers on Linux 6.2+) and keeps copies of what it is given.
type gsoRecorder struct {
	udp    bool
	frames [][]byte
	gso    []hw.GSO
}

func (w *gsoRecorder) WriteFrames(frames [][]byte) (int, error) {
	return w.WriteFramesGSO(frames, make([]hw.GSO, len(frames)))
}

func (w *gsoRecorder) WriteFramesGSO(frames [][]byte, gso []hw.GSO) (int, error) {
	for i, f := range frames {
		w.frames = append(w.frames, bytes.Clone(f))
		w.gso = append(w.gso, gso[i])
	}
	return len(frames), nil
}

func (w *gsoRecorder) GSOMaxSize() int { return hw.MaxGSOFrameLen }
func (w *gsoRecorder) UDPGSO() bool    { return w.udp }

// udpDatagram builds a frame of the router's own: flow f's (its source
// port) datagram with payload bytes of pattern seq, IPv4 ID id.
func ownDatagram(v6 bool, flow uint16, id uint16, payload int, seq byte) []byte {
	ipLen := header.IPv4MinimumSize
	if v6 {
		ipLen = header.IPv6MinimumSize
	}
	f := make([]byte, header.EthernetMinimumSize+ipLen+header.UDPMinimumSize+payload)
	copy(f, []byte{2, 0, 0, 0, 0, 0xb, 2, 0, 0, 0, 0, 2})
	ip := f[header.EthernetMinimumSize:]
	var src, dst []byte
	if v6 {
		binary.BigEndian.PutUint16(f[12:], uint16(header.IPv6ProtocolNumber))
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(header.UDPMinimumSize+payload))
		ip[6], ip[7] = protoUDP, 64
		ip[8], ip[23], ip[24], ip[39] = 0xfd, 1, 0xfd, 2
		src, dst = ip[8:24], ip[24:40]
	} else {
		binary.BigEndian.PutUint16(f[12:], uint16(header.IPv4ProtocolNumber))
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		binary.BigEndian.PutUint16(ip[4:], id)
		ip[6], ip[8], ip[9] = 0x40, 64, protoUDP
		copy(ip[12:], []byte{10, 2, 0, 1, 10, 79, 0, 10})
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:ipLen], 0))
		src, dst = ip[12:16], ip[16:20]
	}
	u := ip[ipLen:]
	binary.BigEndian.PutUint16(u, flow)
	binary.BigEndian.PutUint16(u[2:], 51820)
	binary.BigEndian.PutUint16(u[4:], uint16(header.UDPMinimumSize+payload))
	for i := range payload {
		u[header.UDPMinimumSize+i] = seq + byte(i)
	}
	setL4Checksum(src, dst, protoUDP, u)
	return f
}

// dgram is one datagram of a test case.
type dgram struct {
	v6      bool
	flow    uint16
	payload int
}

func dgrams(n int, d dgram) []dgram {
	out := make([]dgram, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestUDPGSOCoalesce: the router's own datagrams in an endpoint's pending
// batch leave as UDP superframes where its writer takes them: only runs of
// one flow join, only the last datagram of a run may be shorter, within
// 64 segments and 64 KiB of IP; cut as the kernel cuts them (segmenter:
// TestSegmenterMatchesKernel) they are the datagrams as sent, byte for
// byte and in order. A writer that does not take UDP superframes gets
// every datagram as it is.
func TestUDPGSOCoalesce(t *testing.T) {
	a4 := dgram{flow: 1, payload: 1000}
	b4 := dgram{flow: 2, payload: 1000}
	a6 := dgram{v6: true, flow: 1, payload: 1000}
	for _, tc := range []struct {
		name  string
		in    []dgram
		plain bool // a writer without UDP GSO
		want  []int
	}{
		{"one flow, short last", append(dgrams(5, a4), dgram{flow: 1, payload: 300}), false, []int{6}},
		{"a short one closes the run", append(append(dgrams(3, a4), dgram{flow: 1, payload: 10}), dgrams(3, a4)...), false, []int{4, 3}},
		{"a longer one starts a run", append(dgrams(3, dgram{flow: 1, payload: 500}), dgrams(2, a4)...), false, []int{3, 2}},
		{"flows taking turns keep their order", []dgram{a4, b4, a4, b4, b4, a4}, false, []int{1, 1, 1, 2, 1}},
		{"IPv6 and IPv4 of one port", append(dgrams(3, a6), dgrams(2, a4)...), false, []int{3, 2}},
		{"64 segments at most", dgrams(70, dgram{flow: 1, payload: 600}), false, []int{64, 6}},
		{"64 KiB of IP at most", dgrams(50, dgram{flow: 1, payload: 1400}), false, []int{46, 4}},
		{"no UDP GSO on the writer", dgrams(4, a4), true, []int{1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &gsoRecorder{udp: !tc.plain}
			e := newEndpoint(mustMAC("02:00:00:00:00:0b"), 1500, rec, nil)
			w := e.writer.Load()
			var sent [][]byte
			e.txMu.Lock()
			for i, d := range tc.in {
				f := ownDatagram(d.v6, d.flow, uint16(100+i), d.payload, byte(i))
				sent = append(sent, f)
				buf := e.getBuf(len(f))
				copy(*buf, f)
				if !w.udpGSO || !e.addOwnUDPLocked(w, (*buf)[:len(f)], buf) {
					e.pending.add((*buf)[:len(f)], buf)
				}
			}
			e.sendPendingLocked(w)
			e.txMu.Unlock()

			var got []int
			var cut [][]byte
			for i, f := range rec.frames {
				g := rec.gso[i]
				if g.Type == hw.GSONone {
					got = append(got, 1)
					cut = append(cut, f)
					continue
				}
				fr := hw.Frame{Data: f, GSO: g}
				s, ok := checkSuperframe(&fr)
				if !ok || !s.udp || g.Type != hw.GSOUDPL4 || !g.NeedsCsum || int(g.HdrLen) != 14+s.ipLen+8 {
					t.Fatalf("frame %d: superframe %+v not a well-formed UDP one (%+v, %v)", i, g, s, ok)
				}
				seg, ok := newSegmenter(f, header.EthernetMinimumSize, int(g.Size), 1500)
				if !ok {
					t.Fatalf("frame %d: newSegmenter refused it", i)
				}
				got = append(got, seg.count())
				for k := range seg.count() {
					b := make([]byte, seg.hdrLen()+seg.mss)
					cut = append(cut, b[:seg.segment(k, b)])
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("datagrams per frame sent: %v, want %v", got, tc.want)
			}
			if len(cut) != len(sent) {
				t.Fatalf("%d datagrams after cutting, want %d", len(cut), len(sent))
			}
			for i := range sent {
				if !bytes.Equal(cut[i], sent[i]) {
					t.Fatalf("datagram %d after cutting differs from the one sent:\ngot  % x\nwant % x", i, cut[i][:min(64, len(cut[i]))], sent[i][:min(64, len(sent[i]))])
				}
			}
		})
	}
}

// TestUDPGSOAllocs: joining a batch's datagrams into superframes and
// sending them allocates nothing (the superframe buffers are pooled).
func TestUDPGSOAllocs(t *testing.T) {
	e := newEndpoint(mustMAC("02:00:00:00:00:0b"), 1500, nopGSOWriter{}, nil)
	w := e.writer.Load()
	var in [][]byte
	for i := range 64 {
		in = append(in, ownDatagram(false, 1, uint16(i), 1400, byte(i)))
	}
	run := func() {
		e.txMu.Lock()
		for _, f := range in {
			buf := e.getBuf(len(f))
			copy(*buf, f)
			if !e.addOwnUDPLocked(w, (*buf)[:len(f)], buf) {
				t.Fatal("addOwnUDPLocked refused a datagram")
			}
		}
		e.sendPendingLocked(w)
		e.txMu.Unlock()
	}
	run()
	// -race: sync.Pool drops some buffers on purpose.
	if allocs := testing.AllocsPerRun(100, run); allocs > 0 && !raceEnabled {
		t.Errorf("%.1f allocations per batch of %d datagrams, want 0", allocs, len(in))
	}
}

// nopGSOWriter takes UDP superframes and drops everything.
type nopGSOWriter struct{}

func (nopGSOWriter) WriteFrames(f [][]byte) (int, error)                { return len(f), nil }
func (nopGSOWriter) WriteFramesGSO(f [][]byte, _ []hw.GSO) (int, error) { return len(f), nil }
func (nopGSOWriter) GSOMaxSize() int                                    { return hw.MaxGSOFrameLen }
func (nopGSOWriter) UDPGSO() bool                                       { return true }
