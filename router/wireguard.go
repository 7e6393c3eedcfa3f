package router

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/wglink"
	"github.com/gvrouter/gvrouter/stack"
	"github.com/gvrouter/gvrouter/wireguard"
)

// WireGuard interfaces (config wireguard:) run in package wglink; this
// file builds one per interface, gives netstack its TUN as a link
// (stack.LinkConfig: its addresses, and routes to the peers' allowed
// IPs), opens its UDP sockets in the router's own netstack and keeps the
// wan side's firewall and NAT off its listen port:
//
//   - the listen port is admitted by the WAN input policy
//     (stack.InterfaceConfig.AdmitUDP) on every wan interface, for UDP
//     to that port only;
//   - the NAT engine never maps a flow onto it (natrules.ReservedPorts),
//     and config validation refuses a port forward of it.
//
// Firewall role: the interface's role: says which side the tunnel's
// packets are on. role: lan (road warrior) makes peers inside hosts:
// they reach the LAN, the router and, through the NAT, the WAN, as a LAN
// host does; their sources are checked by WireGuard itself (a peer may
// send only from its allowed IPs, cryptokey routing), which stands in
// for the LAN's RFC 3704 ingress filter. role: wan (a tunnel to a
// provider) puts the tunnel outside; new flows from it to the router
// are not subject to the WAN input policy yet (the link has no
// classification stage), so use role: lan unless the peer is untrusted
// and nothing on the router listens beyond the status page's lan
// addresses.

// wgDefaultRoute is a prefix no route is made for: a peer allowed
// 0.0.0.0/0 or ::/0 would take the router's default route, and with it
// the tunnel's own UDP. A routes: entry can still send it there.
func wgDefaultRoute(p netip.Prefix) bool { return p.Bits() == 0 }

// syncWireGuardLocked makes a wglink.Link for each wireguard: interface
// of cfg that has none and returns those cfg no longer has (or whose
// MTU changed), which the caller closes after netstack dropped them.
// r.mu must be held.
func (r *Router) syncWireGuardLocked(cfg *config.Config) (gone []*wglink.Link) {
	if r.wireguard == nil {
		r.wireguard = make(map[string]*runningWG)
	}
	for name, w := range r.wireguard {
		ic := cfg.Interface(name)
		if ic == nil || ic.WireGuard == nil || ic.MTU != w.mtu {
			gone = append(gone, w.link)
			delete(r.wireguard, name)
		}
	}
	for _, ic := range cfg.Interfaces {
		if ic.WireGuard == nil || r.wireguard[ic.Name] != nil {
			continue
		}
		r.wireguard[ic.Name] = &runningWG{mtu: ic.MTU, link: wglink.New(wglink.Env{
			Name:    ic.Name,
			MTU:     ic.MTU,
			Listen:  r.wgListener(ic.Name),
			Resolve: resolveHost,
			Log:     r.log.With("component", "wireguard", "interface", ic.Name),
		})}
	}
	return gone
}

// runningWG is one WireGuard interface's link and the MTU it was made
// with (a change makes a new one).
type runningWG struct {
	link *wglink.Link
	mtu  int
}

// wgLinksLocked is the netstack side of cfg's WireGuard interfaces.
func (r *Router) wgLinksLocked(cfg *config.Config) []stack.LinkConfig {
	var out []stack.LinkConfig
	for _, ic := range cfg.Interfaces {
		w := r.wireguard[ic.Name]
		if ic.WireGuard == nil || w == nil {
			continue
		}
		lc := stack.LinkConfig{Name: ic.Name, Endpoint: w.link.TUN(), Addresses: slices.Clone(ic.Addresses)}
		for _, p := range ic.WireGuard.Peers {
			for _, a := range p.AllowedIPs {
				if !wgDefaultRoute(a) && !slices.Contains(lc.Routes, a) {
					lc.Routes = append(lc.Routes, a)
				}
			}
		}
		out = append(out, lc)
	}
	return out
}

// applyWireGuardLocked configures each link's device from cfg; the first
// time this brings it up and opens its sockets. Run it after netstack
// has the links. r.mu must be held.
func (r *Router) applyWireGuardLocked(cfg *config.Config) error {
	var errs []error
	for _, ic := range cfg.Interfaces {
		w := r.wireguard[ic.Name]
		if ic.WireGuard == nil || w == nil {
			continue
		}
		endpoints := map[wireguard.Key]string{}
		for _, p := range ic.WireGuard.Peers {
			if _, err := netip.ParseAddrPort(p.Endpoint); p.Endpoint != "" && err != nil {
				endpoints[p.PublicKey] = p.Endpoint
			}
		}
		if id, ok := r.net.NATIface(ic.Name); ok && r.nat.engine != nil {
			h := natHooks(r.nat.engine, id)
			if fp, ok := r.net.LinkFastPath(ic.Name); ok {
				h.Forward = fp.ForwardBatch
			}
			w.link.TUN().SetHooks(h)
		}
		if err := w.link.Apply(ic.WireGuard.Device(), endpoints); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// natHooks runs the NAT engine on the tunnel's inside as an Ethernet
// interface's receive and transmit paths do (package stack): Prerouting
// on what the peers send, so their flows are tracked (and replies to
// them known) and a port forward to a peer works; Postrouting on what
// leaves into the tunnel, which confirms the flows the LAN or WAN opened
// towards a peer. In is the link's NIC, as natrules.Compile numbers it.
// Out offloads the flows it forwards into the tunnel, and the caller adds
// the link's fast path as Forward: packets of offloaded flows skip
// netstack both ways. Out runs when the device dequeues a packet, maybe
// after a reload moved the flow's route; it offloads at the generation
// read when netstack forwarded the packet into the queue (Generation),
// so such an offload is stale from the start and the flow's next packet
// takes the slow path, the new route. A packet queued before the hooks
// were set carries 0, which is stale too: the engine's generation is at
// least 1 once it has rules (SetRules advances it), and without rules
// nothing is offloaded.
func natHooks(e *natengine.Engine, in natengine.Iface) *wireguard.Hooks {
	return &wireguard.Hooks{
		In: func(ip []byte) bool {
			v, _, _ := e.PreroutingCT(ip, in, false)
			return v == natengine.Accept
		},
		Out: func(ip []byte, forwarded bool, gen uint64) bool {
			if forwarded {
				if e.Postrouting(ip, in) != natengine.Accept {
					return false
				}
				// The flow's later packets into the tunnel take the
				// fast path from their ingress port (stack's
				// FastLinkWriter): no MACs on a tunnel.
				e.OffloadAt(ip, in, [6]byte{}, [6]byte{}, gen)
				return true
			}
			return e.PostroutingLocal(ip, in) == natengine.Accept
		},
		Generation: e.FastPathGeneration,
	}
}

// closeWireGuardLocked closes every link (Close).
func (r *Router) closeWireGuardLocked() {
	for name, w := range r.wireguard {
		w.link.Close()
		delete(r.wireguard, name)
	}
}

// wgListener opens the Bind's sockets in the router's netstack, on the
// unspecified addresses: replies leave by the route to the peer (the
// WAN's), from the WAN's address. The IPv6 socket is V6ONLY so that it
// can share the port with the IPv4 one; if it cannot be opened the
// interface runs on IPv4 alone (logged).
func (r *Router) wgListener(name string) wireguard.Listener {
	return func(network string, port uint16) (wireguard.PacketConn, error) {
		n := r.net // set once in New, before any link comes up
		if n == nil {
			return nil, errors.New("wireguard: the netstack is not up")
		}
		if network == "udp6" {
			c, err := n.ListenUDP6Only(netip.AddrPortFrom(netip.IPv6Unspecified(), port))
			if err != nil {
				r.log.Warn("wireguard: no IPv6 socket; IPv4 only", "interface", name, "port", port, "err", err)
				return nil, nil
			}
			return c, nil
		}
		c, err := n.ListenUDPConn(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
		if err != nil {
			return nil, fmt.Errorf("wireguard: listen udp4 :%d: %w", port, err)
		}
		return c, nil
	}
}

// resolveHost looks a peer's endpoint host up with the host's resolver.
func resolveHost(host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// wireGuardStatusLocked is the status page's WireGuard section, by
// interface name. r.mu must be held (each link's lock is taken inside
// it: the lock order is r.mu, then a link's).
func (r *Router) wireGuardStatusLocked() []status.WireGuard {
	var out []status.WireGuard
	for name, w := range r.wireguard {
		st, err := w.link.Status()
		if err != nil {
			r.log.Warn("wireguard status", "interface", name, "err", err)
			continue
		}
		out = append(out, status.WireGuard{Name: name, Status: st})
	}
	slices.SortFunc(out, func(a, b status.WireGuard) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// WireGuard returns the status of each WireGuard interface, by name.
func (r *Router) WireGuard() map[string]wireguard.Status {
	r.mu.Lock()
	links := make(map[string]*wglink.Link, len(r.wireguard))
	for name, w := range r.wireguard {
		links[name] = w.link
	}
	r.mu.Unlock()
	out := make(map[string]wireguard.Status, len(links))
	for name, l := range links {
		st, err := l.Status()
		if err != nil {
			r.log.Warn("wireguard status", "interface", name, "err", err)
			continue
		}
		out[name] = st
	}
	return out
}

// wanOnly returns ports for a wan interface and nil for others.
func wanOnly(ic config.Interface, ports []uint16) []uint16 {
	if ic.Role != config.RoleWAN {
		return nil
	}
	return ports
}
