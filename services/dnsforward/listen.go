package dnsforward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// SetListen's sockets: with Config.ListenUDP and Config.ListenTCP the
// forwarder opens and serves one UDP socket and one TCP listener per
// address itself, so that the set can change while it runs. A new LAN
// address (a DHCPv6 delegation renumbering a LAN) gets its sockets and
// an address that left loses them; the cache, the upstreams and the
// questions in flight stay. A question in flight from a client of a
// closed socket gets no answer (its reply write fails); the client
// retries at an address it still has.

// errStopped is SetListen's error once Run has returned: the sockets
// would have no owner left to close them.
var errStopped = errors.New("dnsforward: forwarder stopped")

// listener is the sockets of one SetListen address and the goroutines
// serving them.
type listener struct {
	pc     net.PacketConn
	cancel context.CancelFunc // ends Serve and ServeTCP (which closes the listener)
	done   chan struct{}      // closed when both returned
}

// close stops serving l's address and closes its sockets; it returns
// when they are closed.
func (l *listener) close() {
	l.cancel()
	<-l.done
	l.pc.Close()
}

// SetListen makes the forwarder serve UDP and TCP on exactly addrs, e.g.
// [192.168.1.1:53 [fd00:1::1]:53], opening the sockets of addresses it
// does not serve yet (Config.ListenUDP, Config.ListenTCP) and closing
// those of addresses not in addrs before it returns. Nothing else
// changes: the cache, the upstreams and the questions in flight survive.
// An address that cannot be opened is left out and reported; the others
// are served. Run's end closes every socket, and SetListen after it
// fails.
func (f *Forwarder) SetListen(addrs []netip.AddrPort) error {
	if f.cfg.ListenUDP == nil {
		return errors.New("dnsforward: SetListen needs Config.ListenUDP and Config.ListenTCP")
	}
	f.listenMu.Lock()
	defer f.listenMu.Unlock()
	if f.ctx.Err() != nil {
		return errStopped
	}
	want := make(map[netip.AddrPort]bool, len(addrs))
	for _, ap := range addrs {
		want[ap] = true
	}
	// Close first: an address that moves between two sockets' sets is
	// free again when its new socket opens.
	for ap, l := range f.listeners {
		if !want[ap] {
			l.close()
			delete(f.listeners, ap)
			f.cfg.Log.Info("dnsforward: stopped listening", "addr", ap)
		}
	}
	var errs []error
	f.listenOrder = f.listenOrder[:0]
	for _, ap := range addrs {
		if f.listeners[ap] == nil {
			l, err := f.listen(ap)
			if err != nil {
				errs = append(errs, fmt.Errorf("dnsforward: listen on %v: %w", ap, err))
				continue
			}
			f.listeners[ap] = l
			f.cfg.Log.Info("dnsforward: listening", "addr", ap)
		}
		if !slices.Contains(f.listenOrder, ap) {
			f.listenOrder = append(f.listenOrder, ap)
		}
	}
	return errors.Join(errs...)
}

// listen opens ap's sockets and serves them until l.close or Run's end.
// f.listenMu must be held.
func (f *Forwarder) listen(ap netip.AddrPort) (*listener, error) {
	pc, err := f.cfg.ListenUDP(ap)
	if err != nil {
		return nil, fmt.Errorf("udp: %w", err)
	}
	ln, err := f.cfg.ListenTCP(ap)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("tcp: %w", err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	l := &listener{pc: pc, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := f.Serve(ctx, pc); err != nil {
			f.cfg.Log.Error("dnsforward: udp socket failed", "addr", ap, "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := f.ServeTCP(ctx, ln); err != nil {
			f.cfg.Log.Error("dnsforward: tcp listener failed", "addr", ap, "err", err)
		}
	}()
	go func() {
		wg.Wait()
		close(l.done)
	}()
	return l, nil
}

// closeListeners closes every SetListen socket, for Run's end (f.ctx is
// done, so SetListen opens no more).
func (f *Forwarder) closeListeners() {
	f.listenMu.Lock()
	defer f.listenMu.Unlock()
	for ap, l := range f.listeners {
		l.close()
		delete(f.listeners, ap)
	}
	f.listenOrder = nil
}

// Listening returns the addresses SetListen's sockets serve, in the
// order SetListen was given them.
func (f *Forwarder) Listening() []netip.AddrPort {
	f.listenMu.Lock()
	defer f.listenMu.Unlock()
	return slices.Clone(f.listenOrder)
}
