package status_test

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/pppoe"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// pppoeSnapshot is statustest.Example with one PPPoE session up on wan,
// after one reconnect.
func pppoeSnapshot() status.Snapshot {
	a := netip.MustParseAddr
	snap := statustest.Example(started)
	snap.PPPoE = []status.PPPoE{{Interface: "wan", Status: pppoe.Status{
		State: "up", SessionID: 0x4242, ACMAC: "02:00:00:00:00:5c", ACName: "bras-7", Service: "internet",
		UptimeSeconds: 3723, Reconnects: 1, LastDownReason: `AC sent PADT: <b>maintenance</b>`,
		EchoRTTMillis: 2.5, MTU: 1492, MRU: 1492, Auth: "chap-md5",
		IPv4:     &pppoe.IPv4Status{Local: a("100.64.7.9"), Peer: a("100.64.7.1"), DNS: []netip.Addr{a("192.0.2.53"), a("192.0.2.54")}},
		IPv6:     &pppoe.IPv6Status{Local: a("fe80::1c2d:3e4f:5a6b:7c8d"), Peer: a("fe80::aaaa:bbbb:cccc:dddd")},
		Counters: map[string]uint64{"padi_tx": 2, "padt_rx": 1, "reconnects": 1, "link_rx_queue_full": 0},
	}}}
	return snap
}

// TestPPPoEStatus: the session reaches the JSON (round trip), the page
// (AC text escaped) and /metrics.
func TestPPPoEStatus(t *testing.T) {
	s, _, _ := newServer(t, pppoeSnapshot())
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, key := range []string{`"pppoe": [`, `"local": "fe80::1c2d:3e4f:5a6b:7c8d"`, `"interface": "wan"`, `"session_id": 16962`, `"ac_name": "bras-7"`,
		`"reconnects": 1`, `"last_down_reason": "AC sent PADT: \u003cb\u003emaintenance\u003c/b\u003e"`, `"echo_rtt_ms": 2.5`,
		`"mtu": 1492`, `"local": "100.64.7.9"`, `"dns": [`, `"padi_tx": 2`} {
		if !strings.Contains(raw, key) {
			t.Errorf("JSON does not contain %s", key)
		}
	}
	var got status.Snapshot
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding JSON: %v", err)
	}
	if want := s.Latest().PPPoE; !reflect.DeepEqual(got.PPPoE, want) {
		t.Errorf("decoded pppoe = %+v\nwant %+v", got.PPPoE, want)
	}

	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{"<h2>PPPoE wan</h2>", "id 16962 AC bras-7 (02:00:00:00:00:5c) service internet",
		"for 1h 2m 3s", "last because: <span class=\"drops\">AC sent PADT: &lt;b&gt;maintenance&lt;/b&gt;</span>",
		"MTU 1492 MRU 1492 auth chap-md5 echo RTT 2.5 ms", "100.64.7.9 peer 100.64.7.1 DNS 192.0.2.53, 192.0.2.54",
		"fe80::1c2d:3e4f:5a6b:7c8d peer fe80::aaaa:bbbb:cccc:dddd"} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	if strings.Contains(page, "<b>maintenance") {
		t.Error("the AC's text is markup on the page")
	}

	fams := scrape(t, s)
	l := labels
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gvrouter_pppoe_up", l("interface", "wan"), 1},
		{"gvrouter_pppoe_state", l("interface", "wan", "state", "up"), 1},
		{"gvrouter_pppoe_state", l("interface", "wan", "state", "discovery"), 0},
		{"gvrouter_pppoe_session_info", l("interface", "wan", "session_id", "16962", "ac_name", "bras-7", "ac_mac", "02:00:00:00:00:5c", "address", "100.64.7.9"), 1},
		{"gvrouter_pppoe_ipv6cp_info", l("interface", "wan", "local", "fe80::1c2d:3e4f:5a6b:7c8d", "peer", "fe80::aaaa:bbbb:cccc:dddd"), 1},
		{"gvrouter_pppoe_uptime_seconds", l("interface", "wan"), 3723},
		{"gvrouter_pppoe_reconnects_total", l("interface", "wan"), 1},
		{"gvrouter_pppoe_lcp_echo_rtt_seconds", l("interface", "wan"), 0.0025},
		{"gvrouter_pppoe_mtu", l("interface", "wan"), 1492},
		{"gvrouter_pppoe_counter_total", l("interface", "wan", "counter", "padi_tx"), 2},
		{"gvrouter_pppoe_counter_total", l("interface", "wan", "counter", "padt_rx"), 1},
	} {
		if got, ok := value(fams, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
}

// TestPPPoEAbsent: without a session the page has no PPPoE block and
// /metrics no PPPoE series.
func TestPPPoEAbsent(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	if page := body(t, get(t, s.Handler(), "GET", "/")); strings.Contains(page, "PPPoE") {
		t.Error("page shows PPPoE without a session")
	}
	for name := range scrape(t, s) {
		if strings.HasPrefix(name, "gvrouter_pppoe_") {
			t.Errorf("metric %s without a session", name)
		}
	}
}
