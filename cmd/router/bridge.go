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

// bridgePort is an open port of `router bridge`.
type bridgePort interface {
	hw.BridgePort
	Close() error
}

// cmdBridge bridges two ports with the port code alone, on either
// backend: the ceiling the router's forwarding is measured against
// (router lab -bench, mode c).
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
	pa, err := openBridgePort(*driver, *a, logger)
	if err != nil {
		return err
	}
	defer pa.Close()
	pb, err := openBridgePort(*driver, *b, logger)
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
// config.DriverAFXDP), with the profile defaults a router port gets.
func openBridgePort(driver, ifname string, log *slog.Logger) (bridgePort, error) {
	if driver == config.DriverAFXDP {
		p, err := xdpport.Open(xdpport.Config{Name: ifname}, log)
		if err != nil {
			return nil, err
		}
		log.Info("bridge port", "port", ifname, "driver", p.Driver(), "mode", p.Mode(), "queues", p.Queues())
		return p, nil
	}
	return hw.Open(hw.Config{Name: ifname}, log)
}
