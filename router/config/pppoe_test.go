package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/pppoe"
)

// pppoeBase is a lan and a PPPoE wan on one port; PWFILE is replaced
// by a password file the test writes.
const pppoeBase = `ports:
  - name: eth0
interfaces:
  - name: lan
    port: eth0
    vlan: 1
    role: lan
    addresses: [192.168.1.1/24]
  - name: wan
    port: eth0
    vlan: 7
    role: wan
    addresses: [pppoe]
    pppoe:
      user: alice@isp.example
      password_file: PWFILE
      service: internet
      ac: bras-7
      mtu: 1500
      lcp_echo: {interval: 5s, failures: 4}
`

// allowPPPoE lets a test parse pppoe while the router does not run it.
func allowPPPoE(t *testing.T) {
	saved := notYetRunning
	notYetRunning = map[string]bool{}
	t.Cleanup(func() { notYetRunning = saved })
}

func writePassword(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pppoe.password")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestParsePPPoE(t *testing.T) {
	allowPPPoE(t)
	pw := writePassword(t, "s3cret\n", 0o600)
	c, err := Parse("p.yaml", []byte(strings.Replace(pppoeBase, "PWFILE", pw, 1)))
	if err != nil {
		t.Fatal(err)
	}
	wan := c.Interface("wan")
	p := wan.PPPoE
	if p == nil || len(wan.Addresses) != 0 || wan.DHCP != nil {
		t.Fatalf("wan = %+v", wan)
	}
	if p.User != "alice@isp.example" || p.PasswordFile != pw || p.Service != "internet" || p.AC != "bras-7" ||
		p.MTU != 1500 || p.EchoInterval != 5*time.Second || p.EchoFailures != 4 || p.Pos != (Pos{13, 17}) {
		t.Errorf("pppoe = %+v", p)
	}
	if want := pppoe.NewCredentials("alice@isp.example", "s3cret"); p.Credentials != want {
		t.Errorf("credentials = %v, want the password from the file", p.Credentials)
	}
	s := p.Session()
	if s.MaxPayload != 1500 || s.Service != "internet" || s.ACName != "bras-7" || s.EchoInterval != 5*time.Second || s.EchoFailures != 4 {
		t.Errorf("Session() = %+v", s)
	}
	if out := fmt.Sprintf("%v %+v %#v", p, p, p); strings.Contains(out, "s3cret") {
		t.Errorf("formatting the config prints the password: %s", out)
	}
	// Without mtu the link is 1492 and asks for no RFC 4638 tag.
	c3, err := Parse("p.yaml", []byte(strings.NewReplacer("PWFILE", pw, "      mtu: 1500\n", "").Replace(pppoeBase)))
	if err != nil {
		t.Fatal(err)
	}
	if p := c3.Interface("wan").PPPoE; p.LinkMTU() != 1492 || p.Session().MaxPayload != 0 {
		t.Errorf("default mtu: LinkMTU %d, MaxPayload %d; want 1492, 0", p.LinkMTU(), p.Session().MaxPayload)
	}
	if !c.Interface("wan").Equal(*wan) || c.Interface("wan").Equal(*c3.Interface("wan")) {
		t.Error("Interface.Equal ignores the pppoe mapping")
	}
}

// TestPPPoERuns: the router runs PPPoE (router/svc/pppoe.go), so a
// config asking for it is accepted as it is, with no test override of
// notYetRunning (until stage 3 it was refused as "not supported by this
// version yet" at the "pppoe" address).
func TestPPPoERuns(t *testing.T) {
	pw := writePassword(t, "s3cret\n", 0o600)
	c, err := Parse("p.yaml", []byte(strings.Replace(pppoeBase, "PWFILE", pw, 1)))
	if err != nil {
		t.Fatalf("Parse = %v, want no error", err)
	}
	if p := c.Interface("wan").PPPoE; p == nil || p.User != "alice@isp.example" {
		t.Errorf("wan's PPPoE = %+v, want alice@isp.example's", p)
	}
	// Masquerade to the address IPCP will give, as to a DHCP lease's (on
	// main: 'nat: masquerade: interface "wan" has no IPv4 address to
	// masquerade to').
	if _, err := Parse("p.yaml", []byte(strings.Replace(pppoeBase, "PWFILE", pw, 1)+"nat: {masquerade: [wan]}\n")); err != nil {
		t.Errorf("Parse with masquerade on the PPPoE wan = %v, want no error", err)
	}
}

func TestPPPoEErrors(t *testing.T) {
	allowPPPoE(t)
	good := writePassword(t, "s3cret\n", 0o600)
	open := writePassword(t, "s3cret\n", 0o644)
	twoLines := writePassword(t, "s3cret\nmore\n", 0o600)
	empty := writePassword(t, "\n", 0o600)
	tests := []struct {
		name, from, to, want string
	}{
		{"password file readable by others", "PWFILE", open, "p.yaml:16:22: interface \"wan\": pppoe: password_file: " + open + " has mode 0644; a password file must be readable by its owner only"},
		{"password file missing", "PWFILE", good + ".nope", "p.yaml:16:22: interface \"wan\": pppoe: password_file: stat " + good + ".nope: no such file"},
		{"password file two lines", "PWFILE", twoLines, "want the password alone on one line"},
		{"password file empty", "PWFILE", empty, "want a password of 1..255 bytes"},
		{"no user", "      user: alice@isp.example\n", "", "p.yaml:15:7: interface \"wan\": pppoe: user is required"},
		{"no password_file", "      password_file: PWFILE\n", "", "p.yaml:15:7: interface \"wan\": pppoe: password_file is required"},
		{"user too long", "alice@isp.example", strings.Repeat("a", 256), "p.yaml:15:13: interface \"wan\": pppoe: user: want 1..255 bytes"},
		{"unknown key", "ac: bras-7", "ac_name: bras-7", "p.yaml:18:7: interface \"wan\": pppoe: unknown key \"ac_name\""},
		{"mtu low", "mtu: 1500", "mtu: 1279", "p.yaml:19:12: interface \"wan\": pppoe: mtu 1279 out of range 1280..1500"},
		{"mtu high", "mtu: 1500", "mtu: 1501", "mtu 1501 out of range 1280..1500 (above 1492 asks for RFC 4638)"},
		{"mtu not a number", "mtu: 1500", "mtu: big", "p.yaml:19:12:"},
		{"echo interval short", "interval: 5s", "interval: 100ms", "p.yaml:20:28: interface \"wan\": pppoe: lcp_echo: interval 100ms out of range 1s..5m"},
		{"echo failures zero", "failures: 4", "failures: 0", "pppoe: lcp_echo: failures 0 out of range 1..30"},
		{"echo unknown key", "failures: 4", "fails: 4", "lcp_echo: unknown key \"fails\""},
		{"service too long", "service: internet", "service: " + strings.Repeat("s", 256), "p.yaml:17:16: interface \"wan\": pppoe: service: 256 bytes"},
		{"listed twice", "addresses: [pppoe]", "addresses: [pppoe, pppoe]", "p.yaml:13:24: interface \"wan\": addresses: \"pppoe\" is listed twice"},
		{"block without address", "addresses: [pppoe]", "addresses: [203.0.113.2/24]", "p.yaml:14:5: interface \"wan\": pppoe: options given but addresses has no \"pppoe\""},
		{"address without block", "    pppoe:\n", "    pppoe_off:\n", "p.yaml:13:17: interface \"wan\": addresses: \"pppoe\" needs a pppoe: mapping"},
		{"lan role", "    role: wan\n", "    role: lan\n", "p.yaml:13:17: interface \"wan\": addresses: \"pppoe\" is for a wan interface, and role is \"lan\""},
		{"with dhcp", "addresses: [pppoe]", "addresses: [pppoe, dhcp]", "p.yaml:13:24: interface \"wan\": addresses: \"dhcp\" and \"pppoe\" cannot be combined"},
		{"with static", "addresses: [pppoe]", "addresses: [pppoe, 203.0.113.2/24]", "p.yaml:13:24: interface \"wan\": addresses: 203.0.113.2/24 beside \"pppoe\""},
		{"interface mtu", "    role: wan\n", "    role: wan\n    mtu: 1492\n", "p.yaml:13:10: interface \"wan\": mtu: the PPPoE link's MTU is pppoe: {mtu: N}"},
		{"port mtu too small", "  - name: eth0\n", "  - name: eth0\n    mtu: 1500\n", "pppoe: mtu 1500 needs port \"eth0\"'s mtu 1508 or more"},
		{"not a mapping", "    pppoe:\n", "    pppoe: yes\n    x:\n", "interface \"wan\": pppoe: want a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Replace(pppoeBase, tt.from, tt.to, 1)
			if in == pppoeBase {
				t.Fatalf("%q is not in the base config", tt.from)
			}
			in = strings.Replace(in, "PWFILE", good, 1)
			_, err := Parse("p.yaml", []byte(in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse = %v\nwant an error containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("an error quotes the password: %v", err)
			}
		})
	}
}
