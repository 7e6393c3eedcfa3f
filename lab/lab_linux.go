package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lab is one run's state. Its methods run on Run's goroutine.
type lab struct {
	opt    Options
	log    *slog.Logger
	out    io.Writer
	prefix string // "gvl<pid>", or "gvl<pid>t<n>" with Options.runTag
	dir    string // runDir/prefix: owner file, config, logs
	lanNS  string
	rtrNS  string
	wanNS  string
	swNS   string // bcm47094: the switch's namespace; "" otherwise
	rtr2NS string // macsec: router 2's namespace; "" otherwise
	// router2 is router 2 of the MACsec lab; msOpt its SecY settings.
	router2 *child
	msOpt   macsecOptions

	namespaces []string // created so far, removed by teardown
	router     *child   // `gvrouter run`, nil when not running
	routerMode rune     // the bench mode whose router variant runs ('a' outside the bench; routerVariants)
	proxy      *proxy   // status page at 127.0.0.1:PORT, nil when not running
	benchSrv   *child   // the NAT bench modes' iperf3 server (startBenchServer)
	// benchBridge is the `gvrouter bridge` of bench modes (c) and (C)
	// while one runs; benchCost is the forwarder's CPU ms per Gbit of
	// each run: mode → benchCase → runs (bench_cpu_linux.go).
	benchBridge *child
	benchCost   map[rune][][]float64
	// benchSuper sums the router's superframe counters and oversize
	// drops over the runs of bench mode (a).
	benchSuper superframeStats
	isp        *child // the ISP's dnsmasq in the WAN namespace (startISP)
	radvd, kea *child // the ISP's IPv6: radvd and kea-dhcp6 in the WAN namespace (startISP6)
	// cfgEdits change the router's lab config before it is written (a
	// bench mode's bigger DHCP pool).
	cfgEdits []func(*labConfig)
	cleanups []func() // undo steps of bench modes, run by teardown (last first)
}

// Run builds the lab, starts the router in it, proves that traffic crosses
// it (and only it), optionally benchmarks, and tears the lab down again
// (after SIGINT with opt.Keep). It returns an error if any step or proof
// failed. Run must run as root in the machine's own network namespace.
func Run(ctx context.Context, opt Options) (err error) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	l := newLab(opt, os.Getpid())
	if err := l.preflight(); err != nil {
		return err
	}
	removed, err := cleanStale(ctx, l.log, os.Getpid())
	if len(removed) > 0 {
		fmt.Fprintf(l.out, "removed namespaces of dead lab runs: %s\n", strings.Join(removed, " "))
	}
	if err != nil {
		l.log.Warn("lab: cleaning earlier runs", "err", err)
	}
	if l.dir, err = writeOwner(l.prefix, os.Getpid()); err != nil {
		return err
	}
	defer func() {
		if terr := l.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
	}()
	if err := l.build(ctx); err != nil {
		return err
	}
	if l.wanByDHCP() {
		if err := l.startISP(ispOptions{renew: l.opt.ispRenew}); err != nil {
			return err
		}
		if err := l.startISP6(ctx, isp6Options{}); err != nil {
			return err
		}
		if err := l.startRadvd(ctx); err != nil {
			return err
		}
	}
	if l.swNS != "" {
		fmt.Fprintf(l.out, "lab %s: LAN host %s (%s, %s) — BCM53012 switch %s (%s VLAN %d, %s VLAN %d, %s tagged) — router %s (%s: %s.1, %s.2) — WAN host %s (%s, %s)\n",
			l.prefix, l.lanNS, lanHost4, lanHost6, l.swNS, swLANPort, lanVID, swWANPort, wanVID, swCPUPort,
			l.rtrNS, cpuPort, cpuPort, cpuPort, l.wanNS, wanHost4, wanHost6)
	} else if l.rtr2NS != "" {
		fmt.Fprintf(l.out, "lab %s: host A %s (%s, %s) — router 1 %s (%s, %s: %s %s) — MACsec link — router 2 %s (%s: %s %s, %s) — host B %s (%s, %s)\n",
			l.prefix, l.lanNS, lanHost4, lanHost6, l.rtrNS, lanPort, msPort, msName, msRouter14, l.rtr2NS, msPort, msName, msRouter24, wanPort, l.wanNS, wanHost4, wanHost6)
	} else {
		fmt.Fprintf(l.out, "lab %s: LAN host %s (%s, %s) — router %s (%s, %s) — WAN host %s (%s, %s)\n",
			l.prefix, l.lanNS, lanHost4, lanHost6, l.rtrNS, lanPort, wanPort, l.wanNS, wanHost4, wanHost6)
	}

	modes := opt.BenchModes
	if modes == "" {
		modes = "abncd"
	}
	var proofErr error
	if !opt.Bench || strings.Contains(modes, "a") {
		if err := l.startRouter(ctx); err != nil {
			return err
		}
		if err := l.startProxy(); err != nil {
			return err
		}
		proofErr = l.summary(l.prove(ctx))
	}
	if opt.testHook != nil {
		if err := opt.testHook(l); err != nil {
			return errors.Join(proofErr, fmt.Errorf("lab: test hook: %w", err))
		}
	}
	if proofErr == nil && opt.Bench {
		if err := l.bench(ctx, modes); err != nil {
			return err
		}
	}
	if opt.Keep && ctx.Err() == nil {
		// A failed proof keeps the lab up too, for a look inside.
		if l.router == nil {
			fmt.Fprintf(l.out, "the router is stopped (bench modes b-d run without it)\n")
		}
		fmt.Fprintf(l.out, "lab is up; `ip netns exec %s sh` gives a LAN host shell; Ctrl-C tears it down\n", l.lanNS)
		<-ctx.Done()
		return proofErr // SIGINT is how a kept lab ends
	}
	if proofErr != nil {
		return proofErr
	}
	return ctx.Err()
}

// newLab returns the state of the run of process pid.
func newLab(opt Options, pid int) *lab {
	l := &lab{opt: opt, log: opt.Log, out: opt.Stdout, prefix: runPrefix(pid) + opt.runTag}
	l.cfgEdits = slices.Clip(opt.cfgEdits)
	l.msOpt.parallel = opt.macsecParallel
	l.msOpt.mka, l.msOpt.mkaRekey = opt.macsecMKA, opt.macsecMKARekey
	if opt.macsecCipher != "" {
		l.msOpt.cipher, l.msOpt.encrypt = opt.macsecCipher, true
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.out == nil {
		l.out = io.Discard
	}
	l.lanNS, l.rtrNS, l.wanNS = l.prefix+"-lan", l.prefix+"-rtr", l.prefix+"-wan"
	if opt.Topology == TopologyBCM47094 {
		l.swNS = l.prefix + "-sw"
	}
	if opt.Topology == TopologyMACsec {
		l.rtr2NS = l.prefix + "-rt2"
	}
	return l
}

// preflight checks what the lab needs before it changes anything.
func (l *lab) preflight() error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("lab: needs root (network namespaces)"))
	}
	tools := []string{"ip"}
	if l.wanByDHCP() {
		// The lab ISP (dnsmasq, kea-dhcp6, radvd: isp_linux.go, isp6_linux.go),
		// the LAN host's DHCP and DHCPv6 clients.
		tools = append(tools, "dnsmasq", "kea-dhcp6", "radvd", "udhcpc", "dhclient")
	}
	if l.opt.Bench {
		tools = append(tools, "iperf3")
		if l.opt.BenchModes == "" || strings.ContainsAny(l.opt.BenchModes, "nmfk") {
			tools = append(tools, "nft")
		}
	}
	if l.opt.Bench && strings.ContainsRune(l.opt.BenchModes, 's') {
		tools = append(tools, "dnsperf")
	}
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			errs = append(errs, fmt.Errorf("lab: %w", err))
		}
	}
	if l.opt.RouterBinary == "" {
		if !l.opt.Bench || strings.ContainsAny(l.opt.BenchModes, "acgmfs") || l.opt.BenchModes == "" {
			errs = append(errs, errors.New("lab: no router binary"))
		}
	} else if _, err := os.Stat(l.opt.RouterBinary); err != nil {
		errs = append(errs, fmt.Errorf("lab: router binary: %w", err))
	}
	if l.opt.BaselineBinary != "" {
		if _, err := os.Stat(l.opt.BaselineBinary); err != nil {
			errs = append(errs, fmt.Errorf("lab: baseline router binary: %w", err))
		}
	} else if strings.ContainsAny(l.opt.BenchModes, "AC") {
		errs = append(errs, errors.New("lab: bench modes A and C need a baseline router binary (-bench-baseline)"))
	}
	switch l.opt.Driver {
	case "", DriverAFPacket:
	case DriverAFXDP:
	default:
		errs = append(errs, fmt.Errorf("lab: unknown driver %q (want %s or %s)", l.opt.Driver, DriverAFXDP, DriverAFPacket))
	}
	if l.opt.HostOffloads {
		if l.opt.Topology != "" && l.opt.Topology != TopologyVeth {
			errs = append(errs, fmt.Errorf("lab: host offloads on topology %s only", TopologyVeth))
		}
		if l.opt.Driver == DriverAFXDP {
			errs = append(errs, fmt.Errorf("lab: host offloads need %s ports: %s cannot flag the hosts' partial checksums", DriverAFPacket, DriverAFXDP))
		}
	}
	switch l.opt.Topology {
	case "", TopologyVeth:
	case TopologyMACsec:
	case TopologyBCM47094:
		if l.opt.Bench {
			errs = append(errs, fmt.Errorf("lab: the bench runs on topology %s only", TopologyVeth))
		}
	default:
		errs = append(errs, fmt.Errorf("lab: unknown topology %q (want %s, %s or %s)", l.opt.Topology, TopologyVeth, TopologyBCM47094, TopologyMACsec))
	}
	for _, m := range l.opt.BenchModes {
		if !strings.ContainsRune(benchModeLetters, m) {
			errs = append(errs, fmt.Errorf("lab: unknown bench mode %q (want any of %s)", m, benchModeLetters))
		}
	}
	if l.opt.HostOffloads && strings.ContainsAny(l.opt.BenchModes, "xy") {
		errs = append(errs, fmt.Errorf("lab: host offloads need %s ports: bench modes x and y run %s", DriverAFPacket, DriverAFXDP))
	}
	return errors.Join(errs...)
}

// startRouter writes the lab config and starts `gvrouter run` in the router
// namespace, then waits until its status listener answers.
func (l *lab) startRouter(ctx context.Context) error {
	return l.startRouterWith(ctx, "", l.opt.routerArgs...)
}

// startRouterWith is startRouter with gro as both interfaces' gro key
// (unless ""); with a gro mode the router also serves the bench's discard
// sink at benchSinkAddr.
func (l *lab) startRouterWith(ctx context.Context, gro string, args ...string) error {
	return l.startRouterBuild(ctx, 'a', gro, args...)
}

// routerVariant is how a bench mode's router differs from the lab's
// router: another build, port driver or transmit path.
type routerVariant struct {
	baseline bool   // Options.BaselineBinary on the wave-1 lab config
	driver   string // ports[].driver; "" for Options.Driver
	tx       string // ports[].tx; "" for the profile's
	queues   int    // ports[].queues; 0 for the profile's
}

// routerVariants are the bench modes that run a router, by letter: (a)
// the lab's router, (A) the baseline build, (x) (a) on af_xdp ports, (t)
// and (u) (a) with the af_packet TX ring instead of sendmmsg, without
// and with PACKET_QDISC_BYPASS, (w) (a) with two receive queues per
// port joined by PACKET_FANOUT (two receive goroutines on one port: how
// the BCM47094's one CPU port would use both cores).
var routerVariants = map[rune]routerVariant{
	'a': {},
	'A': {baseline: true},
	'x': {driver: DriverAFXDP},
	't': {tx: "ring"},
	'u': {tx: "ring-bypass"},
	'w': {queues: 2},
}

// startRouterBuild starts the router of bench mode m (routerVariants) as
// the lab router.
func (l *lab) startRouterBuild(ctx context.Context, m rune, gro string, args ...string) error {
	v := routerVariants[m]
	driver := v.driver
	if driver == "" {
		driver = l.opt.Driver
	}
	edits, bin := l.cfgEdits, l.opt.RouterBinary
	if v.baseline {
		edits, bin, driver = []func(*labConfig){baselineConfig}, l.opt.BaselineBinary, ""
	} else {
		if driver != "" {
			edits = append(slices.Clip(edits), withDriver(driver))
		}
		if v.tx != "" {
			edits = append(slices.Clip(edits), withTx(v.tx))
		}
		if v.queues != 0 {
			edits = append(slices.Clip(edits), withQueues(v.queues))
		}
	}
	cfg, err := routerConfig(l.prefix, routerStatusPort, l.opt.Topology, gro, l.opt.conntrackMax, edits...)
	if l.rtr2NS != "" {
		cfg, err = l.startMACsecPeer(ctx, args...)
	}
	if err != nil {
		return err
	}
	if l.opt.hostTap {
		cfg = append(cfg, hostSection...)
	}
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	if err := os.WriteFile(cfgPath, l.ownStateDir(cfg, "router"), 0o600); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	bin, err = filepath.Abs(bin)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	logPath := filepath.Join(l.dir, "router.log")
	l.router, err = startChild(l.log, "router", l.rtrNS, logPath, l.runCommand(bin, cfgPath, "router", args)...)
	if err != nil {
		return err
	}
	l.routerMode = m
	deadline := time.Now().Add(routerStartTimeout)
	for {
		_, err := l.routerCounters(ctx)
		if err == nil {
			break
		}
		if l.router.exited() {
			return fmt.Errorf("lab: router exited (%v); %s:\n%s", l.router.err, logPath, tail(logPath, 2000))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("lab: router did not answer on 127.0.0.1:%d in %s within %v: %w; %s:\n%s",
				routerStatusPort, l.rtrNS, routerStartTimeout, err, logPath, tail(logPath, 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l.wanByDHCP() && !v.baseline {
		c, err := l.waitWANLease(ctx, netip.Addr{}, wanLeaseTimeout)
		if err != nil {
			return fmt.Errorf("%w; %s:\n%s", err, logPath, tail(logPath, 2000))
		}
		l.log.Info("lab: router has its WAN lease", "address", c.Held().Addr, "server", c.Held().Server, "took", time.Since(deadline.Add(-routerStartTimeout)).Round(time.Millisecond))
	}
	if driver != "" {
		if err := l.checkDrivers(ctx, l.rtrNS, routerPorts(l.opt.Topology), driver); err != nil {
			return fmt.Errorf("%w; %s:\n%s", err, logPath, tail(logPath, 2000))
		}
	}
	l.log.Info("lab: router is up", "pid", l.router.cmd.Process.Pid, "config", cfgPath, "log", logPath)
	return nil
}

// ownStateDir gives the lab router name ("router", "router2") a state
// directory of its own in the lab's directory, so that labs running side
// by side never share the machine's /var/lib/gvrouter (its lock would
// refuse the second router).
func (l *lab) ownStateDir(cfg []byte, name string) []byte {
	return fmt.Appendf(cfg, "state_dir: %s\n", filepath.Join(l.dir, "state-"+name))
}

// runCommand is `gvrouter run` for the lab router name, with a run
// directory (pidfile, port locks) of its own in the lab's directory.
func (l *lab) runCommand(bin, cfgPath, name string, args []string) []string {
	return append([]string{bin, "run", "-config", cfgPath, "-run-dir", filepath.Join(l.dir, "run-"+name)}, args...)
}

// stopRouter stops `gvrouter run` if it runs.
func (l *lab) stopRouter() error {
	if l.router == nil {
		return nil
	}
	err := l.router.stop()
	l.router, l.routerMode = nil, 0
	if err != nil {
		return fmt.Errorf("lab: router: %w", err)
	}
	return nil
}

// startProxy exposes the status page (lan:80 in netstack) at
// 127.0.0.1:StatusPort of the machine's own namespace.
func (l *lab) startProxy() error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(l.opt.StatusPort))
	to := net.JoinHostPort(lanRouter4.Addr().String(), "80")
	p, err := startProxy(l.log, addr, l.lanNS, to)
	if err != nil {
		return fmt.Errorf("lab: status proxy: %w", err)
	}
	l.proxy = p
	return nil
}

// summary prints the proofs and returns an error naming the failed ones.
func (l *lab) summary(ps []proof) error {
	var failed []string
	for _, p := range ps {
		mark, detail := "ok  ", p.Detail
		if p.Err != nil {
			mark, detail = "FAIL", p.Err.Error()
			failed = append(failed, p.Name)
		}
		fmt.Fprintf(l.out, "%s %-56s %s\n", mark, p.Name, detail)
	}
	if l.proxy != nil {
		fmt.Fprintf(l.out, "status page: http://%s/ (router %s, pid %d)\n",
			l.proxy.Addr(), l.rtrNS, l.router.cmd.Process.Pid)
	}
	if len(failed) > 0 {
		return fmt.Errorf("lab: %d of %d proofs failed: %s; router log: %s",
			len(failed), len(ps), strings.Join(failed, "; "), filepath.Join(l.dir, "router.log"))
	}
	fmt.Fprintf(l.out, "all %d proofs passed\n", len(ps))
	return nil
}

// teardown stops what the lab started and removes what it built, even
// after a failure half-way. It keeps going past errors.
func (l *lab) teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	l.proxy.close()
	l.proxy = nil
	if err := l.stopRouter(); err != nil {
		errs = append(errs, err)
	}
	if err := l.stopRouter2(); err != nil {
		errs = append(errs, err)
	}
	l.stopISP()
	l.stopISP6()
	for i := len(l.cleanups) - 1; i >= 0; i-- {
		l.cleanups[i]()
	}
	l.cleanups = nil
	for i := len(l.namespaces) - 1; i >= 0; i-- {
		if err := deleteNetns(ctx, l.namespaces[i]); err != nil {
			errs = append(errs, err)
		}
	}
	l.namespaces = nil
	if l.dir != "" {
		if len(errs) == 0 {
			errs = append(errs, os.RemoveAll(l.dir))
		} else {
			l.log.Warn("lab: keeping run directory after errors", "dir", l.dir)
		}
	}
	l.log.Debug("lab: torn down", "prefix", l.prefix)
	return errors.Join(errs...)
}
