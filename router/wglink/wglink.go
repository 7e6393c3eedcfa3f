// Package wglink runs one WireGuard interface of the router: the TUN the
// router adds to its netstack as a link (stack.LinkConfig), the Bind on
// the router's own UDP sockets (Env.Listen: the WAN netstack's), the
// wireguard-go device between them, and a goroutine that looks peers'
// endpoint host names up again when their handshakes go stale
// (wireguard.Reresolve). It takes a narrow environment and never imports
// the router; router/wireguard.go builds one per wireguard: interface.
package wglink

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/device"

	"github.com/gvrouter/gvrouter/wireguard"
)

// Tunables.
const (
	// reresolveEvery is how often peers with host-name endpoints are
	// checked: wireguard-tools' reresolve-dns runs every 30 s from a
	// timer, and a peer counts as stale only after
	// wireguard.StaleHandshake (135 s) anyway.
	reresolveEvery = 30 * time.Second
)

// Env is what a Link needs from the router.
type Env struct {
	// Name is the interface's name, e.g. "wg0".
	Name string
	// MTU is the tunnel MTU, e.g. 1420; 0 = wireguard.DefaultMTU.
	MTU int
	// Listen opens the Bind's UDP sockets: the router's WAN netstack.
	Listen wireguard.Listener
	// Resolve looks up peers' endpoint host names; nil: host names stay
	// unresolved (counted in ResolveErrors).
	Resolve wireguard.Resolver
	// Log gets the device's errors and the link's events.
	Log *slog.Logger
}

// Link is one running WireGuard interface. Its methods are safe for
// concurrent use.
type Link struct {
	env   Env
	tun   *wireguard.TUN
	bind  *wireguard.Bind
	stats wireguard.DeviceStats
	dev   *device.Device

	// mu protects cfg, names, endpoints, up and resolveErrs.
	mu          sync.Mutex
	cfg         *wireguard.Config
	names       map[wireguard.Key]string
	endpoints   map[wireguard.Key]string
	up          bool
	resolveErrs uint64

	// kick asks routineReresolve for a lookup now (after Apply).
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a Link's TUN and Bind; the device is made, and comes up, on
// the first Apply: the TUN reports itself up at once, and the device
// opens its sockets when it sees that, so it must not exist before the
// router's netstack does. Close stops it.
func New(env Env) *Link {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	l := &Link{env: env, tun: wireguard.NewTUN(env.Name, env.MTU)}
	l.bind = wireguard.NewBind(env.Listen)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done, l.kick = cancel, make(chan struct{}), make(chan struct{}, 1)
	go l.routineReresolve(ctx)
	return l
}

// TUN is the link's netstack side, for stack.LinkConfig.Endpoint.
func (l *Link) TUN() *wireguard.TUN { return l.tun }

// Apply configures the device with c; endpoints maps peers whose
// configured endpoint is a host name to that "host:port". The first
// Apply sets everything and brings the device up (opening the Bind's
// sockets); later ones change only what changed
// (wireguard.Config.UpdateUAPI), so the other peers keep their sessions.
func (l *Link) Apply(c wireguard.Config, endpoints map[wireguard.Key]string) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("wireguard %s: %w", l.env.Name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dev == nil {
		l.dev = device.NewDevice(l.tun.Device(), l.bind, l.stats.Logger(l.env.Log))
	}
	// The TUN drops and counts what no peer takes (drops/no_peer).
	// While the device changes peers it passes what the old or the new
	// peers take, so a packet to a peer being added is never dropped
	// as peerless.
	if l.cfg != nil {
		l.tun.SetPeers(append(slices.Clip(l.cfg.Peers), c.Peers...))
	}
	if err := l.dev.IpcSet(c.UpdateUAPI(l.cfg)); err != nil {
		return fmt.Errorf("wireguard %s: IpcSet: %w", l.env.Name, err)
	}
	l.tun.SetPeers(c.Peers)
	l.cfg = &c
	l.names = make(map[wireguard.Key]string, len(c.Peers))
	for _, p := range c.Peers {
		l.names[p.PublicKey] = p.Name
	}
	l.endpoints = endpoints
	if !l.up {
		if err := l.dev.Up(); err != nil {
			return fmt.Errorf("wireguard %s: up: %w", l.env.Name, err)
		}
		l.up = true
	}
	if len(endpoints) > 0 {
		select { // the goroutine resolves the new host names now
		case l.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Status returns the interface's state: peers, handshakes, bytes and
// counters.
func (l *Link) Status() (wireguard.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statusLocked()
}

func (l *Link) statusLocked() (wireguard.Status, error) {
	if l.dev == nil {
		return wireguard.Status{Counters: wireguard.Stats{Bind: &l.bind.Stats, TUN: &l.tun.Stats, Device: &l.stats}.Counters()}, nil
	}
	uapi, err := l.dev.IpcGet()
	if err != nil {
		return wireguard.Status{}, fmt.Errorf("wireguard %s: IpcGet: %w", l.env.Name, err)
	}
	st, err := wireguard.ReadStatus(uapi, l.names, wireguard.Stats{Bind: &l.bind.Stats, TUN: &l.tun.Stats, Device: &l.stats}, time.Now())
	if err != nil {
		return st, err
	}
	st.Counters["errors"]["resolve"] = l.resolveErrs
	return st, nil
}

// reresolve moves peers whose handshake is stale to their endpoint
// host's current address. The lookups run without l.mu, so a slow
// resolver never holds up Status (and the status page) or Apply.
func (l *Link) reresolve() {
	l.mu.Lock()
	if len(l.endpoints) == 0 || l.dev == nil {
		l.mu.Unlock()
		return
	}
	st, err := l.statusLocked()
	endpoints := l.endpoints
	l.mu.Unlock()
	if err != nil {
		return
	}
	resolve := l.env.Resolve
	if resolve == nil {
		resolve = func(string) ([]netip.Addr, error) { return nil, fmt.Errorf("no resolver") }
	}
	text, err := wireguard.Reresolve(st, endpoints, resolve)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.resolveErrs++
		l.env.Log.Warn("wireguard endpoint", "interface", l.env.Name, "err", err)
	}
	if text != "" && l.dev != nil {
		if err := l.dev.IpcSet(text); err != nil {
			l.env.Log.Warn("wireguard endpoint", "interface", l.env.Name, "err", err)
		}
	}
}

// routineReresolve calls reresolve every reresolveEvery, and when Apply
// kicks it, until ctx ends; Close ends it and waits.
func (l *Link) routineReresolve(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(reresolveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
			l.reresolve()
		case <-t.C:
			l.reresolve()
		}
	}
}

// Close stops the device (closing its sockets) and the goroutine. The
// TUN is closed by the device; netstack drops the link on its own
// (stack.Config.Links).
func (l *Link) Close() {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dev == nil {
		l.tun.Device().Close()
		return
	}
	l.dev.Close()
}
