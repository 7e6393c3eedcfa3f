package status

import "time"

// Test hooks: internal fields and helpers for the external tests.

func (s *Server) SetClock(now func() time.Time) { s.now = now }
func (s *Server) SetInterval(d time.Duration)   { s.interval = d }
func (s *Server) Sample() *Snapshot             { return s.sample() }

var (
	PageJS        = pageJS
	FormatUptime  = formatUptime
	FormatWhen    = formatWhen
	FormatLatency = formatLatency
)

func (s *Server) Latest() *Snapshot { return &s.latest.Load().snap }

// Conns returns the open and refused connection counts.
func (s *Server) Conns() (open int64, refused uint64) {
	return s.lim.open.Load(), s.lim.refused.Load()
}
