package lab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/linuxpeer"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

// TestRouterMKASuiteSwitch: the router's SecY is configured for
// GCM-AES-256 with mka, and Debian's wpa_supplicant 2.10, elected key
// server by priority, distributes GCM-AES-128 SAKs as it always does. The
// router rebuilds its SecY for GCM-AES-128 (logged at Info with both
// suites; the status shows the cipher in use and the configured one),
// the link comes up, the guest pings the router's SecY address and
// iperf3 crosses it; a reload of the unchanged config keeps the SecY on
// GCM-AES-128 with the same MI and live peer, and the ping still works.
// No CAK or SAK appears in the router's log or status.
func TestRouterMKASuiteSwitch(t *testing.T) {
	netnstest.Privileged(t, "iperf3")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const (
		cakHex    = "5b2e8f0c3a9d71e64c0b8a2f9e1d7c35"
		cknHex    = "6c70722073756974" // "lpr suit"
		routerSCI = "0200007700010001" // linuxpeer.HostMAC + port 1
	)
	p, ns := linuxpeer.StartT(t, ctx, "mka", map[string]string{
		"MKA_CAK": cakHex, "MKA_CKN": cknHex, "MKA_PRIORITY": "16", "ADDR": "10.77.0.2/24",
		"GUEST_CMD": "iperf3 -s -D",
	})
	host := hostBehind(t, ns)
	cakFile := filepath.Join(t.TempDir(), "cak")
	if err := os.WriteFile(cakFile, []byte(cakHex+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yamlText := fmt.Sprintf(`ports:
  - name: %s
`+hostPort+`interfaces:
  - {name: link, port: %s, role: lan}
`+hostInterface+`macsec:
  - name: ms1
    on: link
    sci: %s
    cipher: gcm-aes-256
    encrypt: on
    mka: {ckn: %s, cak_file: %s, priority: 200}
    addresses: [10.77.0.1/24]
    pn_store: %s
state_dir: %s
`, p.Tap, p.Tap, routerSCI, cknHex, cakFile, t.TempDir(), t.TempDir())
	cfg, err := config.Parse("linuxpeer.yaml", []byte(yamlText))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, yamlText)
	}
	var logs lockedBuffer
	var r *router.Router
	ns.Do(t, func() {
		r, err = router.New(cfg, router.Build{Version: "test"}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	})
	if err != nil {
		t.Fatalf("router.New: %v", err)
	}
	t.Cleanup(func() { r.Close() })

	// Up by MKA on the key server's suite.
	var ms status.MACsec
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms = suiteSecY(t, r)
		m := ms.MKA
		if m != nil && len(m.Live) == 1 && !m.KeyServer && m.KeyServerSCI != "" && m.Latest != nil && m.Latest.TX && m.Latest.RX {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("router MKA after 60 s: cipher %s, %+v\nrouter log:\n%s", ms.Cipher, m, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := ms.MKA
	t.Logf("router MKA: key server %s, live peer %s MI %s, SAK KN %d AN %d; cipher %s (configured %s), suite switches %d",
		m.KeyServerSCI, m.Live[0].SCI, m.Live[0].MI, m.Latest.KN, m.Latest.AN, ms.Cipher, ms.CipherConfigured, m.Counters["suite_switches"])
	if ms.Cipher != "gcm-aes-128" || ms.CipherConfigured != "gcm-aes-256" || m.Counters["suite_switches"] != 1 || m.Counters["sak_rejected"] != 0 {
		t.Errorf("status: cipher %q, cipher_configured %q, suite_switches %d, sak_rejected %d; want gcm-aes-128, gcm-aes-256, 1, 0",
			ms.Cipher, ms.CipherConfigured, m.Counters["suite_switches"], m.Counters["sak_rejected"])
	}
	switchRE := regexp.MustCompile(`level=INFO msg="macsec secy rebuilt[^"]*".* from=gcm-aes-256 to=gcm-aes-128`)
	if !switchRE.MatchString(logs.String()) {
		t.Errorf("no Info line on the rebuild with both suites in the router's log:\n%s", logs.String())
	}
	mi := m.MI

	if _, err := p.WaitConsole(ctx, regexp.MustCompile(`(?m)^LPEER MACSEC-IF (\S+)`), 30*time.Second); err != nil {
		t.Fatalf("guest made no SecY: %v", err)
	}
	p.MustRun(t, ctx, "ip route add 10.78.0.0/24 via 10.77.0.1", 10*time.Second)
	waitPing := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := p.Run(ctx, "ping -c 1 -W 1 10.77.0.1", 10*time.Second)
			if m := pingRE.FindStringSubmatch(out); err == nil && m != nil && m[2] == "1" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: guest cannot ping the router's SecY address:\n%s\n%s", what, out, p.MustRun(t, ctx, "ip macsec show", 10*time.Second))
			}
			time.Sleep(500 * time.Millisecond)
		}
		pingFromGuest(t, ctx, p, "10.77.0.1")
	}
	waitPing("after the suite switch")
	if out := p.MustRun(t, ctx, "ip macsec show", 10*time.Second); !strings.Contains(out, "GCM-AES-128") {
		t.Errorf("guest's SecY is not GCM-AES-128:\n%s", out)
	}

	// TCP across the SecY: host → router → GCM-AES-128 SecY → guest.
	res := iperfToGuest(t, ctx, host, 3)
	t.Logf("iperf3 3 s host→router→GCM-AES-128 SecY→guest: %.1f Mbit/s, %d bytes", res.End.SumReceived.BitsPerSecond/1e6, res.End.SumReceived.Bytes)
	if res.End.SumReceived.Bytes == 0 {
		t.Error("iperf3 moved no data over the switched SecY")
	}

	// A reload of the same config does not fight the switch.
	cfg2, err := config.Parse("linuxpeer.yaml", []byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	ns.Do(t, func() { err = r.Reload(cfg2) })
	if err != nil {
		t.Fatalf("Reload: %v", err)
	}
	time.Sleep(3 * time.Second)
	ms = suiteSecY(t, r)
	if ms.Cipher != "gcm-aes-128" || ms.MKA == nil || ms.MKA.MI != mi || len(ms.MKA.Live) != 1 || ms.MKA.Counters["suite_switches"] != 1 {
		t.Errorf("after a reload of the same config: cipher %s, MKA %+v; want gcm-aes-128, MI %s, the live peer, still 1 switch", ms.Cipher, ms.MKA, mi)
	}
	waitPing("after the reload")

	// No key in the router's log or status.
	js, err := json.Marshal(r.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{cakHex}
	for _, s := range regexp.MustCompile(`(?m)KaY: generated new SAK - hexdump\(len=16\): ([0-9a-f ]+)$`).FindAllStringSubmatch(p.Console(), -1) {
		secrets = append(secrets, strings.ReplaceAll(strings.TrimSpace(s[1]), " ", ""))
	}
	if len(secrets) < 2 {
		t.Errorf("found no SAK in wpa_supplicant's debug output; the key check would prove nothing")
	}
	for _, s := range secrets {
		for _, where := range []string{logs.String(), string(js)} {
			if strings.Contains(strings.ToLower(where), s) {
				t.Errorf("key %s… in the router's log or status", s[:4])
			}
		}
	}
	t.Logf("router log:\n%s\nguest:\n%s", logs.String(), p.MustRun(t, ctx, "ip -s macsec show", 10*time.Second))
}

// suiteSecY returns the router's one SecY's status.
func suiteSecY(t *testing.T, r *router.Router) status.MACsec {
	t.Helper()
	snap := r.Snapshot()
	if len(snap.MACsec) != 1 {
		t.Fatalf("status has %d SecYs, want 1", len(snap.MACsec))
	}
	return snap.MACsec[0]
}

// lockedBuffer is a bytes.Buffer safe for the router's goroutines to log
// into while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
