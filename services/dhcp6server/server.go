package dhcp6server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// Transport carries the server's UDP datagrams on one link. Recv returns
// every UDP datagram to port 547 the link receives, multicast to
// ff02::1:2 or unicast to the server, with Src, Dst (the IPv6 destination
// address and port, which the server checks), SrcMAC (nil if the
// transport cannot know it) and the payload, which the server does not
// keep after it handled it. Send sends a whole datagram from Src to Dst
// with Ethernet destination DstMAC (nil: the transport resolves it);
// Send does not keep the Packet. In the router, a rawudp IPv6 Conn on
// port 547 fed by the interface's frame tap is one.
type Transport interface {
	// Send sends one datagram.
	Send(rawudp.Packet) error
	// Recv returns the next datagram received, or an error when ctx is
	// done or the transport is closed.
	Recv(ctx context.Context) (rawudp.Packet, error)
}

// ErrRunning is returned by Run when another Run is in progress.
var ErrRunning = errors.New("dhcp6server: already running")

// logEvery spaces the debug lines about dropped datagrams, so that a
// flood does not flood the log.
const logEvery = time.Second

// Server is one LAN interface's stateless DHCPv6 server. Its methods are
// safe for concurrent use.
type Server struct {
	cfg      Config
	t        Transport
	log      *slog.Logger
	stats    Stats
	duid     []byte        // our DUID
	serverID dhcpv6.Option // option 2 with duid
	refresh  dhcpv6.Option // option 32
	opts     atomic.Pointer[options]
	limit    *limiter
	running  atomic.Bool
	lastLog  atomic.Int64 // unix ns of the last drop logged
}

// New returns a server for cfg on t, or the errors Validate found.
func New(cfg Config, t Transport) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, errors.New("dhcp6server: no transport")
	}
	cfg = cfg.withDefaults()
	duid := duidLL(cfg.HWAddr)
	s := &Server{cfg: cfg, t: t, log: cfg.Log, duid: duid.ToBytes(), serverID: dhcpv6.OptServerID(duid)}
	s.refresh = refreshOption(cfg.RefreshTime)
	s.opts.Store(newOptions(cfg.DNS, cfg.Domains))
	s.limit = newLimiter(cfg.Clock.Now())
	return s, nil
}

// SetOptions replaces the DNS servers and search domains sent from the
// next Reply on (a new delegated prefix, a forwarder that moved). Invalid
// ones are refused with the errors Config.Validate would report, and the
// options in force stay.
func (s *Server) SetOptions(dns []netip.Addr, domains []string) error {
	var errs []error
	for _, e := range checkOptions(dns, domains) {
		errs = append(errs, e)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.opts.Store(newOptions(dns, domains))
	s.log.Info("dhcp6server: options changed", "dns", dns, "domains", domains)
	return nil
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Status returns a snapshot of the server.
func (s *Server) Status() Status {
	o := s.opts.Load()
	return Status{
		Addr:        s.cfg.Addr,
		ServerID:    slices.Clone(s.duid),
		DNS:         slices.Clone(o.dns),
		Domains:     slices.Clone(o.domains),
		RefreshTime: s.cfg.RefreshTime,
		Running:     s.running.Load(),
		Sources:     s.limit.size(),
		Counters:    s.stats.Counters(),
		Drops:       s.stats.DropCounts(),
	}
}

// Run serves until ctx is done (returning nil) or the transport fails.
// It handles one datagram at a time on the calling goroutine. Only one
// Run may be in progress (ErrRunning); a Server may be run again after
// Run returns.
func (s *Server) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer s.running.Store(false)
	s.log.Debug("dhcp6server: routineRun started", "addr", s.cfg.Addr)
	defer s.log.Debug("dhcp6server: routineRun stopped", "addr", s.cfg.Addr)
	for {
		p, err := s.t.Recv(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dhcp6server: receive: %w", err)
		}
		s.serve(p)
	}
}

// serve handles one datagram and sends its Reply, if any.
func (s *Server) serve(p rawudp.Packet) {
	r, ok := s.handle(p)
	if !ok {
		return
	}
	if err := s.t.Send(r); err != nil {
		s.stats.SendErrors.Add(1)
		s.log.Debug("dhcp6server: send", "to", r.Dst, "err", err)
		return
	}
	s.stats.Replied.Add(1)
}
