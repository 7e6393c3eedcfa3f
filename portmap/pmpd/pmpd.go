// Package pmpd serves UDP port 5351, which NAT-PMP (RFC 6886) and PCP
// (RFC 6887) share: it reads each datagram, hands it to the protocol its
// version byte names (0: NAT-PMP, anything else: PCP, which answers
// versions it does not speak with UNSUPP_VERSION, RFC 6887 section 9)
// and sends the answer back to the sender.
package pmpd

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
)

// maxDatagram bounds what is read: PCP messages are at most 1100 bytes
// (RFC 6887 section 7); one byte more shows that a datagram was longer.
const maxDatagram = 1101

// Handler answers one request, appending the response to out; nil means
// no answer. natpmp.Handler and pcp.Handler are Handlers.
type Handler interface {
	Handle(req []byte, from netip.AddrPort, out []byte) []byte
}

// Stats are the listener's counters (`counter:"GROUP/NAME"`).
type Stats struct {
	Disabled   atomic.Uint64 `counter:"drops/disabled"`     // a protocol that is off
	Empty      atomic.Uint64 `counter:"drops/empty"`        // a zero-length datagram
	SendErrors atomic.Uint64 `counter:"errors/send_failed"` // an answer that could not be sent
	// Announcements counts the restart announcements sent.
	Announcements atomic.Uint64 `counter:"events/announcements"`
}

// Server serves one socket. NATPMP and PCP may each be nil (off).
type Server struct {
	Conn   net.PacketConn // bound to a LAN-side address, port 5351; never a WAN one
	NATPMP Handler
	PCP    Handler
	stats  Stats
}

// Stats returns the listener's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Serve answers requests until ctx is done or the socket fails; it
// closes Conn when ctx is done, and returns nil then.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.Conn.Close() })
	defer stop()
	buf := make([]byte, maxDatagram)
	out := make([]byte, 0, maxDatagram)
	for {
		n, addr, err := s.Conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		if resp := s.handle(buf[:n], ua.AddrPort(), out[:0]); resp != nil {
			if _, err := s.Conn.WriteTo(resp, addr); err != nil {
				s.stats.SendErrors.Add(1)
			}
		}
	}
}

func (s *Server) handle(b []byte, from netip.AddrPort, out []byte) []byte {
	if len(b) == 0 {
		s.stats.Empty.Add(1)
		return nil
	}
	h := s.PCP
	if b[0] == 0 {
		h = s.NATPMP
	}
	if h == nil {
		s.stats.Disabled.Add(1)
		return nil
	}
	return h.Handle(b, from, out)
}

// Announcer gives the unsolicited message a protocol multicasts when the
// server starts or its external address changes (natpmp.Handler and
// pcp.Handler).
type Announcer interface {
	Announcement() []byte
}

// AnnounceGroup is where announcements go: all hosts, the clients' port
// (RFC 6886 section 3.2.1, RFC 6887 section 14.1.3).
var AnnounceGroup = netip.AddrPortFrom(netip.AddrFrom4([4]byte{224, 0, 0, 1}), 5350)

// Announcement schedule (RFC 6886 section 3.2.1, which RFC 6887 section
// 14.1.3 follows): ten times, the first interval 250 ms, each next one
// doubled.
const (
	announceCount = 10
	announceFirst = 250 * time.Millisecond
)

// Announce sends the announcements of the protocols that are on (a
// NAT-PMP external address response, a PCP ANNOUNCE response, each with
// the epoch) to dst (AnnounceGroup) on conn, ten times from 250 ms apart
// and doubling, or until ctx is done. conn must be a LAN-side socket:
// announcements never go to the WAN.
func (s *Server) Announce(ctx context.Context, conn net.PacketConn, dst netip.AddrPort) error {
	var as []Announcer
	for _, h := range []Handler{s.NATPMP, s.PCP} {
		if a, ok := h.(Announcer); ok {
			as = append(as, a)
		}
	}
	wait := announceFirst
	for i := range announceCount {
		for _, a := range as {
			if _, err := conn.WriteTo(a.Announcement(), net.UDPAddrFromAddrPort(dst)); err != nil {
				return err
			}
			s.stats.Announcements.Add(1)
		}
		if i == announceCount-1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
	return nil
}
