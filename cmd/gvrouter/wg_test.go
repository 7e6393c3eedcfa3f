package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/wireguard"
)

// TestWGKeys: `gvrouter wg genkey | gvrouter wg pubkey` agrees with
// wg(8) (wireguard-tools) both ways: wg pubkey of our key, and our
// pubkey of wg's key.
func TestWGKeys(t *testing.T) {
	wg, err := exec.LookPath("wg")
	if err != nil {
		netnstest.SkipOrFail(t, "wg (wireguard-tools) is not installed: %v", err)
	}
	run := func(stdin string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return strings.TrimSpace(string(out))
	}
	ours := func(stdin string, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := cmdWG(args, strings.NewReader(stdin), &out); err != nil {
			t.Fatalf("gvrouter wg %v: %v", args, err)
		}
		return strings.TrimSpace(out.String())
	}
	for range 5 {
		priv := ours("", "genkey")
		if got, want := ours(priv+"\n", "pubkey"), run(priv+"\n", wg, "pubkey"); got != want || len(got) != 44 {
			t.Errorf("pubkey of our genkey: ours %q, wg's %q", got, want)
		}
		if got := run(priv, wg, "pubkey"); got == "" {
			t.Errorf("wg pubkey refused our key")
		}
		wpriv := run("", wg, "genkey")
		if got, want := ours(wpriv, "pubkey"), run(wpriv, wg, "pubkey"); got != want {
			t.Errorf("pubkey of wg's genkey: ours %q, wg's %q", got, want)
		}
	}
	var out bytes.Buffer
	if err := cmdWG([]string{"pubkey"}, strings.NewReader("not a key"), &out); err == nil {
		t.Errorf("pubkey of junk succeeded: %q", out.String())
	}
}

// TestWGPeer: `gvrouter wg peer phone` prints a wg-quick file whose
// keys, address, DNS, endpoint and allowed IPs fit the router's config,
// a QR code, and a peers: entry that the config then takes.
func TestWGPeer(t *testing.T) {
	dir := t.TempDir()
	key, _ := wireguard.GenerateKey()
	keyFile := filepath.Join(dir, "wg0.key")
	if err := os.WriteFile(keyFile, []byte(key.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := `ports:
  - name: eth0
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24]}
  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24]}
  - name: wg0
    role: lan
    addresses: [10.8.0.1/24]
    wireguard:
      private_key_file: ` + keyFile + `
      listen_port: 51820
      peers:
        - {name: laptop, public_key: ` + mustPub(t) + `, allowed_ips: [10.8.0.2/32]}
`
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := cmdWG([]string{"peer", "-config", path, "phone"}, nil, &out); err != nil {
		t.Fatalf("gvrouter wg peer: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"Address = 10.8.0.3/32\nDNS = 10.8.0.1\n",
		"[Peer]\nPublicKey = " + key.PublicKey().String() + "\nEndpoint = 203.0.113.2:51820\nAllowedIPs = 192.168.1.0/24, 10.8.0.0/24\nPersistentKeepalive = 25\n",
		"█", // the QR code's blocks
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	m := regexp.MustCompile(`PrivateKey = (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no PrivateKey in\n%s", text)
	}
	priv, err := wireguard.ParseKey(m[1])
	if err != nil {
		t.Fatal(err)
	}
	entry := regexp.MustCompile(`(?m)^        - \{name: phone, .*\}\n`).FindString(text)
	if !strings.Contains(entry, "public_key: "+priv.PublicKey().String()) || !strings.Contains(entry, "allowed_ips: [10.8.0.3/32]") {
		t.Fatalf("peers: entry %q does not match the printed key and address", entry)
	}
	cfg, err := config.Parse("config.yaml", []byte(conf+entry))
	if err != nil {
		t.Fatalf("the config with the printed entry: %v", err)
	}
	if ps := cfg.Interface("wg0").WireGuard.Peers; len(ps) != 2 || ps[1].PublicKey != priv.PublicKey() {
		t.Errorf("peers after adding the entry: %+v", ps)
	}
	for _, bad := range [][]string{{"peer", "-config", path, "laptop"}, {"peer", "-config", path, "-interface", "wg9", "x"}, {"peer", "-config", path}} {
		if err := cmdWG(bad, nil, io.Discard); err == nil {
			t.Errorf("gvrouter wg %v: no error", bad)
		}
	}
}

func mustPub(t *testing.T) string {
	k, err := wireguard.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().String()
}
