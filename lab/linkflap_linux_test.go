package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestLinkFlap takes the LAN cable out and puts it back while the real
// router runs: the status page shows the interface and its port down, then
// up, and traffic crosses again without a restart.
func TestLinkFlap(t *testing.T) {
	parallelLab(t)
	runWithHook(t, func(l *lab) error {
		ctx := context.Background()
		waitState := func(want string) error {
			deadline := time.Now().Add(proofTimeout)
			for {
				body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
				if err != nil {
					return err
				}
				var s status.Snapshot
				if err := json.Unmarshal(body, &s); err != nil {
					return err
				}
				var ifState, portState string
				for _, i := range s.Interfaces {
					if i.Name == "lan" {
						ifState = i.State
					}
				}
				for _, p := range s.Ports {
					if p.Name == lanPort {
						portState = p.State
					}
				}
				if ifState == want && portState == want {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("status page: lan %q, %s %q; want both %q", ifState, lanPort, portState, want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if err := nsRun(ctx, l.lanNS, "ip", "link", "set", hostIf, "down"); err != nil {
			return err
		}
		if err := waitState("down"); err != nil {
			return err
		}
		if err := nsRun(ctx, l.lanNS, "ip", "link", "set", hostIf, "up"); err != nil {
			return err
		}
		// Link down took the host's default route with it.
		if err := nsRun(ctx, l.lanNS, "ip", "route", "replace", "default", "via", lanRouter4.Addr().String(), "dev", hostIf); err != nil {
			return err
		}
		if err := waitState("up"); err != nil {
			return err
		}
		if _, err := ping(ctx, l.lanNS, wanHost4.Addr()); err != nil {
			return fmt.Errorf("after the link came back: %w", err)
		}
		_, err := tcpEcho(ctx, l.lanNS, l.wanNS, wanHost4.Addr())
		return err
	})
}
