// Command gvlab builds the virtual lab in network namespaces around the
// appliance binary (cmd/gvrouter), proves it works and, with -bench,
// measures it beside the kernel:
//
//	gvlab [-router BIN] [-bench [-bench-modes abncdgmfksACxytuwlq] [-bench-baseline BIN] [-bench-sqm DOWN/UP]] [-keep] [-status-port N] [-topology veth|bcm47094|macsec] [-driver af_xdp|af_packet]
//
// It is a binary of its own so that the appliance carries none of the
// lab: the lab runs gvrouter as a child process ("gvrouter run",
// "gvrouter bridge"), as it runs on a router. Without -router, gvlab uses
// the gvrouter installed beside it or, in a source tree (go run
// ./cmd/gvlab), builds ./cmd/gvrouter first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gvrouter/gvrouter/lab"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		log.SetFlags(0)
		log.Fatalf("gvlab: %v", err)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gvlab", flag.ExitOnError)
	routerBin := fs.String("router", "", "the gvrouter binary the lab runs; default the gvrouter beside gvlab, else one built from ./cmd/gvrouter of the source tree gvlab runs in")
	bench := fs.Bool("bench", false, "measure throughput: router, kernel forwarding, port bridge, kernel bridge")
	keep := fs.Bool("keep", false, "keep the lab up until SIGINT")
	port := fs.Int("status-port", 8080, "expose the router's status page at 127.0.0.1:PORT")
	secs := fs.Int("bench-seconds", 10, "iperf3 -t per run")
	runs := fs.Int("bench-runs", 5, "runs per figure (the median is printed)")
	dbg := fs.Bool("debug", false, "debug logging")
	modes := fs.String("bench-modes", "", "bench modes, any of abncdgmfksACxytuwlq: (a) router NAT, (b) kernel forwarding, (n) kernel nftables masquerade, (c) port bridge, (d) kernel bridge, (g) router per GRO mode, forwarded and local, (m) router RSS with 65,536 tracked flows, (f) SYN flood against a 10,000-flow table during an iperf3 flow, (k) the same flood against kernel nftables masquerade, (s) router RSS with 1,000 DHCP leases and a full DNS cache, (A) and (C) (a) and (c) with the -bench-baseline build, (x) and (y) (a) and (c) on af_xdp ports, (t) and (u) (a) with the af_packet TX ring, without and with PACKET_QDISC_BYPASS, (w) (a) with two receive queues per port (PACKET_FANOUT), (l) latency: a 20 pps ping's RTT idle and beside 4 TCP streams each way, its loss and the throughput, for n, a and x, (q) SQM: the router behind a bloated modem (-bench-sqm), sqm off and on, irtt beside 4 streams up and 4 down, and 16-vs-1-stream host fairness; default abncd")
	sqmRates := fs.String("bench-sqm", lab.DefaultSQMRates, "bench mode q's modem, download/upload Mbit/s (htb with a 1,000-packet FIFO each way); the router's sqm runs at 95 % of each")
	sqmCake := fs.Bool("bench-sqm-cake", false, "bench mode q: also Linux as the router with cake at the same rates, in the QEMU guest of internal/linuxpeer (KVM if /dev/kvm opens), after the router's runs")
	baseline := fs.String("bench-baseline", "", "an earlier router build for bench modes A and C: (a) and (c) with it, taking turns with this build run by run, ratios (a)/(A) and (c)/(C)")
	driver := fs.String("driver", "", "port driver of the lab routers and of the port bridge of bench mode c: af_xdp (fail if a port falls back) | af_packet; default the hardware profile's (the -bench-baseline build of modes A and C keeps its own)")
	hostOffloads := fs.Bool("host-offloads", false, "turn TSO, GSO and TX checksum offload on at every lab veth (GRO off): the hosts send TSO superframes, as a container or VM beside the router does; the bench then fails a router run with an oversize drop (topology veth, af_packet)")
	topo := fs.String("topology", lab.TopologyVeth, "lab layout: veth (two veth pairs; the bench's) | bcm47094 (emulated BCM53012 switch, router eth0 with VLANs 1 and 2) | macsec (two routers joined by a MACsec link, a host behind each)")
	fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	logger := newLogger(*dbg)
	bin := *routerBin
	if bin == "" {
		var cleanup func()
		var err error
		bin, cleanup, err = findRouter(logger)
		if err != nil {
			return err
		}
		defer cleanup()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	return lab.Run(ctx, lab.Options{
		RouterBinary:   bin,
		StatusPort:     *port,
		Keep:           *keep,
		Topology:       *topo,
		Driver:         *driver,
		HostOffloads:   *hostOffloads,
		Bench:          *bench,
		BenchSeconds:   *secs,
		BenchRuns:      *runs,
		BenchModes:     *modes,
		BaselineBinary: *baseline,
		SQMRates:       *sqmRates,
		SQMCake:        *sqmCake,
		Log:            logger,
		Stdout:         os.Stdout,
	})
}

func newLogger(debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// findRouter returns the gvrouter installed beside this executable or,
// failing that, one built from the source tree of the working directory
// into a temporary directory that cleanup removes.
func findRouter(logger *slog.Logger) (bin string, cleanup func(), err error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), "gvrouter")
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
			return beside, func() {}, nil
		}
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if err != nil || strings.TrimSpace(string(gomod)) == "" || !exists(filepath.Join(root, "cmd", "gvrouter")) {
		return "", nil, errors.New("no gvrouter beside gvlab and no source tree to build one in: name it with -router")
	}
	dir, err := os.MkdirTemp("", "gvlab-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "gvrouter")
	logger.Info("building the router", "pkg", "./cmd/gvrouter", "out", bin)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gvrouter")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build ./cmd/gvrouter: %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
