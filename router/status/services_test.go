package status_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
	"github.com/gvrouter/gvrouter/services/dhcp4server"
	"github.com/gvrouter/gvrouter/services/dnsforward"
)

// sampled is when newServer's second sample is taken: the page's "now".
var sampled = t0.Add(time.Second)

// servicesSnapshot is statustest.Example with the services of
// statustest.WithServices, their times relative to sampled.
func servicesSnapshot() status.Snapshot {
	return statustest.WithServices(statustest.Example(started), sampled)
}

// scrape returns the parsed /metrics of s.
func scrape(t *testing.T, s *status.Server) map[string]*dto.MetricFamily {
	t.Helper()
	res := get(t, s.Handler(), "GET", "/metrics")
	raw := body(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics status = %d, want 200:\n%s", res.StatusCode, raw)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, raw)
	}
	return fams
}

// labels builds a label set from name, value pairs.
func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestServicesJSON checks that the services sections survive the JSON
// round trip field for field, under snake_case names.
func TestServicesJSON(t *testing.T) {
	s, _, _ := newServer(t, servicesSnapshot())
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, key := range []string{
		`"dhcp_clients": [`, `"dhcp_servers": [`, `"dns": {`,
		`"address": "198.51.100.2/30"`, `"server": "198.51.100.1"`, `"routers": [`, `"last_error": ""`,
		`"renew": "2026-11-30T11:02:01Z"`, `"expiry": "2026-11-30T16:00:01Z"`, `"mtu": 1492`,
		`"pool_size": 150`, `"pool_used": 37`, `"pool_start": "192.168.1.100"`, `"lease_file_error": ""`,
		`"mac": "02:00:00:00:01:0a"`, `"hostname": "laptop"`, `"static": true`, `"state": "unused"`,
		`"cache_hits": 9000`, `"cache_entries": 812`, `"upstream_queries": 2900`, `"latency_count": 2900`,
		`"upstream_errors": {`, `"source": "dhcp"`, `"latency_buckets": [`, `"queries_per_second": 0`,
	} {
		if !strings.Contains(raw, key) {
			t.Errorf("JSON does not contain %s", key)
		}
	}
	// The unused static lease has no expiry: the key is left out.
	if strings.Contains(raw, `"expiry": "0001-01-01T00:00:00Z"`) {
		t.Errorf("JSON has a zero expiry, want it omitted")
	}
	var got status.Snapshot
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decoding JSON: %v", err)
	}
	want := s.Latest()
	if !reflect.DeepEqual(got.DHCPClients, want.DHCPClients) {
		t.Errorf("decoded dhcp_clients = %+v\nwant %+v", got.DHCPClients, want.DHCPClients)
	}
	if !reflect.DeepEqual(got.DHCPServers, want.DHCPServers) {
		t.Errorf("decoded dhcp_servers = %+v\nwant %+v", got.DHCPServers, want.DHCPServers)
	}
	if !reflect.DeepEqual(got.DNS, want.DNS) {
		t.Errorf("decoded dns = %+v\nwant %+v", got.DNS, want.DNS)
	}
	// The Server sorts leases by address.
	var order []string
	for _, l := range got.DHCPServers[0].Leases {
		order = append(order, l.Addr.String())
	}
	if w := "192.168.1.2 192.168.1.3 192.168.1.100 192.168.1.101"; strings.Join(order, " ") != w {
		t.Errorf("lease order = %v, want %s", order, w)
	}
}

// TestServicesNormalized checks that nil slices and maps of a Source
// encode as [] and {}, and that sorting the leases leaves the Source's
// slice alone.
func TestServicesNormalized(t *testing.T) {
	a := netip.MustParseAddr
	leases := []status.DHCPLease{
		{MAC: dhcp4server.MAC{2, 0, 0, 0, 0, 0x0b}, Addr: a("192.168.1.11")},
		{MAC: dhcp4server.MAC{2, 0, 0, 0, 0, 0x0a}, Addr: a("192.168.1.10")},
	}
	src := &aliasingSource{snap: status.Snapshot{
		DHCPClients: []status.DHCPClient{{Interface: "wan", Status: dhcp4client.Status{State: "selecting"}}},
		DHCPServers: []status.DHCPServer{{Interface: "lan", Status: dhcp4server.Status{Leases: leases}}},
		DNS:         &status.DNS{},
	}}
	s := status.New(src, nil)
	s.Sample()
	if got := src.snap.DHCPServers[0].Leases[0].Addr; got != a("192.168.1.11") {
		t.Errorf("Source's first lease after a sample = %v, want 192.168.1.11 (unsorted)", got)
	}
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	var got struct {
		DHCPClients []map[string]any `json:"dhcp_clients"`
		DHCPServers []map[string]any `json:"dhcp_servers"`
		DNS         map[string]any   `json:"dns"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	check := func(what string, m map[string]any, keys ...string) {
		for _, k := range keys {
			if m[k] == nil {
				t.Errorf("%s.%s = null, want [] or {}", what, k)
			}
		}
	}
	check("dhcp_clients[0]", got.DHCPClients[0], "routers", "routes", "dns", "counters", "drops")
	check("dhcp_servers[0]", got.DHCPServers[0], "leases", "counters", "drops")
	check("dns", got.DNS, "listen", "upstreams", "queries", "upstream_errors", "drops")
	if _, ok := got.DNS["latency_buckets"]; ok {
		t.Errorf("dns.latency_buckets present, want omitted when empty")
	}
}

// TestServicesDNSRate checks queries_per_second between two samples.
func TestServicesDNSRate(t *testing.T) {
	snap := status.Snapshot{DNS: &status.DNS{Status: dnsforward.Status{Queries: map[string]uint64{"udp": 100, "tcp": 10}}}}
	src := statustest.New(snap)
	clk := fakeclock.NewAt(t0)
	s := status.New(src, nil)
	s.SetClock(clk.Now)
	s.Sample()
	clk.Forward(2 * time.Second)
	snap.DNS = &status.DNS{Status: dnsforward.Status{Queries: map[string]uint64{"udp": 150, "tcp": 20}}}
	src.Set(snap)
	if got := s.Sample().DNS.Rates.QueriesPerSecond; got != 30 {
		t.Errorf("QueriesPerSecond over 60 queries in 2 s = %v, want 30", got)
	}
}

// TestServicesPage checks that each section reaches the page: the WAN
// lease with absolute and relative times, the lease table with pool use,
// and the DNS figures.
func TestServicesPage(t *testing.T) {
	s, _, _ := newServer(t, servicesSnapshot())
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{
		// WAN lease
		"<h2>WAN lease wan</h2>",
		`<span class="badge up">bound</span>`,
		`<td class="mono">198.51.100.2/30</td>`,
		`<tr><td>server</td><td class="mono">198.51.100.1</td></tr>`,
		"<div>203.0.113.0/24 via 198.51.100.1</div>",
		"198.51.100.53, 198.51.100.54",
		"isp.example", "<td>1492</td>",
		"2026-11-30 11:02:01 UTC (in 3h 2m 0s)",  // T1
		"2026-11-30 14:45:01 UTC (in 6h 45m 0s)", // T2
		"2026-11-30 16:00:01 UTC (in 8h 0m 0s)",  // expiry
		"2026-11-30 06:00:01 UTC (2h 0m 0s ago)", // acquired
		`<span class="mono">renew</span> 2`,
		`<span class="mono">wrong_xid</span> 2`,
		// DHCP leases
		"<h2>DHCP leases lan</h2>",
		"pool 37 of 150 in use",
		"192.168.1.100&ndash;192.168.1.249",
		"1 offered, 1 declined",
		`<td class="mono">02:00:00:00:01:0a</td>`, "<td>laptop</td>",
		"<td>static</td>", "<td>dynamic</td>", "<td>expired</td>", "<td>unused</td>",
		"(in 11h 0m 0s)", "(5m 0s ago)",
		`<span class="mono">wrong_magic_cookie</span> 3`,
		// DNS
		"<h2>DNS</h2>",
		"192.168.1.1:53", "198.51.100.53:53 <span class=\"sub\">dhcp</span>",
		"12,040", "tcp 40, udp 12,000",
		"74.8% hit", "9,000 hits, 3,040 misses", "812 of 10,000 entries",
		"mean latency 12.3 ms, 2 in flight",
		`<span class="mono">timeout</span> 4`,
		`<span class="mono">answer_mismatch</span> 1`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	// A drop reason at zero is not listed, and no lease is lost.
	for _, bad := range []string{`<span class="mono">malformed</span> 0`, `class="alert"`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
}

// TestServicesLeaseLost checks that a lost lease says so: a notice at
// the top of the page, a red state, no address, and in the metrics.
func TestServicesLeaseLost(t *testing.T) {
	snap := servicesSnapshot()
	c := &snap.DHCPClients[0]
	c.State = "selecting"
	c.Lease = nil // as the client reports it: no lease
	c.LastError = "lease lost at 12:00:01: expired"
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, want := range []string{
		"<section id=\"s-alerts\">\n<p class=\"alert\">WAN lease on wan: lease lost at 12:00:01: expired</p>",
		`<span class="badge down">selecting</span>`,
		`<tr><td>last error</td><td class="drops">lease lost at 12:00:01: expired</td></tr>`,
		`<tr><td>address</td><td class="mono"><span class="none">none</span></td></tr>`,
		`<tr><td>expiry</td><td><span class="none">none</span></td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	fams := scrape(t, s)
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gvrouter_dhcp_client_error", labels("interface", "wan"), 1},
		{"gvrouter_dhcp_client_state", labels("interface", "wan", "state", "selecting"), 1},
		{"gvrouter_dhcp_client_state", labels("interface", "wan", "state", "bound"), 0},
	} {
		if got, ok := value(fams, tt.name, tt.labels); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	for _, name := range []string{"gvrouter_dhcp_client_lease_info", "gvrouter_dhcp_client_lease_expiry_timestamp_seconds"} {
		if _, ok := fams[name]; ok {
			t.Errorf("metric %s present without a lease, want none", name)
		}
	}
}

// TestServicesPageEscapes checks that what clients and servers send
// (a hostname, a domain, an error text) is shown as text, never markup.
func TestServicesPageEscapes(t *testing.T) {
	snap := servicesSnapshot()
	snap.DHCPServers[0].Leases[0].Hostname = `<script>alert("x")</script>`
	// A MAC is bytes (dhcp4server.MAC), so it cannot carry markup.
	snap.DHCPServers[0].Leases[1].Hostname = `<img src=x onerror=alert(1)>`
	snap.DHCPServers[0].LeaseFileError = `<b>disk</b>`
	snap.DHCPClients[0].Domain = `"><iframe src=//evil>`
	snap.DHCPClients[0].LastError = `NAK: <svg onload=alert(1)>`
	snap.DHCPClients[0].Counters["<u>ev</u>"] = 1
	snap.DNS.Upstreams[0].Source = `<marquee>`
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, bad := range []string{"<script>", "<img", "<b>disk", "<iframe", "<svg", "<u>ev", "<marquee>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	for _, want := range []string{
		"<td>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</td>",
		"&lt;img src=x onerror=alert(1)&gt;",
		"lease file: &lt;b&gt;disk&lt;/b&gt;",
		"&#34;&gt;&lt;iframe src=//evil&gt;",
		"NAK: &lt;svg onload=alert(1)&gt;",
		"&lt;marquee&gt;",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain escaped %q", want)
		}
	}
}

// TestServicesAbsent checks that a router without the services shows no
// trace of them: no section, no JSON key, no metric.
func TestServicesAbsent(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, bad := range []string{"WAN lease", "DHCP leases", "<h2>DNS</h2>", `class="alert"`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q without the services", bad)
		}
	}
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, bad := range []string{`"dhcp_clients"`, `"dhcp_servers"`, `"dns"`} {
		if strings.Contains(raw, bad) {
			t.Errorf("JSON contains %s without the services", bad)
		}
	}
	for name := range scrape(t, s) {
		if strings.HasPrefix(name, "gvrouter_dhcp_") || strings.HasPrefix(name, "gvrouter_dns_") {
			t.Errorf("metric %s present without the services", name)
		}
	}
}

// TestServicesMetrics checks the names, types, labels and values of the
// services' metrics.
func TestServicesMetrics(t *testing.T) {
	s, _, _ := newServer(t, servicesSnapshot())
	fams := scrape(t, s)
	l := labels
	gauge, counter := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	tests := []struct {
		name   string
		labels map[string]string
		typ    dto.MetricType
		want   float64
	}{
		{"gvrouter_dhcp_client_state", l("interface", "wan", "state", "bound"), gauge, 1},
		{"gvrouter_dhcp_client_state", l("interface", "wan", "state", "renewing"), gauge, 0},
		{"gvrouter_dhcp_client_state", l("interface", "wan", "state", "init-reboot"), gauge, 0},
		{"gvrouter_dhcp_client_lease_info", l("interface", "wan", "address", "198.51.100.2/30", "server", "198.51.100.1"), gauge, 1},
		{"gvrouter_dhcp_client_error", l("interface", "wan"), gauge, 0},
		{"gvrouter_dhcp_client_lease_acquired_timestamp_seconds", l("interface", "wan"), gauge, float64(sampled.Add(-2 * time.Hour).Unix())},
		{"gvrouter_dhcp_client_lease_renew_timestamp_seconds", l("interface", "wan"), gauge, float64(sampled.Add(3*time.Hour + 2*time.Minute).Unix())},
		{"gvrouter_dhcp_client_lease_rebind_timestamp_seconds", l("interface", "wan"), gauge, float64(sampled.Add(6*time.Hour + 45*time.Minute).Unix())},
		{"gvrouter_dhcp_client_lease_expiry_timestamp_seconds", l("interface", "wan"), gauge, float64(sampled.Add(8 * time.Hour).Unix())},
		{"gvrouter_dhcp_client_events_total", l("interface", "wan", "event", "request"), counter, 3},
		{"gvrouter_dhcp_client_drops_total", l("interface", "wan", "reason", "wrong_xid"), counter, 2},

		{"gvrouter_dhcp_server_pool_size", l("interface", "lan"), gauge, 150},
		{"gvrouter_dhcp_server_pool_used", l("interface", "lan"), gauge, 37},
		{"gvrouter_dhcp_server_pool_offered", l("interface", "lan"), gauge, 1},
		{"gvrouter_dhcp_server_pool_declined", l("interface", "lan"), gauge, 1},
		{"gvrouter_dhcp_server_leases", l("interface", "lan", "kind", "dynamic", "state", "bound"), gauge, 1},
		{"gvrouter_dhcp_server_leases", l("interface", "lan", "kind", "dynamic", "state", "expired"), gauge, 1},
		{"gvrouter_dhcp_server_leases", l("interface", "lan", "kind", "static", "state", "bound"), gauge, 1},
		{"gvrouter_dhcp_server_leases", l("interface", "lan", "kind", "static", "state", "unused"), gauge, 1},
		{"gvrouter_dhcp_server_events_total", l("interface", "lan", "event", "ack"), counter, 118},
		{"gvrouter_dhcp_server_events_total", l("interface", "lan", "event", "nak"), counter, 2},
		{"gvrouter_dhcp_server_drops_total", l("interface", "lan", "reason", "wrong_magic_cookie"), counter, 3},
		{"gvrouter_dhcp_server_drops_total", l("interface", "lan", "reason", "malformed"), counter, 0},
		{"gvrouter_dhcp_server_lease_file_error", l("interface", "lan"), gauge, 0},

		{"gvrouter_dns_queries_total", l("transport", "udp"), counter, 12_000},
		{"gvrouter_dns_queries_total", l("transport", "tcp"), counter, 40},
		{"gvrouter_dns_cache_hits_total", l(), counter, 9_000},
		{"gvrouter_dns_cache_misses_total", l(), counter, 3_040},
		{"gvrouter_dns_cache_entries", l(), gauge, 812},
		{"gvrouter_dns_cache_max_entries", l(), gauge, 10_000},
		{"gvrouter_dns_local_answers_total", l(), counter, 150},
		{"gvrouter_dns_in_flight_queries", l(), gauge, 2},
		{"gvrouter_dns_upstream_queries_total", l(), counter, 2_900},
		{"gvrouter_dns_upstream_errors_total", l("kind", "timeout"), counter, 4},
		{"gvrouter_dns_upstream_errors_total", l("kind", "servfail"), counter, 1},
		{"gvrouter_dns_drops_total", l("reason", "answer_mismatch"), counter, 1},
		{"gvrouter_dns_upstream_info", l("address", "198.51.100.53:53", "source", "dhcp"), gauge, 1},
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

	// The latency histogram: the Snapshot's buckets and the implicit +Inf.
	f, ok := fams["gvrouter_dns_upstream_latency_seconds"]
	if !ok || f.GetType() != dto.MetricType_HISTOGRAM || len(f.GetMetric()) != 1 {
		t.Fatalf("gvrouter_dns_upstream_latency_seconds = %v, want one histogram", f)
	}
	h := f.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 2_900 || fmt.Sprintf("%.4f", h.GetSampleSum()) != "35.6700" {
		t.Errorf("latency count, sum = %d, %v; want 2900, 35.67", h.GetSampleCount(), h.GetSampleSum())
	}
	var got []string
	for _, b := range h.GetBucket() {
		got = append(got, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	if w := "0.005:1000 0.025:2500 0.1:2880 1:2899 +Inf:2900"; strings.Join(got, " ") != w {
		t.Errorf("latency buckets = %v, want %s", got, w)
	}

	// No series per lease or per client: no MAC, address or hostname of
	// a lease in any label.
	for name, f := range fams {
		if !strings.HasPrefix(name, "gvrouter_dhcp_server_") {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v := lp.GetValue(); strings.Contains(v, "192.168.1.") || strings.Contains(v, "02:00:00:00:01") || v == "laptop" {
					t.Errorf("%s has a per-lease label %s=%q", name, lp.GetName(), v)
				}
			}
		}
	}
}

// TestServicesMetricsHistogramWithoutBuckets checks that sum and count
// alone give a histogram with only the +Inf bucket.
func TestServicesMetricsHistogramWithoutBuckets(t *testing.T) {
	s, _, _ := newServer(t, status.Snapshot{DNS: &status.DNS{Status: dnsforward.Status{LatencySum: 1.5, LatencyCount: 3}}})
	f := scrape(t, s)["gvrouter_dns_upstream_latency_seconds"]
	h := f.GetMetric()[0].GetHistogram()
	if b := h.GetBucket(); h.GetSampleCount() != 3 || h.GetSampleSum() != 1.5 || len(b) != 1 || b[0].GetCumulativeCount() != 3 {
		t.Errorf("histogram = %v, want count 3, sum 1.5, one +Inf bucket of 3", h)
	}
}

// TestServicesMetricsBadInput checks that repeated interfaces and a label
// value that is not UTF-8 neither break the scrape nor panic.
func TestServicesMetricsBadInput(t *testing.T) {
	snap := servicesSnapshot()
	snap.DHCPClients = append(snap.DHCPClients, snap.DHCPClients[0])
	snap.DHCPServers = append(snap.DHCPServers, snap.DHCPServers[0], status.DHCPServer{Interface: "bad\xff", Status: dhcp4server.Status{PoolSize: 9}})
	snap.DNS.Upstreams = append(snap.DNS.Upstreams, snap.DNS.Upstreams[0])
	s, _, _ := newServer(t, snap)
	fams := scrape(t, s)
	if got, ok := value(fams, "gvrouter_dhcp_server_pool_size", labels("interface", "lan")); !ok || got != 150 {
		t.Errorf("gvrouter_dhcp_server_pool_size{lan} = %v (present %v), want 150", got, ok)
	}
	if n := len(fams["gvrouter_dhcp_client_lease_info"].GetMetric()); n != 1 {
		t.Errorf("gvrouter_dhcp_client_lease_info series = %d, want 1", n)
	}
	if n := len(fams["gvrouter_dns_upstream_info"].GetMetric()); n != 2 {
		t.Errorf("gvrouter_dns_upstream_info series = %d, want 2", n)
	}
}

// TestServicesPageLeaseCap checks that a huge lease table is cut at
// 1,000 rows on the page and whole in the JSON.
func TestServicesPageLeaseCap(t *testing.T) {
	snap := status.Snapshot{DHCPServers: []status.DHCPServer{{Interface: "lan", Status: dhcp4server.Status{PoolSize: 2000, PoolUsed: 1005}}}}
	for i := range 1005 {
		snap.DHCPServers[0].Leases = append(snap.DHCPServers[0].Leases, status.DHCPLease{
			MAC:  dhcp4server.MAC{2, 0, 0, 0, byte(i >> 8), byte(i)},
			Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}),
		})
	}
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	if !strings.Contains(page, "and 5 more leases") {
		t.Errorf("page does not say %q", "and 5 more leases")
	}
	if n := strings.Count(page, `<td class="mono">02:00:00:00:`); n != 1000 {
		t.Errorf("lease rows on the page = %d, want 1000", n)
	}
	if strings.Contains(page, "10.0.3.236") {
		t.Errorf("page lists the 1,005th lease, want it cut")
	}
	var got status.Snapshot
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	if n := len(got.DHCPServers[0].Leases); n != 1005 {
		t.Errorf("JSON leases = %d, want 1005", n)
	}
}

func TestFormatServices(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name, got, want string
	}{
		{"FormatWhen(now, zero)", status.FormatWhen(now, time.Time{}), ""},
		{"FormatWhen(now, now+3h2m)", status.FormatWhen(now, now.Add(3*time.Hour+2*time.Minute)), "2026-11-30 11:02:00 UTC (in 3h 2m 0s)"},
		{"FormatWhen(now, now-90s)", status.FormatWhen(now, now.Add(-90*time.Second)), "2026-11-30 07:58:30 UTC (1m 30s ago)"},
		{"FormatWhen(now, now)", status.FormatWhen(now, now), "2026-11-30 08:00:00 UTC (in 0s)"},
		{"FormatWhen(now, now+1ms)", status.FormatWhen(now, now.Add(time.Millisecond)), "2026-11-30 08:00:00 UTC (in 0s)"},
		{"FormatWhen(now, +2d in CET)", status.FormatWhen(now, now.Add(48*time.Hour).In(time.FixedZone("CET", 3600))), "2026-12-02 08:00:00 UTC (in 2d 0h 0m 0s)"},
		{"FormatLatency(0)", status.FormatLatency(0), "0 ms"},
		{"FormatLatency(0.00085)", status.FormatLatency(0.00085), "850 µs"},
		{"FormatLatency(0.0123)", status.FormatLatency(0.0123), "12.3 ms"},
		{"FormatLatency(1.2)", status.FormatLatency(1.2), "1.20 s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}
