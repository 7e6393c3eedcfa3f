package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Bench mode g: the router once per GRO mode (off, selective, on; gro on
// both interfaces, the router restarted for each), measuring
//
//   - forwarded: iperf3 LAN host → WAN host, -P 1, the same -t/-O as the
//     other modes;
//   - local: a TCP upload from the LAN host to the discard sink that
//     `gvrouter run -bench-sink` serves in the router's netstack. iperf3
//     cannot talk to a plain sink, so the lab sends itself, from a socket
//     in the LAN namespace, for -O + -t seconds, and counts the bytes the
//     router acknowledged during the -t seconds (TCP_INFO bytes_acked on
//     the sender), the same receiver-side figure iperf3 reports.
//
// The sink is a run flag, not a config key: it exists for this bench only.

// groBenchModes are the gro values mode g runs, in order.
var groBenchModes = []string{"off", "selective", "on"}

// benchSinkPort is the discard sink's port on the router's LAN address.
const benchSinkPort = 5001

// uploadChunk is the write size of the local upload, iperf3's default
// TCP length (128 KiB).
const uploadChunk = 128 << 10

// groResult is the medians of one GRO mode, in bit/s.
type groResult struct {
	forward, local float64
}

// benchGRO runs mode g and prints its table and the required ratios.
func (l *lab) benchGRO(ctx context.Context) error {
	if l.proxy != nil {
		l.proxy.close()
		l.proxy = nil
	}
	if err := l.stopRouter(); err != nil {
		return err
	}
	sink := netip.AddrPortFrom(lanRouter4.Addr(), benchSinkPort)
	kBefore := l.kernelState()
	results := map[string]groResult{}
	var errs []error
	for _, mode := range groBenchModes {
		if ctx.Err() != nil {
			break
		}
		r, err := l.benchGROMode(ctx, mode, sink)
		results[mode] = r
		if err != nil {
			errs = append(errs, fmt.Errorf("gro %s: %w", mode, err))
		}
		if err := l.stopRouter(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := kernelSilent(kBefore, l.kernelState()); err != nil {
		errs = append(errs, err)
	}
	l.printGRO(results)
	return errors.Join(errs...)
}

// benchGROMode starts the router with gro mode and measures both figures.
func (l *lab) benchGROMode(ctx context.Context, mode string, sink netip.AddrPort) (groResult, error) {
	var r groResult
	if err := l.startRouterWith(ctx, mode, "-bench-sink", sink.String()); err != nil {
		return r, err
	}
	to := wanHost4.Addr()
	if _, err := ping(ctx, l.lanNS, to); err != nil {
		return r, fmt.Errorf("no path to %s before iperf3: %w", to, err)
	}
	var errs []error
	var fwd, local []float64
	for i := 0; i < l.opt.benchRuns() && ctx.Err() == nil; i++ {
		bps, err := l.iperf(ctx, to, benchCase{Streams: 1})
		if err != nil && ctx.Err() == nil {
			time.Sleep(benchRetryPause)
			bps, err = l.iperf(ctx, to, benchCase{Streams: 1})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("forwarded run %d: %w", i+1, err))
		} else {
			fwd = append(fwd, bps)
		}
		bps, err = upload(ctx, l.lanNS, sink, benchOmitSeconds, l.opt.benchSeconds())
		if err != nil {
			errs = append(errs, fmt.Errorf("local run %d: %w", i+1, err))
		} else {
			local = append(local, bps)
		}
	}
	r.forward, r.local = median(fwd), median(local)
	fmt.Fprintf(l.out, "  (g) gro %-10s forwarded median %6.0f Mbit/s runs %s; local median %6.0f Mbit/s runs %s\n",
		mode, r.forward/1e6, mbps(fwd), r.local/1e6, mbps(local))
	return r, errors.Join(errs...)
}

// printGRO prints mode g's table and checks the acceptance ratios.
func (l *lab) printGRO(res map[string]groResult) {
	fmt.Fprintf(l.out, "\n%-24s %14s %14s\n", "Mbit/s (median) gro", "forwarded", "local")
	for _, m := range groBenchModes {
		r := res[m]
		fmt.Fprintf(l.out, "%-24s %14s %14s\n", m, mbitOrNA(r.forward), mbitOrNA(r.local))
	}
	off, sel, on := res["off"], res["selective"], res["on"]
	for _, c := range []struct {
		name string
		a, b float64
		ok   func(x float64) bool
	}{
		{"forwarded selective/off (want >= 0.95)", sel.forward, off.forward, func(x float64) bool { return x >= 0.95 }},
		{"forwarded selective/on (want > 1)", sel.forward, on.forward, func(x float64) bool { return x > 1 }},
		{"local selective/off (want >= 1.2)", sel.local, off.local, func(x float64) bool { return x >= 1.2 }},
	} {
		verdict := "n/a"
		if c.a > 0 && c.b > 0 {
			verdict = "FAIL"
			if c.ok(c.a / c.b) {
				verdict = "ok"
			}
		}
		fmt.Fprintf(l.out, "ratio %s: %s %s\n", c.name, ratio(c.a, c.b), verdict)
	}
}

func mbitOrNA(bps float64) string {
	if bps <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", bps/1e6)
}

// upload connects from namespace ns to to, sends for omit+secs seconds
// and returns the rate at which the receiver acknowledged data during the
// last secs seconds, in bit/s.
func upload(ctx context.Context, ns string, to netip.AddrPort, omit, secs int) (float64, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		c, err = d.DialContext(dctx, "tcp", to.String())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("lab: upload to %s: %w", to, err)
	}
	defer c.Close()
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, uploadChunk)
		for !stop.Load() {
			if _, err := c.Write(buf); err != nil {
				if stop.Load() {
					err = nil
				}
				done <- err
				return
			}
		}
		done <- nil
	}()
	sample := func() (uint64, time.Time, error) {
		tc := c.(*net.TCPConn)
		rc, err := tc.SyscallConn()
		if err != nil {
			return 0, time.Time{}, err
		}
		var info *unix.TCPInfo
		var serr error
		if err := rc.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
			return 0, time.Time{}, err
		}
		if serr != nil {
			return 0, time.Time{}, serr
		}
		return info.Bytes_acked, time.Now(), nil
	}
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case err := <-done:
			if err == nil {
				err = errors.New("sender stopped")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := wait(time.Duration(omit) * time.Second); err != nil {
		return 0, fmt.Errorf("lab: upload to %s: %w", to, err)
	}
	b0, t0, err := sample()
	if err != nil {
		return 0, fmt.Errorf("lab: upload to %s: TCP_INFO: %w", to, err)
	}
	if err := wait(time.Duration(secs) * time.Second); err != nil {
		return 0, fmt.Errorf("lab: upload to %s: %w", to, err)
	}
	b1, t1, err := sample()
	if err != nil {
		return 0, fmt.Errorf("lab: upload to %s: TCP_INFO: %w", to, err)
	}
	stop.Store(true)
	c.Close()
	if err := <-done; err != nil && !strings.Contains(err.Error(), "closed") {
		return 0, fmt.Errorf("lab: upload to %s: %w", to, err)
	}
	if b1 <= b0 {
		return 0, fmt.Errorf("lab: upload to %s: nothing acknowledged in %d s", to, secs)
	}
	return float64(b1-b0) * 8 / t1.Sub(t0).Seconds(), nil
}
