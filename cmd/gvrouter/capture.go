package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gvrouter/gvrouter/capture"
)

// cmdCapture asks the running daemon for a live capture and writes it as
// pcapng to a file or stdout; a summary goes to stderr. SIGINT ends the
// capture early, with the frames so far written.
func cmdCapture(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	iface := fs.String("i", "", "port or interface to capture (eth0, eth0.2, ms1), or firewall:log (the packets of rules with log: capture)")
	count := fs.Int("c", 0, "stop after this many frames (0: no limit)")
	snap := fs.Int("s", 0, fmt.Sprintf("octets kept of each frame (0: %d)", capture.MaxSnaplen))
	secs := fs.Int("t", 0, fmt.Sprintf("stop after this many seconds (0: %d, at most %d)", capture.DefaultSeconds, capture.MaxSeconds))
	out := fs.String("w", "", "pcapng file to write, - for stdout (required)")
	runDir := fs.String("run-dir", defaultRunDir(), "the running router's run directory (env "+runDirEnv+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *iface == "" || *out == "" {
		return fmt.Errorf("need -i IFACE and -w FILE|-")
	}
	w := stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	req := capture.Request{Iface: *iface, Count: *count, Snaplen: *snap, Seconds: *secs, Filter: strings.Join(fs.Args(), " ")}
	res, err := capture.Dial(ctx, filepath.Join(*runDir, capture.SocketName), req, w)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%d frames captured (%d received, %d sent), %d dropped by the capture",
		res.Captured, res.Received, res.Sent, res.Dropped)
	if c := res.Counted; c != nil {
		fmt.Fprintf(stderr, "; %s counted %d received, %d sent meanwhile", *iface, c.Received, c.Sent)
	}
	fmt.Fprintln(stderr)
	return nil
}
