package wireguard

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func testConfig(t *testing.T) (Config, Key) {
	priv, _ := GenerateKey()
	peer, _ := GenerateKey()
	psk, _ := GenerateKey()
	return Config{PrivateKey: priv, ListenPort: 51820, Peers: []Peer{{
		Name: "phone", PublicKey: peer.PublicKey(), PresharedKey: psk,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32")},
		Endpoint:   netip.MustParseAddrPort("203.0.113.7:51820"), PersistentKeepalive: 25 * time.Second,
	}}}, psk
}

// TestConfigFormatHidesKeys: printing a Config, with any verb, shows
// neither the private nor the preshared key.
func TestConfigFormatHidesKeys(t *testing.T) {
	c, psk := testConfig(t)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x"} {
		out := fmt.Sprintf(verb, c) + fmt.Sprintf(verb, &c) + fmt.Sprintf(verb, c.Peers)
		for _, k := range []Key{c.PrivateKey, psk} {
			if strings.Contains(out, k.String()) || strings.Contains(out, k.hex()) || strings.Contains(out, fmt.Sprint(k[:])) {
				t.Errorf("Sprintf(%s) shows a secret key: %s", verb, out)
			}
		}
		if !strings.Contains(out, c.Peers[0].PublicKey.String()) {
			t.Errorf("Sprintf(%s) = %s, want the peer's public key", verb, out)
		}
	}
}

func TestConfigUAPIAndValidate(t *testing.T) {
	c, psk := testConfig(t)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	u := c.UAPI()
	for _, want := range []string{
		"private_key=" + c.PrivateKey.hex() + "\n", "listen_port=51820\n", "replace_peers=true\n",
		"public_key=" + c.Peers[0].PublicKey.hex() + "\n", "preshared_key=" + psk.hex() + "\n",
		"endpoint=203.0.113.7:51820\n", "persistent_keepalive_interval=25\n", "allowed_ip=10.8.0.2/32\n",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("UAPI() lacks %q", want)
		}
	}
	bad := c
	bad.Peers = append([]Peer{}, c.Peers...)
	bad.Peers = append(bad.Peers, Peer{Name: "phone", PublicKey: c.Peers[0].PublicKey, PersistentKeepalive: 1500 * time.Millisecond,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.3/24")}})
	bad.Peers = append(bad.Peers, Peer{Name: "self", PublicKey: c.PrivateKey.PublicKey()})
	err := bad.Validate()
	for _, want := range []string{`peer "phone": name is used twice`, `public key is also peer "phone"'s`, "allowed IP 10.8.0.3/24 has host bits", "persistent keepalive 1.5s", `peer "self": public key is the interface's own`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
	if err := (&Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "private key is missing") {
		t.Errorf("Validate(empty) = %v", err)
	}
}
