package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The status page's access rules as a LAN host meets them: who may capture
// through it, and which Host and Origin it answers. Every request is made by curl in a
// lab namespace; what curl reports (status code, headers, body) and what
// tshark reads from the body are the checks.

// curlResult is one curl request's outcome.
type curlResult struct {
	code    int
	headers string
	body    []byte
}

// curl runs curl in namespace ns for url with extra headers ("Name:
// value") and returns what it got; an error only if curl itself failed
// (no answer at all).
func curl(ctx context.Context, ns, dir, url string, headers ...string) (curlResult, error) {
	f, err := os.CreateTemp(dir, "curl-*.body")
	if err != nil {
		return curlResult{}, err
	}
	f.Close()
	hf := f.Name() + ".headers"
	args := []string{"-sS", "-g", "--max-time", "20", "-o", f.Name(), "-D", hf, "-w", "%{http_code}"}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	out, err := output(ctx, ns, "curl", append(args, url)...)
	if err != nil {
		return curlResult{}, err
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return curlResult{}, fmt.Errorf("curl %s: status %q", url, out)
	}
	body, _ := os.ReadFile(f.Name())
	hdr, _ := os.ReadFile(hf)
	return curlResult{code: code, headers: string(hdr), body: body}, nil
}

// pcapngMagic is a pcapng file's first four bytes (the Section Header
// Block type).
var pcapngMagic = []byte{0x0a, 0x0d, 0x0d, 0x0a}

// TestLabCaptureRights (who may take a capture) runs the host-TAP lab with
// the status page also on the host interface (host:80, netstack) and on a
// kernel socket at 0.0.0.0:8081 (which the LAN host reaches at the kernel's
// TAP address, routed by the router), and asks for /api/capture with curl:
// from the LAN host every listener wants the token (403 and no pcapng
// without it; with it, a capture tshark reads); the board itself (the
// kernel through the TAP, loopback) needs none. On the code before the fix
// the LAN host got 200 and frames from host:80 and from the kernel socket.
func TestLabCaptureRights(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "curl", "tshark")
	var out bytes.Buffer
	const socketPort = 8081
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		hostTap:      true,
		cfgEdits: []func(*labConfig){func(c *labConfig) {
			c.Status.Listen = append(c.Status.Listen, "host:80", "0.0.0.0:"+strconv.Itoa(socketPort))
		}},
		testHook: func(l *lab) error { return checkCaptureRights(t, l, socketPort) },
		runTag:   nextRunTag(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}

func checkCaptureRights(t *testing.T, l *lab, socketPort int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	token := "lab-capture-token-0123456789abcdef"
	if err := os.WriteFile(filepath.Join(l.dir, "run-router", "capture.token"), []byte(token+"\n"), 0o600); err != nil {
		return err
	}
	const query = "/api/capture?iface=lan&count=2&seconds=5"
	hostIf := "http://" + hostRouter4.Addr().String() + query
	socket := "http://" + netip.AddrPortFrom(hostKernel4.Addr(), uint16(socketPort)).String() + query
	lanIf := "http://" + lanRouter4.Addr().String() + query
	loopback := "http://127.0.0.1:" + strconv.Itoa(routerStatusPort) + query
	bearer := "Authorization: Bearer " + token
	for _, tc := range []struct {
		who, ns, url string
		headers      []string
		want         int
	}{
		{"LAN host, host interface listener, no token", l.lanNS, hostIf, nil, 403},
		{"LAN host, kernel socket on 0.0.0.0, no token", l.lanNS, socket, nil, 403},
		{"LAN host, lan listener, no token", l.lanNS, lanIf, nil, 403},
		{"LAN host, host interface listener, wrong token", l.lanNS, hostIf, []string{"Authorization: Bearer not-the-token-0123456789"}, 403},
		{"LAN host, host interface listener, token", l.lanNS, hostIf, []string{bearer}, 200},
		{"LAN host, kernel socket, token", l.lanNS, socket, []string{bearer}, 200},
		{"LAN host, lan listener, token", l.lanNS, lanIf, []string{bearer}, 200},
		{"the kernel through the TAP, host interface listener", l.rtrNS, hostIf, nil, 200},
		{"the kernel on loopback", l.rtrNS, loopback, nil, 200},
	} {
		// Traffic on lan while the capture runs.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 3 {
				time.Sleep(300 * time.Millisecond)
				ping(ctx, l.lanNS, lanRouter4.Addr())
			}
		}()
		res, err := curl(ctx, tc.ns, l.dir, tc.url, tc.headers...)
		<-done
		if err != nil {
			return fmt.Errorf("%s: %w", tc.who, err)
		}
		isPcap := bytes.HasPrefix(res.body, pcapngMagic)
		if res.code != tc.want {
			return fmt.Errorf("%s: GET %s = %d (%d bytes, pcapng %v), want %d", tc.who, tc.url, res.code, len(res.body), isPcap, tc.want)
		}
		if tc.want == 403 {
			if isPcap || !bytes.Contains(res.body, []byte("token")) {
				return fmt.Errorf("%s: 403 with body %q, want the token refusal and no capture", tc.who, res.body)
			}
			t.Logf("%s: %d %s", tc.who, res.code, bytes.TrimSpace(res.body))
			continue
		}
		f := filepath.Join(l.dir, "rights.pcapng")
		if err := os.WriteFile(f, res.body, 0o600); err != nil {
			return err
		}
		protos, err := protocolsOf(ctx, f)
		if err != nil || len(protos) != 2 {
			return fmt.Errorf("%s: tshark read %q, %v from the 200 answer, want 2 frames", tc.who, protos, err)
		}
		t.Logf("%s: %d, %d frames %q", tc.who, res.code, len(protos), protos)
	}
	return nil
}

// TestLabStatusRebinding (DNS rebinding) asks the status page, from the LAN
// host with curl, with the Host and Origin headers of a DNS rebinding page:
// Host evil.example gets 403 and none of the page's data on lan:80 and on
// the kernel socket, an Origin of another site or Sec-Fetch-Site cross-site
// gets 403 from the JSON endpoints, answers carry no CORS header, the
// router's own addresses (IPv4, IPv6 in brackets) still work, and after a
// reload a name in status.hosts does. The metric counts the refusals. On
// the code before the fix Host evil.example got 200 with the LAN's leases
// and MACs.
func TestLabStatusRebinding(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "curl")
	var out bytes.Buffer
	opt := Options{
		RouterBinary: buildRouter(t),
		StatusPort:   freePort(t),
		Log:          testLogger(t),
		Stdout:       &out,
		testHook:     func(l *lab) error { return checkRebinding(t, l) },
		runTag:       nextRunTag(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Run(ctx, opt); err != nil {
		t.Fatalf("Run() error: %v\noutput:\n%s", err, out.String())
	}
}

func checkRebinding(t *testing.T, l *lab) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lan := "http://" + lanRouter4.Addr().String()
	lan6 := "http://[" + lanRouter6.Addr().String() + "]"
	loop := "http://127.0.0.1:" + strconv.Itoa(routerStatusPort)
	// What the page would give away: the static lease's MAC.
	secret := []byte(labStaticMAC)
	type check struct {
		what, ns, url string
		headers       []string
		want          int
	}
	run := func(cs []check) error {
		for _, c := range cs {
			res, err := curl(ctx, c.ns, l.dir, c.url, c.headers...)
			if err != nil {
				return fmt.Errorf("%s: %w", c.what, err)
			}
			if res.code != c.want {
				return fmt.Errorf("%s: GET %s %q = %d, want %d; body %.200q", c.what, c.url, c.headers, res.code, c.want, res.body)
			}
			if regexp.MustCompile(`(?im)^access-control-`).MatchString(res.headers) {
				return fmt.Errorf("%s: answer has CORS headers:\n%s", c.what, res.headers)
			}
			leaks := bytes.Contains(bytes.ToLower(res.body), bytes.ToLower(secret))
			if c.want == 403 && leaks {
				return fmt.Errorf("%s: 403 whose body has the lease MAC %s", c.what, secret)
			}
			if c.want == 200 && strings.HasPrefix(c.url, lan) && strings.HasSuffix(c.url, "/api/status") && !leaks {
				return fmt.Errorf("%s: 200 without the lease MAC %s: not the status JSON?", c.what, secret)
			}
			t.Logf("%s: %d", c.what, res.code)
		}
		return nil
	}
	evil := "Host: evil.example"
	if err := run([]check{
		{"rebinding Host on lan:80, JSON", l.lanNS, lan + "/api/status", []string{evil}, 403},
		{"rebinding Host on lan:80, page", l.lanNS, lan + "/", []string{evil}, 403},
		{"rebinding Host with a port", l.lanNS, lan + "/api/conntrack", []string{"Host: evil.example:80"}, 403},
		{"rebinding Host on the kernel socket", l.rtrNS, loop + "/api/status", []string{"Host: evil.example:" + strconv.Itoa(routerStatusPort)}, 403},
		{"foreign Origin", l.lanNS, lan + "/api/status", []string{"Origin: http://evil.example"}, 403},
		{"cross-site fetch without Origin", l.lanNS, lan + "/metrics", []string{"Sec-Fetch-Site: cross-site"}, 403},
		{"the lan address", l.lanNS, lan + "/api/status", nil, 200},
		{"the lan address, same-origin fetch", l.lanNS, lan + "/api/status", []string{"Origin: " + lan, "Sec-Fetch-Site: same-origin"}, 200},
		{"the lan IPv6 address in brackets", l.lanNS, lan6 + "/api/status", nil, 200},
		{"the page by address", l.lanNS, lan + "/", nil, 200},
		{"loopback socket", l.rtrNS, loop + "/api/status", nil, 200},
		{"localhost", l.rtrNS, loop + "/api/status", []string{"Host: localhost:" + strconv.Itoa(routerStatusPort)}, 200},
		{"configured name before it is configured", l.lanNS, lan + "/api/status", []string{"Host: gvrouter.lab"}, 403},
	}); err != nil {
		return err
	}
	// The refusals are counted (the JSON as of the last one-second
	// sample).
	var snap struct {
		HTTP struct {
			Host   uint64 `json:"forbidden_host"`
			Origin uint64 `json:"forbidden_origin"`
		} `json:"http"`
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		res, err := curl(ctx, l.rtrNS, l.dir, loop+"/api/status")
		if err != nil {
			return err
		}
		if err := json.Unmarshal(res.body, &snap); err != nil {
			return fmt.Errorf("/api/status: %w", err)
		}
		if snap.HTTP.Host == 5 && snap.HTTP.Origin == 2 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("status http counters %+v, want 5 foreign Host and 2 cross-origin refusals", snap.HTTP)
		}
	}
	metrics, err := curl(ctx, l.rtrNS, l.dir, loop+"/metrics")
	if err != nil {
		return err
	}
	if !bytes.Contains(metrics.body, []byte(`gvrouter_status_forbidden_requests_total{reason="host"} 5`)) {
		return fmt.Errorf("/metrics has no host refusal count of 5:\n%s", grepLines(metrics.body, "forbidden"))
	}

	// status.hosts, by a reload.
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	m := regexp.MustCompile(`(?m)^status:\n( +)`).FindStringSubmatchIndex(string(orig))
	if m == nil {
		return fmt.Errorf("lab config has no status section:\n%s", orig)
	}
	indent := string(orig[m[2]:m[3]])
	next := string(orig[:m[2]]) + indent + "hosts: [gvrouter.lab]\n" + string(orig[m[2]:])
	if err := os.WriteFile(cfgPath, []byte(next), 0o600); err != nil {
		return err
	}
	if err := l.router.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		res, err := curl(ctx, l.lanNS, l.dir, lan+"/api/status", "Host: gvrouter.lab")
		if err == nil && res.code == 200 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Host gvrouter.lab 10 s after the reload: %d, %v; router log:\n%s", res.code, err, tail(filepath.Join(l.dir, "router.log"), 2000))
		}
	}
	return run([]check{
		{"configured name", l.lanNS, lan + "/api/status", []string{"Host: GVRouter.lab."}, 200},
		{"configured name as Origin", l.lanNS, lan + "/api/status", []string{"Host: gvrouter.lab", "Origin: http://gvrouter.lab", "Sec-Fetch-Site: same-origin"}, 200},
		{"a subdomain of it", l.lanNS, lan + "/api/status", []string{"Host: evil.gvrouter.lab"}, 403},
	})
}

// grepLines returns the lines of b that contain s.
func grepLines(b []byte, s string) string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
