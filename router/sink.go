package router

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// ServeDiscard accepts TCP connections at addr in the router's netstack
// and reads and drops whatever they send (RFC 863), so that a sender
// measures how fast the router terminates TCP. It is for the lab's GRO
// bench (router run -bench-sink), not part of the config: a production
// router has no business sinking traffic. The listener closes with the
// router; a reload that restarts the status listeners (their interface's
// addresses changed, say by a delegation) opens it again.
func (r *Router) ServeDiscard(addr netip.AddrPort) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.net == nil {
		return errors.New("router: closed")
	}
	return r.serveDiscardLocked(addr)
}

func (r *Router) serveDiscardLocked(addr netip.AddrPort) error {
	ln, err := r.net.ListenTCP(addr)
	if err != nil {
		return fmt.Errorf("router: discard listener %s: %w", addr, err)
	}
	sl := &statusListener{Listener: ln}
	r.listeners = append(r.listeners, sl)
	r.sinks = append(r.sinks, addr)
	if err := r.applyNATLocked(); err != nil {
		r.log.Warn("nat: reserving the discard port", "addr", addr, "err", err)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if !sl.closing.Load() {
					r.log.Warn("discard listener stopped", "addr", addr, "err", err)
				}
				return
			}
			// Not in r.wg: Close must not wait for a sender to stop;
			// closing the netstack ends the read.
			go func() {
				defer c.Close()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	r.log.Info("discard sink listening", "on", addr)
	return nil
}
