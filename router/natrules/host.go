package natrules

import (
	"net/netip"
	"slices"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
)

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
