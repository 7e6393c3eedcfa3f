package status_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestVLANInterfaces checks that VLAN interfaces show their parent port,
// VIDs, protocol and PCP on the page and in the JSON, and that an
// untagged interface has none of the VLAN keys.
func TestVLANInterfaces(t *testing.T) {
	pcp3, pcp0 := 3, 0
	snap := status.Snapshot{Interfaces: []status.Interface{
		{Name: "eth0.1", Port: "eth0", State: "up", VLAN: []int{1}, VLANProtocol: "802.1Q", PCP: &pcp0},
		{Name: "q", Port: "eth0", State: "up", VLAN: []int{100, 10}, VLANProtocol: "802.1ad", PCP: &pcp3},
		{Name: "plain", Port: "eth1", State: "up"},
	}}
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{
		`eth0<br><span class="sub">802.1Q vlan 1 pcp 0</span>`,
		`eth0<br><span class="sub">802.1ad vlan 100, 10 pcp 3</span>`,
		`<td class="mono">eth1</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	var got struct {
		Interfaces []map[string]any `json:"interfaces"`
	}
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Interfaces) != 3 {
		t.Fatalf("JSON has %d interfaces, want 3", len(got.Interfaces))
	}
	q, plain := got.Interfaces[1], got.Interfaces[2]
	if q["vlan_protocol"] != "802.1ad" || q["pcp"] != 3.0 || len(q["vlan"].([]any)) != 2 {
		t.Errorf("JSON interface q = %v, want vlan [100 10], 802.1ad, pcp 3", q)
	}
	for _, k := range []string{"vlan", "vlan_protocol", "pcp"} {
		if _, ok := plain[k]; ok {
			t.Errorf("JSON untagged interface has %q: %v", k, plain)
		}
	}
	if p, ok := got.Interfaces[0]["pcp"]; !ok || p != 0.0 {
		t.Errorf("JSON eth0.1 pcp = %v, %v; want 0 present", p, ok)
	}
}

// TestGROFields checks that the GRO mode and counters reach the page, the
// JSON and the metrics, and are absent when unknown.
func TestGROFields(t *testing.T) {
	snap := status.Snapshot{Interfaces: []status.Interface{
		{Name: "lan", Port: "eth0", State: "up", GROMode: "selective", GRO: &status.GRO{Coalesced: 41, Flushed: 7, BypassedForward: 5, Segmented: 2, ChecksumVerified: 48, ChecksumBad: 1}},
		{Name: "plain", Port: "eth1", State: "up"},
	}}
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{
		"<td><b>lan</b></td>\n<td>selective</td>",
		`<td class="num">41</td><td class="num">7</td><td class="num">5</td>` + "\n" +
			`<td class="num">2</td><td class="num">48</td><td class="num">1</td>`,
		"<td><b>plain</b></td>\n<td>unknown</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	var got struct {
		Interfaces []map[string]any `json:"interfaces"`
	}
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	lan, plain := got.Interfaces[0], got.Interfaces[1]
	c, _ := lan["gro_counters"].(map[string]any)
	if lan["gro"] != "selective" || c["coalesced"] != 41.0 || c["bypassed_forward"] != 5.0 || c["checksum_bad"] != 1.0 {
		t.Errorf("JSON lan = %v", lan)
	}
	for _, k := range []string{"gro", "gro_counters"} {
		if _, ok := plain[k]; ok {
			t.Errorf("JSON interface without GRO info has %q", k)
		}
	}
	metrics := body(t, get(t, s.Handler(), "GET", "/metrics"))
	if want := `gvrouter_interface_gro_total{event="coalesced",interface="lan"} 41`; !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %q", want)
	}
}
