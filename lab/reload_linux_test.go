package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReload runs the real router binary in the lab and reloads it with
// SIGHUP: a valid new config (an extra LAN address) takes effect while a
// TCP connection that crosses the router keeps working, and an invalid one
// is refused with file:line:column in the log while the running config
// stays in force.
func TestReload(t *testing.T) {
	parallelLab(t)
	extra := netip.MustParseAddr("10.77.1.9")
	runWithHook(t, func(l *lab) error {
		ctx := context.Background()
		cfgPath := filepath.Join(l.dir, "lab.yaml")
		logPath := filepath.Join(l.dir, "router.log")
		orig, err := os.ReadFile(cfgPath)
		if err != nil {
			return err
		}

		// A connection across the router, kept open over the reloads.
		ln, err := listenIn(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), 0).String())
		if err != nil {
			return err
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				io.Copy(c, c)
				c.Close()
			}
		}()
		conn, err := dialIn(ctx, l.lanNS, ln.Addr().String(), proofTimeout)
		if err != nil {
			return err
		}
		defer conn.Close()
		echo := func(when string) error {
			msg := []byte("still here " + when)
			conn.SetDeadline(time.Now().Add(proofTimeout))
			if _, err := conn.Write(msg); err != nil {
				return fmt.Errorf("TCP across the router %s: %w", when, err)
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, msg) {
				return fmt.Errorf("TCP across the router %s: got %q, %v", when, got, err)
			}
			return nil
		}
		if err := echo("before reload"); err != nil {
			return err
		}
		pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = ping(pingCtx, l.lanNS, extra)
		cancel()
		if err == nil {
			return fmt.Errorf("%s answered before the reload that adds it", extra)
		}

		// A valid reload adds the address and keeps the connection.
		var withExtra string
		for line := range strings.Lines(string(orig)) {
			withExtra += line
			if strings.TrimSpace(line) == "- "+lanRouter4.String() {
				withExtra += strings.Replace(line, lanRouter4.String(), extra.String()+"/24", 1)
			}
		}
		if withExtra == string(orig) {
			return fmt.Errorf("lab config has no %s line to extend:\n%s", lanRouter4, orig)
		}
		if err := os.WriteFile(cfgPath, []byte(withExtra), 0o600); err != nil {
			return err
		}
		if err := l.router.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			return err
		}
		if _, err := ping(ctx, l.lanNS, extra); err != nil {
			return fmt.Errorf("after reload: %w\n%s", err, tail(logPath, 2000))
		}
		if err := echo("after reload"); err != nil {
			return err
		}

		// An invalid reload changes nothing and names the line.
		bad := withExtra + "bogus_key: 1\n"
		if err := os.WriteFile(cfgPath, []byte(bad), 0o600); err != nil {
			return err
		}
		badLine := strings.Count(bad, "\n")
		if err := l.router.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			return err
		}
		want := fmt.Sprintf("%s:%d:1", cfgPath, badLine)
		deadline := time.Now().Add(proofTimeout)
		for !strings.Contains(tail(logPath, 4000), want) {
			if time.Now().After(deadline) {
				return fmt.Errorf("router log does not name %s after an invalid reload:\n%s", want, tail(logPath, 2000))
			}
			time.Sleep(50 * time.Millisecond)
		}
		if l.router.exited() {
			return fmt.Errorf("router exited after an invalid reload")
		}
		if _, err := ping(ctx, l.lanNS, extra); err != nil {
			return fmt.Errorf("after invalid reload the running config changed: %w", err)
		}
		return echo("after invalid reload")
	})
}
