package sqm

import (
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/gvrouter/gvrouter/hw"
)

// Set is the shaped directions of a router's wan interfaces, by interface
// name. The router asks it for each interface's writer (upload) and
// receive shaper (download) at every Apply, then prunes what the new
// config no longer shapes; a rate change reconfigures a Queue in place,
// so its backlog and flows survive a reload.
type Set struct {
	host HostFunc
	log  *slog.Logger

	mu sync.Mutex
	m  map[string]*pair
}

// pair is one interface's two directions; nil when not shaped.
type pair struct{ upload, download *Queue }

// NewSet returns an empty Set whose queues find inside hosts with host.
func NewSet(host HostFunc, log *slog.Logger) *Set {
	return &Set{host: host, log: log, m: make(map[string]*pair)}
}

// queue returns name's Queue of direction d made with p and writing to
// out, or the existing one reconfigured to p; nil (logged) when p is
// refused, which config validation makes unlikely.
func (s *Set) queue(name string, d Direction, p Params, out hw.FrameWriter) *Queue {
	pr := s.m[name]
	if pr == nil {
		pr = &pair{}
		s.m[name] = pr
	}
	q := &pr.upload
	if d == Download {
		q = &pr.download
	}
	if *q != nil {
		if err := (*q).Reconfigure(p); err != nil {
			// Keep shaping as before.
			s.log.Error("sqm", "interface", name, "direction", d.String(), "err", err)
		}
		(*q).SetOutput(out)
		return *q
	}
	nq, err := New(d, p, s.host, out)
	if err != nil {
		s.log.Error("sqm", "interface", name, "direction", d.String(), "err", err)
		return nil
	}
	*q = nq
	return nq
}

// Writer returns what interface name writes to: its upload Queue in
// front of w when p is set, else w itself (no cost when not shaped).
func (s *Set) Writer(name string, p *Params, w hw.FrameWriter) hw.FrameWriter {
	if p == nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queue(name, Upload, *p, w); q != nil {
		return q
	}
	return w
}

// Download returns interface name's download Queue made or reconfigured
// to p, writing what it releases to out; nil when p is nil or refused.
func (s *Set) Download(name string, p *Params, out hw.FrameWriter) *Queue {
	if p == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue(name, Download, *p, out)
}

// Prune closes the directions shaped no longer reports as shaped, once
// the stack writes elsewhere (after Apply).
func (s *Set) Prune(shaped func(name string) (upload, download bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, pr := range s.m {
		up, down := shaped(name)
		if pr.upload != nil && !up {
			pr.upload.Close()
			pr.upload = nil
		}
		if pr.download != nil && !down {
			pr.download.Close()
			pr.download = nil
		}
		if pr.upload == nil && pr.download == nil {
			delete(s.m, name)
		}
	}
}

// Close stops every queue.
func (s *Set) Close() {
	s.Prune(func(string) (bool, bool) { return false, false })
}

// Status is one shaped direction for the status page and metrics: the
// interface and its Queue's Stats as they are.
type Status struct {
	// Interface is the wan interface, e.g. "wan".
	Interface string `json:"interface"`
	Stats
}

// Status returns the shaped directions by interface name, upload first.
func (s *Set) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for _, name := range slices.Sorted(maps.Keys(s.m)) {
		pr := s.m[name]
		for _, q := range []*Queue{pr.upload, pr.download} {
			if q != nil {
				out = append(out, Status{Interface: name, Stats: q.Stats()})
			}
		}
	}
	return out
}
