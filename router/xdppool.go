package router

import (
	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xdpport"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

// xdpPoolLocked returns the Pool the router's af_xdp ports share their
// UMEM through, so that a frame forwarded from one to another leaves
// from the buffer it arrived in (hw/xdpport, "Zero-copy forwarding").
// It is made once, when the first af_xdp port opens, sized for the
// queues of every port the config puts on af_xdp (or auto) at that
// time; a port a reload adds later joins where a removed one left room,
// or gets a UMEM of its own in the pool (frames to and from it are then
// copied).
func (r *Router) xdpPoolLocked(cfg *config.Config) *xdpport.Pool {
	if r.xdpPool == nil {
		sockets := 0
		for _, pc := range cfg.Ports {
			if pc.Kind == config.PortTAP {
				continue
			}
			if d := pc.DriverOf(cfg.Hardware); d == config.DriverAFXDP || d == config.DriverAuto {
				sockets += xdpport.QueueCount(pc.Name)
			}
		}
		r.xdpPool = xdpport.NewPool(xdpport.PoolConfig{Sockets: sockets})
	}
	return r.xdpPool
}

// portUMEM is what the status page shows of an af_xdp port's UMEM and
// its zero-copy and copied transmits (st is the port's Stats); nil for
// other backends.
func portUMEM(p portIO, st hw.Stats) *status.PortUMEM {
	xp, ok := p.(*xdpport.Port)
	if !ok {
		return nil
	}
	info := xp.UmemInfo()
	u := &status.PortUMEM{
		ID:         info.ID,
		SharedWith: []string{},
		Frames:     info.Frames,
		FrameSize:  info.FrameSize,
		Free:       info.Counts.Free,
		Fill:       info.Counts.Fill,
		RX:         info.Counts.RX,
		Held:       info.Counts.Held,
		Lent:       info.Counts.Lent,
		TX:         info.Counts.TX,
		Completion: info.Counts.Completion,
		TxZeroCopy: st.TxZeroCopy,
		TxCopied:   st.TxCopied,
	}
	for _, name := range info.Ports {
		if name != xp.Name() {
			u.SharedWith = append(u.SharedWith, name)
		}
	}
	return u
}
