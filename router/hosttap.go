package router

import (
	"fmt"

	"github.com/gvrouter/gvrouter/hw/tap"
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
