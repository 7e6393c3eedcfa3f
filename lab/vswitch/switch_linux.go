package vswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/hw"
)

// agingSweepInterval is how often Run deletes aged addresses from the
// learning table. Lookups ignore aged entries anyway; the sweep only
// frees their room, and a tenth of AgingTime keeps that cheap.
const agingSweepInterval = AgingTime / 10

// Switch is a VLAN-aware learning switch over hw ports. Its methods are
// safe for concurrent use.
type Switch struct {
	log     *slog.Logger
	names   []string
	ports   []*hw.Port
	promisc []int // per port, a socket whose membership keeps it promiscuous
	fw      *forwarder
	queues  [][]*queue // by port, by receive queue

	// mu protects closed.
	mu     sync.Mutex
	closed bool
}

// New opens every port of cfg with hw.Open (one receive queue, the kernel
// silenced on it) in the calling thread's network namespace and puts it
// in promiscuous mode. Run starts switching; Close undoes all of it. A nil
// log discards messages.
func New(cfg Config, log *slog.Logger) (*Switch, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// Every port must come from one namespace: the calling thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := &Switch{log: log}
	start := time.Now()
	writers := make([]hw.FrameWriter, len(cfg.Ports))
	for i, pc := range cfg.Ports {
		// No vnet headers: the switch forwards wire frames only, as the
		// BCM53012 it stands for; a host's superframe is an oversize
		// drop on its port.
		p, err := hw.Open(hw.Config{Name: pc.Name, Queues: 1, VnetHdr: hw.VnetOff}, log)
		if err != nil {
			s.closePorts()
			return nil, fmt.Errorf("vswitch: port %s: %w", pc.Name, err)
		}
		s.ports = append(s.ports, p)
		s.names = append(s.names, pc.Name)
		writers[i] = p
		fd, err := promiscSocket(pc.Name)
		if err != nil {
			s.closePorts()
			return nil, fmt.Errorf("vswitch: port %s: %w", pc.Name, err)
		}
		s.promisc = append(s.promisc, fd)
	}
	s.fw = newForwarder(newTable(&cfg), writers, func() int64 { return int64(time.Since(start)) })
	s.queues = make([][]*queue, len(s.ports))
	for i, p := range s.ports {
		for range p.Queues() {
			s.queues[i] = append(s.queues[i], s.fw.newQueue())
		}
		// Addresses behind a port that went down may come back
		// anywhere: forget them, as the Linux bridge does when a port
		// is disabled.
		p.SetLinkHandler(func(up bool) {
			if !up {
				s.fw.fdb.flush(i)
			}
		})
	}
	for i, pc := range cfg.Ports {
		log.Info("vswitch port", "port", pc.Name, "pvid", pc.PVID, "tagged", pc.Tagged, "queues", len(s.queues[i]))
	}
	return s, nil
}

// promiscSocket returns an AF_PACKET socket that holds a promiscuous
// membership on ifname: the kernel drops it when the socket closes. It
// receives nothing (protocol 0, unbound).
func promiscSocket(ifname string) (int, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, fmt.Errorf("promiscuous mode: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("promiscuous mode: AF_PACKET socket: %w", err)
	}
	mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("promiscuous mode: %w", err)
	}
	return fd, nil
}

// Run switches frames between the ports until ctx is done or Close is
// called; it returns nil when ctx ends and hw.ErrClosed when Close stopped
// it. A port that fails stops the switch and its error is returned. Only
// one Run may be in progress (hw.ErrRunning).
func (s *Switch) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(s.ports))
	var wg sync.WaitGroup
	for i, p := range s.ports {
		qs := s.queues[i]
		wg.Go(func() {
			errs[i] = p.Run(ctx, func(queue int, frames []hw.Frame) {
				s.fw.handle(i, qs[queue], frames)
			})
			cancel() // one port stopping stops the switch
		})
	}
	wg.Go(func() { s.routineAge(ctx) })
	wg.Wait()

	closed := false
	var failed []error
	for i, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, hw.ErrClosed):
			closed = true
		default:
			failed = append(failed, fmt.Errorf("vswitch: port %s: %w", s.names[i], err))
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if closed {
		return hw.ErrClosed
	}
	return nil
}

// routineAge deletes aged addresses every agingSweepInterval until ctx is
// done. Run starts it and waits for it.
func (s *Switch) routineAge(ctx context.Context) {
	s.log.Debug("vswitch ageing started")
	defer s.log.Debug("vswitch ageing stopped")
	t := time.NewTicker(agingSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.fw.fdb.expire(s.fw.now())
		}
	}
}

// Close stops Run and closes the ports, restoring the kernel's settings
// on them. It returns the errors met while restoring, or hw.ErrClosed if
// the switch was already closed.
func (s *Switch) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return hw.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	return s.closePorts()
}

func (s *Switch) closePorts() error {
	var errs []error
	for i, p := range s.ports {
		if err := p.Close(); err != nil {
			errs = append(errs, fmt.Errorf("vswitch: close %s: %w", s.names[i], err))
		}
	}
	for _, fd := range s.promisc {
		unix.Close(fd)
	}
	s.promisc = nil
	return errors.Join(errs...)
}

// Stats returns a snapshot of the switch's counters.
func (s *Switch) Stats() Stats {
	st := s.fw.stats(s.names)
	for i, p := range s.ports {
		st.Ports[i].HW = p.Stats()
	}
	return st
}
