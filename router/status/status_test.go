package status_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

var demoPath = flag.String("status.demo", "", "write the demo page (two samples of statustest.Example) to this file")

// t0 is the fake clock's start; started is when the fake router started.
var (
	t0      = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	started = t0.Add(-(26*time.Hour + 3*time.Minute + 7*time.Second))
)

// newServer returns a Server over statustest.Example that has taken two
// samples one second apart, in which every interface and port received
// 125,000 bytes in 1,000 packets and sent 250,000 bytes in 500 packets:
// 1 Mbit/s and 1000 pkt/s in, 2 Mbit/s and 500 pkt/s out.
func newServer(t *testing.T, snap status.Snapshot) (*status.Server, *statustest.Source, *fakeclock.Clock) {
	t.Helper()
	src := statustest.New(snap)
	clk := fakeclock.NewAt(t0)
	s := status.New(src, nil)
	s.SetClock(clk.Now)
	s.Sample()
	clk.Forward(time.Second)
	src.Set(statustest.Advance(snap, 1000, 125_000, 500, 250_000))
	s.Sample()
	return s, src, clk
}

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	req.Host = "localhost" // httptest's example.com would be refused (host.go)
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// body returns the response body. For the HTML page it leaves out the
// page's script (page.js), whose source mentions every section: the
// tests here check what the templates rendered, the browser test
// (browser_test.go) what the script does.
func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	s := string(b)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		if i, j := strings.Index(s, "<script>"), strings.LastIndex(s, "</script>"); i >= 0 && j > i {
			s = s[:i] + s[j+len("</script>"):]
		}
	}
	return s
}

func TestRates(t *testing.T) {
	base := status.Snapshot{
		Interfaces: []status.Interface{{Name: "lan", RxPackets: 100, RxBytes: 1000, TxPackets: 50, TxBytes: 4000}},
		Ports:      []status.Port{{Name: "eth0", RxPackets: 100, RxBytes: 1000, TxPackets: 50, TxBytes: 4000}},
	}
	tests := []struct {
		name string
		dt   time.Duration
		next func(status.Snapshot) status.Snapshot
		want status.Rates
	}{
		{
			name: "one second",
			dt:   time.Second,
			next: func(s status.Snapshot) status.Snapshot { return statustest.Advance(s, 1000, 125_000, 500, 250_000) },
			want: status.Rates{RxBitsPerSecond: 1_000_000, TxBitsPerSecond: 2_000_000, RxPacketsPerSecond: 1000, TxPacketsPerSecond: 500},
		},
		{
			name: "two seconds",
			dt:   2 * time.Second,
			next: func(s status.Snapshot) status.Snapshot { return statustest.Advance(s, 1000, 125_000, 500, 250_000) },
			want: status.Rates{RxBitsPerSecond: 500_000, TxBitsPerSecond: 1_000_000, RxPacketsPerSecond: 500, TxPacketsPerSecond: 250},
		},
		{
			name: "idle",
			dt:   time.Second,
			next: func(s status.Snapshot) status.Snapshot { return s },
			want: status.Rates{},
		},
		{
			name: "counter reset",
			dt:   time.Second,
			next: func(s status.Snapshot) status.Snapshot {
				s = statustest.Clone(s)
				s.Interfaces[0].RxPackets, s.Interfaces[0].RxBytes = 1, 60
				s.Ports[0].RxPackets, s.Ports[0].RxBytes = 1, 60
				return statustest.Advance(s, 0, 0, 10, 1000)
			},
			want: status.Rates{TxBitsPerSecond: 8000, TxPacketsPerSecond: 10},
		},
		{
			name: "renamed",
			dt:   time.Second,
			next: func(s status.Snapshot) status.Snapshot {
				s = statustest.Advance(s, 1000, 125_000, 500, 250_000)
				s.Interfaces[0].Name, s.Ports[0].Name = "lan2", "eth9"
				return s
			},
			want: status.Rates{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := statustest.New(base)
			clk := fakeclock.NewAt(t0)
			s := status.New(src, nil)
			s.SetClock(clk.Now)
			s.Sample()
			clk.Forward(tt.dt)
			src.Set(tt.next(base))
			got := s.Sample()
			if r := got.Interfaces[0].Rates; r != tt.want {
				t.Errorf("interface rates = %+v, want %+v", r, tt.want)
			}
			if r := got.Ports[0].Rates; r != tt.want {
				t.Errorf("port rates = %+v, want %+v", r, tt.want)
			}
		})
	}
}

func TestSampleUptime(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	got := s.Sample()
	want := (26*time.Hour + 3*time.Minute + 8*time.Second).Seconds()
	if got.UptimeSeconds != want {
		t.Errorf("UptimeSeconds = %v, want %v", got.UptimeSeconds, want)
	}
	if !got.Time.Equal(t0.Add(time.Second)) {
		t.Errorf("Time = %v, want %v", got.Time, t0.Add(time.Second))
	}
}

// TestSampleDoesNotAlias checks that rates are not written into the
// Source's slices.
func TestSampleDoesNotAlias(t *testing.T) {
	snap := statustest.Example(started)
	src := &aliasingSource{snap: snap}
	clk := fakeclock.NewAt(t0)
	s := status.New(src, nil)
	s.SetClock(clk.Now)
	s.Sample()
	clk.Forward(time.Second)
	src.snap = statustest.Advance(snap, 1, 1, 1, 1)
	s.Sample()
	if r := src.snap.Interfaces[0].Rates; r != (status.Rates{}) {
		t.Errorf("Source's interface Rates = %+v, want zero", r)
	}
}

// aliasingSource returns its own slices every time, which a Source may do.
type aliasingSource struct{ snap status.Snapshot }

func (a *aliasingSource) Snapshot() status.Snapshot { return a.snap }

func TestPage(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	res := get(t, s.Handler(), "GET", "/")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / status = %d, want 200", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/html; charset=utf-8", ct)
	}
	page := body(t, res)
	for _, want := range []string{
		// interfaces and ports
		"<td><b>lan</b></td>", "<td><b>wan</b></td>", "<td><b>guest</b></td>",
		`<td class="mono"><b>eth0</b><br><span class="sub">af_xdp, zero-copy, native</span><br><span class="sub">UMEM shared with eth3</span></td>`, `<td class="mono"><b>eth2</b></td>`,
		`<br><span class="sub">2,300,000 zero-copy, 45,700 copied</span></td>`,
		`<br><span class="sub">queue on: 37 waiting, max 6.4 ms; 1,033 ECN marked, 412 dropped, 64 over limit</span>`,
		// addresses, MAC, MTU, queues
		"192.168.1.1/24<br>fd00:1::1/64", "198.51.100.2/30", "02:00:00:00:00:01",
		`<td class="num">1500</td>`,
		// drops by reason
		`<span class="mono">no_route</span> 12`, `<span class="mono">ttl_exceeded</span> 3`,
		`<span class="mono">martian_source</span> 41`, `<span class="mono">ring_full</span> 7`,
		// rates
		"1.00 Mbit/s", "2.00 Mbit/s", "1.00 kpkt/s", "500 pkt/s",
		// counters: lan rx packets 1,234,567 + 1,000; lan tx bytes 3,211,237,654
		"1,235,567", "2.99 GiB",
		// header
		`<b id="version">v0.1.0</b>`, `<b id="build">2026-11-30T07:00:00Z 3f2c1ab</b>`, `<b id="uptime">1d 2h 3m 8s</b>`,
		// the sample, for the script and the browser test
		`data-seq="2" data-time="2026-11-30T08:00:01.000Z"`,
		// routes
		"198.51.100.1", "on-link",
		`class="badge up" data-iface="lan">up<`, `class="badge down" data-iface="guest">down<`,
		`class="badge down" data-port="eth2">down<`,
		// without JavaScript the page reloads itself; with it, it fetches
		`<noscript><meta http-equiv="refresh" content="2"></noscript>`,
		"<section id=\"s-interfaces\">",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
}

func TestPageEscapes(t *testing.T) {
	snap := statustest.Example(started)
	snap.Interfaces[0].Name = `<script>alert("x")</script>`
	snap.Interfaces[0].Drops = map[string]uint64{`<img src=x onerror=alert(1)>`: 1}
	snap.Version = `"><b>v`
	s, _, _ := newServer(t, snap)
	page := body(t, get(t, s.Handler(), "GET", "/"))
	for _, bad := range []string{"<script>", "<img", `"><b>v`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "&lt;img src=x", "&#34;&gt;&lt;b&gt;v"} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain escaped %q", want)
		}
	}
}

func TestPageEmpty(t *testing.T) {
	s := status.New(statustest.New(status.Snapshot{}), nil)
	res := get(t, s.Handler(), "GET", "/")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET / status = %d, want 200", res.StatusCode)
	}
	page := body(t, res)
	for _, want := range []string{"no interfaces", "no ports", "no routes", "unknown"} {
		if !strings.Contains(page, want) {
			t.Errorf("page does not contain %q", want)
		}
	}
}

func TestJSON(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	res := get(t, s.Handler(), "GET", "/api/status")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/status status = %d, want 200", res.StatusCode)
	}
	if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", res.Header.Get("Content-Type"))
	}
	raw := body(t, res)
	for _, key := range []string{
		`"uptime_seconds": 93788`, `"rx_bits_per_second": 1000000`, `"tx_packets_per_second": 500`,
		`"drops": {}`, // guest has none: an empty object, not null
		`"routes": [`,
	} {
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
	want := *s.Latest()
	if !got.Started.Equal(want.Started) || !got.Time.Equal(want.Time) {
		t.Errorf("times = %v, %v; want %v, %v", got.Started, got.Time, want.Started, want.Time)
	}
	got.Started, got.Time, want.Started, want.Time = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded JSON = %+v\nwant %+v", got, want)
	}
	if r := got.Interfaces[0].Rates.RxBitsPerSecond; r != 1e6 {
		t.Errorf("interfaces[0].rates.rx_bits_per_second = %v, want 1e6", r)
	}
}

func TestMethods(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	h := s.Handler()
	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/", 200},
		{"HEAD", "/", 200},
		{"GET", "/api/status", 200},
		{"HEAD", "/api/status", 200},
		{"GET", "/metrics", 200},
		{"POST", "/", 405},
		{"POST", "/api/status", 405},
		{"PUT", "/metrics", 405},
		{"DELETE", "/", 405},
		{"OPTIONS", "/", 405},
		{"GET", "/index.html", 404},
		{"GET", "/api/status/x", 404},
		{"GET", "/api/", 404},
		{"POST", "/nothing", 405},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			res := get(t, h, tt.method, tt.path)
			if res.StatusCode != tt.want {
				t.Errorf("%s %s status = %d, want %d", tt.method, tt.path, res.StatusCode, tt.want)
			}
			if tt.want == 405 {
				if a := res.Header.Get("Allow"); a != "GET, HEAD" {
					t.Errorf("Allow = %q, want GET, HEAD", a)
				}
			}
			for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
				if got := res.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestStaleSample checks that a request samples the Source itself when Run
// is not running and the latest sample is old.
func TestStaleSample(t *testing.T) {
	snap := statustest.Example(started)
	s, src, clk := newServer(t, snap)
	calls := src.Calls()
	get(t, s.Handler(), "GET", "/api/status")
	if got := src.Calls(); got != calls {
		t.Errorf("Snapshot calls after a fresh request = %d, want %d", got, calls)
	}
	clk.Forward(10 * time.Second)
	src.Set(statustest.Advance(statustest.Advance(snap, 1000, 125_000, 500, 250_000), 10_000, 1_250_000, 0, 0))
	var got status.Snapshot
	if err := json.Unmarshal([]byte(body(t, get(t, s.Handler(), "GET", "/api/status"))), &got); err != nil {
		t.Fatal(err)
	}
	if n := src.Calls(); n != calls+1 {
		t.Errorf("Snapshot calls after a stale request = %d, want %d", n, calls+1)
	}
	if r := got.Interfaces[0].Rates.RxBitsPerSecond; r != 1e6 {
		t.Errorf("rx rate over 10 s = %v, want 1e6", r)
	}
}

func TestRun(t *testing.T) {
	leakCheck(t)
	src := statustest.New(statustest.Example(started))
	s := status.New(src, nil)
	s.SetInterval(5 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.Run(ctx)
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for src.Calls() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Run took %d samples in 5 s, want 3", src.Calls())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestServe(t *testing.T) {
	leakCheck(t)
	s, _, _ := newServer(t, statustest.Example(started))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("listen: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(l) }()
	client := &http.Client{Transport: &http.Transport{}}
	res, err := client.Get("http://" + l.Addr().String() + "/api/status")
	if err != nil {
		t.Fatalf("GET /api/status: %v", err)
	}
	b := body(t, res)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(b, `"lan"`) {
		t.Errorf("GET /api/status = %d %q, want 200 with lan", res.StatusCode, b)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v, want nil", err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Serve() = %v, want nil after Close", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
	client.CloseIdleConnections()
	if err := s.Serve(l); err != nil {
		t.Errorf("Serve() after Close = %v, want nil", err)
	}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"FormatBytes(0)", status.FormatBytes(0), "0 B"},
		{"FormatBytes(1023)", status.FormatBytes(1023), "1023 B"},
		{"FormatBytes(1536)", status.FormatBytes(1536), "1.50 KiB"},
		{"FormatBytes(3<<30)", status.FormatBytes(3 << 30), "3.00 GiB"},
		{"FormatBytes(max)", status.FormatBytes(math.MaxUint64), "16.00 EiB"},
		{"FormatBits(0)", status.FormatBits(0), "0 bit/s"},
		{"FormatBits(999)", status.FormatBits(999), "999 bit/s"},
		{"FormatBits(1e6)", status.FormatBits(1e6), "1.00 Mbit/s"},
		{"FormatBits(9.5e9)", status.FormatBits(9.5e9), "9.50 Gbit/s"},
		{"FormatPPS(1488095)", status.FormatPPS(1488095), "1.49 Mpkt/s"},
		{"FormatCount(0)", status.FormatCount(0), "0"},
		{"FormatCount(999)", status.FormatCount(999), "999"},
		{"FormatCount(1000)", status.FormatCount(1000), "1,000"},
		{"FormatCount(1234567)", status.FormatCount(1234567), "1,234,567"},
		{"FormatCount(123456)", status.FormatCount(123456), "123,456"},
		{"FormatUptime(0)", status.FormatUptime(0), "0s"},
		{"FormatUptime(59.9)", status.FormatUptime(59.9), "59s"},
		{"FormatUptime(3661)", status.FormatUptime(3661), "1h 1m 1s"},
		{"FormatUptime(90061)", status.FormatUptime(90061), "1d 1h 1m 1s"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// TestDemoPage writes the page for a person to look at, with the
// services' sections, when -status.demo is given.
func TestDemoPage(t *testing.T) {
	if *demoPath == "" {
		t.Skip("no -status.demo path")
	}
	s, _, _ := newServer(t, statustest.WithServices(statustest.Example(started), t0.Add(time.Second)))
	if err := os.WriteFile(*demoPath, []byte(body(t, get(t, s.Handler(), "GET", "/"))), 0o644); err != nil {
		t.Fatal(err)
	}
}

// leakCheck fails the test if it leaves goroutines behind.
func leakCheck(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines left behind:\n%s", n-before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}
