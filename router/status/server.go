package status

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// SampleInterval is how often Run samples the Source. One second gives
	// "current" rates that follow traffic changes as a person watches the
	// page (which fetches every second) at the cost of one Snapshot a second.
	SampleInterval = time.Second

	// staleSamples is how many intervals old the latest sample may be before
	// a request samples the Source itself. It covers a Server whose Run is
	// not running (tests, or a stopped sampler) without racing a live one.
	staleSamples = 2

	// HTTP limits. The page is small and read-only; these only bound what a
	// slow or hostile client can hold.
	readHeaderTimeout = 5 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 8 << 10
)

// Server serves the status page, JSON and Prometheus metrics for a Source.
// It is safe for concurrent use.
type Server struct {
	src Source
	log *slog.Logger

	// now and interval are the clock and sampling period; tests replace
	// them before the first sample.
	now      func() time.Time
	interval time.Duration

	// latest is the newest sample, with Rates and uptime filled in. Readers
	// never lock; sample stores a new pointer.
	latest atomic.Pointer[timedSnapshot]
	// sampleMu serialises sample, so rates are always computed from two
	// consecutive samples.
	sampleMu sync.Mutex

	// hist is the last HistoryLen samples' rates, for /api/history.
	hist *history

	reg     *prometheus.Registry
	handler http.Handler // the endpoints, without guard
	guarded http.Handler // handler behind guard

	// lim counts the connections of every listener given to Serve.
	lim connLimit

	// hosts are the configured names and addresses guard admits besides
	// the router's own (SetHosts); nil = none.
	hosts atomic.Pointer[[]string]
	// forbiddenHost and forbiddenOrigin count the requests guard refused.
	forbiddenHost, forbiddenOrigin atomic.Uint64

	// mu protects servers and closed.
	mu      sync.Mutex
	servers map[*http.Server]struct{}
	closed  bool
}

// New returns a Server for src. It logs to log (nil discards). Call Run to
// sample once a second; until then, and whenever the latest sample is stale,
// requests sample src themselves.
func New(src Source, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		src:      src,
		log:      log,
		now:      time.Now,
		interval: SampleInterval,
		servers:  make(map[*http.Server]struct{}),
		hist:     newHistory(),
	}
	s.reg = newRegistry(s)
	s.handler = s.newHandler()
	s.guarded = s.guard(s.handler)
	return s
}

// Run samples the Source every second until ctx is done. Run it once, in
// its own goroutine; it returns when ctx is cancelled.
func (s *Server) Run(ctx context.Context) {
	s.log.Debug("status: sampler started", "interval", s.interval)
	defer s.log.Debug("status: sampler stopped")
	t := time.NewTicker(s.interval)
	defer t.Stop()
	s.sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sample()
		}
	}
}

// timedSnapshot is one sample: a Snapshot and when it was taken.
type timedSnapshot struct {
	snap Snapshot
	// at is snap.Time with the monotonic clock reading, so intervals and
	// uptime survive wall clock steps (a router without an RTC sets its
	// clock by NTP after boot).
	at time.Time
}

// sample takes a Snapshot from the Source, fills in the fields the Server
// owns and makes it the latest.
func (s *Server) sample() *Snapshot {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	return s.sampleLocked()
}

// sampleLocked is sample; s.sampleMu must be held.
func (s *Server) sampleLocked() *Snapshot {
	cur := &timedSnapshot{snap: s.src.Snapshot(), at: s.now()}
	snap := &cur.snap
	snap.Time = cur.at.UTC()
	if !snap.Started.IsZero() {
		snap.UptimeSeconds = max(0, cur.at.Sub(snap.Started).Seconds())
	}
	// Copy the slices: Rates are written into them, and the Source may
	// hand out its own backing arrays. Empty slices encode as [] not null.
	snap.Interfaces = append(make([]Interface, 0, len(snap.Interfaces)), snap.Interfaces...)
	snap.Ports = append(make([]Port, 0, len(snap.Ports)), snap.Ports...)
	snap.Routes = slices.Clone(snap.Routes)
	if snap.Routes == nil {
		snap.Routes = []Route{}
	}
	for k := range snap.Interfaces {
		i := &snap.Interfaces[k]
		i.Rates = Rates{}
		if i.Addresses == nil {
			i.Addresses = []string{}
		}
		if i.Drops == nil {
			i.Drops = map[string]uint64{}
		}
	}
	for k := range snap.Ports {
		p := &snap.Ports[k]
		p.Rates = Rates{}
		if p.Drops == nil {
			p.Drops = map[string]uint64{}
		}
	}
	snap.HTTP = HTTP{Open: s.lim.open.Load(), Refused: s.lim.refused.Load(),
		ForbiddenHost: s.forbiddenHost.Load(), ForbiddenOrigin: s.forbiddenOrigin.Load()}
	snap.Conntrack = normalizeConntrack(snap.Conntrack)
	normalizeServices(snap)
	normalizePPPoE(snap)
	normalizeIPv6(snap)
	normalizeNeighbors(snap)
	if snap.Process == nil {
		snap.Process = readProcess()
	} else {
		p := *snap.Process
		snap.Process = &p
	}
	snap.Seq = 1
	if prev := s.latest.Load(); prev != nil {
		snap.Seq = prev.snap.Seq + 1
		dt := cur.at.Sub(prev.at)
		fillRates(&prev.snap, snap, dt)
		fillConntrackRates(prev.snap.Conntrack, snap.Conntrack, dt)
		fillDNSRates(prev.snap.DNS, snap.DNS, dt)
		fillProcessRate(prev.snap.Process, snap.Process, dt)
	}
	s.hist.record(snap)
	s.latest.Store(cur)
	return snap
}

// current returns the latest sample, sampling first if there is none or it
// is stale. The result is shared and must not be modified.
func (s *Server) current() *Snapshot {
	if p := s.latest.Load(); p != nil && !s.stale(p) {
		return &p.snap
	}
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	if p := s.latest.Load(); p != nil && !s.stale(p) {
		return &p.snap // another request sampled while we waited
	}
	return s.sampleLocked()
}

// stale reports whether p is too old to serve.
func (s *Server) stale(p *timedSnapshot) bool {
	return s.now().Sub(p.at) > staleSamples*s.interval
}

// Handler returns the HTTP handler for "/", "/api/status",
// "/api/conntrack" and "/metrics". It answers 403 to a Host that does
// not name the router and to a cross-origin read (host.go).
func (s *Server) Handler() http.Handler { return s.guarded }

// Serve serves the Handler on l until l fails or is closed, or Close is
// called. It returns nil in the last two cases. The connections of all
// listeners together are capped at MaxConns; one past that is answered
// with a 503 and closed, and counted in Snapshot.HTTP.Refused.
func (s *Server) Serve(l net.Listener) error { return s.ServeHandler(l, s.handler) }

// ServeHandler is Serve with h as the handler, for a listener that
// answers more than Handler does (h usually falls back to Handler): the
// router mounts /api/capture per listener this way. h is behind the same
// Host and Origin checks as Handler.
func (s *Server) ServeHandler(l net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           s.guard(h),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readHeaderTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.servers[srv] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.servers, srv)
		s.mu.Unlock()
	}()
	s.log.Debug("status: serving", "addr", l.Addr())
	err := srv.Serve(&limitListener{Listener: l, lim: &s.lim})
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close closes every listener given to Serve and their open connections.
// Serve calls after Close close their listener and return nil.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for srv := range s.servers {
		errs = append(errs, srv.Close())
	}
	return errors.Join(errs...)
}
