package router

import (
	"maps"
	"slices"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/qdisc"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/sqm"
	"github.com/gvrouter/gvrouter/stack"
)

// sqmQueues are the shaped directions of one wan interface (config sqm:).
type sqmQueues struct {
	upload, download *sqm.Queue
}

// sqmParams translates an sqm: mapping for one direction's rate; mtu is
// the interface's, so every frame of it fits a queue slot.
func sqmParams(s *config.SQM, rate uint64, mtu int) sqm.Params {
	return sqm.Params{
		Rate:     rate,
		Overhead: s.Overhead,
		Diffserv: s.DiffservMode(),
		ECN:      s.ECN,
		// Ethernet header and two VLAN tags around an MTU packet.
		FrameSize: max(qdisc.DefaultFrameSize, mtu+14+8),
	}
}

// sqmWriterLocked returns what interface ic writes to: its upload Queue in
// front of w when sqm: shapes its upload, else w. The Queue is made on
// first use and reconfigured after (a rate change keeps its backlog);
// shapedInput is a download Queue's output: the interface's receive path.
type shapedInput struct{ ifc *stack.Interface }

func (s shapedInput) WriteFrames(frames [][]byte) (int, error) {
	s.ifc.DeliverShaped(frames)
	return len(frames), nil
}

// bindSQMLocked puts a download Queue in front of the receive path of
// each wan interface whose sqm: shapes download, takes it away from the
// others, then closes the queues cfg no longer has (pruneSQMLocked).
// Call it after every Apply: an interface Apply recreated is a new one.
// r.mu must be held.
func (r *Router) bindSQMLocked(cfg *config.Config) {
	for i := range cfg.Interfaces {
		ic := &cfg.Interfaces[i]
		ifc := r.net.Interface(ic.Name)
		if ifc == nil {
			continue
		}
		if ic.SQM == nil || ic.SQM.Download == 0 {
			ifc.SetIngressShaper(nil)
			continue
		}
		if r.sqm == nil {
			r.sqm = make(map[string]*sqmQueues)
		}
		qs := r.sqm[ic.Name]
		if qs == nil {
			qs = &sqmQueues{}
			r.sqm[ic.Name] = qs
		}
		p := sqmParams(ic.SQM, ic.SQM.Download, int(ifc.MTU()))
		out := shapedInput{ifc}
		if qs.download == nil {
			q, err := sqm.New(sqm.Download, p, r.nat.engine.InsideHost, out)
			if err != nil {
				r.log.Error("sqm download", "interface", ic.Name, "err", err)
				ifc.SetIngressShaper(nil)
				continue
			}
			qs.download = q
		} else {
			if err := qs.download.Reconfigure(p); err != nil {
				r.log.Error("sqm download", "interface", ic.Name, "err", err)
			}
			qs.download.SetOutput(out)
		}
		ifc.SetIngressShaper(qs.download)
	}
	r.pruneSQMLocked(cfg)
}

// pruneSQMLocked closes the ones no longer configured. r.mu must be held.
func (r *Router) sqmWriterLocked(ic *config.Interface, mtu int, w hw.FrameWriter) hw.FrameWriter {
	if ic.SQM == nil || ic.SQM.Upload == 0 {
		return w
	}
	if r.sqm == nil {
		r.sqm = make(map[string]*sqmQueues)
	}
	qs := r.sqm[ic.Name]
	if qs == nil {
		qs = &sqmQueues{}
		r.sqm[ic.Name] = qs
	}
	p := sqmParams(ic.SQM, ic.SQM.Upload, mtu)
	if qs.upload != nil {
		if err := qs.upload.Reconfigure(p); err != nil {
			// config.Validate checked the ranges; keep shaping as before.
			r.log.Error("sqm upload", "interface", ic.Name, "err", err)
		}
		qs.upload.SetOutput(w)
		return qs.upload
	}
	q, err := sqm.New(sqm.Upload, p, r.nat.engine.InsideHost, w)
	if err != nil {
		r.log.Error("sqm upload", "interface", ic.Name, "err", err)
		return w
	}
	qs.upload = q
	return q
}

// pruneSQMLocked closes the queues of directions cfg no longer shapes,
// once the stack writes elsewhere (after Apply). r.mu must be held.
func (r *Router) pruneSQMLocked(cfg *config.Config) {
	for name, qs := range r.sqm {
		ic := cfg.Interface(name)
		if qs.upload != nil && (ic == nil || ic.SQM == nil || ic.SQM.Upload == 0) {
			qs.upload.Close()
			qs.upload = nil
		}
		if qs.download != nil && (ic == nil || ic.SQM == nil || ic.SQM.Download == 0) {
			qs.download.Close()
			qs.download = nil
		}
		if qs.upload == nil && qs.download == nil {
			delete(r.sqm, name)
		}
	}
}

// closeSQMLocked stops every queue (Close).
func (r *Router) closeSQMLocked() {
	for _, qs := range r.sqm {
		if qs.upload != nil {
			qs.upload.Close()
		}
		if qs.download != nil {
			qs.download.Close()
		}
	}
	r.sqm = nil
}

// sqmStatusLocked returns the shaped directions for the status page,
// by interface name, upload first. r.mu must be held.
func (r *Router) sqmStatusLocked() []status.SQM {
	var out []status.SQM
	for _, name := range slices.Sorted(maps.Keys(r.sqm)) {
		qs := r.sqm[name]
		for _, q := range []*sqm.Queue{qs.upload, qs.download} {
			if q == nil {
				continue
			}
			st := q.Stats()
			out = append(out, status.SQM{
				Interface:   name,
				Direction:   st.Direction,
				Rate:        st.Rate,
				Overhead:    st.Overhead,
				Diffserv:    st.Diffserv,
				TinNames:    st.TinNames,
				WriteErrors: st.WriteErrors,
				Queue:       st.Queue,
			})
		}
	}
	return out
}
