package lab

import (
	"context"
	"fmt"
	"strconv"
)

// checkDrivers fails unless every router port of the topology runs on
// driver, as the router's status reports it: a port on af_xdp that could
// not start falls back to af_packet and keeps working, which would make
// an af_xdp lab run quietly prove af_packet.
func (l *lab) checkDrivers(ctx context.Context, driver string) error {
	body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
	if err != nil {
		return fmt.Errorf("lab: port drivers: %w", err)
	}
	got, err := portDrivers(body)
	if err != nil {
		return err
	}
	for _, p := range routerPorts(l.opt.Topology) {
		if got[p] != driver {
			return fmt.Errorf("lab: router port %s runs on %q, want %s (the router log says why it fell back)", p, got[p], driver)
		}
	}
	l.log.Info("lab: router ports on their driver", "driver", driver, "ports", routerPorts(l.opt.Topology))
	return nil
}
