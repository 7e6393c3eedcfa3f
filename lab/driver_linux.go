package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// checkDrivers fails unless each of ports of the router in namespace ns
// runs on driver, as the router's status reports it: a port on af_xdp
// that could not start falls back to af_packet and keeps working, which
// would make an af_xdp lab run quietly prove af_packet.
func (l *lab) checkDrivers(ctx context.Context, ns string, ports []string, driver string) error {
	body, err := httpGet(ctx, ns, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
	if err != nil {
		return fmt.Errorf("lab: port drivers: %w", err)
	}
	got, err := portDrivers(body)
	if err != nil {
		return err
	}
	for _, p := range ports {
		if got[p] != driver {
			return fmt.Errorf("lab: router port %s in %s runs on %q, want %s (the router log says why it fell back)", p, ns, got[p], driver)
		}
	}
	l.log.Info("lab: router ports on their driver", "namespace", ns, "driver", driver, "ports", ports)
	return nil
}

// checkXDP fails unless each of devs in namespace ns has an XDP program
// attached, as `ip -d -j link show` lists it: the port bridge of bench
// mode (c) on af_xdp has no status page to ask.
func checkXDP(ctx context.Context, ns string, devs ...string) error {
	for _, dev := range devs {
		out, err := output(ctx, ns, "ip", "-d", "-j", "link", "show", "dev", dev)
		if err != nil {
			return err
		}
		var links []map[string]json.RawMessage
		if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
			return fmt.Errorf("lab: ip -j link show %s: %v: %s", dev, err, out)
		}
		if _, ok := links[0]["xdp"]; !ok {
			return fmt.Errorf("lab: %s has no XDP program", dev)
		}
	}
	return nil
}
