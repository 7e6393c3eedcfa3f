// Package pppoelink runs a PPPoE client session (package pppoe) on a WAN
// interface: it takes the PPPoE frames (EtherTypes 0x8863 and 0x8864)
// off the interface with a raw-frame tap, hands them to the session on
// one goroutine, sends the session's frames with the interface's
// WriteFrame and calls Tick at the session's NextDeadline.
//
// The session's IP packets (the slow path, before a netstack NIC for the
// PPP link exists) and its state changes go to the callbacks of Config;
// this package moves frames and time and never imports the router.
package pppoelink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/pppoe"
	"github.com/gvrouter/gvrouter/stack"
)

// Lower is the WAN interface the session runs on.
type Lower = stack.FrameLink

// Tunables.
const (
	// rxQueue is how many received PPPoE frames wait for the session's
	// goroutine. Control traffic is a few frames a second; data frames
	// reach this queue only until the PPP link has its own NIC, so 256
	// (two receive batches) absorbs a burst; more are counted as
	// RxQueueFull.
	rxQueue = 256
	// maxFrame is the largest frame kept: a baby-jumbo PPPoE frame
	// (RFC 4638: 1500 + 8 of PPPoE and PPP, 14 of Ethernet) and one VLAN
	// tag. A longer one is counted as RxTooLong.
	maxFrame = 1500 + 8 + 14 + 4
	// idleWait is how long routineRun sleeps when the session has no
	// timer (stopped): long, since a frame or Close wakes it anyway.
	idleWait = time.Hour
)

// Config configures a Link.
type Config struct {
	// Name names the interface in logs, e.g. "wan".
	Name string
	// Session configures the PPPoE session (Local MAC, service,
	// credentials, echo). Its OnChange is the Link's: use OnChange below.
	Session pppoe.Config
	// OnChange, if set, is called on the link's goroutine with the
	// session's new Status whenever it changes (up, down, addresses):
	// the router re-addresses the WAN, its default route and the DNS
	// forwarder's upstreams from it.
	OnChange func(pppoe.Status)
	// Deliver, if set, is handed each IPv4 or IPv6 packet the session
	// received (proto is pppoe.ProtoIPv4 or ProtoIPv6) on the link's
	// goroutine; packet is valid only during the call. Unset, such
	// packets are counted as NoDeliver.
	Deliver func(proto uint16, packet []byte)
	// Now returns the time; nil uses time.Now. Tests set it.
	Now func() time.Time
}

// Stats are the link's own counters, beside the session's.
type Stats struct {
	// RxQueueFull counts PPPoE frames dropped because the session's
	// goroutine was behind by rxQueue frames.
	RxQueueFull atomic.Uint64
	// RxTooLong counts PPPoE frames longer than maxFrame, dropped.
	RxTooLong atomic.Uint64
	// NoLower counts frames the session sent while no interface was
	// bound (between a reload's removal and re-creation of it).
	NoLower atomic.Uint64
	// TxError counts frames WriteFrame refused.
	TxError atomic.Uint64
	// NoDeliver counts IP packets received with no Deliver to take them.
	NoDeliver atomic.Uint64
}

// Counters returns the link's counters by name, for the status page and
// /metrics.
func (s *Stats) Counters() map[string]uint64 {
	return map[string]uint64{
		"link_rx_queue_full": s.RxQueueFull.Load(),
		"link_rx_too_long":   s.RxTooLong.Load(),
		"link_no_lower":      s.NoLower.Load(),
		"link_tx_error":      s.TxError.Load(),
		"link_no_deliver":    s.NoDeliver.Load(),
	}
}

// Link is a running PPPoE session on a WAN interface. It is safe for
// concurrent use. Its one goroutine (routineRun) is started by Start and
// stopped by Close.
type Link struct {
	name    string
	s       *pppoe.Session
	log     *slog.Logger
	now     func() time.Time
	deliver func(uint16, []byte)
	stats   Stats

	// rx carries received frames to routineRun; free returns their
	// buffers. rxQueue buffers exist, so receiving allocates nothing.
	rx   chan rxFrame
	free chan *[maxFrame]byte

	// onChange is Config.OnChange, called by changed.
	onChange func(pppoe.Status)

	// mu protects lower and remove.
	mu     sync.Mutex
	lower  Lower
	remove []func()

	// out is the interface frames leave by; nil while there is none.
	out atomic.Pointer[lowerBox]

	cancel context.CancelFunc
	done   chan struct{}
}

type lowerBox struct{ l Lower }

type rxFrame struct {
	buf *[maxFrame]byte
	n   int
}

// Start builds the session for cfg and starts it: discovery begins at
// once, and its PADIs are counted as NoLower until Bind gives the link
// an interface (the router binds it in the same reload).
func Start(cfg Config, log *slog.Logger) (*Link, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Link{name: cfg.Name, log: log, now: cfg.Now, deliver: cfg.Deliver, onChange: cfg.OnChange,
		rx: make(chan rxFrame, rxQueue), free: make(chan *[maxFrame]byte, rxQueue), done: make(chan struct{})}
	if l.now == nil {
		l.now = time.Now
	}
	for range rxQueue {
		l.free <- new([maxFrame]byte)
	}
	sc := cfg.Session
	sc.OnChange = l.changed
	s, err := pppoe.New(sc, sender{l})
	if err != nil {
		return nil, fmt.Errorf("pppoe %s: %w", cfg.Name, err)
	}
	l.s = s
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.routineRun(ctx)
	return l, nil
}

// Session returns the session, for Status, Stats and Link.
func (l *Link) Session() *pppoe.Session { return l.s }

// Stats returns the link's own counters.
func (l *Link) Stats() *Stats { return &l.stats }

// Status returns the session's Status with the link's counters merged
// into its Counters.
func (l *Link) Status() pppoe.Status {
	st := l.s.Status(l.now())
	if st.Counters == nil {
		st.Counters = make(map[string]uint64)
	}
	for k, v := range l.stats.Counters() {
		st.Counters[k] = v
	}
	return st
}

// Bind moves the link to lower, the WAN interface now (a reload may have
// recreated it; nil when it is gone): the taps move and the session's
// frames leave by it. Binding the same interface again does nothing.
func (l *Link) Bind(lower Lower) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lower == l.lower {
		return nil
	}
	for _, r := range l.remove {
		r()
	}
	l.remove, l.lower = nil, nil
	l.out.Store(nil)
	if lower == nil {
		return nil
	}
	for _, et := range []uint16{pppoe.EtherTypeDiscovery, pppoe.EtherTypeSession} {
		remove, err := lower.AddTap(stack.MatchEtherType(et), tap{l})
		if err != nil {
			for _, r := range l.remove {
				r()
			}
			l.remove = nil
			return fmt.Errorf("pppoe %s: %w", l.name, err)
		}
		l.remove = append(l.remove, remove)
	}
	l.lower = lower
	l.out.Store(&lowerBox{lower})
	return nil
}

// Close ends the session (a PADT to the AC if one is up, while the
// interface is still bound), stops the goroutine and removes the taps.
func (l *Link) Close() {
	l.cancel()
	<-l.done
	l.s.Stop(l.now())
	_ = l.Bind(nil)
}

// changed is the session's OnChange. It runs on routineRun, inside a
// Session call but without its lock, so the caller's OnChange may read
// the session.
func (l *Link) changed(st pppoe.Status) {
	l.log.Info("pppoe session", "interface", l.name, "state", st.State, "reason", st.LastDownReason)
	if l.onChange != nil {
		l.onChange(st)
	}
}

// routineRun is the link's goroutine: it hands received frames to the
// session and calls Tick at its NextDeadline, so the session is entered
// from one goroutine only and never from the receive path. Owner: Start;
// stopped by Close.
func (l *Link) routineRun(ctx context.Context) {
	l.log.Debug("pppoe link started", "interface", l.name)
	defer l.log.Debug("pppoe link stopped", "interface", l.name)
	defer close(l.done)
	l.s.Start(l.now())
	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	for {
		wait := idleWait
		if d := l.s.NextDeadline(); !d.IsZero() {
			wait = max(d.Sub(l.now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case f := <-l.rx:
			proto, pkt := l.s.Handle(l.now(), f.buf[:f.n])
			if pkt != nil {
				if l.deliver != nil {
					l.deliver(proto, pkt)
				} else {
					l.stats.NoDeliver.Add(1)
				}
			}
			l.free <- f.buf
		case <-timer.C:
			l.s.Tick(l.now())
		}
	}
}

// tap takes PPPoE frames off the receive path. Deliver copies the frame
// into a free buffer and queues it for routineRun; it never blocks.
type tap struct{ l *Link }

func (t tap) Deliver(frame []byte) bool {
	l := t.l
	if len(frame) > maxFrame {
		l.stats.RxTooLong.Add(1)
		return true
	}
	select {
	case buf := <-l.free:
		n := copy(buf[:], frame)
		l.rx <- rxFrame{buf, n}
	default:
		l.stats.RxQueueFull.Add(1)
	}
	return true
}

// sender is the session's FrameSender: the bound interface's WriteFrame.
type sender struct{ l *Link }

func (s sender) SendFrame(frame []byte) {
	b := s.l.out.Load()
	if b == nil {
		s.l.stats.NoLower.Add(1)
		return
	}
	if err := b.l.WriteFrame(frame); err != nil {
		s.l.stats.TxError.Add(1)
	}
}
