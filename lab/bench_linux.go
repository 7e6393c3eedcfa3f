package lab

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// iperfSlack is added to -t and -O for an iperf3 client's timeout:
	// connection setup and the end-of-test exchange.
	iperfSlack = 30 * time.Second
	// benchRetryPause separates a failed iperf3 run from its one retry;
	// iperf3 -s refuses a test while it still finishes the previous one.
	benchRetryPause = time.Second
)

// bench runs the selected bench modes, a, b, n, c and d taking turns run by
// run, then f, k, m and g, and prints the tables and the ratios. The router
// of the proofs, if running, serves the first run of mode (a); it is
// stopped before the other modes and started again for each run of (a).
func (l *lab) bench(ctx context.Context, modes string) error {
	if l.rtr2NS != "" {
		return l.benchMACsec(ctx)
	}
	l.cleanups = append(l.cleanups, func() {
		if l.benchSrv != nil {
			l.benchSrv.stop()
		}
	})
	if err := l.startBenchServer(ctx); err != nil {
		return err
	}
	driver := l.opt.Driver
	if driver == "" {
		driver = "the profile's default"
	}
	offloads := "offloads tso/gso/gro/tx off on all lab veths"
	if l.opt.HostOffloads {
		offloads = "offloads tso/gso/tx on, gro off, on all lab veths: the hosts send TSO superframes"
	}
	fmt.Fprintf(l.out, "bench: iperf3 TCP -t %d -O %d, median of %d runs, the modes taking turns run by run; %s; router ports and port bridge (c) on %s (the baseline's A and C on its defaults)\n",
		l.opt.benchSeconds(), benchOmitSeconds, l.opt.benchRuns(), offloads, driver)
	// The modes take turns run by run (a b n c d, a b n c d, ...), so that
	// the machine's drift over minutes, often larger than the differences
	// between the modes, hits them alike and the ratios of one run hold
	// (mode by mode, one (a) -P 1 WAN→LAN median once came out 30 % below
	// every other measurement of the same code).
	runs := map[rune][][]float64{} // mode → benchCase → bit/s of each run
	l.benchCost = map[rune][][]float64{}
	var errs []error
	for r := 0; r < l.opt.benchRuns() && ctx.Err() == nil; r++ {
		for _, m := range benchOrder {
			if !strings.ContainsRune(modes, m) || ctx.Err() != nil {
				continue
			}
			if err := l.benchRound(ctx, m, runs); err != nil {
				errs = append(errs, fmt.Errorf("lab: bench %s run %d: %w", benchModeNames[m], r+1, err))
			}
		}
	}
	results := map[rune][]float64{} // mode → median bit/s per benchCase
	for _, m := range benchOrder {
		if runs[m] == nil {
			continue
		}
		results[m] = make([]float64, len(benchCases))
		for i, c := range benchCases {
			results[m][i] = median(runs[m][i])
			fmt.Fprintf(l.out, "  %-22s %-14s median %8.0f Mbit/s  runs %s\n", benchModeNames[m], c, results[m][i]/1e6, mbps(runs[m][i]))
		}
	}
	if strings.ContainsAny(modes, benchOrder) {
		l.printBench(results, modes)
		l.printBenchCost(modes)
	}
	if strings.ContainsRune(modes, 'a') {
		s := l.benchSuper
		fmt.Fprintf(l.out, "router superframes over the (a) runs: %d frames dropped as oversize on its ports; %d superframes received, %d sent on whole, %d cut in software\n",
			s.oversize, s.received, s.sentWhole, s.segmented)
	}
	if strings.ContainsRune(modes, 'f') && ctx.Err() == nil {
		if err := l.benchFlood(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['f'], err))
		}
	}
	if strings.ContainsRune(modes, 'k') && ctx.Err() == nil {
		if err := l.benchKernelFlood(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['k'], err))
		}
	}
	if strings.ContainsRune(modes, 'm') && ctx.Err() == nil {
		if err := l.benchMemory(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['m'], err))
		}
	}
	if strings.ContainsRune(modes, 's') && ctx.Err() == nil {
		if err := l.benchServices(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['s'], err))
		}
	}
	if strings.ContainsRune(modes, 'l') && ctx.Err() == nil {
		if err := l.benchLatency(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['l'], err))
		}
	}
	if strings.ContainsRune(modes, 'g') && ctx.Err() == nil {
		if err := l.benchGRO(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['g'], err))
		}
	}
	// Last: it adds a modem, a second LAN host and a far server that
	// stay in the lab's namespaces.
	if strings.ContainsRune(modes, 'q') && ctx.Err() == nil {
		if err := l.benchSQM(ctx); err != nil {
			errs = append(errs, fmt.Errorf("lab: bench %s: %w", benchModeNames['q'], err))
		}
	}
	return errors.Join(errs...)
}

// benchSetup prepares bench mode m and returns the iperf3 server address
// and a function that undoes the mode's changes.
func (l *lab) benchSetup(ctx context.Context, m rune) (to netip.Addr, undo func(), err error) {
	_, routed := routerVariants[m]
	if !routed {
		// Every mode but the router's ((a) and its variants) runs
		// without the router, on ports it restored.
		l.proxy.close()
		l.proxy = nil
		if err := l.stopRouter(); err != nil {
			return to, nil, err
		}
	}
	var steps, undoSteps [][]string
	switch m {
	case 'a', 'A', 'x', 't', 'u', 'w':
		if l.router == nil || l.routerMode != m {
			return to, nil, errors.New("the router variant of this mode is not running")
		}
		to = wanHost4.Addr()
	case 'b', 'n':
		to = wanHost4.Addr()
		steps = [][]string{
			{l.rtrNS, "ip", "addr", "add", lanRouter4.String(), "dev", lanPort},
			{l.rtrNS, "ip", "addr", "add", wanRouter4.String(), "dev", wanPort},
		}
		undoSteps = [][]string{
			{l.rtrNS, "ip", "addr", "flush", "dev", lanPort},
			{l.rtrNS, "ip", "addr", "flush", "dev", wanPort},
		}
	case 'c', 'C', 'y', 'd':
		to = l2WAN.Addr()
		steps = [][]string{
			{l.lanNS, "ip", "addr", "add", l2LAN.String(), "dev", hostIf},
			{l.wanNS, "ip", "addr", "add", l2WAN.String(), "dev", hostIf},
		}
		undoSteps = [][]string{
			{l.lanNS, "ip", "addr", "del", l2LAN.String(), "dev", hostIf},
			{l.wanNS, "ip", "addr", "del", l2WAN.String(), "dev", hostIf},
		}
		if m == 'd' {
			steps = append(steps,
				[]string{l.rtrNS, "ip", "link", "add", "br0", "type", "bridge", "stp_state", "0"},
				[]string{l.rtrNS, "ip", "link", "set", lanPort, "master", "br0"},
				[]string{l.rtrNS, "ip", "link", "set", wanPort, "master", "br0"},
				[]string{l.rtrNS, "ip", "link", "set", "br0", "up"},
			)
			undoSteps = append([][]string{
				{l.rtrNS, "ip", "link", "set", lanPort, "nomaster"},
				{l.rtrNS, "ip", "link", "set", wanPort, "nomaster"},
				{l.rtrNS, "ip", "link", "del", "br0"},
			}, undoSteps...)
		}
	}
	var extra func()
	undo = func() {
		if extra != nil {
			extra()
		}
		for _, s := range undoSteps {
			if err := nsRun(context.Background(), s[0], s[1], s[2:]...); err != nil {
				l.log.Warn("lab: bench undo", "err", err)
			}
		}
	}
	for _, s := range steps {
		if err := nsRun(ctx, s[0], s[1], s[2:]...); err != nil {
			return to, undo, err
		}
	}
	switch m {
	case 'b', 'n':
		if err := inNetns(l.rtrNS, func() error { return writeSysctl("net/ipv4/ip_forward", "1", false) }); err != nil {
			return to, undo, err
		}
		extra = func() {
			if m == 'n' {
				if err := nsRun(context.Background(), l.rtrNS, "nft", "delete", "table", "ip", labNATTable); err != nil {
					l.log.Warn("lab: bench undo nftables", "err", err)
				}
			}
			if err := inNetns(l.rtrNS, func() error { return writeSysctl("net/ipv4/ip_forward", "0", false) }); err != nil {
				l.log.Warn("lab: bench undo ip_forward", "err", err)
			}
		}
		if m == 'n' {
			// The router's NAT in the kernel's words: masquerade what
			// leaves the WAN port (fw4's default), conntrack on.
			rules := fmt.Sprintf("add table ip %[1]s\nadd chain ip %[1]s post { type nat hook postrouting priority srcnat; policy accept; }\nadd rule ip %[1]s post oifname %[2]q masquerade\n", labNATTable, wanPort)
			cmd := command(ctx, l.rtrNS, "nft", "-f", "-")
			cmd.Stdin = strings.NewReader(rules)
			if out, err := cmd.CombinedOutput(); err != nil {
				return to, undo, fmt.Errorf("nft masquerade: %v: %s", err, out)
			}
		}
	case 'c', 'C', 'y':
		bin := l.opt.RouterBinary
		if m == 'C' {
			bin = l.opt.BaselineBinary
		}
		bin, err := filepath.Abs(bin)
		if err != nil {
			return to, undo, err
		}
		args := []string{bin, "bridge", "-a", lanPort, "-b", wanPort}
		switch {
		case m == 'y':
			args = append(args, "-driver", DriverAFXDP)
		case m == 'c' && l.opt.Driver != "":
			// The baseline (C) keeps its default, af_packet, as its
			// router (A) does: a build before -driver would refuse it.
			args = append(args, "-driver", l.opt.Driver)
		}
		br, err := startChild(l.log, "router bridge", l.rtrNS, filepath.Join(l.dir, "bridge.log"), args...)
		if err != nil {
			return to, undo, err
		}
		l.benchBridge = br
		extra = func() {
			l.benchBridge = nil
			if err := br.stop(); err != nil {
				l.log.Warn("lab: router bridge", "err", err)
			}
		}
	}
	if _, err := ping(ctx, l.lanNS, to); err != nil {
		return to, undo, fmt.Errorf("no path to %s before iperf3: %w", to, err)
	}
	if m == 'y' || m == 'c' && l.opt.Driver == DriverAFXDP {
		if err := checkXDP(ctx, l.rtrNS, lanPort, wanPort); err != nil {
			return to, undo, fmt.Errorf("port bridge on %s: %w", DriverAFXDP, err)
		}
	}
	return to, undo, nil
}

// startBenchServer (re)starts the WAN host's iperf3 server. A server can
// stay "busy running a test" for minutes when the router was stopped
// before the closing exchange of the last test reached it, so every
// bench round starts a fresh one.
func (l *lab) startBenchServer(ctx context.Context) error {
	if l.benchSrv != nil {
		l.benchSrv.stop()
		l.benchSrv = nil
	}
	srv, err := startChild(l.log, "iperf3 server", l.wanNS, filepath.Join(l.dir, "iperf3-server.log"),
		"iperf3", "-s", "-p", strconv.Itoa(benchPort))
	if err != nil {
		return err
	}
	l.benchSrv = srv
	return waitListening(ctx, l.wanNS, benchPort, srv)
}

// benchRound sets up bench mode m (starting the router for (a) if an
// earlier mode stopped it), runs every bench case once, appends the
// figures to runs[m] and undoes the mode. A figure of (a) counts only if
// the kernel forwarded nothing meanwhile.
func (l *lab) benchRound(ctx context.Context, m rune, runs map[rune][][]float64) error {
	if err := l.startBenchServer(ctx); err != nil {
		return err
	}
	if _, routed := routerVariants[m]; routed {
		if l.router != nil && l.routerMode != m {
			l.proxy.close()
			l.proxy = nil
			if err := l.stopRouter(); err != nil {
				return err
			}
		}
		if l.router == nil {
			var args []string
			if !routerVariants[m].baseline {
				args = l.opt.routerArgs
			}
			if err := l.startRouterBuild(ctx, m, "", args...); err != nil {
				return err
			}
		}
	}
	kBefore := l.kernelState()
	to, undo, err := l.benchSetup(ctx, m)
	if undo != nil {
		defer undo()
	}
	if err != nil {
		return err
	}
	var super0 superframeStats
	if m == 'a' {
		if super0, err = l.readSuperframes(ctx); err != nil {
			return err
		}
	}
	got := make([]float64, len(benchCases))
	cost := make([]float64, len(benchCases))
	pid := l.benchForwarderPID(m)
	var errs []error
	for i, c := range benchCases {
		cost[i] = -1
		cpu0, cerr := procCPUSeconds(pid)
		bps, err := l.iperf(ctx, to, c)
		if err != nil && ctx.Err() == nil {
			time.Sleep(benchRetryPause)
			cpu0, cerr = procCPUSeconds(pid)
			bps, err = l.iperf(ctx, to, c)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c, err))
			got[i] = -1
			continue
		}
		got[i] = bps
		if cpu1, err := procCPUSeconds(pid); pid != 0 && cerr == nil && err == nil {
			cost[i] = cpuMsPerGbit(cpu1-cpu0, bps, float64(l.opt.benchSeconds()+benchOmitSeconds))
		}
		l.log.Debug("lab: bench", "mode", benchModeNames[m], "case", c.String(), "mbps", fmt.Sprintf("%.0f", bps/1e6))
	}
	if _, routed := routerVariants[m]; routed {
		// A router's figure counts only if it did all the forwarding.
		if err := kernelSilent(kBefore, l.kernelState()); err != nil {
			return err
		}
	}
	if m == 'a' {
		super1, err := l.readSuperframes(ctx)
		if err != nil {
			return err
		}
		d := super1.minus(super0)
		l.benchSuper.add(d)
		if l.opt.HostOffloads && d.oversize > 0 {
			// With superframes from the hosts, an oversize drop means the
			// router lost one: the figure does not count.
			return fmt.Errorf("the router dropped %d frames as oversize", d.oversize)
		}
	}
	if runs[m] == nil {
		runs[m] = make([][]float64, len(benchCases))
	}
	for i, bps := range got {
		if bps >= 0 {
			runs[m][i] = append(runs[m][i], bps)
		}
	}
	if pid != 0 {
		if l.benchCost[m] == nil {
			l.benchCost[m] = make([][]float64, len(benchCases))
		}
		for i, c := range cost {
			if c >= 0 {
				l.benchCost[m][i] = append(l.benchCost[m][i], c)
			}
		}
	}
	return errors.Join(errs...)
}

// iperf runs one iperf3 client in the LAN host namespace.
func (l *lab) iperf(ctx context.Context, to netip.Addr, c benchCase) (float64, error) {
	t := l.opt.benchSeconds()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(t+benchOmitSeconds)*time.Second+iperfSlack)
	defer cancel()
	args := []string{"-c", to.String(), "-p", strconv.Itoa(benchPort),
		"-t", strconv.Itoa(t), "-O", strconv.Itoa(benchOmitSeconds), "-P", strconv.Itoa(c.Streams), "-J"}
	if c.Reverse {
		args = append(args, "-R")
	}
	out, err := output(ctx, l.lanNS, "iperf3", args...)
	bps, perr := parseIperf(out)
	if perr != nil {
		return 0, errors.Join(perr, err)
	}
	return bps, nil
}

// printBench prints the table of medians and, each on its own line, the
// ratios (a)/(b) and (c)/(d) per case.
func (l *lab) printBench(results map[rune][]float64, modes string) {
	fmt.Fprintf(l.out, "\n%-32s", "Mbit/s (median)")
	for _, c := range benchCases {
		fmt.Fprintf(l.out, " %14s", c)
	}
	fmt.Fprintln(l.out)
	for _, m := range benchOrder {
		if !strings.ContainsRune(modes, m) {
			continue
		}
		fmt.Fprintf(l.out, "%-32s", benchModeNames[m])
		for i := range benchCases {
			v := "n/a"
			if r := results[m]; r != nil && r[i] > 0 {
				v = fmt.Sprintf("%.0f", r[i]/1e6)
			}
			fmt.Fprintf(l.out, " %14s", v)
		}
		fmt.Fprintln(l.out)
	}
	for _, p := range benchRatios {
		if !strings.ContainsRune(modes, p[0]) && !strings.ContainsRune(modes, p[1]) {
			continue
		}
		if strings.ContainsAny(string(p[:]), benchPairOnly) && !(strings.ContainsRune(modes, p[0]) && strings.ContainsRune(modes, p[1])) {
			continue // baseline and variant ratios only with both figures
		}
		for i, c := range benchCases {
			var x, y float64
			if r := results[p[0]]; r != nil {
				x = r[i]
			}
			if r := results[p[1]]; r != nil {
				y = r[i]
			}
			fmt.Fprintf(l.out, "ratio (%c)/(%c) %s: %s\n", p[0], p[1], c, ratio(x, y))
		}
	}
}

func mbps(xs []float64) string { return rounded(xs, 1e6) }

// rounded formats xs / unit rounded, as "[a b c]".
func rounded(xs []float64, unit float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.0f", x/unit)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// kernelState reads the router namespace's kernel state; a failed read
// gives a state that fails kernelSilent.
func (l *lab) kernelState() kernelState {
	k, err := readKernelState(l.rtrNS)
	if err != nil {
		l.log.Warn("lab: kernel state", "err", err)
		return kernelState{IPForward: "unknown", IP6Forward: "unknown"}
	}
	return k
}

// waitListening waits until a TCP socket listens on port in namespace ns.
func waitListening(ctx context.Context, ns string, port int, c *child) error {
	want := fmt.Sprintf(":%04X", port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		found := false
		err := inNetns(ns, func() error {
			for _, f := range []string{"/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"} {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				sc := bufio.NewScanner(bytes.NewReader(b))
				for sc.Scan() {
					// sl local_address rem_address st ...; st 0A is LISTEN.
					fl := strings.Fields(sc.Text())
					if len(fl) > 3 && strings.HasSuffix(fl[1], want) && fl[3] == "0A" {
						found = true
					}
				}
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case found:
			return nil
		case c.exited():
			return fmt.Errorf("lab: %s exited: %v", c.name, c.err)
		case time.Now().After(deadline) || ctx.Err() != nil:
			return fmt.Errorf("lab: nothing listens on port %d in %s", port, ns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// superframeStats is what the router's status says of superframes and
// oversize drops, summed over its ports and interfaces.
type superframeStats struct {
	oversize, received, sentWhole, segmented uint64
}

func (s superframeStats) minus(o superframeStats) superframeStats {
	return superframeStats{s.oversize - o.oversize, s.received - o.received, s.sentWhole - o.sentWhole, s.segmented - o.segmented}
}

func (s *superframeStats) add(o superframeStats) {
	s.oversize += o.oversize
	s.received += o.received
	s.sentWhole += o.sentWhole
	s.segmented += o.segmented
}

// readSuperframes reads the router's superframe counters and its ports'
// oversize drops from its status listener. The server samples once a
// second, so it waits for a sample taken after the call.
func (l *lab) readSuperframes(ctx context.Context) (superframeStats, error) {
	start := time.Now()
	for {
		body, err := httpGet(ctx, l.rtrNS, "http://127.0.0.1:"+strconv.Itoa(routerStatusPort)+"/api/status")
		if err != nil {
			return superframeStats{}, fmt.Errorf("lab: router status: %w", err)
		}
		s, at, err := parseSuperframes(body)
		if err != nil || !at.Before(start) || time.Since(start) > 5*time.Second {
			return s, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
