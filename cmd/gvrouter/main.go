// Command gvrouter is the appliance daemon and its tools:
//
//	gvrouter run     -config /etc/gvrouter/config.yaml  run until SIGINT/SIGTERM; SIGHUP reloads
//	gvrouter check   -config /etc/gvrouter/config.yaml  validate, touch nothing
//	gvrouter reload  [-pidfile /run/gvrouter/gvrouter.pid]  ask the running daemon to reload
//	gvrouter restore -config /etc/gvrouter/config.yaml  give the ports back as a crashed router found them
//	gvrouter capture -i eth0.2 -w - [host 192.0.2.1 and tcp] | tshark -r -
//	gvrouter bridge -a IF -b IF [-driver af_packet|af_xdp]  our ports alone as an L2 bridge (bench)
//	gvrouter wg genkey | gvrouter wg pubkey
//	gvrouter wg peer -config /etc/gvrouter/config.yaml phone   a new peer's wg-quick file and QR code
//	gvrouter version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/statedir"
)

// version is set at link time: -ldflags "-X main.version=v0.1.0".
var version = ""

const usage = `usage: gvrouter <command> [flags]

commands:
  run     -config FILE [-pidfile FILE] [-run-dir DIR]
                                         run the router until SIGINT/SIGTERM; SIGHUP reloads FILE
  check   -config FILE                   validate FILE without touching any interface
  reload  [-pidfile FILE] [-run-dir DIR] make the running router re-read its config
  restore [-config FILE | -state-dir DIR] [-run-dir DIR]
                                         put back the kernel settings of the ports a router that
                                         did not stop cleanly left silenced; starts nothing
  capture -i IFACE [-c N] [-s SNAPLEN] [-t SECONDS] -w FILE|- [FILTER]
                                         live capture of a port or interface as pcapng from the
                                         running router (root or its group)
  bridge  -a IF -b IF [-driver af_packet|af_xdp]
                                         bridge two ports at layer 2 with the port code alone
  wg genkey | wg pubkey                  a WireGuard private key; the public key of the one on stdin
  wg peer [-config FILE] [-interface wg0] [-endpoint host:port] [-all] NAME
                                         a new WireGuard peer: its wg-quick file, a QR code, the peers: entry to add
  version                                print the version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "run":
		err = cmdRun(args)
	case "check":
		err = cmdCheck(args, os.Stdout)
	case "reload":
		err = cmdReload(args)
	case "restore":
		err = cmdRestore(args, os.Stdout)
	case "capture":
		err = cmdCapture(args, os.Stdout, os.Stderr)
	case "bridge":
		err = cmdBridge(args)
	case "wg":
		err = cmdWG(args, os.Stdin, os.Stdout)
	case "version", "-version", "--version":
		fmt.Println(buildInfo().Version, buildInfo().Build)
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "gvrouter: unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		log.SetFlags(0)
		log.Fatalf("gvrouter %s: %v", cmd, err)
	}
}

func newLogger(debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func buildInfo() router.Build {
	b := router.Build{Version: version, Build: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				b.Build += " " + s.Value[:12]
			}
		}
	}
	if b.Version == "" || b.Version == "(devel)" {
		b.Version = "devel"
	}
	return b
}

func cmdCheck(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	path := fs.String("config", "/etc/gvrouter/config.yaml", "config file")
	fs.Parse(args)
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	fw := "wan_input " + map[bool]string{true: "drop", false: "accept"}[cfg.Firewall.WANInputDrop()]
	if z := &cfg.Firewall; len(z.Zones) > 0 {
		fw = fmt.Sprintf("firewall: %d zones, %d rules, %d redirects", len(z.Zones), len(z.Rules), len(z.Redirects))
	}
	fmt.Fprintf(out, "%s: ok (%d ports, %d interfaces, %d routes, %d macsec; nat: %d masquerade, %d snat, %d forwards; %s)\n",
		*path, len(cfg.Ports), len(cfg.Interfaces), len(cfg.Routes), len(cfg.MACsec),
		len(cfg.NAT.Masquerade), len(cfg.NAT.SNAT), len(cfg.NAT.Forwards), fw)
	return nil
}

// routerGCPercent is the daemon's GOGC unless the environment sets one.
// The heap of a router is mostly its conntrack table, and a SYN flood
// churns it (every new flow evicts an unassured one): with Go's default
// of 100 the heap may grow to twice the live table before a collection,
// which on a 256 MB board is memory a flood should not get. At 50 the
// ceiling is 1.5 times. The GC's extra work is paid on the slow path
// only: the fast path and the ring/transmit paths allocate nothing.
const routerGCPercent = 50

func setGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(routerGCPercent)
	}
}

// cmdRun runs the daemon: SIGINT/SIGTERM stop it cleanly, SIGHUP reloads.
func cmdRun(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	path := fs.String("config", "/etc/gvrouter/config.yaml", "config file")
	runDir := fs.String("run-dir", defaultRunDir(), "directory of the pidfile and the port locks (env "+runDirEnv+")")
	pidfile := fs.String("pidfile", "", "write the process ID here (for gvrouter reload); default RUN-DIR/"+statedir.PidfileName+`, "-" for none`)
	ingressDrop := fs.String("ingress-drop", "", "how the kernel's stack is kept off the ports: nft (nftables netdev table) or tc (clsact + cls_bpf); default nft (through netlink, no nft binary needed), tc only where the kernel refuses the nftables table")
	dbg := fs.Bool("debug", false, "debug logging")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	sink := fs.String("bench-sink", "", "bench only (gvlab -bench-modes g): accept TCP at ADDR:PORT in the netstack and discard it")
	fs.Parse(args)
	logger := newLogger(*dbg)
	setGCPercent()

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if err := hw.SetIngressDrop(*ingressDrop); err != nil {
		return err
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	opts := []router.Option{router.WithRunDir(*runDir)}
	for _, lab := range labOptions {
		opts = append(opts, lab()...)
	}
	r, err := router.New(cfg, buildInfo(), logger, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := serveBenchSink(r, *sink); err != nil {
		return err
	}
	if *pidfile == "" {
		*pidfile = filepath.Join(*runDir, statedir.PidfileName)
	}
	if *pidfile != "-" {
		// The router holds its state directory's and ports' locks, so
		// no other router writes this pidfile meanwhile.
		if err := os.MkdirAll(filepath.Dir(*pidfile), 0o755); err != nil {
			return fmt.Errorf("pidfile: %w", err)
		}
		if err := statedir.WriteFile(*pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return fmt.Errorf("pidfile: %w", err)
		}
		defer os.Remove(*pidfile)
	}
	logger.Info("router running", "config", *path, "version", buildInfo().Version)
	for sig := range sigs {
		if sig != syscall.SIGHUP {
			logger.Info("stopping", "signal", sig.String())
			break
		}
		next, err := config.Load(*path)
		if err != nil {
			logger.Error("reload: config invalid, keeping the running one", "err", err)
			continue
		}
		if err := r.Reload(next); err != nil {
			logger.Error("reload applied with errors", "err", err)
			continue
		}
		logger.Info("reloaded", "config", *path)
	}
	return closeWithWatchdog(r, logger)
}

// shutdownWatchdog is how long a clean stop may take before the daemon
// logs where it is stuck; the port restores usually take well under a
// second.
const shutdownWatchdog = 3 * time.Second

// closeWithWatchdog closes r and, if that takes longer than
// shutdownWatchdog, writes every goroutine's stack to the log so a stuck
// shutdown can be diagnosed.
func closeWithWatchdog(r *router.Router, logger *slog.Logger) error {
	t := time.AfterFunc(shutdownWatchdog, func() {
		logger.Warn("shutdown is slow; goroutines follow")
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
	})
	defer t.Stop()
	return r.Close()
}

// cmdReload sends SIGHUP to the daemon named by its pidfile.
func cmdReload(args []string) error {
	fs := flag.NewFlagSet("reload", flag.ExitOnError)
	runDir := fs.String("run-dir", defaultRunDir(), "the running router's run directory (env "+runDirEnv+")")
	pidfile := fs.String("pidfile", "", "the running router's pidfile; default RUN-DIR/"+statedir.PidfileName)
	fs.Parse(args)
	if *pidfile == "" {
		*pidfile = filepath.Join(*runDir, statedir.PidfileName)
	}
	b, err := os.ReadFile(*pidfile)
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("%s: not a process ID: %q", *pidfile, strings.TrimSpace(string(b)))
	}
	return syscall.Kill(pid, syscall.SIGHUP)
}

// runDirEnv names the environment variable that moves the run directory
// (tests and the lab run several routers on one machine).
const runDirEnv = "GVROUTER_RUN_DIR"

func defaultRunDir() string {
	if d := os.Getenv(runDirEnv); d != "" {
		return d
	}
	return statedir.DefaultRunDir
}

// cmdRestore puts back what the takeover records in the state directory
// list, as the clean stop of the router that wrote them would have, without
// starting a router: for a router that crashed and should not run again.
// It refuses while a router holds the state directory or a port.
func cmdRestore(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ExitOnError)
	path := fs.String("config", "/etc/gvrouter/config.yaml", "config file: its state_dir is used")
	stateDir := fs.String("state-dir", "", "state directory (instead of the config's state_dir)")
	runDir := fs.String("run-dir", defaultRunDir(), "run directory of the port locks (env "+runDirEnv+")")
	dbg := fs.Bool("debug", false, "debug logging")
	fs.Parse(args)
	logger := newLogger(*dbg)
	dir := *stateDir
	if dir == "" {
		cfg, err := config.Load(*path)
		if err != nil {
			return fmt.Errorf("%w (name the state directory with -state-dir to restore without a valid config)", err)
		}
		dir = cfg.StateDirectory()
	}
	lock, err := router.LockStateDir(dir)
	if err != nil {
		if errors.Is(err, statedir.ErrLocked) {
			return fmt.Errorf("%w: a running router gives its ports back when it stops (SIGTERM); restore is for a router that did not", err)
		}
		return err
	}
	defer lock.Unlock()
	ports, err := hw.RecordedPorts(dir)
	if err != nil {
		return err
	}
	if len(ports) == 0 {
		fmt.Fprintf(out, "nothing to restore: no takeover record in %s\n", dir)
		return nil
	}
	var errs []error
	for _, name := range ports {
		pl, err := hw.LockPort(*runDir, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = hw.Restore(dir, name, logger)
		pl.Unlock()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "restored %s\n", name)
	}
	return errors.Join(errs...)
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}
