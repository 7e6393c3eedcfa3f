package router

// The lab's hooks: what package router offers only so that the lab (lab/,
// cmd/gvlab) and the whole-router tests can measure or steer a router.
// None is reachable from the config; the appliance reaches ServeDiscard
// only through "gvrouter run -bench-sink", WithMKARand only in a build
// with -tags labmka, WithMACsecYield only with -tags labyield,
// WithPortMapClock only with -tags labclock and WithARPProbeTiming only
// with -tags labprobe (cmd/gvrouter/labhooks.go says why each exists
// there).
//
//   - ServeDiscard: a TCP sink in the router's netstack, so that the
//     lab's GRO bench (gvlab -bench-modes g) and the MACsec interop test
//     can measure TCP the router terminates, with nothing else in the way.
//   - WithMKARand: a known stream of MIs and SAKs, so that the lab's
//     key-leak test can grep every log, page and capture for the SAKs.
//   - WithMKASecY: a wrapper around the SecY an MKA participant keys, so
//     that a test can start a transmit SA near PN exhaustion and make the
//     peer's key server rekey.
//   - WithMACsecYield: workers that yield their core before each run of
//     frames, so that the lab's PN-order test has the crypto of its calls
//     spread over the workers whatever the machine's load.
//   - WithPortMapClock: the port mapping table's clock, so that the lab's
//     port mapping test proves the 120 s minimum lifetime runs out
//     without waiting 120 s (cmd/gvrouter/labclock.go).
//   - WithARPProbeTiming: the DHCP clients' RFC 5227 probe timing, so
//     that a lab start waits half a second for the router's WAN lease,
//     not the RFC's 5.5 s (cmd/gvrouter/labprobe.go).

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/gvrouter/gvrouter/services/dhcp4client"
)

// ServeDiscard accepts TCP connections at addr in the router's netstack
// and reads and drops whatever they send (RFC 863), so that a sender
// measures how fast the router terminates TCP. It is for the lab's GRO
// bench (gvrouter run -bench-sink), not part of the config: a production
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

// WithMKARand makes the MKA participants draw MIs and SAKs from rand
// instead of crypto/rand: a test that must know the SAKs (the lab's
// key-leak check) injects it. Never use it outside tests.
func WithMKARand(rand io.Reader) Option { return func(r *Router) { r.mkaRand = rand } }

// WithMKASecY puts wrap's SecY between each MKA participant and its
// SecY: a test that must steer what the participant installs (a transmit
// SA that starts near PN exhaustion, so that the peer's key server
// rekeys) wraps it. Never use it outside tests.
func WithMKASecY(wrap func(MKASecY) MKASecY) Option {
	return func(r *Router) { r.mkaSecY = wrap }
}

// WithMACsecYield sets macsec.Config.YieldBetweenRuns on every SecY: each
// crypto worker yields its core before each run of frames it claims, so
// that a helper the call readied takes its share on the caller's core.
// The lab's PN-order test injects it (a build with -tags labyield) to have
// the crypto of every call split over the workers however busy the
// machine. Never use it outside tests.
func WithMACsecYield() Option { return func(r *Router) { r.macsecYield = true } }

// WithPortMapClock makes the port mapping table read the time from now
// instead of time.Now: its mappings' expiry, the sweeper's removals and
// the epoch all follow it. The lab (a build with -tags labclock) gives a
// clock it can move forward, to see a mapping of the smallest lifetime
// expire without waiting it out. Never use it outside tests.
func WithPortMapClock(now func() time.Time) Option { return func(r *Router) { r.portmapNow = now } }

// WithARPProbeTiming sets the timing of the DHCP clients' RFC 5227 probe
// of an offered address (dhcp4client.ARPProberConfig's ProbeWait,
// ProbeNum, ProbeMin, ProbeMax and AnnounceWait; its Link, Clock and Rand
// are ignored). The lab's tests (a build with -tags labprobe) shorten
// it: each lab start waits for the WAN lease, and the RFC's 5.5 s over
// every start of CI add up to minutes. Never use it outside tests.
func WithARPProbeTiming(timing dhcp4client.ARPProberConfig) Option {
	return func(r *Router) {
		r.arpProbe = dhcp4client.ARPProberConfig{
			ProbeWait: timing.ProbeWait, ProbeNum: timing.ProbeNum,
			ProbeMin: timing.ProbeMin, ProbeMax: timing.ProbeMax, AnnounceWait: timing.AnnounceWait,
		}
	}
}
