// Package mkalink runs an MKA participant (package mka) on a SecY's lower
// interface, the uncontrolled port of IEEE 802.1X-2020 clause 6.5: it
// takes EAPOL frames (EtherType 0x888E) off the interface with a raw-frame
// tap, sends the participant's MKPDUs with the interface's WriteFrame,
// drives its timers and its periodic rekey, and follows the router when a
// reload recreates the lower interface.
//
// The participant installs and rolls the SAs on the SecY itself (RX
// first, then TX, as its SAK Use handshake says); this package only moves
// frames and time. It never sees a CAK or SAK: they stay inside the
// participant, and nothing here logs, returns or exports one.
package mkalink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/stack"
)

// Lower is the SecY's lower interface.
type Lower = stack.FrameLink

// Tunables.
const (
	// rxQueue is how many received MKPDUs wait for the participant. A
	// peer sends one per hello time (2 s), so 32 absorbs a burst from a
	// shared medium of many peers; more are counted as RxQueueFull.
	rxQueue = 32
	// maxFrame is the largest MKPDU kept: a jumbo-free Ethernet frame.
	// MKPDUs of a point-to-point CA are a few hundred octets; a longer
	// frame is counted as RxTooLong.
	maxFrame = 1518
	// tickInterval is how often the participant's timers run: a fifth of
	// the bounded hello time (0.5 s), as mka.Participant.Run does.
	tickInterval = 100 * time.Millisecond
)

// Config configures a Link.
type Config struct {
	// Name names the SecY in logs, e.g. "ms1".
	Name string
	// Participant configures the MKA participant (CAK, SCI, priority,
	// cipher suite).
	Participant mka.Config
	// Rekey, if not zero, makes the key server distribute a new SAK this
	// often, e.g. 1h; other participants ignore it.
	Rekey time.Duration
}

// Stats are the link's own counters, beside the participant's.
type Stats struct {
	// RxQueueFull counts MKPDUs dropped because the participant was
	// behind by rxQueue frames.
	RxQueueFull atomic.Uint64
	// RxTooLong counts EAPOL frames longer than maxFrame, dropped.
	RxTooLong atomic.Uint64
	// NoLower counts MKPDUs not sent because the lower interface was gone
	// (between a reload's removal and re-creation of it).
	NoLower atomic.Uint64
	// Rekeys counts periodic rekeys started by Config.Rekey.
	Rekeys atomic.Uint64
}

// Link is a running participant on a lower interface. It is safe for
// concurrent use. Its one goroutine (routineRun) is started by Start and
// stopped by Close.
type Link struct {
	name  string
	ckn   []byte
	p     *mka.Participant
	log   *slog.Logger
	rekey time.Duration
	stats Stats

	// rx carries received MKPDUs to routineRun; free returns their
	// buffers. rxQueue buffers exist, so receiving allocates nothing.
	rx   chan rxFrame
	free chan *[maxFrame]byte

	// mu protects lower and remove.
	mu     sync.Mutex
	lower  Lower
	remove func()

	// out is the lower interface MKPDUs leave by; nil while there is none.
	out atomic.Pointer[lowerBox]

	// setRekey carries a new rekey interval to routineRun (SetRekey).
	setRekey chan time.Duration

	cancel context.CancelFunc
	done   chan struct{}
}

// lowerBox holds a Lower for an atomic.Pointer.
type lowerBox struct{ l Lower }

// rxFrame is a received frame copied out of the receive batch.
type rxFrame struct {
	buf *[maxFrame]byte
	n   int
}

// Start builds the participant for cfg on secy and starts it. It sends
// nothing until Bind gives it a lower interface.
func Start(cfg Config, secy mka.SecY, log *slog.Logger) (*Link, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Link{name: cfg.Name, ckn: cfg.Participant.CAK.CKN(), log: log, rekey: cfg.Rekey,
		setRekey: make(chan time.Duration), done: make(chan struct{})}
	p, err := mka.New(cfg.Participant, secy, transport{l}, log)
	if err != nil {
		return nil, fmt.Errorf("mka %s: %w", cfg.Name, err)
	}
	l.p = p
	l.rxInit()
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go l.routineRun(ctx)
	return l, nil
}

// Participant returns the participant, for its State and Stats.
func (l *Link) Participant() *mka.Participant { return l.p }

// Stats returns the link's own counters.
func (l *Link) Stats() *Stats { return &l.stats }

// Bind moves the link to lower, the SecY's lower interface now (a reload
// may have recreated it; nil when it is gone): the EAPOL tap moves and
// MKPDUs leave by it. Binding the same interface again does nothing.
func (l *Link) Bind(lower Lower) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lower == l.lower {
		return nil
	}
	if l.remove != nil {
		l.remove()
		l.remove = nil
	}
	l.lower = nil
	l.out.Store(nil)
	if lower == nil {
		return nil
	}
	remove, err := lower.AddTap(stack.MatchEtherType(mka.EtherType), tap{l})
	if err != nil {
		return fmt.Errorf("mka %s: %w", l.name, err)
	}
	l.lower, l.remove = lower, remove
	l.out.Store(&lowerBox{lower})
	return nil
}

// Close stops the participant and removes the tap. The SAs it installed
// stay on the SecY, which its owner closes next.
func (l *Link) Close() {
	l.cancel()
	<-l.done
	_ = l.Bind(nil)
}

// Rekey makes the participant distribute a new SAK now if it is the key
// server (mka.ErrNotKeyServer otherwise).
func (l *Link) Rekey() error { return l.p.Rekey() }

// SetRekey changes the periodic rekey interval (Config.Rekey; 0 stops
// periodic rekeys, and withdraws one still waiting); the next rekey comes
// d from now. The participant and
// its keys stay. After Close it does nothing.
func (l *Link) SetRekey(d time.Duration) {
	select {
	case l.setRekey <- d:
	case <-l.done:
	}
}

// routineRun is the link's goroutine: it hands received MKPDUs to the
// participant and ticks its timers, so the participant is never entered
// from the receive path (where a SecY call could wait on the receive
// goroutine itself). Owner: Start; stopped by Close.
func (l *Link) routineRun(ctx context.Context) {
	l.log.Debug("mka link started")
	defer l.log.Debug("mka link stopped")
	defer close(l.done)
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	var (
		rekeyTicker *time.Ticker
		rekey       <-chan time.Time
	)
	every := func(d time.Duration) {
		if rekeyTicker != nil {
			rekeyTicker.Stop()
			rekeyTicker, rekey = nil, nil
		}
		if d > 0 {
			rekeyTicker = time.NewTicker(d)
			rekey = rekeyTicker.C
		}
	}
	every(l.rekey)
	defer every(0)
	// The first tick comes after tickInterval, by when the router has
	// bound the lower interface (it does so in the same reload).
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-l.rx:
			l.p.Receive(f.buf[:f.n])
			l.free <- f.buf
		case <-tick.C:
			l.p.Tick()
		case d := <-l.setRekey:
			every(d)
			if d == 0 {
				// A periodic rekey still waiting for the last rollover
				// to finish is withdrawn with the period.
				l.p.CancelRekey()
			}
		case <-rekey:
			if err := l.p.Rekey(); err == nil {
				l.stats.Rekeys.Add(1)
			} else if !errors.Is(err, mka.ErrNotKeyServer) {
				l.log.Warn("mka rekey", "secy", l.name, "err", err)
			}
		}
	}
}

// transport is the participant's mka.Transport: the lower interface's
// WriteFrame, which copies the frame and queues it; it never calls back
// into the participant.
type transport struct{ l *Link }

// Send implements mka.Transport.
func (t transport) Send(frame []byte) error {
	b := t.l.out.Load()
	if b == nil {
		t.l.stats.NoLower.Add(1)
		return errNoLower
	}
	return b.l.WriteFrame(frame)
}

// errNoLower is Send's error while the lower interface is gone.
var errNoLower = errors.New("mkalink: no lower interface")

// tap is the EAPOL tap on the lower interface.
type tap struct{ l *Link }

// Deliver implements stack.Tap: it copies the frame into a free buffer
// and queues it for routineRun, or counts a drop; it never blocks.
func (t tap) Deliver(frame []byte) bool {
	l := t.l
	if len(frame) > maxFrame {
		l.stats.RxTooLong.Add(1)
		return true
	}
	select {
	case buf := <-l.free:
		n := copy(buf[:], frame)
		l.rx <- rxFrame{buf, n} // cannot block: one rx slot per buffer
	default:
		l.stats.RxQueueFull.Add(1)
	}
	return true
}

// rxInit makes the receive buffers.
func (l *Link) rxInit() {
	l.rx = make(chan rxFrame, rxQueue)
	l.free = make(chan *[maxFrame]byte, rxQueue)
	for range rxQueue {
		l.free <- new([maxFrame]byte)
	}
}
