package router

import (
	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xdpport"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"github.com/gvrouter/gvrouter/router/config"
)

var _ portIO = (*xdpport.Port)(nil)

// driverPort is a port that names its backend and mode for the status
// page (*xdpport.Port); others are af_packet or the host TAP.
type driverPort interface {
	Driver() string
	Mode() string
}

// portDriver returns the backend and mode the status page shows for p.
func portDriver(p portIO) (driver, mode string) {
	switch p := p.(type) {
	case driverPort:
		return p.Driver(), p.Mode()
	case *hw.Port:
		return config.DriverAFPacket, ""
	}
	return "tap", ""
}

// openDriverLocked opens the kernel interface of pc with the driver its
// config or the hardware profile asks for (config.Port.DriverOf). AF_XDP
// that cannot start (no CAP_BPF, no XDP, and for auto no zero-copy)
// falls back to AF_PACKET, and says why: the port works either way.
// AF_XDP takes every queue the NIC has (pc.Queues is AF_PACKET's fanout
// width), since frames of a queue without a socket would be dropped.
func (r *Router) openDriverLocked(cfg *config.Config, pc config.Port, extra int) (portIO, error) {
	driver := pc.DriverOf(cfg.Hardware)
	if driver == config.DriverAFXDP || driver == config.DriverAuto {
		bind := xsk.BindAuto
		if driver == config.DriverAuto {
			// auto: AF_XDP only where it beats the ring, i.e. zero-copy.
			bind = xsk.BindZeroCopy
		}
		p, err := xdpport.Open(xdpport.Config{Name: pc.Name, MTU: pc.MTU, ExtraTags: extra, Bind: bind, StateDir: r.state.dir, Pool: r.xdpPoolLocked(cfg)}, r.log)
		if err == nil {
			r.log.Info("port driver", "port", pc.Name, "config", driver, "driver", p.Driver(), "mode", p.Mode(), "queues", p.Queues())
			return p, nil
		}
		r.log.Warn("port driver: af_xdp cannot start, using af_packet", "port", pc.Name, "config", driver, "reason", err)
	}
	p, err := hw.Open(hw.Config{
		Name:      pc.Name,
		Queues:    pc.Queues,
		MTU:       pc.MTU,
		Profile:   cfg.Hardware,
		ExtraTags: extra,
		StateDir:  r.state.dir,
		Tx:        hw.TxMode(pc.Tx),
	}, r.log)
	if err != nil {
		return nil, err
	}
	r.log.Info("port driver", "port", pc.Name, "config", driver, "driver", config.DriverAFPacket)
	return p, nil
}
