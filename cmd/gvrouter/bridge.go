package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xdpport"
	"github.com/gvrouter/gvrouter/router/config"
)

// bridgePort is an open port of `gvrouter bridge`.
type bridgePort interface {
	hw.BridgePort
	Close() error
}

// cmdBridge bridges two ports with the port code alone, on either
// backend: the ceiling the router's forwarding is measured against
// (gvlab -bench, mode c).
func cmdBridge(args []string) error {
	fs := flag.NewFlagSet("bridge", flag.ExitOnError)
	a := fs.String("a", "", "first port")
	b := fs.String("b", "", "second port")
	driver := fs.String("driver", config.DriverAFPacket, "port driver: af_packet | af_xdp (fails rather than falling back)")
	dbg := fs.Bool("debug", false, "debug logging")
	fs.Parse(args)
	if *a == "" || *b == "" {
		return errors.New("need -a and -b")
	}
	if *driver != config.DriverAFPacket && *driver != config.DriverAFXDP {
		return fmt.Errorf("bridge: driver %q: want %s or %s", *driver, config.DriverAFPacket, config.DriverAFXDP)
	}
	logger := newLogger(*dbg)
	// On af_xdp both ports share one UMEM, as a router's af_xdp ports do,
	// so a frame leaves from the buffer it arrived in (hw/xdpport doc).
	var pool *xdpport.Pool
	if *driver == config.DriverAFXDP {
		pool = xdpport.NewPool(xdpport.PoolConfig{Sockets: xdpport.QueueCount(*a) + xdpport.QueueCount(*b)})
	}
	pa, err := openBridgePort(*driver, *a, pool, logger)
	if err != nil {
		return err
	}
	defer pa.Close()
	pb, err := openBridgePort(*driver, *b, pool, logger)
	if err != nil {
		return err
	}
	defer pb.Close()
	ctx, cancel := signalContext()
	defer cancel()
	logger.Info("bridging", "a", *a, "b", *b, "driver", *driver)
	if err := hw.Bridge(ctx, pa, pb); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// openBridgePort opens ifname with driver (config.DriverAFPacket or
// config.DriverAFXDP, on pool's UMEM), with the profile defaults a router
// port gets.
func openBridgePort(driver, ifname string, pool *xdpport.Pool, log *slog.Logger) (bridgePort, error) {
	if driver == config.DriverAFXDP {
		p, err := xdpport.Open(xdpport.Config{Name: ifname, Pool: pool}, log)
		if err != nil {
			return nil, err
		}
		log.Info("bridge port", "port", ifname, "driver", p.Driver(), "mode", p.Mode(), "queues", p.Queues(), "umem_ports", p.UmemInfo().Ports)
		return p, nil
	}
	return hw.Open(hw.Config{Name: ifname}, log)
}
