package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// summaryRe is `gvrouter capture`'s closing line on stderr.
var summaryRe = regexp.MustCompile(`(\d+) frames captured \((\d+) received, (\d+) sent\), (\d+) dropped by the capture; \S+ counted (\d+) received, (\d+) sent meanwhile`)

// checkCounted fails unless `gvrouter capture`'s summary says the capture
// holds, each way, exactly the frames the port or interface counted over
// its window and dropped none: the window's edges fall in quiet moments
// of the lab, so a difference is a frame the capture missed.
func checkCounted(iface, summary string) error {
	m := summaryRe.FindStringSubmatch(summary)
	if m == nil {
		return fmt.Errorf("router capture -i %s: summary %q, want frames captured and counted", iface, summary)
	}
	if m[2] != m[5] || m[3] != m[6] || m[4] != "0" {
		return fmt.Errorf("router capture -i %s: captured %s received and %s sent (%s dropped), the interface counted %s and %s over the window",
			iface, m[2], m[3], m[4], m[5], m[6])
	}
	return nil
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

// TestRunMACsecCapture runs `gvrouter capture` against the MACsec lab's
// router 1 during TCP (HTTP to its LAN address from host B, through the
// SecY), IPv4 and IPv6 traffic: the SecY's capture holds plaintext
// IPv4/IPv6 and TCP, the interface below it only SecTAG frames, the port
// the same as the wire; `gvrouter capture -w - | tshark -r -` works, and
// /api/capture answers on the host listener and refuses a LAN one
// without the token.
//
// It runs beside the other parallel lab tests (a lab of its own, tagged):
// its time goes to its lab's start, tshark and short flows, not CPU.
func TestRunMACsecCapture(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "tshark")
	bin := buildRouter(t)
	statusPort := freePort(t)
	opt := Options{
		RouterBinary: bin,
		StatusPort:   statusPort,
		runTag:       nextRunTag(), // beside the other parallel labs
		Topology:     TopologyMACsec,
		Log:          testLogger(t),
		Stdout:       &bytes.Buffer{},
		fewProofs:    true, // the hook makes and captures its own traffic
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
			if err := checkCounted(msName, e1.String()); err != nil {
				return err
			}
			if err := checkCounted(msLower, e2.String()); err != nil {
				return err
			}
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

			// Each plaintext frame of the SecY is one SecTAG frame below
			// it (both captures span the same quiet window).
			if len(secy) != len(lower) {
				return fmt.Errorf("SecY capture has %d frames, the interface below it %d", len(secy), len(lower))
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

// TestRunBCM47094Capture captures the tagged CPU port eth0 and the VLAN
// interface eth0.2 at once during masqueraded TCP and IPv6 from the LAN
// host to the WAN host: tshark decodes 802.1Q (VLANs 1 and 2) with IPv4,
// IPv6 and TCP on the port and the same traffic untagged on eth0.2, and
// the port's VLAN 2 frames are exactly eth0.2's frames.
//
// It runs beside the other parallel lab tests (a lab of its own, tagged):
// its time goes to its lab's start, tshark and short flows, not CPU.
func TestRunBCM47094Capture(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "tshark")
	bin := buildRouter(t)
	opt := Options{
		RouterBinary: bin,
		StatusPort:   freePort(t),
		runTag:       nextRunTag(), // beside the other parallel labs
		Topology:     TopologyBCM47094,
		Log:          testLogger(t),
		Stdout:       &bytes.Buffer{},
		fewProofs:    true, // the hook makes and captures its own traffic
		testHook: func(l *lab) error {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// A TCP sink on the WAN host.
			var ln net.Listener
			if err := inNetns(l.wanNS, func() (err error) {
				ln, err = net.Listen("tcp", net.JoinHostPort(wanHost4.Addr().String(), "0"))
				return err
			}); err != nil {
				return err
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { io.Copy(io.Discard, c); c.Close() }()
				}
			}()
			runDir := filepath.Join(l.dir, "run-router")
			capt := func(iface, file string) (*exec.Cmd, *bytes.Buffer, error) {
				cmd := exec.CommandContext(ctx, bin, "capture", "-run-dir", runDir, "-i", iface, "-t", "4", "-w", file)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				return cmd, &stderr, cmd.Start()
			}
			portFile, vlanFile := filepath.Join(l.dir, "eth0.pcapng"), filepath.Join(l.dir, "eth0.2.pcapng")
			c1, e1, err := capt(cpuPort, portFile)
			if err != nil {
				return err
			}
			c2, e2, err := capt("eth0.2", vlanFile)
			if err != nil {
				return err
			}
			time.Sleep(time.Second)
			c, err := dialIn(ctx, l.lanNS, ln.Addr().String(), 5*time.Second)
			if err != nil {
				return fmt.Errorf("TCP LAN→WAN: %w", err)
			}
			c.Write(make([]byte, 64<<10))
			c.Close()
			if _, err := ping(ctx, l.lanNS, wanHost6.Addr()); err != nil {
				return fmt.Errorf("ping6 LAN→WAN: %w", err)
			}
			if err := c1.Wait(); err != nil {
				return fmt.Errorf("router capture -i eth0: %v: %s", err, e1)
			}
			if err := c2.Wait(); err != nil {
				return fmt.Errorf("router capture -i eth0.2: %v: %s", err, e2)
			}
			t.Logf("eth0: %s; eth0.2: %s", strings.TrimSpace(e1.String()), strings.TrimSpace(e2.String()))
			if err := checkCounted(cpuPort, e1.String()); err != nil {
				return err
			}
			if err := checkCounted("eth0.2", e2.String()); err != nil {
				return err
			}
			port, err := protocolsOf(ctx, portFile)
			if err != nil {
				return err
			}
			vlan, err := protocolsOf(ctx, vlanFile)
			if err != nil {
				return err
			}
			vids, err := tsharkField(ctx, portFile, "vlan.id")
			if err != nil {
				return err
			}
			// Masqueraded on the way out: eth0.2 shows the rewritten
			// frames (netstack's and the fast path's alike), the port
			// both sides of the rewrite.
			srcs, err := tsharkField(ctx, vlanFile, "ip.src")
			if err != nil {
				return err
			}
			if n := countWith(srcs, lanHost4.Addr().String()); n > 0 {
				return fmt.Errorf("eth0.2 capture: %d frames from the LAN host's own address, want all masqueraded", n)
			}
			if countWith(srcs, wanRouter4.Addr().String()) < 10 {
				return fmt.Errorf("eth0.2 capture: sources %q, want the router's WAN address", srcs)
			}
			vlan2 := 0
			for _, v := range vids {
				if v == "2" {
					vlan2++
				}
			}
			switch {
			case countWith(port, "eth:ethertype:vlan:ethertype:ip:tcp") < 20, countWith(port, "vlan:ethertype:ipv6") < 4:
				return fmt.Errorf("port capture: want 802.1Q-tagged IPv4 TCP and IPv6, got %q", port)
			case countWith(vlan, "vlan") > 0, countWith(vlan, "eth:ethertype:ip:tcp") < 10, countWith(vlan, "eth:ethertype:ipv6") < 2:
				return fmt.Errorf("eth0.2 capture: want untagged IPv4 TCP and IPv6, got %q", vlan)
			case vlan2 != len(vlan):
				return fmt.Errorf("port capture has %d frames of VLAN 2, eth0.2's capture %d", vlan2, len(vlan))
			}
			return nil
		},
	}
	if err := Run(context.Background(), opt); err != nil {
		t.Fatal(err)
	}
}

// tsharkField returns one field of each frame of a pcapng ("" where the
// frame has none).
func tsharkField(ctx context.Context, file, field string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "tshark", "-r", file, "-T", "fields", "-e", field)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(file))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark -r %s: %w", file, err)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n"), nil
}
