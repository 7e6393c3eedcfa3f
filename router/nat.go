package router

import (
	"context"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/natrules"
	"github.com/gvrouter/gvrouter/router/natstatus"
	"github.com/gvrouter/gvrouter/router/status"
)

// sweepInterval is how often expired flows are removed (nf_conntrack's GC
// runs about every second; the timeouts are minutes, so 5 s is plenty).
const sweepInterval = 5 * time.Second

// applyNATLocked gives the engine the rules of r.cfg and the interfaces
// the stack has now. r.mu must be held.
func (r *Router) applyNATLocked() error {
	if r.nat.engine == nil || r.net == nil || r.cfg == nil {
		return nil
	}
	portMTU := func(port string) int {
		if rp := r.ports[port]; rp != nil {
			return rp.port.MTU()
		}
		return 0
	}
	return r.nat.engine.SetRules(natrules.Compile(r.cfg, r.net.NATIface, portMTU, natrules.ReservedPorts(r.cfg, r.sinks)))
}

// sweepNAT removes expired flows every sweepInterval until ctx is done.
func (r *Router) sweepNAT(ctx context.Context, e *natengine.Engine) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Sweep()
		}
	}
}

// Flows implements status.FlowSource: every tracked flow, for the
// conntrack table.
func (r *Router) Flows() []status.Flow {
	r.mu.Lock()
	e := r.nat.engine
	r.mu.Unlock()
	if e == nil {
		return nil
	}
	return natstatus.Flows(e.Flows())
}

var _ status.FlowSource = (*Router)(nil)
