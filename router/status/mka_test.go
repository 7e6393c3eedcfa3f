package status_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestMKASection checks that a SecY's MKA participant reaches the page
// (role, peers, keys by KN and AN, last roll, counters), the JSON and the
// metrics.
func TestMKASection(t *testing.T) {
	roll := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	snap := status.Snapshot{
		MACsec: []status.MACsec{{
			Name: "ms1", On: "link", SCI: "0200000000010001", Cipher: "gcm-aes-128",
			MKA: &status.MACsecMKA{
				CKN: "6c61622d6d6b61", Priority: 0, MI: "0102030405060708090a0b0c", MN: 42,
				KeyServer: true, KeyServerSCI: "0200000000010001",
				Live:     []status.MKAPeer{{SCI: "0200000000020001", MI: "a1a2a3a4a5a6a7a8a9aaabac", MN: 40, Priority: 16}},
				Latest:   &status.MKAKey{KeyServerMI: "0102030405060708090a0b0c", KN: 3, AN: 2, RX: true, TX: true},
				Previous: &status.MKAKey{KeyServerMI: "0102030405060708090a0b0c", KN: 2, AN: 1, RX: true},
				LastRoll: roll,
				Counters: map[string]uint64{"mkpdus_sent": 50, "invalid_icv": 0, "sak_rolls": 2, "peer_timeouts": 1},
			},
		}},
	}
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{
		"ckn 6c61622d6d6b61 priority 0 mi 0102030405060708090a0b0c mn 42 key server this SecY",
		"sci 0200000000020001 mi a1a2a3a4a5a6a7a8a9aaabac mn 40 priority 16",
		"kn 3 an 2 rx true tx true",
		"kn 2 an 1 rx true tx false",
		"2026-12-03 13:00:00Z",
		`<span class="mono">invalid_icv</span> 0`,
		`<span class="mono">sak_rolls</span> 2`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	var got struct {
		MACsec []struct {
			MKA *status.MACsecMKA `json:"mka"`
		} `json:"macsec"`
	}
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.MACsec) != 1 || got.MACsec[0].MKA == nil || !got.MACsec[0].MKA.KeyServer || got.MACsec[0].MKA.Latest.KN != 3 ||
		len(got.MACsec[0].MKA.Live) != 1 || got.MACsec[0].MKA.Counters["mkpdus_sent"] != 50 {
		t.Errorf("JSON macsec mka = %+v", got.MACsec)
	}
	metrics := body(t, get(t, s.Handler(), "GET", "/metrics"))
	for _, want := range []string{
		`gvrouter_mka_counter_total{counter="invalid_icv",secy="ms1"} 0`,
		`gvrouter_mka_counter_total{counter="peer_timeouts",secy="ms1"} 1`,
		`gvrouter_mka_key_server{secy="ms1"} 1`,
		`gvrouter_mka_peers{list="live",secy="ms1"} 1`,
		`gvrouter_mka_peers{list="potential",secy="ms1"} 0`,
		`gvrouter_mka_latest_key_number{an="2",secy="ms1"} 3`,
		`gvrouter_mka_last_roll_timestamp_seconds{secy="ms1"} 1.7963028e+09`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
