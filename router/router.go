// Package router assembles the appliance from its config: it opens the
// ports, builds the netstack interfaces on them, serves the status page and
// applies a new config on reload without disturbing what did not change.
package router

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvrouter/gvrouter/capture"
	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xdpport"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/natrules"
	"github.com/gvrouter/gvrouter/router/natstatus"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/svc"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/sqm"
	"github.com/gvrouter/gvrouter/stack"
	"github.com/gvrouter/gvrouter/statedir"
)

// Build describes the running binary on the status page.
type Build struct {
	Version string // e.g. "v0.1.0" or a VCS revision
	Build   string // e.g. "go1.26.8 linux/arm"
}

// Router is one running appliance. Its methods are safe for concurrent
// use. Its state is grouped by what it serves, each group saying what
// guards it; mu is the one lock of the reload path: New's setup, Reload,
// leaseLoop's application of what was learned and Close hold it, and so
// every group that a config change rewrites is under it. Lock order: mu
// before any group's own lock (learned.queue's, nat.census's,
// capture's), which are never held while taking mu.
type Router struct {
	log     *slog.Logger // never changes
	build   Build        // never changes
	started time.Time    // never changes

	// mu protects cfg, userCfg, closed and each group below marked
	// "under mu".
	mu sync.Mutex
	// cfg is the config in force: userCfg (the file's) with what the
	// router learned added (learned.State.Effective).
	cfg     *config.Config
	userCfg *config.Config
	closed  bool

	// learned is what the WAN side taught the router (package learned).
	learned struct {
		// state is merged into the file's config by every reload;
		// under mu.
		state learned.State
		// queue brings the clients' news to leaseLoop; it has a lock
		// of its own, so a client never waits for a reload.
		queue *learned.Queue
		// owned6 is what the RA learners must not take from their
		// links, stored by each reload and read on their goroutines.
		owned6 atomic.Pointer[learned.Owned]
	}

	// svc runs the services (package svc); nil until the netstack
	// exists. Under mu.
	svc *svc.Manager

	// ports and net are the data path: the open ports by name and the
	// netstack on them. Under mu; the ports' receive goroutines read
	// their entry (runningPort.input, a stack.PortInput) atomically.
	ports map[string]*runningPort
	net   *stack.Netstack
	// xdpPool is the UMEMs the af_xdp ports share (xdppool.go); nil
	// until the first af_xdp port opens. Under mu.
	xdpPool *xdpport.Pool

	// macsec holds the SecYs by name (macsec.go); under mu.
	macsec map[string]*runningSecY
	// wireguard holds the WireGuard interfaces by name (wireguard.go); under
	// mu.
	wireguard map[string]*runningWG
	// sqm holds the shaped directions of wan interfaces (sqm.go); made
	// with the NAT engine, which finds each frame's inside host.
	sqm *sqm.Set
	// mkaRand is the MKA participants' source of MIs and SAKs; nil means
	// crypto/rand (WithMKARand).
	mkaRand io.Reader
	// mkaSecY, if set, wraps each SecY for its MKA participant
	// (WithMKASecY).
	mkaSecY func(MKASecY) MKASecY
	// macsecYield sets macsec.Config.YieldBetweenRuns on every SecY
	// (WithMACsecYield).
	macsecYield bool
	// portmapNow is the port mapping table's clock; nil means time.Now
	// (WithPortMapClock).
	portmapNow func() time.Time
	// arpProbe is the DHCP clients' RFC 5227 probe timing; zero means
	// the RFC's (WithARPProbeTiming).
	arpProbe dhcp4client.ARPProberConfig

	// nat is the conntrack/NAT engine and its status.
	nat struct {
		// engine is built once in New (under mu) and never replaced:
		// reloads change its rules and keep every tracked flow. It
		// locks itself.
		engine *natengine.Engine
		max    int // its table limit, fixed at New
		// census is the status page's last walk of the table; it has
		// a lock of its own, taken outside mu (Snapshot).
		census natstatus.Cache
	}

	// state is the state directory and the locks that keep a second
	// router off this one's state and ports; under mu.
	state struct {
		// dir is the state directory in force (config state_dir at
		// start: a change needs a restart) and lock its lock.
		dir  string
		lock *statedir.Lock
		// runDir is where port locks are taken ("" = none) and
		// portLocks the locks held, by port.
		runDir    string
		portLocks map[string]*statedir.Lock
	}

	// statusSrv serves the status page on listeners; sinks are the
	// ServeDiscard listeners' addresses, reserved from SNAT. Under mu.
	statusSrv *status.Server
	listeners []*statusListener
	sinks     []netip.AddrPort
	// portmap runs port_mapping: (portmap.go); under mu.
	portmap portMapper
	// captures runs live captures (capture.go); captureLn is its socket
	// and capIfaces the interfaces' points by name, under mu.
	captures  *capture.Manager
	captureLn *net.UnixListener
	capIfaces map[string]*capture.Point
	// fwLog is the firewall:log point, where rules with log: capture
	// hand their packets (capture.go); set in New.
	fwLog *capture.Point
	// hostKernel is the host kernel's addresses (host:
	// kernel_addresses), read by the status listeners' capture checks
	// without mu (setListenPolicyLocked).
	hostKernel atomic.Pointer[[]netip.Addr]

	// ctx ends with Close and cancel ends it; wg counts the goroutines
	// New and the listeners start, which Close waits for.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// portIO is what the router needs of a port: a *hw.Port (AF_PACKET on a
// kernel interface) or the host TAP (hosttap.go).
type portIO interface {
	hw.FrameWriter
	Name() string
	// HardwareAddr is the MAC of the router's interfaces on the port.
	HardwareAddr() net.HardwareAddr
	MTU() int
	LinkUp() bool
	SetLinkHandler(f func(up bool))
	Stats() hw.Stats
	Run(ctx context.Context, h hw.BatchHandler) error
	Close() error
}

var _ portIO = (*hw.Port)(nil)

// runningPort is an open port and the goroutine that reads it.
type runningPort struct {
	port portIO
	cfg  config.Port
	// extraTags is the hw.Config.ExtraTags the port was opened with.
	extraTags int
	// host is hostKey of the host TAP's port ("" for others).
	host   string
	cancel context.CancelFunc
	done   chan struct{}
	// input is the port's receive entry (its trunk's), re-pointed on
	// reload.
	input stack.PortInput
	// rxq is the port's receive queue in front of input, made by
	// startPortLocked and closed when the receive loop ends; on or off
	// by ports[].aqm (bindPortsLocked).
	rxq *stack.RxQueue
	// trunk demultiplexes the port's frames to its interfaces by VLAN;
	// nil until the netstack exists.
	trunk *stack.Trunk
	// capture is the port's live-capture point and captureW its writer
	// behind it (capture.go); nil until first used.
	capture  *capture.Point
	captureW *capture.Writer
}

// Option changes how New starts the router.
type Option func(*Router)

// WithRunDir makes New take a lock per port under dir (e.g.
// "/run/gvrouter", see hw.LockPort) before it touches any port, so that a
// second router on the same ports refuses instead of taking them over.
// Without it no port lock is taken.
func WithRunDir(dir string) Option { return func(r *Router) { r.state.runDir = dir } }

// New opens every port of cfg, builds the netstack and starts serving. On
// error everything opened so far is closed again, so a failed start leaves
// the machine as it was. Before it touches anything it locks the state
// directory (cfg.StateDirectory) and, with WithRunDir, every port: a
// second router on the same state directory or ports gets an error naming
// the first one's pid. What a port takeover changes is recorded in the
// state directory (hw.Config.StateDir).
func New(cfg *config.Config, build Build, log *slog.Logger, opts ...Option) (_ *Router, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Router{
		log:     log,
		build:   build,
		started: time.Now(),
		ports:   make(map[string]*runningPort),
		userCfg: cfg,
		ctx:     ctx,
		cancel:  cancel,
	}
	r.learned.queue = learned.NewQueue()
	r.state.portLocks = make(map[string]*statedir.Lock)
	r.state.dir = cfg.StateDirectory()
	r.learned.state = learned.State{Log: log, Dir: func() (string, error) { return r.serviceDir("ipv6") }, Fallback: r.state.dir}
	for _, o := range opts {
		o(r)
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	r.statusSrv = status.New(r, log.With("component", "status"))
	if err := r.lock(cfg); err != nil {
		return nil, err
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.statusSrv.Run(ctx)
	}()

	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.startCaptureLocked(); err != nil {
		return nil, err
	}
	ec := natrules.EngineConfig(cfg)
	r.nat.engine, r.nat.max = natengine.New(ec), ec.MaxConns
	r.fwLog = firewallLogPoint(r.nat.engine)
	r.sqm = sqm.NewSet(r.nat.engine.InsideHost, log.With("component", "sqm"))
	for _, pc := range cfg.Ports {
		if err := r.openPortLocked(cfg, pc); err != nil {
			return nil, err
		}
	}
	if err := r.syncMACsecLocked(cfg); err != nil {
		return nil, err
	}
	r.syncWireGuardLocked(cfg)
	sc, err := r.stackConfigLocked(cfg)
	if err != nil {
		return nil, err
	}
	n, err := stack.New(sc, log.With("component", "stack"))
	if err != nil {
		return nil, fmt.Errorf("netstack: %w", err)
	}
	r.net = n
	r.cfg = cfg
	r.bindSQMLocked(cfg)
	r.setListenPolicyLocked(cfg)
	if err := r.applyNATLocked(); err != nil {
		return nil, fmt.Errorf("nat: %w", err)
	}
	if err := r.applyWireGuardLocked(cfg); err != nil {
		return nil, err
	}
	r.svc = r.newServicesLocked()
	r.wg.Add(3)
	go func() {
		defer r.wg.Done()
		r.sweepNAT(ctx, r.nat.engine)
	}()
	go func() {
		defer r.wg.Done()
		r.leaseLoop(ctx)
	}()
	go func() {
		defer r.wg.Done()
		r.svc.Run(ctx)
	}()
	r.bindMACsecLocked()
	r.bindPortsLocked()
	if err := r.listenLocked(cfg.Status); err != nil {
		return nil, err
	}
	for _, rp := range r.ports {
		r.startPortLocked(rp)
	}
	if err := r.svc.Sync(cfg, &r.learned.state); err != nil {
		return nil, err
	}
	if err := r.syncPortMapLocked(); err != nil {
		return nil, err
	}
	return r, nil
}

// openPortLocked opens one port as the config says, taking its lock
// first unless it holds it.
func (r *Router) openPortLocked(cfg *config.Config, pc config.Port) error {
	if err := r.lockPortLocked(pc.Name); err != nil {
		return err
	}
	if pc.Kind == config.PortTAP {
		return r.openHostLocked(cfg, pc)
	}
	extra := extraTags(cfg, pc.Name)
	p, err := r.openDriverLocked(cfg, pc, extra)
	if err != nil {
		return fmt.Errorf("port %s: %w", pc.Name, err)
	}
	r.ports[pc.Name] = &runningPort{port: p, cfg: pc, extraTags: extra}
	return nil
}

// extraTags is hw.Config.ExtraTags of port: how many VLAN tags its
// interfaces put in full-size frames beyond what the kernel allows for. The kernel
// lets one 802.1Q (0x8100) outer tag exceed the MTU, no 802.1ad one
// (af_packet.c packet_extra_vlan_len_allowed).
func extraTags(cfg *config.Config, port string) int {
	extra := 0
	for _, ic := range cfg.Interfaces {
		if ic.Port != port || len(ic.VLAN) == 0 {
			continue
		}
		n := len(ic.VLAN) - 1
		if ic.VLANProtocol == config.VLANProtocol8021AD {
			n++
		}
		extra = max(extra, n)
	}
	return extra
}

// stackConfigLocked translates the config into the netstack's terms, using
// each port's MAC and MTU.
func (r *Router) stackConfigLocked(cfg *config.Config) (stack.Config, error) {
	sc := stack.Config{NAT: r.nat.engine, Links: r.wgLinksLocked(cfg)}
	for _, ic := range cfg.Interfaces {
		if ic.WireGuard != nil {
			continue // a link (wireguard.go), on no port
		}
		rp, ok := r.ports[ic.Port]
		if !ok {
			return sc, fmt.Errorf("interface %s: port %s is not open", ic.Name, ic.Port)
		}
		mtu := ic.MTU
		if mtu == 0 && ic.PPPoE != nil {
			mtu = ic.PPPoE.LinkMTU() // until IPCP's lease says
		}
		if mtu == 0 {
			mtu = rp.port.MTU()
		}
		vids := make([]uint16, 0, len(ic.VLAN))
		for _, v := range ic.VLAN {
			vids = append(vids, uint16(v))
		}
		var tpid uint16
		if ic.VLANProtocol == config.VLANProtocol8021AD {
			tpid = stack.TPID8021AD
		}
		gro := stack.GROSelective
		if ic.GRO != "" {
			var err error
			if gro, err = stack.ParseGROMode(ic.GRO); err != nil {
				return sc, fmt.Errorf("interface %s: %w", ic.Name, err)
			}
		}
		sc.Interfaces = append(sc.Interfaces, stack.InterfaceConfig{
			Name:         ic.Name,
			MAC:          rp.port.HardwareAddr(),
			MTU:          uint32(mtu),
			Addresses:    slices.Clone(ic.Addresses),
			Writer:       r.sqm.Writer(ic.Name, sqmParams(&ic, true, mtu), rp.captureWriter()),
			VLAN:         vids,
			VLANProtocol: tpid,
			PCP:          uint8(ic.PCP),
			GRO:          gro,
			// fw4's wan zone input policy, after NAT (forwards pass).
			DropNewInput: natrules.DropNewInput(cfg, ic),
			AdmitUDP:     wanOnly(ic, cfg.WireGuardListenPorts()),
			// RFC 3704 ingress filtering on the inside; nothing of the
			// router's own leaves the outside from an inside address.
			IngressFilter: ic.Role == config.RoleLAN,
			EgressFilter:  ic.Role == config.RoleWAN,
			PPPoE:         ic.PPPoE != nil,
		})
	}
	sc.Interfaces = append(sc.Interfaces, r.macsecInterfacesLocked(cfg, sc.Interfaces)...)
	for _, rc := range cfg.Routes {
		sc.Routes = append(sc.Routes, stack.RouteConfig{To: rc.To, Via: rc.Via, Dev: rc.Dev})
	}
	return sc, nil
}

// bindPortsLocked points each port's receive loop at its trunk, which
// demultiplexes to the interfaces on the port by VLAN, and each port's
// carrier changes at those interfaces.
func (r *Router) bindPortsLocked() {
	for name, rp := range r.ports {
		if rp.rxq != nil {
			rp.rxq.SetEnabled(portAQM(r.cfg, name))
		}
		var ifcs []*stack.Interface
		for _, ic := range r.cfg.Interfaces {
			if ic.Port != name {
				continue
			}
			if ifc := r.net.Interface(ic.Name); ifc != nil {
				ifc.SetLinkUp(rp.port.LinkUp())
				ifcs = append(ifcs, ifc)
			}
		}
		ms := r.macsecOnPortLocked(name)
		for _, ifc := range ms {
			ifc.SetLinkUp(rp.port.LinkUp())
		}
		rp.port.SetLinkHandler(func(up bool) {
			for _, ifc := range ifcs {
				ifc.SetLinkUp(up)
			}
			for _, ifc := range ms {
				ifc.SetLinkUp(up)
			}
		})
		if len(ifcs) == 0 {
			rp.input.SetTrunk(nil)
			continue
		}
		if rp.trunk == nil {
			rp.trunk = r.net.NewTrunk()
		}
		if err := rp.trunk.Set(ifcs...); err != nil {
			// config.Validate rejects two interfaces with one VLAN.
			r.log.Error("port interfaces", "port", name, "err", err)
		}
		rp.input.SetTrunk(rp.trunk)
	}
	r.reattachCapturesLocked()
	r.syncMulticastLocked()
}

// portAQM reports whether port name's receive queue is on in cfg
// (ports[].aqm; off unless "on": the queue copies every frame it
// holds, which costs af_packet bulk throughput until that copy goes,
// docs/performance.md).
func portAQM(cfg *config.Config, name string) bool {
	pc := cfg.Port(name)
	return pc != nil && pc.AQM == config.AQMOn
}

// startPortLocked starts the receive loop of one port.
func (r *Router) startPortLocked(rp *runningPort) {
	if rp.done != nil {
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	rp.cancel = cancel
	rp.done = make(chan struct{})
	rxq := stack.NewRxQueue(rp.input.HandleBatch, rp.port.MTU()+hw.MaxL2Overhead)
	rxq.SetEnabled(portAQM(r.cfg, rp.cfg.Name))
	rp.rxq = rxq
	go func() {
		defer close(rp.done)
		defer rxq.Close()
		var err error
		if br, ok := rp.port.(hw.BacklogRunner); ok {
			// The port's receive loops serve the queue themselves.
			err = br.RunBacklog(ctx, rxq)
		} else {
			err = rp.port.Run(ctx, rxq.HandleBatch)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Error("port receive loop stopped", "port", rp.port.Name(), "err", err)
		}
	}()
}

// stopPort stops a port's receive loop and closes it, restoring the
// kernel's settings on it.
func (r *Router) stopPort(rp *runningPort) error {
	if rp.cancel != nil {
		rp.cancel()
		<-rp.done
	}
	return rp.port.Close()
}

// listenLocked starts the status page on every configured listen address.
func (r *Router) listenLocked(sc config.Status) error {
	for _, l := range sc.Listen {
		var addrs []string
		if l.Interface != "" {
			ic := r.cfg.Interface(l.Interface)
			if ic == nil {
				return fmt.Errorf("status listen %s:%d: no interface %s", l.Interface, l.Port, l.Interface)
			}
			for _, p := range ic.Addresses {
				ln, err := r.net.ListenTCP(netip.AddrPortFrom(p.Addr(), l.Port))
				if err != nil {
					return fmt.Errorf("status listen %s:%d (%s): %w", l.Interface, l.Port, p.Addr(), err)
				}
				r.serveLocked(ln, r.captureAllowLocked(ic))
				addrs = append(addrs, ln.Addr().String())
			}
		} else {
			ln, err := net.Listen("tcp", l.Host.String())
			if err != nil {
				return fmt.Errorf("status listen %s: %w", l.Host, err)
			}
			r.serveLocked(ln, r.captureAllowSocketLocked())
			addrs = append(addrs, ln.Addr().String())
		}
		r.log.Info("status page listening", "on", addrs)
	}
	return nil
}

// statusListener is one listener of the status page; closing is set before
// the router closes it, so the error that ends its Serve is expected.
type statusListener struct {
	net.Listener
	closing atomic.Bool
}

func (r *Router) serveLocked(ln net.Listener, allowCapture func(*http.Request) error) {
	sl := &statusListener{Listener: ln}
	r.listeners = append(r.listeners, sl)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.statusSrv.ServeHandler(ln, r.statusHandler(allowCapture)); err != nil && !sl.closing.Load() {
			r.log.Warn("status server stopped", "addr", ln.Addr(), "err", err)
		}
	}()
}

func (r *Router) closeListenersLocked() {
	for _, ln := range r.listeners {
		ln.closing.Store(true)
		ln.Close()
	}
	r.listeners = nil
	r.sinks = nil
}

// Close stops everything and restores every port. It is safe to call twice.
func (r *Router) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	if r.svc != nil {
		r.svc.Stop()
	}
	if r.net != nil {
		r.stopPortMapLocked()
	}
	r.closeListenersLocked()
	r.closeCaptureLocked()
	r.statusSrv.Close()
	r.cancel()
	var errs []error
	for name, rp := range r.ports {
		if err := r.stopPort(rp); err != nil {
			errs = append(errs, fmt.Errorf("port %s: %w", name, err))
		}
	}
	r.ports = nil
	r.unlockPortsLocked()
	r.closeMACsecLocked()
	r.closeWireGuardLocked()
	if r.net != nil {
		r.net.Close()
	}
	if r.sqm != nil {
		r.sqm.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.state.lock.Unlock()
	return errors.Join(errs...)
}

// Config returns the config in force.
func (r *Router) Config() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg
}
