package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// benchLatency is bench mode l: for the kernel's masquerade (n), the
// router (a, its default port driver) and the router on af_xdp (x),
// taking turns run by run, the RTT of a 20 pps ping from the LAN host to
// the WAN host at idle and beside 4 TCP streams each way, the ping's
// loss, and the streams' throughput. It prints the median of the runs.
func (l *lab) benchLatency(ctx context.Context) error {
	if err := l.startBenchServer(ctx); err != nil {
		return err
	}
	fmt.Fprintf(l.out, "bench latency: ping -i %s (%d/s) from the LAN host to the WAN host, idle (%d probes) and beside iperf3 -P %d -t %d -O %d each way; median of %d runs, the modes taking turns run by run\n",
		probeInterval, probesPerSecond, idleProbes, latencyStreams, l.opt.benchSeconds(), benchOmitSeconds, l.opt.benchRuns())
	runs := map[rune][]latencyRun{}
	var errs []error
	for r := 0; r < l.opt.benchRuns() && ctx.Err() == nil; r++ {
		for _, m := range latencyModes {
			if ctx.Err() != nil {
				break
			}
			run, err := l.benchLatencyRound(ctx, m)
			if err != nil {
				errs = append(errs, fmt.Errorf("lab: bench latency %s run %d: %w", benchModeNames[m], r+1, err))
				continue
			}
			l.log.Debug("lab: bench latency", "mode", benchModeNames[m], "idle_ms", run.Idle.avg(), "up_ms", run.Up.avg(), "down_ms", run.Down.avg())
			runs[m] = append(runs[m], run)
		}
	}
	l.printLatency(runs)
	return errors.Join(errs...)
}

// benchLatencyRound sets up mode m as benchRound does, measures one run
// and undoes the mode.
func (l *lab) benchLatencyRound(ctx context.Context, m rune) (latencyRun, error) {
	run := latencyRun{UpBps: math.NaN(), DnBps: math.NaN()}
	if err := l.startBenchServer(ctx); err != nil {
		return run, err
	}
	if _, routed := routerVariants[m]; routed {
		if l.router != nil && l.routerMode != m {
			l.proxy.close()
			l.proxy = nil
			if err := l.stopRouter(); err != nil {
				return run, err
			}
		}
		if l.router == nil {
			if err := l.startRouterBuild(ctx, m, "", l.opt.routerArgs...); err != nil {
				return run, err
			}
		}
	}
	kBefore := l.kernelState()
	to, undo, err := l.benchSetup(ctx, m)
	if undo != nil {
		defer undo()
	}
	if err != nil {
		return run, err
	}
	if run.Idle, err = l.probe(ctx, to, idleProbes); err != nil {
		return run, fmt.Errorf("idle: %w", err)
	}
	var errs []error
	for _, reverse := range []bool{false, true} {
		st, bps, err := l.probeUnderLoad(ctx, to, reverse)
		if err != nil {
			errs = append(errs, err)
		}
		if reverse {
			run.Down, run.DnBps = st, bps
		} else {
			run.Up, run.UpBps = st, bps
		}
	}
	if _, routed := routerVariants[m]; routed {
		// As in benchRound: the router's figures count only if it did
		// all the forwarding.
		if err := kernelSilent(kBefore, l.kernelState()); err != nil {
			return run, err
		}
	}
	return run, errors.Join(errs...)
}

// probeUnderLoad runs the ping beside one iperf3 run of latencyStreams
// streams (reverse: WAN→LAN) and returns the ping's figures and the
// streams' throughput (NaN if iperf3 failed).
func (l *lab) probeUnderLoad(ctx context.Context, to netip.Addr, reverse bool) (pingStats, float64, error) {
	secs := l.opt.benchSeconds() + benchOmitSeconds
	type result struct {
		st  pingStats
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The probe starts with the load and stops before it does, so
		// that every probe sees the streams running.
		time.Sleep(time.Second)
		st, err := l.probe(ctx, to, (secs-2)*probesPerSecond)
		done <- result{st, err}
	}()
	bps, err := l.iperf(ctx, to, benchCase{Streams: latencyStreams, Reverse: reverse})
	if err != nil {
		bps = math.NaN()
		err = fmt.Errorf("%s: %w", benchCase{latencyStreams, reverse}, err)
	}
	r := <-done
	if r.err != nil {
		err = errors.Join(err, fmt.Errorf("probe beside %s: %w", benchCase{latencyStreams, reverse}, r.err))
	}
	return r.st, bps, err
}

// probe sends n echo requests from the LAN host to to with iputils ping
// at probeInterval and parses its output. A reply later than 1 s counts
// as lost.
func (l *lab) probe(ctx context.Context, to netip.Addr, n int) (pingStats, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*time.Second/probesPerSecond+10*time.Second)
	defer cancel()
	out, err := output(ctx, l.lanNS, "ping", "-n", "-c", strconv.Itoa(n), "-i", probeInterval, "-W", "1", to.String())
	st, perr := parsePing(out)
	if perr != nil {
		return st, errors.Join(perr, err)
	}
	// ping exits 1 when a reply was missing: that is a figure (loss),
	// not a failure.
	return st, nil
}

// printLatency prints one line per mode: the median of each figure.
func (l *lab) printLatency(runs map[rune][]latencyRun) {
	fmt.Fprintf(l.out, "\n%-34s", "latency (median)")
	for _, f := range latencyFigures {
		fmt.Fprintf(l.out, " %11s", f.name)
	}
	fmt.Fprintln(l.out)
	for _, m := range latencyModes {
		name := benchModeNames[m]
		if m == 'a' && l.opt.Driver != "" {
			name += " on " + l.opt.Driver
		}
		fmt.Fprintf(l.out, "%-34s", name)
		for _, f := range latencyFigures {
			v := "n/a"
			if x := medianFigure(runs[m], f.get); !math.IsNaN(x) {
				v = fmt.Sprintf(f.f, x)
			}
			fmt.Fprintf(l.out, " %11s", v)
		}
		fmt.Fprintf(l.out, "  (%d runs)\n", len(runs[m]))
	}
	var idle []string
	for _, m := range latencyModes {
		idle = append(idle, fmt.Sprintf("(%c) %s", m, roundedMs(runs[m])))
	}
	fmt.Fprintf(l.out, "idle avg ms per run: %s\n", strings.Join(idle, "; "))
}

// roundedMs lists the idle average of each run.
func roundedMs(runs []latencyRun) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = fmt.Sprintf("%.3f", r.Idle.avg())
	}
	return "[" + strings.Join(s, " ") + "]"
}
