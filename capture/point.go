package capture

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gvrouter/gvrouter/hw"
)

// Direction says whether a frame was received or sent at a Point.
type Direction uint8

// Directions, written as each packet's epb_flags.
const (
	In Direction = iota
	Out
)

// Point is a place frames are captured: a port or an interface. The
// data path calls CaptureRx and CaptureTx once per batch. Point is safe
// for concurrent use.
type Point struct {
	name string
	// sessions is nil when no capture runs on the point: the data path's
	// one atomic load. Replaced under mu.
	sessions atomic.Pointer[[]*Session]
	mu       sync.Mutex
	// attach, if set, is called under mu with true when the first
	// session starts and false when the last one ends, so an interface
	// or a port's receive entry holds the point only while a capture
	// runs.
	attach func(p *Point, on bool)
	// counters, if set, reads the port's or interface's own frame
	// counters, for a capture's Result.
	counters func() (rx, tx uint64)
}

// SetCounters gives p the port's or interface's own received and sent
// frame counters: a capture reports how far they moved over its window
// (Result.Counted), so an operator can see whether it holds every
// frame. Call it before p is used; f must be safe to call from any
// goroutine.
func (p *Point) SetCounters(f func() (rx, tx uint64)) { p.counters = f }

// NewPoint returns a point named name (the port or interface name).
// attach may be nil when the point's holders keep it for good (a
// Writer).
func NewPoint(name string, attach func(p *Point, on bool)) *Point {
	return &Point{name: name, attach: attach}
}

// Name returns the point's name.
func (p *Point) Name() string { return p.name }

// Active reports whether a capture runs on p: one atomic load.
func (p *Point) Active() bool { return p.sessions.Load() != nil }

func (p *Point) add(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var next []*Session
	if old := p.sessions.Load(); old != nil {
		next = slices.Clone(*old)
	}
	next = append(next, s)
	p.sessions.Store(&next)
	if len(next) == 1 && p.attach != nil {
		p.attach(p, true)
	}
}

func (p *Point) remove(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.sessions.Load()
	if old == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*old), func(x *Session) bool { return x == s })
	if len(next) > 0 {
		p.sessions.Store(&next)
		return
	}
	p.sessions.Store(nil)
	if p.attach != nil {
		p.attach(p, false)
	}
}

// CaptureRx copies received frames to the point's captures. A frame's
// ring-header tag (VLANValid) is put back in-band after the MAC
// addresses, as libpcap does on Linux, so a port's capture shows the
// tags as on the wire. Frames are not kept.
func (p *Point) CaptureRx(frames []hw.Frame) {
	ss := p.sessions.Load()
	if ss == nil {
		return
	}
	for _, s := range *ss {
		for i := range frames {
			f := &frames[i]
			var tag [4]byte
			n := 0
			if f.VLANValid {
				tpid := f.VLANTPID
				if tpid == 0 {
					tpid = 0x8100
				}
				binary.BigEndian.PutUint16(tag[:], tpid)
				binary.BigEndian.PutUint16(tag[2:], f.VLANTCI)
				n = 4
			}
			s.add(In, f.Data, tag[:n], 0, max(f.WireLen, len(f.Data))+n)
		}
	}
}

// CaptureTx copies frames about to be sent to the point's captures,
// without the strip octets of tags after the MAC addresses (an
// interface's own VLAN tags, which its capture does not show). Frames are
// not kept.
func (p *Point) CaptureTx(frames [][]byte, strip int) {
	ss := p.sessions.Load()
	if ss == nil {
		return
	}
	for _, s := range *ss {
		for _, f := range frames {
			st := strip
			if len(f) < 12+st {
				st = 0
			}
			s.add(Out, f, nil, st, len(f)-st)
		}
	}
}

// CaptureIP copies one IP packet, which has no link header (ip starts at
// the IP header), to the point's captures as dir, behind an Ethernet
// header of zero MAC addresses and the packet's EtherType, so that every
// capture is one Ethernet link. The packet is not kept. With no capture
// running it costs one atomic load.
func (p *Point) CaptureIP(dir Direction, ip []byte) {
	ss := p.sessions.Load()
	if ss == nil || len(ip) == 0 {
		return
	}
	hdr := &ipv4Header
	if ip[0]>>4 == 6 {
		hdr = &ipv6Header
	}
	for _, s := range *ss {
		s.put(dir, hdr[:12], hdr[12:], ip, len(hdr)+len(ip))
	}
}

// The Ethernet headers CaptureIP puts before a packet: no addresses,
// the EtherType of IPv4 (0x0800) or IPv6 (0x86dd).
var (
	ipv4Header = [14]byte{12: 0x08, 13: 0x00}
	ipv6Header = [14]byte{12: 0x86, 13: 0xdd}
)

// Writer is a port's hw.FrameWriter with p's transmit capture in front
// of it. It is safe for concurrent use as its FrameWriter is.
type Writer struct {
	hw.FrameWriter
	P *Point
}

// WriteFrames implements hw.FrameWriter.
func (w *Writer) WriteFrames(frames [][]byte) (int, error) {
	if w.P.sessions.Load() != nil {
		w.P.CaptureTx(frames, 0)
	}
	return w.FrameWriter.WriteFrames(frames)
}

// ExtendFrame passes the port's ExtendFrame on (an af_xdp port lends the
// room before a frame of its UMEM, so the stack pushes tags in place);
// nil for a port that has none.
func (w *Writer) ExtendFrame(frame []byte, head int) []byte {
	if x, ok := w.FrameWriter.(interface {
		ExtendFrame(frame []byte, head int) []byte
	}); ok {
		return x.ExtendFrame(frame, head)
	}
	return nil
}

var _ hw.GSOWriter = (*Writer)(nil)

// GSOMaxSize implements hw.GSOWriter: its FrameWriter's, or 0 if that
// takes no superframes.
func (w *Writer) GSOMaxSize() int {
	if g, ok := w.FrameWriter.(hw.GSOWriter); ok {
		return g.GSOMaxSize()
	}
	return 0
}

// UDPGSO passes its FrameWriter's on (hw.Port.UDPGSO): whether it takes
// UDP superframes whole; false for a writer that does not say.
func (w *Writer) UDPGSO() bool {
	u, ok := w.FrameWriter.(interface{ UDPGSO() bool })
	return ok && u.UDPGSO()
}

// WriteFramesGSO implements hw.GSOWriter. A superframe is captured whole,
// as sent (tcpdump on the interface shows it so too).
func (w *Writer) WriteFramesGSO(frames [][]byte, gso []hw.GSO) (int, error) {
	if w.P.sessions.Load() != nil {
		w.P.CaptureTx(frames, 0)
	}
	if g, ok := w.FrameWriter.(hw.GSOWriter); ok {
		return g.WriteFramesGSO(frames, gso)
	}
	return w.FrameWriter.WriteFrames(frames)
}
