package capture

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Bounds of one capture. A capture shows everyone's traffic and costs
// copies on the data path, so every one ends by itself.
const (
	// MaxSessions is how many captures may run at once (router-wide).
	MaxSessions = 2
	// DefaultSeconds ends a capture that gave no time limit.
	DefaultSeconds = 60
	// MaxSeconds is the longest capture: an hour.
	MaxSeconds = 3600
	// MaxCount is the most frames one capture writes.
	MaxCount = 10_000_000
	// MaxSnaplen is the most octets kept of a frame: a 9000-octet jumbo
	// frame plus Ethernet header, two tags, SecTAG and ICV, rounded up.
	MaxSnaplen = 9216 + 64
	// queueLen is the number of buffers between the data path and the
	// writer: at MaxSnaplen about 4.7 MiB per capture, enough for a
	// burst of a full receive ring block while the writer is slow.
	queueLen = 512
)

// Request asks for one capture.
type Request struct {
	// Iface is the port or interface, e.g. "eth0", "eth0.2", "ms1".
	Iface string `json:"iface"`
	// Count ends the capture after this many frames; 0: no count limit.
	Count int `json:"count,omitempty"`
	// Snaplen is the most octets kept of each frame; 0: MaxSnaplen.
	Snaplen int `json:"snaplen,omitempty"`
	// Seconds ends the capture after this long; 0: DefaultSeconds.
	Seconds int `json:"seconds,omitempty"`
	// Filter is a Filter expression, e.g. "host 192.0.2.1 and tcp".
	Filter string `json:"filter,omitempty"`
}

// normalize applies defaults and checks the bounds.
func (r *Request) normalize() error {
	if r.Iface == "" {
		return fmt.Errorf("capture: no interface")
	}
	if r.Count < 0 || r.Count > MaxCount {
		return fmt.Errorf("capture: count %d out of 0..%d", r.Count, MaxCount)
	}
	if r.Seconds < 0 || r.Seconds > MaxSeconds {
		return fmt.Errorf("capture: seconds %d out of 0..%d", r.Seconds, MaxSeconds)
	}
	if r.Snaplen < 0 {
		return fmt.Errorf("capture: snaplen %d is negative", r.Snaplen)
	}
	if r.Seconds == 0 {
		r.Seconds = DefaultSeconds
	}
	if r.Snaplen == 0 || r.Snaplen > MaxSnaplen {
		r.Snaplen = MaxSnaplen
	}
	r.Snaplen = max(r.Snaplen, 64) // Ethernet, tags and an IP header
	return nil
}

// Result is what a finished capture reports.
type Result struct {
	// Captured is the number of frames written.
	Captured uint64 `json:"captured"`
	// Dropped is the number of matching frames the capture itself lost
	// because its queue was full (the writer was too slow).
	Dropped uint64 `json:"dropped"`
	// Received and Sent split Captured by direction.
	Received uint64 `json:"received"`
	Sent     uint64 `json:"sent"`
	// Counted is how far the port's or interface's own counters moved
	// from the capture's start to its end (nil where the point has
	// none). With no filter, no count limit and nothing dropped it
	// equals Received and Sent when the window starts and ends between
	// frames; a difference is a frame the capture did not see.
	Counted *Counted `json:"counted,omitempty"`
}

// Counted is frames a port or interface counted over a capture's window.
type Counted struct {
	Received uint64 `json:"received"`
	Sent     uint64 `json:"sent"`
}

// packet is one queued frame.
type packet struct {
	buf  []byte // len = captured octets
	wire int
	dir  Direction
	ts   time.Time
}

// Session is one running capture. Its add is called by the data path,
// concurrently; everything else belongs to Run's goroutine.
type Session struct {
	filter  *Filter
	expr    string
	snaplen int
	count   uint64
	// queue carries filled packets to Run; free holds empty ones.
	queue, free chan *packet
	// taken counts frames accepted into the queue, dropped those lost.
	taken, dropped atomic.Uint64
	now            func() time.Time
}

func newSession(r Request, f *Filter) *Session {
	s := &Session{
		filter:  f,
		expr:    r.Filter,
		snaplen: r.Snaplen,
		count:   uint64(r.Count),
		queue:   make(chan *packet, queueLen),
		free:    make(chan *packet, queueLen),
		now:     time.Now,
	}
	for range queueLen {
		s.free <- &packet{buf: make([]byte, 0, r.Snaplen)}
	}
	return s
}

// add copies one frame into a free buffer: the frame's first 12 octets,
// then tag (a ring-header tag put back), then the frame from octet
// 12+skip (an interface's own tags left out), at most snaplen octets;
// wire is the frame's length as shown. A frame the filter refuses goes
// back; one with no free buffer is counted as dropped.
func (s *Session) add(dir Direction, f, tag []byte, skip, wire int) {
	if len(f) < 12 {
		return
	}
	s.put(dir, f[:12], tag, f[12+skip:], wire)
}

// put copies head, mid and as much of rest as snaplen leaves into a free
// buffer and queues it, as add describes.
func (s *Session) put(dir Direction, head, mid, rest []byte, wire int) {
	if s.count > 0 && s.taken.Load() >= s.count {
		return
	}
	var p *packet
	select {
	case p = <-s.free:
	default:
		s.dropped.Add(1)
		return
	}
	b := p.buf[:0]
	b = append(b, head...)
	b = append(b, mid...)
	b = append(b, rest[:min(len(rest), s.snaplen-len(b))]...)
	if !s.filter.Match(b) {
		p.buf = b[:0]
		s.free <- p
		return
	}
	if s.count > 0 && s.taken.Add(1) > s.count {
		s.free <- p
		return
	} else if s.count == 0 {
		s.taken.Add(1)
	}
	p.buf, p.wire, p.dir, p.ts = b, wire, dir, s.now()
	s.queue <- p // never blocks: at most queueLen packets exist
}

// run writes the session's frames to w as pcapng until ctx ends, the
// time is up or count frames are written: one interface block named
// name, each packet's direction in its epb_flags (RFC draft
// pcapng section 4.3.1), and at the end an interface statistics block
// whose isb_ifdrop is the frames the capture dropped.
func (s *Session) run(ctx context.Context, name string, seconds int, w io.Writer) (Result, error) {
	var res Result
	start := s.now()
	intf := pcapgo.NgInterface{
		Name:        name,
		Description: "gvrouter " + name,
		LinkType:    layers.LinkTypeEthernet,
		SnapLength:  uint32(s.snaplen),
		OS:          "gvrouter",
		Filter:      s.expr,
		Statistics:  pcapgo.NgInterfaceStatistics{PacketsDropped: pcapgo.NgNoValue64, PacketsReceived: pcapgo.NgNoValue64},
	}
	nw, err := pcapgo.NewNgWriterInterface(w, intf, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "gvrouter capture"}})
	if err != nil {
		return res, fmt.Errorf("capture: pcapng header: %w", err)
	}
	if err := nw.Flush(); err != nil {
		return res, fmt.Errorf("capture: write: %w", err)
	}
	dirs := [2]pcapgo.NgEpbFlags{{Direction: pcapgo.NgEpbFlagDirectionInbound}, {Direction: pcapgo.NgEpbFlagDirectionOutbound}}
	timer := time.NewTimer(time.Duration(seconds) * time.Second)
	defer timer.Stop()
	flush := time.NewTicker(200 * time.Millisecond)
	defer flush.Stop()
	write := func(p *packet) error {
		ci := gopacket.CaptureInfo{Timestamp: p.ts, CaptureLength: len(p.buf), Length: p.wire}
		err := nw.WritePacketWithOptions(ci, p.buf, pcapgo.NgPacketOptions{Flags: &dirs[p.dir]})
		if p.dir == In {
			res.Received++
		} else {
			res.Sent++
		}
		res.Captured++
		p.buf = p.buf[:0]
		s.free <- p
		return err
	}
	done := func() bool { return s.count > 0 && res.Captured >= s.count }
	for !done() {
		select {
		case p := <-s.queue:
			if err := write(p); err != nil {
				return s.finish(res), fmt.Errorf("capture: write: %w", err)
			}
			continue
		case <-flush.C:
			if err := nw.Flush(); err != nil {
				return s.finish(res), fmt.Errorf("capture: write: %w", err)
			}
			continue
		case <-ctx.Done():
		case <-timer.C:
		}
		break
	}
	// What was queued before the end is still written.
	for !done() {
		select {
		case p := <-s.queue:
			if err := write(p); err != nil {
				return s.finish(res), fmt.Errorf("capture: write: %w", err)
			}
			continue
		default:
		}
		break
	}
	res = s.finish(res)
	st := pcapgo.NgInterfaceStatistics{StartTime: start, EndTime: s.now(), PacketsDropped: res.Dropped, PacketsReceived: res.Captured + res.Dropped}
	if err := nw.WriteInterfaceStats(0, st); err != nil {
		return res, fmt.Errorf("capture: write: %w", err)
	}
	if err := nw.Flush(); err != nil {
		return res, fmt.Errorf("capture: write: %w", err)
	}
	return res, nil
}

func (s *Session) finish(r Result) Result {
	r.Dropped = s.dropped.Load()
	return r
}
