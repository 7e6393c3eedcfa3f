package lab

import "testing"

func TestParseStatus(t *testing.T) {
	for _, tc := range []struct {
		name, body string
	}{
		{"snake", `{"version":"x","interfaces":[{"name":"lan","rx_packets":7,"tx_packets":3},{"name":"wan","rx_packets":9,"tx_packets":1}]}`},
		{"go", `{"Interfaces":[{"Name":"lan","RxPackets":7,"TxPackets":3},{"Name":"wan","RxPackets":9,"TxPackets":1}]}`},
		{"camel", `{"interfaces":[{"name":"lan","rxPackets":7,"txPackets":3},{"name":"wan","rxPackets":9,"txPackets":1}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus([]byte(tc.body))
			if err != nil {
				t.Fatalf("parseStatus() error: %v", err)
			}
			want := map[string]ifCounters{"lan": {7, 3}, "wan": {9, 1}}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("parseStatus()[%q] = %+v, want %+v", k, got[k], w)
				}
			}
		})
	}
	if _, err := parseStatus([]byte(`{"ports":[]}`)); err == nil {
		t.Errorf("parseStatus(no interfaces) = nil error, want error")
	}
}
