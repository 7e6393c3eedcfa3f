package status_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
	"github.com/gvrouter/gvrouter/wireguard"
)

// TestWireGuardStatus: a WireGuard interface's peers and counters are
// on the page, in /api/status and in /metrics.
func TestWireGuardStatus(t *testing.T) {
	hs := time.Unix(1_700_000_000, 500_000_000)
	snap := status.Snapshot{WireGuard: []status.WireGuard{{Name: "wg0", Status: wireguard.Status{
		PublicKey: "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", ListenPort: 51820,
		Peers: []wireguard.PeerStatus{{Name: "phone", PublicKey: "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=", Endpoint: "198.51.100.7:41234",
			LastHandshake: hs, HandshakeAge: 12, RxBytes: 4096, TxBytes: 8192, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32")}}},
		Counters: map[string]map[string]uint64{"handshake": {"invalid_initiation": 7}, "udp": {"rx_transport": 30}},
	}}}}
	s := status.New(statustest.New(snap), nil)
	s.Sample()
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{`<h2>WireGuard wg0</h2>`, `<td>phone</td><td class="mono">198.51.100.7:41234</td><td class="mono">10.8.0.2/32</td><td>12s ago</td><td class="num">4.00 KiB</td>`,
		`<span class="mono">handshake/invalid_initiation</span> 7`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, want := range []string{`"wireguard": [`, `"name": "wg0"`, `"listen_port": 51820`, `"handshake_age_seconds": 12`, `"rx_bytes": 4096`, `"invalid_initiation": 7`} {
		if !strings.Contains(raw, want) {
			t.Errorf("/api/status lacks %s", want)
		}
	}
	metrics := body(t, get(t, s.Handler(), "GET", "/metrics"))
	for _, want := range []string{
		`gvrouter_wireguard_peer_receive_bytes_total{interface="wg0",peer="phone",public_key="HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="} 4096`,
		`gvrouter_wireguard_peer_last_handshake_seconds{interface="wg0",peer="phone",public_key="HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="} 1.7000000005e+09`,
		`gvrouter_wireguard_events_total{group="handshake",interface="wg0",name="invalid_initiation"} 7`,
		`gvrouter_wireguard_peers{interface="wg0"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
