package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNATSYNFlood floods the router with new TCP SYNs from random source
// ports (LAN → WAN, >= 20,000/s for 10 s) against a table of 10,000
// entries while an iperf3 flow crosses it: the table stays at its limit,
// drops are counted, the router's RSS grows by at most 16 MB, and the
// established flow keeps running through every 1-s interval. The flow's
// throughput during the flood against its pre-flood median is printed;
// it is a performance figure on a shared machine, so `router lab -bench
// -bench-modes f` (scripts/bench.sh) measures it, not this test.
func TestNATSYNFlood(t *testing.T) {
	requirePrivileged(t, "iperf3", "nft")
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		conntrackMax: floodTableMax,
		testHook: func(l *lab) error {
			if prof := os.Getenv("GVROUTER_FLOOD_CPUPROFILE"); prof != "" {
				// For finding where the flood's cost goes; never set in CI.
				if err := l.stopRouter(); err != nil {
					return err
				}
				if err := l.startRouterWith(context.Background(), "", "-cpuprofile", prof); err != nil {
					return err
				}
				defer l.stopRouter()
			}
			r, err := l.flood(context.Background())
			t.Log(r)
			if os.Getenv("GVROUTER_FLOOD_LOG") != "" {
				t.Logf("router log tail:\n%s", tail(filepath.Join(l.dir, "router.log"), 6000))
			}
			if err != nil {
				return err
			}
			return r.check(false)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
	if testing.Verbose() {
		fmt.Print(out.String())
	}
}
