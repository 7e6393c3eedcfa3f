package status_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestMACsecSection checks that a SecY reaches the page (the `ip macsec
// show` view and its counters, zeros included), the JSON and the metrics.
func TestMACsecSection(t *testing.T) {
	snap := status.Snapshot{
		Interfaces: []status.Interface{{Name: "ms1", Port: "link", State: "up", MTU: 1468}},
		MACsec: []status.MACsec{{
			Name: "ms1", On: "link", SCI: "0200000000010001", Cipher: "gcm-aes-256", Encrypt: true, Protect: true,
			SendSCI: true, Replay: true, Validate: "strict", EncodingSA: 1,
			Counters: map[string]uint64{"InPktsBadTag": 0, "OutPktsTooLong": 2},
			TXSC:     map[string]uint64{"OutPktsEncrypted": 10},
			TXSA:     []status.MACsecSA{{AN: 1, State: "on", NextPN: 11, KeyID: "01", Counters: map[string]uint64{"OutPktsEncrypted": 10}}},
			RXSC: []status.MACsecRXSC{{SCI: "0200000000020001", Counters: map[string]uint64{"InPktsOK": 7, "InPktsLate": 0},
				SA: []status.MACsecSA{{AN: 0, State: "on", NextPN: 8, KeyID: "02", Counters: map[string]uint64{"InPktsOK": 7}}}}},
			WorkerFrames: []uint64{4, 6, 0},
		}},
	}
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{
		"<h2>MACsec ms1</h2>",
		"sci 0200000000010001 cipher gcm-aes-256 encrypt on protect on send_sci on end_station off scb off replay on window 0 validate strict encodingsa 1",
		"1: PN 11, state on, key 01",
		"0200000000020001<br>0: PN 8, state on, key 02",
		`<span class="mono">InPktsLate</span> 0`,
		`<span class="mono">OutPktsTooLong</span> 2`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	var got struct {
		MACsec []map[string]any `json:"macsec"`
	}
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.MACsec) != 1 || got.MACsec[0]["cipher"] != "gcm-aes-256" || got.MACsec[0]["encoding_sa"] != 1.0 {
		t.Errorf("JSON macsec = %v", got.MACsec)
	}
	metrics := body(t, get(t, s.Handler(), "GET", "/metrics"))
	for _, want := range []string{
		`gvrouter_macsec_counter_total{an="",counter="InPktsLate",sci="0200000000020001",scope="rx_sc",secy="ms1"} 0`,
		`gvrouter_macsec_counter_total{an="1",counter="OutPktsEncrypted",sci="0200000000010001",scope="tx_sa",secy="ms1"} 10`,
		`gvrouter_macsec_next_pn{an="0",dir="rx",key_id="02",sci="0200000000020001",secy="ms1"} 8`,
		`gvrouter_macsec_worker_frames_total{secy="ms1",worker="1"} 6`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
