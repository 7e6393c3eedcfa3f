package sqm

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/qdisc"
)

// Direction is which way a Queue shapes.
type Direction uint8

const (
	// Upload shapes frames leaving the WAN interface (hosts keyed by the
	// inside source).
	Upload Direction = iota
	// Download shapes frames arriving on the WAN interface, in ingress mode
	// (hosts keyed by the inside destination).
	Download
)

func (d Direction) String() string {
	if d == Download {
		return "download"
	}
	return "upload"
}

// Params are what a Queue shapes to; Reconfigure changes them.
type Params struct {
	// Rate is the shaped rate in bit/s, e.g. 20_000_000.
	Rate uint64
	// Overhead is the per-packet link-layer overhead from the IP header,
	// e.g. 44 (qdisc.ShaperConfig).
	Overhead int
	// Diffserv is qdisc.Besteffort or qdisc.Diffserv3.
	Diffserv qdisc.Diffserv
	// ECN marks ECN-capable packets instead of dropping them.
	ECN bool
	// FrameSize is the largest frame queued, e.g. 1600 (0: the default);
	// longer frames are counted in Stats.OversizeDrops.
	FrameSize int
}

// HostFunc returns the inside address of the flow of an IP packet (from
// its IP header on); egress is true for a packet leaving the WAN. ok false
// means unknown: the Queue then keys by the header's address.
// natengine.Engine.InsideHost is one.
type HostFunc func(ip []byte, egress bool) (netip.Addr, bool)

// maxLag is how far behind its clock the shaper may catch up: Go's
// timers wake an idle goroutine with millisecond resolution, often a
// millisecond or two late on a busy machine, and a shaper that forgot
// that time would fall short of its rate (the lab measured 83 % of 19
// Mbit/s with qdisc's 1 ms default). 4 ms at 100 Mbit/s is 33 full frames.
const maxLag = 4_000_000

// batch is how many frames the goroutine takes from the shaper at once.
const batch = 32

// Queue is one shaped direction of a WAN interface. WriteFrames (a
// hw.FrameWriter) enqueues; the Queue's goroutine, started by New and
// ended by Close, sends to its output. Safe for concurrent use.
type Queue struct {
	dir   Direction
	host  HostFunc
	out   atomic.Pointer[writerBox]
	epoch time.Time

	mu     sync.Mutex // protects q, s, params
	q      *qdisc.FQCoDel
	s      *qdisc.Shaper
	params Params

	sleep sleeper // the goroutine's wait; kick wakes it
	quit  chan struct{}
	done  chan struct{}

	// writeErrors counts frames the output refused.
	writeErrors atomic.Uint64

	// Owned by the goroutine.
	deq  [][]byte
	bufs [][]byte
}

type writerBox struct{ hw.FrameWriter }

// New starts a Queue that shapes dir to p and writes to out.
func New(dir Direction, p Params, host HostFunc, out hw.FrameWriter) (*Queue, error) {
	if out == nil {
		return nil, errors.New("sqm: no output")
	}
	q := &Queue{
		dir:   dir,
		host:  host,
		epoch: time.Now(),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
		deq:   make([][]byte, batch),
		bufs:  make([][]byte, batch),
	}
	if err := q.build(p); err != nil {
		return nil, err
	}
	q.out.Store(&writerBox{out})
	q.sleep.init()
	go q.run()
	return q, nil
}

// build makes a new FQCoDel and Shaper for p. q.mu must be held or q unshared.
func (q *Queue) build(p Params) error {
	fq, err := qdisc.New(qdisc.Config{
		FrameSize: p.FrameSize,
		CoDel:     qdisc.CoDelParams{ECN: p.ECN},
		Diffserv:  p.Diffserv,
		Rate:      p.Rate,
		Classify:  q.classify,
	})
	if err != nil {
		return err
	}
	s, err := qdisc.NewShaper(q.shaperConfig(p), fq)
	if err != nil {
		return err
	}
	q.q, q.s, q.params = fq, s, p
	return nil
}

func (q *Queue) shaperConfig(p Params) qdisc.ShaperConfig {
	return qdisc.ShaperConfig{Rate: p.Rate, Overhead: p.Overhead, Ingress: q.dir == Download, MaxLag: maxLag}
}

// Reconfigure applies p. A change of rate or overhead keeps every queued
// packet and flow; a change of diffserv, ECN or frame size starts empty
// queues (what was queued is dropped, as tc replacing a qdisc does).
func (q *Queue) Reconfigure(p Params) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	old := q.params
	if p == old {
		return nil
	}
	if p.Diffserv == old.Diffserv && p.ECN == old.ECN && p.FrameSize == old.FrameSize {
		s, err := qdisc.NewShaper(q.shaperConfig(p), q.q)
		if err != nil {
			return err
		}
		q.q.SetRate(p.Rate)
		q.s, q.params = s, p
	} else if err := q.build(p); err != nil {
		return err
	}
	q.kick()
	return nil
}

// SetOutput points the Queue at a new output (a reopened port).
func (q *Queue) SetOutput(out hw.FrameWriter) {
	if out != nil {
		q.out.Store(&writerBox{out})
	}
}

// Params returns what the Queue shapes to.
func (q *Queue) Params() Params {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.params
}

// classify is the FQCoDel's classifier: the frame's flow and tin, and its
// host by the flow's inside address.
func (q *Queue) classify(f []byte) qdisc.Class {
	mode := qdisc.HostSrc
	if q.dir == Download {
		mode = qdisc.HostDst
	}
	c := qdisc.ClassifyFrame(f, mode)
	if c.IPVersion != 0 && q.host != nil {
		if a, ok := q.host(f[c.L3:], q.dir == Upload); ok {
			c.Host = qdisc.HashAddr(a)
		}
	}
	return c
}

// now is the Queue's monotonic clock in ns.
func (q *Queue) now() int64 { return int64(time.Since(q.epoch)) }

// WriteFrames implements hw.FrameWriter: it queues copies of frames and
// wakes the goroutine. Every frame is accepted; the queue's own drops
// (CoDel, a full pool, oversize) are in Stats.
func (q *Queue) WriteFrames(frames [][]byte) (int, error) {
	if len(frames) == 0 {
		return 0, nil
	}
	q.mu.Lock()
	q.q.Enqueue(q.now(), frames)
	q.mu.Unlock()
	q.kick()
	return len(frames), nil
}

// ExtendFrame passes its output's ExtendFrame on (stack's frameExtender:
// a port that lends the room before a frame of its receive memory):
// WriteFrames copies every frame into the queue before it returns, so a
// VLAN tag or PPPoE header pushed in that room leaves with the frame, and
// a forwarded frame is copied once, into the queue, not first into a
// buffer with room. nil if the output lends nothing.
func (q *Queue) ExtendFrame(frame []byte, head int) []byte {
	x, ok := q.out.Load().FrameWriter.(interface {
		ExtendFrame(frame []byte, head int) []byte
	})
	if !ok {
		return nil
	}
	return x.ExtendFrame(frame, head)
}

func (q *Queue) kick() {
	q.sleep.kick()
}

// run is the goroutine: take what the shaper releases, send it, sleep
// until the next packet may go or one arrives.
func (q *Queue) run() {
	defer close(q.done)
	q.sleep.start()
	defer q.sleep.stop()
	for {
		q.sleep.arm()
		q.mu.Lock()
		n, next := q.s.Dequeue(q.now(), q.deq)
		for i := range n {
			// Copy out: the pool's frames are invalid after the
			// next Enqueue, which WriteFrames may do at once.
			b := q.bufs[i]
			if cap(b) < len(q.deq[i]) {
				b = make([]byte, len(q.deq[i]), max(len(q.deq[i]), qdisc.DefaultFrameSize))
			}
			b = b[:len(q.deq[i])]
			copy(b, q.deq[i])
			q.bufs[i], q.deq[i] = b, nil
		}
		q.mu.Unlock()
		if n > 0 {
			w := q.out.Load()
			if sent, err := w.WriteFrames(q.bufs[:n]); sent < n || err != nil {
				q.writeErrors.Add(uint64(n - max(sent, 0)))
			}
			if n == len(q.deq) {
				continue // more may be due now
			}
		}
		select {
		case <-q.quit:
			return
		default:
		}
		if next == qdisc.Idle {
			q.sleep.sleep(-1)
			continue
		}
		// A kick while backlogged (an arrival, a reconfiguration that
		// may move next) is at worst an early look.
		if d := next - q.now(); d > 0 {
			q.sleep.sleep(d)
		}
	}
}

// Close stops the goroutine; queued frames are dropped.
func (q *Queue) Close() {
	select {
	case <-q.quit:
	default:
		close(q.quit)
	}
	q.sleep.wake()
	<-q.done
	q.sleep.close()
}

// Stats are a Queue's settings and counters for the status page and
// metrics: the qdisc's per-tin counters as they are.
type Stats struct {
	Direction   string      `json:"direction"`
	Rate        uint64      `json:"rate_bps"`
	Overhead    int         `json:"overhead"`
	Diffserv    string      `json:"diffserv"`
	TinNames    []string    `json:"tin_names"`
	WriteErrors uint64      `json:"write_errors"`
	Queue       qdisc.Stats `json:"queue"`
}

// Stats returns the Queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	p, fq := q.params, q.q
	q.mu.Unlock()
	st := Stats{
		Direction:   q.dir.String(),
		Rate:        p.Rate,
		Overhead:    p.Overhead,
		Diffserv:    p.Diffserv.String(),
		WriteErrors: q.writeErrors.Load(),
		Queue:       fq.Stats(),
	}
	for i := range st.Queue.NumTins {
		st.TinNames = append(st.TinNames, p.Diffserv.TinName(i))
	}
	return st
}
