package status_test

import (
	"encoding/json"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// plainSource is a Source without a conntrack table.
type plainSource struct{ snap status.Snapshot }

func (p plainSource) Snapshot() status.Snapshot { return p.snap }

func TestConntrackSummary(t *testing.T) {
	snap := statustest.Example(started)
	src := statustest.New(snap)
	clk := fakeclock.NewAt(t0)
	s := status.New(src, nil)
	s.SetClock(clk.Now)
	s.Sample()
	clk.Forward(2 * time.Second)
	next := statustest.Clone(snap)
	next.Conntrack.FastPathHits += 2000
	next.Conntrack.SlowPath["miss"] += 200
	next.Conntrack.Events["created"] += 20
	src.Set(next)
	s.Sample()

	c := s.Latest().Conntrack
	want := status.ConntrackRates{FastPathPacketsPerSecond: 1000, SlowPathPacketsPerSecond: 100, NewFlowsPerSecond: 10}
	if c.Rates != want {
		t.Errorf("Rates = %+v, want %+v", c.Rates, want)
	}
	if r := float64(9_002_000) / float64(9_002_000+1_000_200); math.Abs(c.FastPathRatio-r) > 1e-9 {
		t.Errorf("FastPathRatio = %v, want %v", c.FastPathRatio, r)
	}
	if c.States[0].Proto != "icmp" || c.States[len(c.States)-1].State != "UNREPLIED" {
		t.Errorf("States not sorted by proto, state: %+v", c.States)
	}

	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, key := range []string{`"conntrack": {`, `"max": 65536`, `"fastpath_hits": 9002000`, `"input": 56`,
		`"nat_ports": [`, `"new_flows_per_second": 10`, `"state": "ESTABLISHED"`} {
		if !strings.Contains(raw, key) {
			t.Errorf("/api/status does not contain %s", key)
		}
	}
	// Without conntrack the key is absent.
	bare := status.New(plainSource{status.Snapshot{}}, nil)
	if raw := body(t, get(t, bare.Handler(), "GET", "/api/status")); strings.Contains(raw, "conntrack") {
		t.Errorf("/api/status without conntrack mentions it:\n%s", raw)
	}
}

func TestConntrackPageStates(t *testing.T) {
	snap := status.Snapshot{Conntrack: &status.Conntrack{Max: 10, States: []status.FlowCount{
		{Proto: "tcp", State: "SYN_SENT", Flows: 0}, {Proto: "udp", State: "REPLIED", Flows: 3},
	}}}
	s := status.New(statustest.New(snap), nil)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	if strings.Contains(page, "SYN_SENT") || !strings.Contains(page, `<td class="mono">REPLIED</td><td class="num">3</td>`) {
		t.Error("page lists states with no flows, or not the one in use")
	}
	snap.Conntrack.States[1].Flows = 0
	s = status.New(statustest.New(snap), nil)
	if page := body(t, get(t, s.Handler(), "GET", "/")); !strings.Contains(page, `<td colspan="3" class="empty">no flows</td>`) {
		t.Error("page with no flows does not say so")
	}
}

func TestConntrackEmptyMaps(t *testing.T) {
	s := status.New(statustest.New(status.Snapshot{Conntrack: &status.Conntrack{Max: 10}}), nil)
	raw := body(t, get(t, s.Handler(), "GET", "/api/status"))
	for _, key := range []string{`"slowpath": {}`, `"drops": {}`, `"events": {}`, `"states": []`, `"nat_ports": []`, `"fastpath_ratio": 0`} {
		if !strings.Contains(raw, key) {
			t.Errorf("/api/status does not contain %s:\n%s", key, raw)
		}
	}
}

func getPage(t *testing.T, h http.Handler, path string) (status.ConntrackPage, int) {
	t.Helper()
	res := get(t, h, "GET", path)
	b := body(t, res)
	var p status.ConntrackPage
	if res.StatusCode == http.StatusOK {
		dec := json.NewDecoder(strings.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	}
	return p, res.StatusCode
}

func TestConntrackTable(t *testing.T) {
	s, src, _ := newServer(t, statustest.Example(started))
	src.SetFlows(statustest.ExampleFlows(250))
	h := s.Handler()
	for _, tt := range []struct {
		path              string
		code              int
		total, page, n    int
		pages             int
		firstSrc, lastSrc string
	}{
		{"/api/conntrack", 200, 250, 1, 100, 3, "192.168.1.10:40000", "192.168.1.29:40219"},
		{"/api/conntrack?page=3", 200, 250, 3, 50, 3, "", ""},
		{"/api/conntrack?page=4", 200, 250, 4, 0, 3, "", ""},
		{"/api/conntrack?addr=192.168.1.10", 200, 5, 1, 5, 1, "192.168.1.10:40000", "192.168.1.10:40200"},
		{"/api/conntrack?addr=192.168.1.0/28", 200, 30, 1, 30, 1, "", ""}, // .10 to .15, 5 flows each
		{"/api/conntrack?addr=198.51.100.2", 200, 250, 1, 100, 3, "", ""}, // reply destination (the NAT address)
		{"/api/conntrack?addr=10.0.0.1", 200, 0, 1, 0, 1, "", ""},
		{"/api/conntrack?addr=%3A%3Affff%3A192.168.1.10", 200, 5, 1, 5, 1, "", ""}, // IPv4-mapped
		{"/api/conntrack?addr=bogus", 400, 0, 0, 0, 0, "", ""},
		{"/api/conntrack?page=0", 400, 0, 0, 0, 0, "", ""},
		{"/api/conntrack?page=x", 400, 0, 0, 0, 0, "", ""},
	} {
		p, code := getPage(t, h, tt.path)
		if code != tt.code {
			t.Errorf("GET %s = %d, want %d", tt.path, code, tt.code)
			continue
		}
		if code != 200 {
			continue
		}
		if p.Total != tt.total || p.Page != tt.page || len(p.Flows) != tt.n || p.Pages != tt.pages || p.PerPage != status.FlowsPerPage {
			t.Errorf("GET %s = total %d page %d/%d per %d with %d flows; want total %d page %d/%d with %d",
				tt.path, p.Total, p.Page, p.Pages, p.PerPage, len(p.Flows), tt.total, tt.page, tt.pages, tt.n)
		}
		if tt.firstSrc != "" && (p.Flows[0].Src.String() != tt.firstSrc || p.Flows[len(p.Flows)-1].Src.String() != tt.lastSrc) {
			t.Errorf("GET %s: flows %s .. %s, want %s .. %s (sorted by source)", tt.path, p.Flows[0].Src, p.Flows[len(p.Flows)-1].Src, tt.firstSrc, tt.lastSrc)
		}
	}
	p, _ := getPage(t, h, "/api/conntrack?addr=192.168.1.10")
	f := p.Flows[0]
	if f.ReplyDst != netip.MustParseAddrPort("198.51.100.2:40000") || !f.Assured || !f.Offloaded || f.BytesReply != 20000 {
		t.Errorf("flow = %+v", f)
	}

	// A Source without a table: 404.
	bare := status.New(plainSource{status.Snapshot{}}, nil)
	if res := get(t, bare.Handler(), "GET", "/api/conntrack"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /api/conntrack without conntrack = %d, want 404", res.StatusCode)
	}
	if res := get(t, h, "POST", "/api/conntrack"); res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/conntrack = %d, want 405", res.StatusCode)
	}
}

func TestConntrackPage(t *testing.T) {
	s, src, _ := newServer(t, statustest.Example(started))
	src.SetFlows(statustest.ExampleFlows(250))
	h := s.Handler()
	page := body(t, get(t, h, "GET", "/"))
	for _, want := range []string{
		"<h2>Connection tracking</h2>", "<h2>NAT ports</h2>", "<h2>Conntrack table</h2>",
		"412", "of 65,536", "90.0% hit", `<span class="mono">miss</span> 950,000`, `<span class="mono">input</span> 56`,
		`<td class="mono">tcp</td><td class="mono">ESTABLISHED</td><td class="num">310</td>`,
		`<td class="mono">198.51.100.2</td><td class="mono">tcp</td><td class="num">330</td>`,
		"250 flows, page 1 of 3", `href="?addr=&amp;page=2"`,
		"192.168.1.10:40000 &rarr; 203.0.113.7:443", "203.0.113.7:443 &rarr; 198.51.100.2:40000", "ASSURED OFFLOAD",
		`href="api/conntrack"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
	if strings.Contains(page, "previous") {
		t.Error("page 1 links to a previous page")
	}
	page = body(t, get(t, h, "GET", "/?addr=192.168.1.0/24&page=2"))
	for _, want := range []string{"250 flows matching <span class=\"mono\">192.168.1.0/24</span>, page 2 of 3",
		`href="?addr=192.168.1.0%2f24&amp;page=1">previous`, `href="?addr=192.168.1.0%2f24&amp;page=3">next`} {
		if !strings.Contains(page, want) {
			t.Errorf("page 2 does not contain %q", want)
		}
	}
	page = body(t, get(t, h, "GET", "/?addr=%3Cscript%3E"))
	if strings.Contains(page, "<script>") || !strings.Contains(page, "conntrack table: bad addr &#34;&lt;script&gt;&#34;") {
		t.Errorf("bad addr: page does not show an escaped error")
	}
	// Past pageTableAuto flows the table waits for ?table=1.
	big := statustest.Example(started)
	big.Conntrack.Flows = 5000
	src.Set(big)
	s.Sample()
	page = body(t, get(t, h, "GET", "/"))
	if strings.Contains(page, "<h2>Conntrack table</h2>") || !strings.Contains(page, `<a href="?table=1">Show the conntrack table</a>`) {
		t.Error("a 5,000-flow table is shown unasked, or without a link")
	}
	page = body(t, get(t, h, "GET", "/?table=1"))
	if !strings.Contains(page, "<h2>Conntrack table</h2>") || strings.Contains(page, "Show the conntrack table") {
		t.Error("?table=1 does not show the table")
	}
	// No conntrack section: no table either.
	snap := statustest.Example(started)
	snap.Conntrack = nil
	bare := status.New(plainSource{snap}, nil)
	if page := body(t, get(t, bare.Handler(), "GET", "/")); strings.Contains(page, "Connection tracking") || strings.Contains(page, "Conntrack table") {
		t.Error("page without conntrack shows its sections")
	}
}

func TestConntrackMetrics(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	raw := body(t, get(t, s.Handler(), "GET", "/metrics"))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gvrouter_conntrack_flows", map[string]string{"proto": "tcp", "state": "ESTABLISHED"}, 310},
		{"gvrouter_conntrack_flows", map[string]string{"proto": "udp", "state": "UNREPLIED"}, 16},
		{"gvrouter_conntrack_max", map[string]string{}, 65536},
		{"gvrouter_conntrack_assured_flows", map[string]string{}, 380},
		{"gvrouter_conntrack_offloaded_flows", map[string]string{}, 301},
		{"gvrouter_fastpath_hits_total", map[string]string{}, 9_000_000},
		{"gvrouter_fastpath_slow_total", map[string]string{"reason": "fin_rst"}, 40_000},
		{"gvrouter_nat_drops_total", map[string]string{"reason": "unsolicited"}, 1234},
		{"gvrouter_conntrack_events_total", map[string]string{"event": "created"}, 52_000},
		{"gvrouter_nat_ports", map[string]string{"address": "198.51.100.2", "proto": "udp"}, 70},
		{"gvrouter_nat_port_flows", map[string]string{"address": "198.51.100.2", "proto": "tcp"}, 334},
	} {
		if v, ok := value(fams, tt.name, tt.labels); !ok || v != tt.want {
			t.Errorf("%s%v = %v, %v; want %v", tt.name, tt.labels, v, ok, tt.want)
		}
	}
	// Without conntrack: no conntrack series.
	snap := statustest.Example(started)
	snap.Conntrack = nil
	bare := status.New(statustest.New(snap), nil)
	if raw := body(t, get(t, bare.Handler(), "GET", "/metrics")); strings.Contains(raw, "gvrouter_conntrack_max ") {
		t.Error("/metrics without conntrack has gvrouter_conntrack_max")
	}
}

func TestBuildPage(t *testing.T) {
	ap := netip.MustParseAddrPort
	flows := []status.Flow{
		{Proto: "udp", Src: ap("10.0.0.2:1"), Dst: ap("10.0.0.9:53")},
		{Proto: "tcp", Src: ap("10.0.0.3:1"), Dst: ap("10.0.0.9:80")},
		{Proto: "tcp", Src: ap("10.0.0.1:2"), Dst: ap("10.0.0.9:80")},
		{Proto: "tcp", Src: ap("10.0.0.1:1"), Dst: ap("10.0.0.9:81")},
		{Proto: "icmpv6", Src: ap("[fd00::1]:7"), Dst: ap("[fd00::2]:7")},
	}
	q, err := status.ParseTableQuery("", "")
	if err != nil {
		t.Fatal(err)
	}
	p := status.BuildPage(flows, q)
	var got []string
	for _, f := range p.Flows {
		got = append(got, f.Proto+" "+f.Src.String())
	}
	want := "icmpv6 [fd00::1]:7,tcp 10.0.0.1:1,tcp 10.0.0.1:2,tcp 10.0.0.3:1,udp 10.0.0.2:1"
	if strings.Join(got, ",") != want {
		t.Errorf("order = %v, want %s", got, want)
	}
	if flows[0].Proto != "udp" {
		t.Error("BuildPage reordered its input")
	}
	q, _ = status.ParseTableQuery("fd00::/64", "1")
	if p := status.BuildPage(flows, q); p.Total != 1 || p.Addr != "fd00::/64" {
		t.Errorf("IPv6 prefix filter: %+v", p)
	}
}
