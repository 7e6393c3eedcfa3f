package status_test

import (
	"net/http"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// value returns the value of the sample of family name whose labels are
// exactly labels, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	res := get(t, s.Handler(), "GET", "/metrics")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics status = %d, want 200", res.StatusCode)
	}
	raw := body(t, res)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, raw)
	}
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name   string
		labels map[string]string
		typ    dto.MetricType
		want   float64
	}{
		{"gvrouter_interface_rx_packets_total", l("interface", "lan"), dto.MetricType_COUNTER, 1_235_567},
		{"gvrouter_interface_tapped_total", l("interface", "lan"), dto.MetricType_COUNTER, 42},
		{"gvrouter_interface_rx_bytes_total", l("interface", "lan"), dto.MetricType_COUNTER, 987_779_321},
		{"gvrouter_interface_tx_packets_total", l("interface", "lan"), dto.MetricType_COUNTER, 2_346_178},
		{"gvrouter_interface_tx_bytes_total", l("interface", "lan"), dto.MetricType_COUNTER, 3_211_237_654},
		{"gvrouter_interface_drops_total", l("interface", "lan", "reason", "no_route"), dto.MetricType_COUNTER, 12},
		{"gvrouter_interface_drops_total", l("interface", "wan", "reason", "martian_source"), dto.MetricType_COUNTER, 41},
		{"gvrouter_interface_up", l("interface", "lan"), dto.MetricType_GAUGE, 1},
		{"gvrouter_interface_up", l("interface", "guest"), dto.MetricType_GAUGE, 0},
		{"gvrouter_interface_rx_bits_per_second", l("interface", "lan"), dto.MetricType_GAUGE, 1e6},
		{"gvrouter_interface_tx_bits_per_second", l("interface", "lan"), dto.MetricType_GAUGE, 2e6},
		{"gvrouter_interface_rx_packets_per_second", l("interface", "wan"), dto.MetricType_GAUGE, 1000},
		{"gvrouter_interface_tx_packets_per_second", l("interface", "wan"), dto.MetricType_GAUGE, 500},
		{"gvrouter_port_rx_packets_total", l("port", "eth0"), dto.MetricType_COUNTER, 1_235_600},
		{"gvrouter_port_tx_bytes_total", l("port", "eth1"), dto.MetricType_COUNTER, 905_250_000},
		{"gvrouter_port_drops_total", l("port", "eth0", "reason", "ring_full"), dto.MetricType_COUNTER, 7},
		{"gvrouter_port_up", l("port", "eth2"), dto.MetricType_GAUGE, 0},
		{"gvrouter_port_rx_bits_per_second", l("port", "eth0"), dto.MetricType_GAUGE, 1e6},
		{"gvrouter_port_driver_info", l("port", "eth0", "driver", "af_xdp", "mode", "zero-copy, native"), dto.MetricType_GAUGE, 1},
		{"gvrouter_port_tx_zero_copy_total", l("port", "eth0"), dto.MetricType_COUNTER, 2_300_000},
		{"gvrouter_port_tx_copied_total", l("port", "eth0"), dto.MetricType_COUNTER, 45_700},
		{"gvrouter_port_umem_shared_ports", l("port", "eth0", "umem", "1"), dto.MetricType_GAUGE, 1},
		{"gvrouter_port_umem_frames", l("port", "eth0", "place", "lent"), dto.MetricType_GAUGE, 64},
		{"gvrouter_port_aqm_frames_total", l("port", "eth1", "event", "ecn_marked"), dto.MetricType_COUNTER, 1_033},
		{"gvrouter_port_aqm_frames_total", l("port", "eth1", "event", "dropped"), dto.MetricType_COUNTER, 412},
		{"gvrouter_port_aqm_frames_total", l("port", "eth1", "event", "copied"), dto.MetricType_COUNTER, 1_200},
		{"gvrouter_port_aqm_backlog_frames", l("port", "eth1"), dto.MetricType_GAUGE, 37},
		{"gvrouter_port_aqm_max_sojourn_seconds", l("port", "eth1"), dto.MetricType_GAUGE, 0.0064},
		{"gvrouter_port_drops_total", l("port", "eth1", "reason", "aqm"), dto.MetricType_COUNTER, 412},
		{"gvrouter_uptime_seconds", l(), dto.MetricType_GAUGE, 93_788},
		{"gvrouter_build_info", l("version", "v0.1.0", "build", "2026-11-30T07:00:00Z 3f2c1ab"), dto.MetricType_GAUGE, 1},
	}
	for _, tt := range tests {
		got, ok := value(fams, tt.name, tt.labels)
		if !ok {
			t.Errorf("no sample %s%v", tt.name, tt.labels)
			continue
		}
		if got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
		if typ := fams[tt.name].GetType(); typ != tt.typ {
			t.Errorf("%s type = %v, want %v", tt.name, typ, tt.typ)
		}
	}
	// A reason with no drops on an interface yields no sample for it.
	if _, ok := value(fams, "gvrouter_interface_drops_total", l("interface", "guest", "reason", "no_route")); ok {
		t.Errorf("gvrouter_interface_drops_total for guest/no_route exists, want none")
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Errorf("no go_goroutines: Go collector missing")
	}
}

// TestMetricsDuplicateNames checks that a Source listing one name twice
// does not break the scrape.
func TestMetricsDuplicateNames(t *testing.T) {
	snap := statustest.Example(started)
	snap.Interfaces = append(snap.Interfaces, snap.Interfaces[0])
	snap.Ports = append(snap.Ports, snap.Ports[0])
	s, _, _ := newServer(t, snap)
	res := get(t, s.Handler(), "GET", "/metrics")
	raw := body(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics status = %d, want 200:\n%s", res.StatusCode, raw)
	}
	var lines []string
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, `gvrouter_interface_rx_packets_total{interface="lan"}`) {
			lines = append(lines, line)
		}
	}
	sort.Strings(lines)
	if want := []string{`gvrouter_interface_rx_packets_total{interface="lan"} 1.235567e+06`}; strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lan rx packets lines = %q, want %q", lines, want)
	}
}
