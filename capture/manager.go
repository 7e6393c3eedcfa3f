package capture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrBusy is returned by Manager.Run when MaxSessions captures already
// run.
var ErrBusy = errors.New("capture: too many captures running")

// Manager starts captures on the router's points. It is safe for
// concurrent use.
type Manager struct {
	// lookup finds the point of a port or interface name.
	lookup func(name string) (*Point, error)
	mu     sync.Mutex
	// running is protected by mu.
	running int
}

// NewManager returns a manager that finds points with lookup, which
// returns an error naming what it could not find.
func NewManager(lookup func(name string) (*Point, error)) *Manager {
	return &Manager{lookup: lookup}
}

// Prepare checks r, applies its defaults and reserves a capture slot;
// call the returned start to run the capture (writing pcapng to w) or
// cancel to give the slot back. Splitting the two lets a server answer
// an error before it starts streaming.
func (m *Manager) Prepare(r Request) (start func(ctx context.Context, w io.Writer) (Result, error), cancel func(), err error) {
	if err := r.normalize(); err != nil {
		return nil, nil, err
	}
	f, err := Parse(r.Filter)
	if err != nil {
		return nil, nil, err
	}
	p, err := m.lookup(r.Iface)
	if err != nil {
		return nil, nil, fmt.Errorf("capture: %w", err)
	}
	m.mu.Lock()
	if m.running >= MaxSessions {
		m.mu.Unlock()
		return nil, nil, fmt.Errorf("%w (at most %d)", ErrBusy, MaxSessions)
	}
	m.running++
	m.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			m.mu.Lock()
			m.running--
			m.mu.Unlock()
		})
	}
	start = func(ctx context.Context, w io.Writer) (Result, error) {
		defer release()
		s := newSession(r, f)
		p.add(s)
		if p.counters == nil {
			defer p.remove(s)
			return s.run(ctx, p.Name(), r.Seconds, w)
		}
		rx0, tx0 := p.counters()
		res, err := s.run(ctx, p.Name(), r.Seconds, w)
		p.remove(s)
		// A reload that recreates an interface starts its counters
		// again: then the window's count is unknown.
		if rx1, tx1 := p.counters(); rx1 >= rx0 && tx1 >= tx0 {
			res.Counted = &Counted{Received: rx1 - rx0, Sent: tx1 - tx0}
		}
		return res, err
	}
	return start, release, nil
}

// Run is Prepare and start in one call.
func (m *Manager) Run(ctx context.Context, r Request, w io.Writer) (Result, error) {
	start, _, err := m.Prepare(r)
	if err != nil {
		return Result{}, err
	}
	return start(ctx, w)
}
