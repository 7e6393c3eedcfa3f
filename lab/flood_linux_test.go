package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestNATSYNFlood floods the router with new TCP SYNs from random source
// ports of 80 LAN addresses (LAN → WAN, >= 20,000/s for 10 s; one
// address alone stops at its per_host limit) against a table of 10,000
// entries while an iperf3 flow crosses it: the table stays at its limit,
// drops are counted, the router's RSS grows by at most 16 MB, and the
// established flow keeps running through every 1-s interval. The flow's
// throughput during the flood against its pre-flood median is printed;
// it is a performance figure on a shared machine, so `gvlab -bench
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
		fewProofs:    true, // the flood brings its own LAN addresses and flows
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

// TestBenchKernelFlood runs bench mode k: the flood of TestNATSYNFlood
// against the router namespace's kernel doing nftables masquerade. The
// flow must keep moving; its throughput is printed, not asserted. After
// the mode the router namespace forwards nothing and tracks nothing, and
// the WAN host no longer drops the flood's port.
func TestBenchKernelFlood(t *testing.T) {
	if testing.Short() && !netnstest.CI() {
		t.Skip("the flood takes a while")
	}
	requirePrivileged(t, "iperf3", "nft")
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		fewProofs:    true, // mode k stops the router at once
		testHook: func(l *lab) error {
			ctx := context.Background()
			if err := l.benchKernelFlood(ctx); err != nil {
				return err
			}
			k := l.kernelState()
			if k.IPForward != "0" {
				t.Errorf("ip_forward after (k) = %q, want 0", k.IPForward)
			}
			for _, ns := range []string{l.rtrNS, l.wanNS} {
				if b, err := output(ctx, ns, "nft", "list", "tables"); err != nil || len(bytes.TrimSpace(b)) != 0 {
					t.Errorf("nftables of %s after (k): %q (%v), want none", ns, b, err)
				}
			}
			flows, _, _, err := l.kernelProbe().table(ctx)
			if err != nil || flows != 0 {
				t.Errorf("conntrack entries after (k) = %d (%v), want 0", flows, err)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err := Run(ctx, opt)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatalf("Run() error: %v", err)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "(k) kernel") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, "lowest") {
		t.Errorf("output has no (k) result line")
	}
	if strings.Contains(out.String(), "stalled") {
		t.Errorf("the established flow stalled during the flood")
	}
}
