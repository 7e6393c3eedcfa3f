package router

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/gvrouter/gvrouter/capture"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/stack"
)

// Live capture wiring (package capture does the work). A port's point
// wraps its writer for good: with no capture running that costs one
// atomic load per batch. The port's receive entry (stack.PortInput) and
// an interface (stack.Interface.SetCapture) hold their point only while
// a capture runs on it.

// FirewallLogPoint is the capture point of the packets that firewall
// rules with log: capture decided (`gvrouter capture -i firewall:log`).
// No port or interface can have the name: a name has no ':'.
const FirewallLogPoint = "firewall:log"

// firewallLogPoint makes the firewall:log point and gives e a LogSink
// that copies each logged packet into it as received. With no capture
// running on the point a logged packet costs one atomic load.
func firewallLogPoint(e *natengine.Engine) *capture.Point {
	p := capture.NewPoint(FirewallLogPoint, nil)
	e.SetLogSink(func(pkt []byte, _, _ natengine.Iface) { p.CaptureIP(capture.In, pkt) })
	return p
}

// capturePoint returns rp's point, made on first use.
func (rp *runningPort) capturePoint() *capture.Point {
	if rp.capture == nil {
		rp.capture = capture.NewPoint(rp.port.Name(), func(p *capture.Point, on bool) {
			if on {
				rp.input.SetCapture(p)
			} else {
				rp.input.SetCapture(nil)
			}
		})
		port := rp.port
		rp.capture.SetCounters(func() (rx, tx uint64) {
			st := port.Stats()
			return st.RxPackets, st.TxPackets
		})
		rp.captureW = &capture.Writer{FrameWriter: rp.port, P: rp.capture}
	}
	return rp.capture
}

// captureWriter is rp's port writer behind its transmit capture.
func (rp *runningPort) captureWriter() *capture.Writer {
	rp.capturePoint()
	return rp.captureW
}

// lookupCapture finds the point of an interface (first) or a port.
func (r *Router) lookupCapture(name string) (*capture.Point, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("router is closing")
	}
	if r.net != nil && r.net.Interface(name) != nil {
		if p := r.capIfaces[name]; p != nil {
			return p, nil
		}
		// The interface of the moment: a reload may have made a new
		// one since the point was.
		current := func() *stack.Interface {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.net == nil {
				return nil
			}
			return r.net.Interface(name)
		}
		p := capture.NewPoint(name, func(p *capture.Point, on bool) {
			ifc := current()
			if ifc == nil {
				return
			}
			if on {
				ifc.SetCapture(p)
			} else {
				ifc.SetCapture(nil)
			}
		})
		p.SetCounters(func() (rx, tx uint64) {
			ifc := current()
			if ifc == nil {
				return 0, 0
			}
			st := ifc.Stats()
			return st.RxPackets, st.TxPackets
		})
		if r.capIfaces == nil {
			r.capIfaces = make(map[string]*capture.Point)
		}
		r.capIfaces[name] = p
		return p, nil
	}
	if rp := r.ports[name]; rp != nil {
		return rp.capturePoint(), nil
	}
	if name == FirewallLogPoint && r.fwLog != nil {
		return r.fwLog, nil
	}
	return nil, fmt.Errorf("no port or interface %q", name)
}

// Captures returns the router's capture manager, for the status page's
// /api/capture.
func (r *Router) Captures() *capture.Manager { return r.captures }

// startCaptureLocked serves captures on runDir/capture.sock to root and
// the daemon's group.
func (r *Router) startCaptureLocked() error {
	r.captures = capture.NewManager(r.lookupCapture)
	if r.state.runDir == "" {
		return nil
	}
	ln, err := capture.Listen(filepath.Join(r.state.runDir, capture.SocketName), os.Getegid())
	if err != nil {
		return err
	}
	r.captureLn = ln
	srv := capture.NewServer(r.captures, os.Getegid(), r.log.With("component", "capture"))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := srv.Serve(r.ctx, ln); err != nil {
			r.log.Error("capture socket", "err", err)
		}
	}()
	return nil
}

// closeCaptureLocked closes the capture socket; running captures end
// with the router's context.
func (r *Router) closeCaptureLocked() {
	if r.captureLn != nil {
		r.captureLn.Close()
		os.Remove(r.captureLn.Addr().(*net.UnixAddr).Name)
		r.captureLn = nil
	}
}

var _ stack.CaptureSink = (*capture.Point)(nil)

// captureAllowLocked is who may use /api/capture on a netstack listener
// of interface ic: nobody on a wan interface; elsewhere the board's own
// kernel through the host TAP (a request from one of host:'s
// kernel_addresses, which only the kernel has: the router routes it
// nowhere else), and anyone else, a LAN host on any listener, the host
// interface's too, only with the token of the run directory's
// capture.token (mode 0600).
func (r *Router) captureAllowLocked(ic *config.Interface) func(*http.Request) error {
	if ic.Role == config.RoleWAN {
		return capture.Refuse(errors.New("capture: refused on a wan listener"))
	}
	return capture.TrustOr(r.fromHostKernel, r.captureTokenLocked())
}

// captureAllowSocketLocked is who may use /api/capture on a host socket
// listener (status.listen 127.0.0.1:8080, or any address): loopback
// callers, the machine itself; anyone else with the token. A LAN host
// reaches a socket on the kernel's host: address, or on 0.0.0.0, routed
// or forwarded by the router, and the kernel never accepts a loopback
// source from outside.
func (r *Router) captureAllowSocketLocked() func(*http.Request) error {
	return capture.TrustOr(netip.Addr.IsLoopback, r.captureTokenLocked())
}

// captureTokenLocked asks for the token of runDir/capture.token.
func (r *Router) captureTokenLocked() func(*http.Request) error {
	if r.state.runDir == "" {
		return capture.Refuse(errors.New("capture: refused: no run directory for " + capture.TokenFile))
	}
	return capture.TokenAllow(filepath.Join(r.state.runDir, capture.TokenFile))
}

// fromHostKernel reports whether a is one of the host kernel's addresses
// (host: kernel_addresses) of the config in force.
func (r *Router) fromHostKernel(a netip.Addr) bool {
	p := r.hostKernel.Load()
	return p != nil && slices.Contains(*p, a)
}

// setListenPolicyLocked makes the status listeners follow cfg: the host
// kernel's addresses for captureAllowLocked and the status.hosts names.
func (r *Router) setListenPolicyLocked(cfg *config.Config) {
	var kernel []netip.Addr
	if cfg.Host != nil {
		for _, p := range cfg.Host.KernelAddresses {
			kernel = append(kernel, p.Addr().Unmap())
		}
	}
	r.hostKernel.Store(&kernel)
	r.statusSrv.SetHosts(cfg.Status.Hosts)
}

// statusHandler is the status page with /api/capture, which allow
// guards.
func (r *Router) statusHandler(allow func(*http.Request) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/capture", capture.HTTPHandler(r.captures, allow))
	mux.Handle("/", r.statusSrv.Handler())
	return mux
}

// reattachCapturesLocked gives the interfaces an Apply recreated (a new
// *stack.Interface starts without a sink) the points of the captures
// still running on them.
func (r *Router) reattachCapturesLocked() {
	for name, p := range r.capIfaces {
		if !p.Active() {
			continue
		}
		if ifc := r.net.Interface(name); ifc != nil {
			ifc.SetCapture(p)
		}
	}
}
