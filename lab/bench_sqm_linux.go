package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// The SQM bench's servers, all in the namespace beyond the WAN host so
// that both directions cross the modem as forwarded traffic (see
// addFarServer): the upload's and the download's iperf3, the fairness
// row's second iperf3 and irtt.
const (
	sqmUpPort   = benchPort
	sqmDownPort = benchPort + 1
	sqmFairPort = benchPort + 2
	irttPort    = 2112 // irtt's default
)

// sqmTopology is what benchSQM adds to the lab: the namespaces of the
// far server and the second LAN host.
type sqmTopology struct {
	far, lan2 string
}

// benchSQM is bench mode q: the router behind a bloated modem (htb at
// the -bench-sqm rates with a 1,000-packet FIFO, each direction), first
// without sqm, then with sqm at 95 % of the modem's rates, taking turns
// run by run; each run probes with irtt at idle and beside 4 TCP
// streams up and 4 down at once, and measures the fairness row (16
// upload streams from the LAN host beside 1 from a second LAN host). It
// prints the median of the runs.
func (l *lab) benchSQM(ctx context.Context) error {
	rates, err := parseSQMRates(l.opt.SQMRates)
	if err != nil {
		return err
	}
	if l.router != nil && l.routerMode != 'a' {
		l.proxy.close()
		l.proxy = nil
		if err := l.stopRouter(); err != nil {
			return err
		}
	}
	if l.router == nil {
		if err := l.startRouterBuild(ctx, 'a', "", l.opt.routerArgs...); err != nil {
			return err
		}
	}
	topo, undo, err := l.sqmSetup(ctx, rates)
	if undo != nil {
		defer undo()
	}
	if err != nil {
		return err
	}
	orig, err := os.ReadFile(filepath.Join(l.dir, "lab.yaml"))
	if err != nil {
		return err
	}
	on, err := withWANSQM(orig, rates.sqmConfig())
	if err != nil {
		return err
	}
	defer func() {
		if l.router == nil {
			return // the cake anchor stopped it
		}
		if err := reloadRouter(l, orig); err != nil {
			l.log.Warn("lab: bench sqm: restoring the config", "err", err)
		}
	}()
	fmt.Fprintf(l.out, "bench sqm: modem %d/%d Mbit/s down/up (htb, %s-packet FIFO each way); router sqm %s; load iperf3 -P %d up and -P %d down at once, -t %d -O %d, to a server beyond the WAN host; probe irtt -i %s (idle %d s, loaded from second %d); fairness: %d upload streams from one LAN host beside %d from another; LAN hosts and server tcp_ecn=1; median of %d runs, sqm off and on taking turns\n",
		rates.Down, rates.Up, modemFIFO, rates.sqmConfig(), sqmStreams, sqmStreams, l.opt.benchSeconds(), benchOmitSeconds,
		sqmProbeInterval, sqmIdleSeconds, benchOmitSeconds, sqmFairManyFlows, sqmFairOneFlow, l.opt.benchRuns())
	rows := []sqmBenchRow{
		{"router, no sqm", orig, 0},
		{fmt.Sprintf("router, sqm %d/%d kbit", shapedDownKbit(rates.Down), shapedUpKbit(rates.Up)), on, 2},
	}
	runs := make([][]sqmRun, len(rows))
	var errs []error
	for r := 0; r < l.opt.benchRuns() && ctx.Err() == nil; r++ {
		for i, row := range rows {
			if ctx.Err() != nil {
				break
			}
			run, err := l.sqmRow(ctx, topo, row.cfg, row.sqm)
			if err != nil {
				errs = append(errs, fmt.Errorf("lab: bench sqm %s run %d: %w", row.name, r+1, err))
			}
			runs[i] = append(runs[i], run)
			l.log.Debug("lab: bench sqm", "row", row.name, "idle_ms", mean(run.Idle.RTT), "loaded_ms", mean(run.Loaded.RTT), "up_mbps", run.UpBps/1e6, "down_mbps", run.DnBps/1e6)
		}
	}
	if l.opt.SQMCake && ctx.Err() == nil {
		cake, accel, err := l.benchSQMCake(ctx, topo, rates)
		if err != nil {
			errs = append(errs, err)
		}
		rows = append(rows, sqmBenchRow{fmt.Sprintf("Linux cake %d/%d kbit (%s)", shapedDownKbit(rates.Down), shapedUpKbit(rates.Up), accel), nil, 0})
		runs = append(runs, cake)
	}
	figs := sqmFigures(rates)
	fmt.Fprintf(l.out, "\n%-34s", "sqm (median)")
	for _, f := range figs {
		fmt.Fprintf(l.out, " %8s", f.name)
	}
	fmt.Fprintln(l.out)
	for i, row := range rows {
		fmt.Fprintf(l.out, "%-34s", row.name)
		for _, f := range figs {
			v := "n/a"
			if x := medianOf(runs[i], f.get); !math.IsNaN(x) {
				v = fmt.Sprintf(f.f, x)
			}
			fmt.Fprintf(l.out, " %8s", v)
		}
		fmt.Fprintf(l.out, "  (%d runs)\n", len(runs[i]))
	}
	fmt.Fprintf(l.out, "ms: irtt round trip; +avg/+p99: loaded avg/p99 less the idle avg; up/dn owd: one-way delay under load, avg and p99; up/dn %%: of the sqm rate (%d/%d kbit) in both rows; cpu: the router process's CPU over the loaded phase, per Gbit moved (both ways) and as %% of one core; 1-flow %%: the single-stream host's share of the upload beside the 16-stream host; ring drp: frames the router's port receive rings dropped over the run (before the router reads them: no queue of its own sees them)\n",
		shapedDownKbit(rates.Down), shapedUpKbit(rates.Up))
	return errors.Join(errs...)
}

// sqmBenchRow is a row of the router's: its config and how many sqm
// queues its status must show.
type sqmBenchRow struct {
	name string
	cfg  []byte
	sqm  int
}

// sqmSetup builds the far server, the modem both ways, the second LAN
// host, turns ECN on at the end hosts and starts the servers. undo
// removes the modem and stops the servers (the namespaces go with the
// lab's).
func (l *lab) sqmSetup(ctx context.Context, rates sqmRates) (sqmTopology, func(), error) {
	var t sqmTopology
	var stops []func()
	undo := func() {
		for _, s := range stops {
			s()
		}
	}
	var err error
	if t.far, err = addFarServer(ctx, l); err != nil {
		return t, undo, err
	}
	stops = append(stops, func() {
		for _, s := range [][]string{
			{"tc", "qdisc", "del", "dev", hostIf, "ingress"},
			{"tc", "qdisc", "del", "dev", hostIf, "root"},
			{"ip", "link", "del", modemIFB},
		} {
			if err := nsRun(context.Background(), l.wanNS, s[0], s[1:]...); err != nil {
				l.log.Warn("lab: bench sqm: removing the modem", "err", err)
			}
		}
	})
	if err := addModem(ctx, l, strconv.Itoa(rates.Up)+"mbit"); err != nil {
		return t, undo, err
	}
	if err := addDownloadModem(ctx, l, strconv.Itoa(rates.Down)+"mbit"); err != nil {
		return t, undo, err
	}
	if t.lan2, err = addSecondLANHost(ctx, l); err != nil {
		return t, undo, err
	}
	// ECN on at both ends (RFC 3168), as Apple's and recent Linux
	// stacks ask for it: a CoDel mark then costs no retransmission.
	for _, ns := range []string{l.lanNS, t.lan2, t.far} {
		if err := nsRun(ctx, ns, "sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1"); err != nil {
			return t, undo, err
		}
	}
	for _, port := range []int{sqmUpPort, sqmDownPort, sqmFairPort} {
		srv, err := startChild(l.log, "iperf3 server", t.far, filepath.Join(l.dir, fmt.Sprintf("iperf3-far-%d.log", port)),
			"iperf3", "-s", "-p", strconv.Itoa(port))
		if err != nil {
			return t, undo, err
		}
		stops = append(stops, func() { srv.stop() })
		if err := waitListening(ctx, t.far, port, srv); err != nil {
			return t, undo, err
		}
	}
	irtt, err := startChild(l.log, "irtt server", t.far, filepath.Join(l.dir, "irtt-server.log"),
		"irtt", "server", "-b", netip.AddrPortFrom(farServer.Addr(), irttPort).String())
	if err != nil {
		return t, undo, err
	}
	stops = append(stops, func() { irtt.stop() })
	return t, undo, nil
}

// sqmRow loads cfg into the router, checks that its status shows
// sqmQueues shaped directions and measures one run.
func (l *lab) sqmRow(ctx context.Context, t sqmTopology, cfg []byte, sqmQueues int) (sqmRun, error) {
	run := sqmRun{UpBps: math.NaN(), DnBps: math.NaN(), CPUSeconds: math.NaN(), FairMany: math.NaN(), FairOne: math.NaN(), RingDrops: math.NaN()}
	if err := reloadRouter(l, cfg); err != nil {
		return run, err
	}
	snap, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return run, err
	}
	if len(snap.SQM) != sqmQueues {
		return run, fmt.Errorf("the router's status shows %d sqm queues, want %d", len(snap.SQM), sqmQueues)
	}
	kBefore := l.kernelState()
	run, err = l.sqmMeasure(ctx, t, l.router.cmd.Process.Pid, l.shapedBits)
	if after, serr := l.statusSince(ctx, time.Now()); serr == nil {
		run.RingDrops = float64(ringDrops(after) - ringDrops(snap))
	}
	// As in benchRound: the router's figures count only if it did all
	// the forwarding.
	if err := kernelSilent(kBefore, l.kernelState()); err != nil {
		return run, err
	}
	return run, err
}

// shapedBits reads what the router's sqm shapers have sent so far each
// way, in bits as the shaper charges them: the frame less its Ethernet
// header (the lab's WAN frames carry no VLAN tag) plus the overhead; at
// is the status snapshot's time.
func (l *lab) shapedBits(ctx context.Context) (up, down float64, at time.Time, err error) {
	snap, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return 0, 0, at, err
	}
	if len(snap.SQM) == 0 {
		return 0, 0, at, errors.New("no sqm")
	}
	for _, q := range snap.SQM {
		var bits float64
		for _, t := range q.Queue.Tins[:min(q.Queue.NumTins, len(q.Queue.Tins))] {
			bits += 8 * (float64(t.SentBytes) + float64(q.Overhead-14)*float64(t.SentPackets))
		}
		switch q.Direction {
		case "upload":
			up += bits
		case "download":
			down += bits
		}
	}
	return up, down, snap.Time, nil
}

// ringDrops sums the router's ports' receive-ring drops.
func ringDrops(s status.Snapshot) uint64 {
	var n uint64
	for _, p := range s.Ports {
		n += p.Drops["ring"]
	}
	return n
}

// sqmMeasure measures one run of whatever routes: the idle probe, the
// loaded phase with the CPU time of process pid, the fairness row.
//
// shaped, if not nil, reads what the router's shapers have sent each
// way so far, in bits.
func (l *lab) sqmMeasure(ctx context.Context, t sqmTopology, pid int, shaped func(context.Context) (up, down float64, at time.Time, err error)) (sqmRun, error) {
	run := sqmRun{UpBps: math.NaN(), DnBps: math.NaN(), CPUSeconds: math.NaN(), FairMany: math.NaN(), FairOne: math.NaN(), RingDrops: math.NaN(),
		UpLinkBps: math.NaN(), DnLinkBps: math.NaN()}
	var err error
	if run.Idle, err = l.irtt(ctx, sqmIdleSeconds*time.Second); err != nil {
		return run, fmt.Errorf("idle: %w", err)
	}
	var errs []error
	if err := l.sqmLoaded(ctx, &run, pid, shaped); err != nil {
		errs = append(errs, err)
	}
	many, one, err := l.sqmFairness(ctx, t)
	if err != nil {
		errs = append(errs, fmt.Errorf("fairness: %w", err))
	} else {
		run.FairMany, run.FairOne = many, one
	}
	return run, errors.Join(errs...)
}

// sqmLoaded runs the rrul-like load (sqmStreams up and down at once)
// with irtt beside it from the end of iperf3's omitted seconds to a
// second before the load ends, and the router's CPU time around it.
func (l *lab) sqmLoaded(ctx context.Context, run *sqmRun, pid int, shaped func(context.Context) (up, down float64, at time.Time, err error)) error {
	secs := l.opt.benchSeconds() + benchOmitSeconds
	cpu0, cerr := procCPUSeconds(pid)
	start := time.Now()
	type result struct {
		bps float64
		err error
	}
	up, down := make(chan result, 1), make(chan result, 1)
	go func() {
		bps, err := l.iperfFrom(ctx, l.lanNS, farServer.Addr(), sqmUpPort, sqmStreams, false)
		up <- result{bps, err}
	}()
	go func() {
		bps, err := l.iperfFrom(ctx, l.lanNS, farServer.Addr(), sqmDownPort, sqmStreams, true)
		down <- result{bps, err}
	}()
	time.Sleep(benchOmitSeconds * time.Second)
	// The shapers' rates over the load's steady part: from here to a
	// second before iperf3 ends (irtt may wait for replies beyond it).
	link := make(chan [2]float64, 1)
	go func() {
		r := [2]float64{math.NaN(), math.NaN()}
		defer func() { link <- r }()
		if shaped == nil {
			return
		}
		up0, dn0, t0, err := shaped(ctx)
		if err != nil {
			return
		}
		time.Sleep(time.Until(start.Add(time.Duration(secs-1) * time.Second)))
		if up1, dn1, t1, err := shaped(ctx); err == nil && t1.After(t0) {
			d := t1.Sub(t0).Seconds()
			r = [2]float64{(up1 - up0) / d, (dn1 - dn0) / d}
		}
	}()
	var errs []error
	st, err := l.irtt(ctx, time.Duration(max(secs-benchOmitSeconds-1, 1))*time.Second)
	if err != nil {
		errs = append(errs, fmt.Errorf("irtt beside the load: %w", err))
	}
	run.Loaded = st
	lr := <-link
	run.UpLinkBps, run.DnLinkBps = lr[0], lr[1]
	u, d := <-up, <-down
	run.Seconds = time.Since(start).Seconds()
	if cpu1, err := procCPUSeconds(pid); cerr == nil && err == nil {
		run.CPUSeconds = cpu1 - cpu0
	}
	if u.err != nil {
		errs = append(errs, fmt.Errorf("upload: %w", u.err))
	} else {
		run.UpBps = u.bps
	}
	if d.err != nil {
		errs = append(errs, fmt.Errorf("download: %w", d.err))
	} else {
		run.DnBps = d.bps
	}
	return errors.Join(errs...)
}

// sqmFairness runs sqmFairManyFlows upload streams from the LAN host and
// sqmFairOneFlow from the second LAN host at once and returns each
// host's goodput in bit/s.
func (l *lab) sqmFairness(ctx context.Context, t sqmTopology) (many, one float64, err error) {
	type result struct {
		bps float64
		err error
	}
	c := make(chan result, 1)
	go func() {
		bps, err := l.iperfFrom(ctx, t.lan2, farServer.Addr(), sqmFairPort, sqmFairOneFlow, false)
		c <- result{bps, err}
	}()
	many, err = l.iperfFrom(ctx, l.lanNS, farServer.Addr(), sqmUpPort, sqmFairManyFlows, false)
	r := <-c
	if err != nil || r.err != nil {
		return 0, 0, errors.Join(err, r.err)
	}
	return many, r.bps, nil
}

// loadCongestion is the congestion control of the load's senders:
// CUBIC, the default of the devices behind a home router (Linux,
// Windows, macOS, Android). The lab's namespaces inherit this machine's
// default, which may be BBR (v1), whose window does not answer ECN
// marks: its flows then stand at BBR's smallest window and judge the
// machine's default, not the queue (TestSQMDownload's captures).
const loadCongestion = "cubic"

// iperfFrom runs one iperf3 client in namespace ns against the server
// at to:port, -t and -O as the bench's, and returns the receiver's
// bit/s.
func (l *lab) iperfFrom(ctx context.Context, ns string, to netip.Addr, port, streams int, reverse bool) (float64, error) {
	t := l.opt.benchSeconds()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t+benchOmitSeconds)*time.Second+iperfSlack)
	defer cancel()
	args := []string{"-c", to.String(), "-p", strconv.Itoa(port),
		"-t", strconv.Itoa(t), "-O", strconv.Itoa(benchOmitSeconds), "-P", strconv.Itoa(streams), "-J", "-C", loadCongestion}
	if reverse {
		args = append(args, "-R")
	}
	out, err := output(ctx, ns, "iperf3", args...)
	bps, perr := parseIperf(out)
	if perr != nil {
		return 0, errors.Join(perr, err)
	}
	return bps, nil
}

// irtt probes from the LAN host to the far server for d. A reply later
// than 2 s after the last request counts as lost.
func (l *lab) irtt(ctx context.Context, d time.Duration) (irttStats, error) {
	ctx, cancel := context.WithTimeout(ctx, d+15*time.Second)
	defer cancel()
	cmd := command(ctx, l.lanNS, "irtt", "client", "-Q", "-i", sqmProbeInterval, "-d", d.String(), "--wait=2s", "-o", "-",
		netip.AddrPortFrom(farServer.Addr(), irttPort).String())
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	st, perr := parseIRTT(out.Bytes())
	if perr != nil {
		return st, fmt.Errorf("%w (irtt: %v: %s)", perr, err, strings.TrimSpace(stderr.String()))
	}
	return st, nil
}
