package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
)

// memFlows is the table size bench mode m fills: the default limit
// (natengine.DefaultMaxConns), the table size the RSS is reported for.
const memFlows = 65536

// memFwdFlows is as many of them as forwarded flows may hold: the rest
// is the router's own reserve (nat.conntrack.router_reserve, max/16 by
// default).
const memFwdFlows = memFlows - memFlows/config.DefaultRouterReserveShare

// benchMemory is bench mode m: with the router just started (its default
// conntrack limit of 65,536), a SYN flood from random source addresses
// and ports fills the table's forwarded share with masqueraded flows; the router's RSS before and after
// gives the bytes per tracked flow (goal: at most 64 MB in all).
func (l *lab) benchMemory(ctx context.Context) error {
	if l.router == nil {
		if err := l.startRouter(ctx); err != nil {
			return err
		}
	}
	undo, err := l.dropFlood(ctx)
	if err != nil {
		return err
	}
	defer undo()
	v0, err := l.natView(ctx)
	if err != nil {
		return err
	}
	rss0, err := l.routerRSS()
	if err != nil {
		return err
	}
	start := time.Now()
	var v natView
	for v.Flows < memFwdFlows && time.Since(start) < time.Minute && ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := synFlood(fctx, l.lanNS, floodSource, floodSources, wanHost4.Addr(), 30000, floodPorts)
		cancel()
		if err != nil {
			return err
		}
		time.Sleep(statusSampleWait)
		if v, err = l.natView(ctx); err != nil {
			return err
		}
	}
	rss1, err := l.routerRSS()
	if err != nil {
		return err
	}
	added := v.Flows - v0.Flows
	if added <= 0 {
		return errors.New("the flood added no flows")
	}
	per := float64(rss1-rss0) / float64(added)
	fmt.Fprintf(l.out, "\n(m) conntrack memory: %d flows (limit %d) in %v; router RSS %.1f MiB → %.1f MiB; %.0f bytes per flow from RSS\n",
		v.Flows, memFlows, time.Since(start).Round(time.Second), float64(rss0)/(1<<20), float64(rss1)/(1<<20), per)
	return nil
}

// benchFlood is bench mode f: the SYN flood of TestNATSYNFlood with the
// performance criterion (no 1-s interval of an established iperf3 flow
// below half its pre-flood median), on a router restarted with a table of
// floodTableMax.
func (l *lab) benchFlood(ctx context.Context) error {
	if err := l.stopRouter(); err != nil {
		return err
	}
	saved := l.opt.conntrackMax
	l.opt.conntrackMax = floodTableMax
	defer func() { l.opt.conntrackMax = saved }()
	if err := l.startRouter(ctx); err != nil {
		return err
	}
	defer l.stopRouter()
	r, err := l.flood(ctx)
	fmt.Fprintf(l.out, "\n(f) %s\n", r)
	if err != nil {
		return err
	}
	if err := r.check(true); err != nil {
		fmt.Fprintf(l.out, "(f) FAILS: %v\n", err)
		return nil
	}
	fmt.Fprintf(l.out, "(f) holds: table at its limit, drops counted, RSS +%.1f MiB <= 16, every flood interval >= half the pre-flood median\n", float64(r.RSS1-r.RSS0)/(1<<20))
	return nil
}
