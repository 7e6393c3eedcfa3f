package router

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/hw/tap"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
)

// openHostLocked creates the host TAP (host:) as the port pc: the kernel
// gets its end, with cfg.Host.KernelAddresses and default routes via the
// router; the router's end is the host interface, one more lan
// interface.
func (r *Router) openHostLocked(cfg *config.Config, pc config.Port) error {
	h := cfg.Host
	if h == nil || h.Tap != pc.Name {
		return fmt.Errorf("port %s: a tap port without its host: section", pc.Name)
	}
	t, err := tap.Open(tap.Config{
		Name:            h.Tap,
		MTU:             pc.MTU,
		Addresses:       h.Addresses,
		KernelAddresses: h.KernelAddresses,
	}, r.log)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	r.ports[pc.Name] = &runningPort{port: t, cfg: pc, host: hostKey(cfg, pc.Name)}
	return nil
}

// hostKey is what the TAP of port was created with beyond its
// config.Port, so that a reload that changes the kernel's addresses
// makes it anew; "" for a port that is not the host TAP.
func hostKey(cfg *config.Config, port string) string {
	h := cfg.Host
	if h == nil || h.Tap != port {
		return ""
	}
	return fmt.Sprint(h.Addresses, h.KernelAddresses)
}

// hostForwards are the host: forwards as NAT port forwards: a
// connection to a lan interface's own address on the port is DNATed to
// the kernel's address, the port kept. The engine only takes a forward
// where it arrives on its own interface, so the host interface itself
// (and every wan) never forwards.
func hostForwards(cfg *config.Config, id map[string]natengine.Iface) []natengine.Forward {
	h := cfg.Host
	if h == nil || !h.KernelAddress().IsValid() {
		return nil
	}
	var out []natengine.Forward
	for _, f := range h.Forwards {
		for _, ic := range cfg.Interfaces {
			if ic.Role != config.RoleLAN || ic.Host || (f.On != "" && f.On != ic.Name) {
				continue
			}
			if !slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr().Is4() }) {
				continue // the engine forwards on an IPv4 address
			}
			nid, ok := id[ic.Name]
			if !ok {
				continue
			}
			out = append(out, natengine.Forward{
				Proto:     protoOf(f.Proto),
				In:        nid,
				FirstPort: f.Port,
				LastPort:  f.Port,
				To:        netip.AddrPortFrom(h.KernelAddress(), f.Port),
			})
		}
	}
	return out
}
