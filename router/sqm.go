package router

import (
	"github.com/gvrouter/gvrouter/qdisc"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/sqm"
	"github.com/gvrouter/gvrouter/stack"
)

// The shaped directions of wan interfaces (config sqm:) live in an
// sqm.Set (r.sqm); this file only translates the config and binds a
// download Queue to its interface's receive path.

// sqmParams is one direction of ic's sqm: mapping, nil when that
// direction is not shaped; mtu is the interface's, so every frame of it
// fits a queue slot.
func sqmParams(ic *config.Interface, upload bool, mtu int) *sqm.Params {
	s := ic.SQM
	if s == nil {
		return nil
	}
	rate := s.Download
	if upload {
		rate = s.Upload
	}
	if rate == 0 {
		return nil
	}
	return &sqm.Params{
		Rate: rate, Overhead: s.Overhead, Diffserv: s.DiffservMode(), ECN: s.ECN,
		// Ethernet header and two VLAN tags around an MTU packet.
		FrameSize: max(qdisc.DefaultFrameSize, mtu+14+8),
	}
}

// shapedInput is a download Queue's output: the interface's receive path.
type shapedInput struct{ ifc *stack.Interface }

func (s shapedInput) WriteFrames(frames [][]byte) (int, error) {
	s.ifc.DeliverShaped(frames)
	return len(frames), nil
}

// bindSQMLocked puts a download Queue in front of the receive path of
// each wan interface whose sqm: shapes download, takes it away from the
// others, then closes the queues cfg no longer has. Call it after every
// Apply: an interface Apply recreated is a new one. r.mu must be held.
func (r *Router) bindSQMLocked(cfg *config.Config) {
	for i := range cfg.Interfaces {
		ic := &cfg.Interfaces[i]
		if ifc := r.net.Interface(ic.Name); ifc != nil {
			q := r.sqm.Download(ic.Name, sqmParams(ic, false, int(ifc.MTU())), shapedInput{ifc})
			if q == nil {
				ifc.SetIngressShaper(nil)
			} else {
				ifc.SetIngressShaper(q)
			}
		}
	}
	r.sqm.Prune(func(name string) (bool, bool) {
		ic := cfg.Interface(name)
		return ic != nil && sqmParams(ic, true, 0) != nil, ic != nil && sqmParams(ic, false, 0) != nil
	})
}

// sqmStatusLocked returns the shaped directions for the status page.
func (r *Router) sqmStatusLocked() []status.SQM {
	var out []status.SQM
	for _, s := range r.sqm.Status() {
		out = append(out, status.SQM{Status: s})
	}
	return out
}
