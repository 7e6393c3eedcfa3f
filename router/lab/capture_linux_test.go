package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// protocolsOf returns tshark's frame.protocols per frame of a pcapng.
func protocolsOf(ctx context.Context, file string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "tshark", "-r", file, "-T", "fields", "-e", "frame.protocols")
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(file))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark -r %s: %w", file, err)
	}
	return strings.Fields(string(out)), nil
}

func countWith(protos []string, sub string) int {
	n := 0
	for _, p := range protos {
		if strings.Contains(p, sub) {
			n++
		}
	}
	return n
}

// TestRunMACsecCapture runs `router capture` against the MACsec lab's
// router 1 during TCP (HTTP to its LAN address from host B, through the
// SecY), IPv4 and IPv6 traffic: the SecY's capture holds plaintext
// IPv4/IPv6 and TCP, the interface below it only SecTAG frames, the port
// the same as the wire; `router capture -w - | tshark -r -` works, and
// /api/capture answers on the host listener and refuses a LAN one
// without the token.
func TestRunMACsecCapture(t *testing.T) {
	requirePrivileged(t, "tshark")
	bin := buildRouter(t)
	statusPort := freePort(t)
	opt := Options{
		RouterBinary: bin,
		StatusPort:   statusPort,
		Topology:     TopologyMACsec,
		Log:          testLogger(t),
		Stdout:       &bytes.Buffer{},
		testHook: func(l *lab) error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			runDir := filepath.Join(l.dir, "run-router")
			capt := func(iface, file string, secs int) (*exec.Cmd, *bytes.Buffer, error) {
				cmd := exec.CommandContext(ctx, bin, "capture", "-run-dir", runDir, "-i", iface, "-t", strconv.Itoa(secs), "-w", file)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				return cmd, &stderr, cmd.Start()
			}
			secyFile, lowerFile := filepath.Join(l.dir, "ms1.pcapng"), filepath.Join(l.dir, "link.pcapng")
			c1, e1, err := capt(msName, secyFile, 4)
			if err != nil {
				return err
			}
			c2, e2, err := capt(msLower, lowerFile, 4)
			if err != nil {
				return err
			}
			time.Sleep(time.Second) // both captures running
			for range 3 {
				if _, err := httpGet(ctx, l.wanNS, "http://"+lanRouter4.Addr().String()+"/api/status"); err != nil {
					return fmt.Errorf("HTTP through the SecY: %w", err)
				}
			}
			if _, err := ping(ctx, l.wanNS, lanHost6.Addr()); err != nil {
				return fmt.Errorf("ping6 through the SecY: %w", err)
			}
			if err := c1.Wait(); err != nil {
				return fmt.Errorf("router capture -i %s: %v: %s", msName, err, e1)
			}
			if err := c2.Wait(); err != nil {
				return fmt.Errorf("router capture -i %s: %v: %s", msLower, err, e2)
			}
			t.Logf("ms1: %s; link: %s", strings.TrimSpace(e1.String()), strings.TrimSpace(e2.String()))
			secy, err := protocolsOf(ctx, secyFile)
			if err != nil {
				return err
			}
			lower, err := protocolsOf(ctx, lowerFile)
			if err != nil {
				return err
			}
			if countWith(secy, "ip:tcp") < 6 || countWith(secy, "ipv6") < 2 || countWith(secy, "macsec") > 0 {
				return fmt.Errorf("SecY capture: %d TCP/IPv4, %d IPv6, %d MACsec frames of %q: want plaintext IPv4 TCP and IPv6", countWith(secy, "ip:tcp"), countWith(secy, "ipv6"), countWith(secy, "macsec"), secy)
			}
			if countWith(lower, "macsec") < 8 || countWith(lower, "ip:") > 0 {
				return fmt.Errorf("lower capture: %d MACsec frames, %d in clear of %q: want SecTAG frames only", countWith(lower, "macsec"), countWith(lower, "ip:"), lower)
			}

			// The port, piped into tshark as the README says.
			pipe := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("%s capture -run-dir %s -i %s -c 4 -t 10 -w - | HOME=%s tshark -r - -T fields -e frame.protocols", bin, runDir, msPort, l.dir))
			go func() {
				time.Sleep(500 * time.Millisecond)
				ping(ctx, l.lanNS, wanHost4.Addr())
			}()
			out, err := pipe.Output()
			if err != nil {
				return fmt.Errorf("router capture -w - | tshark -r -: %w", err)
			}
			if port := strings.Fields(string(out)); len(port) != 4 || countWith(port, "macsec") != 4 {
				return fmt.Errorf("port capture through tshark: %q, want 4 MACsec frames", port)
			}

			// The status page: the host listener serves a capture, the LAN
			// one wants the token.
			url := fmt.Sprintf("http://127.0.0.1:%d/api/capture?iface=%s&count=2&seconds=5", routerStatusPort, msName)
			go func() {
				time.Sleep(500 * time.Millisecond)
				ping(ctx, l.lanNS, wanHost4.Addr())
			}()
			body, err := httpGet(ctx, l.rtrNS, url)
			if err != nil {
				return fmt.Errorf("GET %s: %w", url, err)
			}
			f := filepath.Join(l.dir, "api.pcapng")
			os.WriteFile(f, body, 0o600)
			if p, err := protocolsOf(ctx, f); err != nil || len(p) != 2 {
				return fmt.Errorf("/api/capture on 127.0.0.1: %q, %v, want 2 frames", p, err)
			}
			lanURL := "http://" + lanRouter4.Addr().String() + "/api/capture?iface=" + msName + "&count=1"
			if _, err := httpGet(ctx, l.lanNS, lanURL); err == nil || !strings.Contains(err.Error(), "403") {
				return fmt.Errorf("/api/capture on lan:80 without token: %v, want 403", err)
			}
			return nil
		},
	}
	if err := Run(context.Background(), opt); err != nil {
		t.Fatal(err)
	}
}
