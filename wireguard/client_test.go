package wireguard

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestClientConfigWGQuick: wg-quick(8) reads the file (its strip command
// parses it and keeps what wg(8) takes), and wg pubkey derives the
// router's view of the peer from it.
func TestClientConfigWGQuick(t *testing.T) {
	priv, _ := GenerateKey()
	server, _ := GenerateKey()
	psk, _ := GenerateKey()
	c := ClientConfig{
		PrivateKey: priv, Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32"), netip.MustParsePrefix("fd00:8::2/128")},
		DNS: []netip.Addr{netip.MustParseAddr("10.8.0.1")}, ServerPublicKey: server.PublicKey(), PresharedKey: psk,
		Endpoint: "vpn.example.net:51820", AllowedIPs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
		PersistentKeepalive: 25 * time.Second,
	}
	text := c.WGQuick()
	for _, want := range []string{
		"[Interface]\nPrivateKey = " + priv.String() + "\nAddress = 10.8.0.2/32, fd00:8::2/128\nDNS = 10.8.0.1\n",
		"[Peer]\nPublicKey = " + server.PublicKey().String() + "\nPresharedKey = " + psk.String() + "\nEndpoint = vpn.example.net:51820\nAllowedIPs = 0.0.0.0/0, ::/0\nPersistentKeepalive = 25\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("WGQuick() =\n%s\nwant it to hold\n%s", text, want)
		}
	}
	wgQuick, err := exec.LookPath("wg-quick")
	if err != nil {
		netnstest.SkipOrFail(t, "wg-quick (wireguard-tools) is not installed: %v", err)
	}
	path := filepath.Join(t.TempDir(), "wg9.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(wgQuick, "strip", path).CombinedOutput()
	if err != nil {
		t.Fatalf("wg-quick strip: %v\n%s", err, out)
	}
	stripped := string(out)
	if !strings.Contains(stripped, "PrivateKey = "+priv.String()) || !strings.Contains(stripped, "Endpoint = vpn.example.net:51820") ||
		strings.Contains(stripped, "DNS") || strings.Contains(stripped, "Address") {
		t.Errorf("wg-quick strip =\n%s\nwant the wg(8) keys without Address and DNS", stripped)
	}
	cmd := exec.Command("wg", "pubkey")
	cmd.Stdin = strings.NewReader(priv.String())
	pub, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(pub)) != priv.PublicKey().String() {
		t.Errorf("wg pubkey of the client's key = %q, %v; want %s", pub, err, priv.PublicKey())
	}
}

func TestFreeAddress(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	tests := []struct {
		subnet string
		own    []netip.Addr
		used   []netip.Prefix
		want   string // "" = none
	}{
		{"10.8.0.1/24", []netip.Addr{a("10.8.0.1")}, nil, "10.8.0.2"},
		{"10.8.0.1/24", []netip.Addr{a("10.8.0.1")}, []netip.Prefix{p("10.8.0.2/32"), p("10.8.0.3/32")}, "10.8.0.4"},
		{"10.8.0.1/24", []netip.Addr{a("10.8.0.1")}, []netip.Prefix{p("10.8.0.0/25")}, "10.8.0.128"},
		{"10.8.0.1/30", []netip.Addr{a("10.8.0.1")}, []netip.Prefix{p("10.8.0.2/32")}, ""}, // .3 is the broadcast
		{"10.8.0.1/31", []netip.Addr{a("10.8.0.1")}, nil, ""},
		{"fd00:8::1/64", []netip.Addr{a("fd00:8::1")}, []netip.Prefix{p("fd00:8::2/128")}, "fd00:8::3"},
	}
	for _, tt := range tests {
		got, ok := FreeAddress(p(tt.subnet), tt.own, tt.used)
		if (tt.want == "" && ok) || (tt.want != "" && (!ok || got != a(tt.want))) {
			t.Errorf("FreeAddress(%s, %v, %v) = %v, %v, want %q", tt.subnet, tt.own, tt.used, got, ok, tt.want)
		}
	}
}
