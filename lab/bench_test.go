package lab

import (
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{156, 806, 813, 553, 525}, 553},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Errorf("median(%v) reordered its argument", in)
			}
		}
	}
}

func TestParseIperf(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       float64
		wantErr    string
	}{
		{"ok", `{"start":{},"intervals":[],"end":{"sum_sent":{"bits_per_second":2.1e9,"retransmits":3},"sum_received":{"bits_per_second":2e9}}}`, 2e9, ""},
		{"error", `{"start":{},"end":{},"error":"unable to connect to server: Connection refused"}`, 0, "Connection refused"},
		{"empty end", `{"end":{}}`, 0, "no receiver throughput"},
		{"not json", `iperf3: error`, 0, "iperf3 JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseIperf([]byte(tc.json))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseIperf() = %v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseIperf() = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseIperfIntervals(t *testing.T) {
	got, err := parseIperfIntervals([]byte(`{"intervals":[` +
		`{"sum":{"bits_per_second":1e6,"omitted":true}},` +
		`{"sum":{"bits_per_second":2e6,"omitted":false}},` +
		`{"sum":{"bits_per_second":3e6}}],"end":{}}`))
	if err != nil || len(got) != 2 || got[0] != 2e6 || got[1] != 3e6 {
		t.Errorf("parseIperfIntervals() = %v, %v; want [2e6 3e6] (the omitted second left out)", got, err)
	}
	if _, err := parseIperfIntervals([]byte(`{"intervals":[{"sum":{"bits_per_second":1e6,"omitted":true}}]}`)); err == nil {
		t.Error("parseIperfIntervals() of omitted intervals only: no error")
	}
	if _, err := parseIperfIntervals([]byte(`{"error":"the server is busy"}`)); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("parseIperfIntervals() of an error: %v", err)
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{
		{1, 2, "0.50"},
		{3e9, 1e9, "3.00"},
		{0, 1, "n/a"},
		{1, 0, "n/a"},
	} {
		if got := ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}
