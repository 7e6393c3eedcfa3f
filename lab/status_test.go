package lab

import "testing"

func TestParseStatus(t *testing.T) {
	body := `{"version":"x","time":"2026-11-30T08:00:00Z","interfaces":[{"name":"lan","rx_packets":7,"tx_packets":3},{"name":"wan","rx_packets":9,"tx_packets":1}]}`
	got, at, err := parseStatusTime([]byte(body))
	if err != nil {
		t.Fatalf("parseStatusTime() error: %v", err)
	}
	want := map[string]ifCounters{"lan": {7, 3}, "wan": {9, 1}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("parseStatusTime()[%q] = %+v, want %+v", k, got[k], w)
		}
	}
	if at.IsZero() {
		t.Errorf("parseStatusTime() time is zero, want 2026-11-30T08:00:00Z")
	}
	if _, err := parseStatus([]byte(`{"ports":[]}`)); err == nil {
		t.Errorf("parseStatus(no interfaces) = nil error, want error")
	}
}

func TestPortDrivers(t *testing.T) {
	body := `{"ports":[{"name":"lan0","driver":"af_xdp","mode":"copy, native"},{"name":"wan0","driver":"af_packet"}]}`
	got, err := portDrivers([]byte(body))
	if err != nil {
		t.Fatalf("portDrivers() error: %v", err)
	}
	if got["lan0"] != "af_xdp" || got["wan0"] != "af_packet" || len(got) != 2 {
		t.Errorf("portDrivers() = %v, want lan0 af_xdp, wan0 af_packet", got)
	}
	if _, err := portDrivers([]byte(`{"ports":`)); err == nil {
		t.Error("portDrivers(truncated) = nil error, want error")
	}
}
