package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/wireguard"
)

// wgBase is a lan on a port and a WireGuard interface; KEYFILE, PSKFILE
// and PEERKEY are replaced by the test's.
const wgBase = `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    role: lan
    addresses: [192.168.1.1/24]
  - name: wg0
    role: lan
    addresses: [10.8.0.1/24]
    mtu: 1420
    wireguard:
      private_key_file: KEYFILE
      listen_port: 51820
      peers:
        - name: phone
          public_key: PEERKEY
          preshared_key_file: PSKFILE
          allowed_ips: [10.8.0.2/32, fd00:8::2/128]
          endpoint: vpn.example.net:51820
          persistent_keepalive: 25s
`

// allowWireGuard lets a test parse wireguard: while the router does not run it.
func allowWireGuard(t *testing.T) {
	saved := notYetRunning
	notYetRunning = map[string]bool{}
	t.Cleanup(func() { notYetRunning = saved })
}

type wgFiles struct {
	priv, psk, peer  wireguard.Key
	keyFile, pskFile string
}

func writeWGFiles(t *testing.T) wgFiles {
	t.Helper()
	var f wgFiles
	f.priv, _ = wireguard.GenerateKey()
	f.psk, _ = wireguard.GenerateKey()
	peerPriv, _ := wireguard.GenerateKey()
	f.peer = peerPriv.PublicKey()
	dir := t.TempDir()
	f.keyFile, f.pskFile = filepath.Join(dir, "wg0.key"), filepath.Join(dir, "phone.psk")
	for p, k := range map[string]wireguard.Key{f.keyFile: f.priv, f.pskFile: f.psk} {
		if err := os.WriteFile(p, []byte(k.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f wgFiles) config(extra ...string) string {
	r := strings.NewReplacer(append([]string{"KEYFILE", f.keyFile, "PSKFILE", f.pskFile, "PEERKEY", f.peer.String()}, extra...)...)
	return r.Replace(wgBase)
}

func TestParseWireGuard(t *testing.T) {
	allowWireGuard(t)
	f := writeWGFiles(t)
	c, err := Parse("w.yaml", []byte(f.config()))
	if err != nil {
		t.Fatal(err)
	}
	ifc := c.Interface("wg0")
	w := ifc.WireGuard
	if w == nil || ifc.Port != "" || ifc.MTU != 1420 || w.ListenPort != 51820 || w.PrivateKeyFile != f.keyFile || w.Pos != (Pos{12, 5}) || len(w.Peers) != 1 {
		t.Fatalf("wg0 = %+v", ifc)
	}
	p := w.Peers[0]
	if p.Name != "phone" || p.PublicKey != f.peer || p.PresharedKeyFile != f.pskFile || p.Endpoint != "vpn.example.net:51820" ||
		p.PersistentKeepalive != 25*time.Second || len(p.AllowedIPs) != 2 || p.AllowedIPs[1] != netip.MustParsePrefix("fd00:8::2/128") {
		t.Errorf("peer = %+v", p)
	}
	d := w.Device()
	if d.PrivateKey != f.priv || d.ListenPort != 51820 || d.Peers[0].PresharedKey != f.psk || d.Peers[0].Endpoint.IsValid() {
		t.Errorf("Device() = keys from the files %v %v, port %d, endpoint %v (a host name stays for the runtime)",
			d.PrivateKey == f.priv, d.Peers[0].PresharedKey == f.psk, d.ListenPort, d.Peers[0].Endpoint)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Device().Validate() = %v", err)
	}
	if out := fmt.Sprintf("%v %+v %#v", c, ifc, w); strings.Contains(out, f.priv.String()) || strings.Contains(out, f.psk.String()) ||
		strings.Contains(out, fmt.Sprint(f.priv[:])) {
		t.Errorf("formatting the config prints a private or preshared key")
	}
	c2, err := Parse("w.yaml", []byte(f.config("endpoint: vpn.example.net:51820", "endpoint: 203.0.113.7:51820")))
	if err != nil {
		t.Fatal(err)
	}
	if got := c2.Interface("wg0").WireGuard.Device().Peers[0].Endpoint; got != netip.MustParseAddrPort("203.0.113.7:51820") {
		t.Errorf("literal endpoint = %v", got)
	}
	if c.Interface("wg0").Equal(*c2.Interface("wg0")) || !c.Interface("wg0").Equal(*ifc) {
		t.Error("Interface.Equal ignores the wireguard mapping")
	}
}

// TestWireGuardRuns: the router runs WireGuard interfaces, so the
// config is taken as it is (the first stage refused it at the
// wireguard: key as "not supported by this version yet").
func TestWireGuardRuns(t *testing.T) {
	f := writeWGFiles(t)
	if _, err := Parse("w.yaml", []byte(f.config())); err != nil {
		t.Errorf("Parse = %v, want nil", err)
	}
}

// TestWireGuardForwardConflict: a UDP port forward of the listen port
// would take WireGuard's packets; it is refused at the forward.
func TestWireGuardForwardConflict(t *testing.T) {
	f := writeWGFiles(t)
	base := f.config() + "  - {name: wan, port: eth0, vlan: 2, role: wan, addresses: [203.0.113.2/24]}\nnat:\n  forwards:\n"
	for _, tc := range []struct{ fwd, want string }{
		{`    - {proto: udp, port: "51000-52000", to: 192.168.1.10}`, `w.yaml:25:7: nat: forward udp 51000-52000: port 51820 is WireGuard interface "wg0"'s listen_port (line 12)`},
		{`    - {proto: tcp, port: 51820, to: 192.168.1.10}`, ""},
		{`    - {proto: udp, port: 51821, to: 192.168.1.10}`, ""},
	} {
		_, err := Parse("w.yaml", []byte(base+tc.fwd+"\n"))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Parse = %v, want %q", tc.fwd, err, tc.want)
		}
	}
}

func TestWireGuardErrors(t *testing.T) {
	allowWireGuard(t)
	f := writeWGFiles(t)
	open := filepath.Join(t.TempDir(), "open.key")
	os.WriteFile(open, []byte(f.priv.String()), 0o644)
	os.Chmod(open, 0o644)
	own := f.priv.PublicKey().String()
	tests := []struct {
		name string
		repl []string
		want string
	}{
		{"key file readable by others", []string{"KEYFILE", open}, "w.yaml:13:25: interface \"wg0\": wireguard: private_key_file: " + open + " has mode 0644; a key file must be readable by its owner only"},
		{"key file missing", []string{"KEYFILE", "/nonexistent/wg0.key"}, "w.yaml:13:25: interface \"wg0\": wireguard: private_key_file: stat /nonexistent/wg0.key: no such file"},
		{"no key file", []string{"      private_key_file: KEYFILE\n", ""}, "w.yaml:13:7: interface \"wg0\": wireguard: private_key_file is required"},
		{"unknown key", []string{"listen_port:", "port_listen:"}, "w.yaml:14:7: interface \"wg0\": wireguard: unknown key \"port_listen\""},
		{"port out of range", []string{"listen_port: 51820", "listen_port: 70000"}, "w.yaml:14:20: interface \"wg0\": wireguard: listen_port 70000 out of range"},
		{"bad public key", []string{"PEERKEY", "notakey"}, "w.yaml:17:23: interface \"wg0\": wireguard: peer \"phone\": public_key: wireguard: a key is 44 characters of base64"},
		{"no public key", []string{"          public_key: PEERKEY\n", ""}, "w.yaml:16:11: interface \"wg0\": wireguard: peer \"phone\": public_key is required"},
		{"own public key", []string{"PEERKEY", own}, "w.yaml:17:23: interface \"wg0\": wireguard: peer \"phone\"'s public key is this interface's own"},
		{"no name", []string{"        - name: phone\n          public_key", "        - public_key"}, "w.yaml:16:11: interface \"wg0\": wireguard: peer: name is required"},
		{"peer unknown key", []string{"endpoint:", "end_point:"}, "w.yaml:20:11: interface \"wg0\": wireguard: peer \"phone\": unknown key \"end_point\"; did you mean \"endpoint\"?"},
		{"host bits", []string{"10.8.0.2/32,", "10.8.0.2/24,"}, "w.yaml:19:25: interface \"wg0\": wireguard: peer \"phone\": allowed_ips: 10.8.0.2/24 has host bits set; did you mean 10.8.0.0/24?"},
		{"not a prefix", []string{"10.8.0.2/32,", "phone,"}, "w.yaml:19:25: interface \"wg0\": wireguard: peer \"phone\": allowed_ips: want a prefix like 10.8.0.2/32"},
		{"endpoint without port", []string{"vpn.example.net:51820", "vpn.example.net"}, "w.yaml:20:21: interface \"wg0\": wireguard: peer \"phone\": endpoint: want host:port"},
		{"endpoint port 0", []string{"vpn.example.net:51820", "vpn.example.net:0"}, "endpoint: want host:port"},
		{"keepalive fraction", []string{"25s", "2500ms"}, "w.yaml:21:33: interface \"wg0\": wireguard: peer \"phone\": persistent_keepalive: want whole seconds from 1s to 65535s"},
		{"keepalive too long", []string{"25s", "20h"}, "persistent_keepalive: want whole seconds"},
		{"psk file open", []string{"PSKFILE", open}, "w.yaml:18:31: interface \"wg0\": wireguard: peer \"phone\": preshared_key_file: " + open + " has mode 0644"},
		{"with a port", []string{"    role: lan\n    addresses: [10.8", "    role: lan\n    port: eth0\n    addresses: [10.8"}, "w.yaml:10:11: interface \"wg0\": port: a WireGuard interface has no port"},
		{"with dhcp", []string{"[10.8.0.1/24]", "[dhcp]"}, "w.yaml:10:17: interface \"wg0\": addresses: \"dhcp\" on a WireGuard interface"},
		{"not a mapping", []string{"    wireguard:\n", "    wireguard: yes\n    x:\n"}, "interface \"wg0\": wireguard: want a mapping"},
		{"twice the peer", []string{"          persistent_keepalive: 25s\n", "          persistent_keepalive: 25s\n        - name: phone\n          public_key: PEERKEY\n"}, "w.yaml:22:17: interface \"wg0\": wireguard: peer \"phone\" is defined twice (first at line 16)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.NewReplacer(tt.repl...).Replace(wgBase)
			in = strings.NewReplacer("KEYFILE", f.keyFile, "PSKFILE", f.pskFile, "PEERKEY", f.peer.String()).Replace(in)
			_, err := Parse("w.yaml", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v\nwant %q", err, tt.want)
			}
			if err != nil && (strings.Contains(err.Error(), f.priv.String()) || strings.Contains(err.Error(), f.psk.String())) {
				t.Errorf("an error quotes a key: %v", err)
			}
		})
	}
}
