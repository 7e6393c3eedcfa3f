package status_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

func getHistory(t *testing.T, h http.Handler, path string) status.History {
	t.Helper()
	res := get(t, h, "GET", path)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s status = %d, want 200", path, res.StatusCode)
	}
	var got status.History
	dec := json.NewDecoder(res.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("GET %s: decoding: %v", path, err)
	}
	return got
}

// TestHistory checks /api/history: one point per sample with the rates
// /api/status showed for it, since= for the newer ones, a series that
// starts late, a removed interface that disappears, and the ring that
// keeps the last HistoryLen samples.
func TestHistory(t *testing.T) {
	base := status.Snapshot{
		Interfaces: []status.Interface{{Name: "lan"}},
		Ports:      []status.Port{{Name: "eth0"}},
	}
	src := statustest.New(base)
	clk := fakeclock.NewAt(t0)
	s := status.New(src, nil)
	s.SetClock(clk.Now)
	h := s.Handler()
	if got := getHistory(t, h, "/api/history"); got.Seq != 1 || len(got.TimesUnixMS) != 1 || got.Len != status.HistoryLen {
		t.Fatalf("history after the first sample = seq %d, %d times, len %d; want 1, 1, %d", got.Seq, len(got.TimesUnixMS), got.Len, status.HistoryLen)
	}
	// Sample k (k ≥ 2) moved k*1000 bytes: k*8000 bit/s.
	snap := base
	for k := 2; k <= 5; k++ {
		clk.Forward(time.Second)
		snap = statustest.Advance(snap, uint64(k), uint64(k*1000), 1, 100)
		if k == 4 {
			snap.Interfaces = append(snap.Interfaces, status.Interface{Name: "wan"})
		}
		src.Set(snap)
		if got := s.Sample(); got.Seq != uint64(k) {
			t.Fatalf("sample %d has Seq %d", k, got.Seq)
		}
	}
	got := getHistory(t, h, "/api/history")
	want := status.History{
		Seq: 5, FirstSeq: 1, IntervalSeconds: 1, Len: status.HistoryLen,
		TimesUnixMS: []int64{t0.UnixMilli(), t0.UnixMilli() + 1000, t0.UnixMilli() + 2000, t0.UnixMilli() + 3000, t0.UnixMilli() + 4000},
		Interfaces: map[string]*status.RateHistory{
			"lan": {FirstSeq: 1, RxBitsPerSecond: []float32{0, 16000, 24000, 32000, 40000}, TxBitsPerSecond: []float32{0, 800, 800, 800, 800},
				RxPacketsPerSecond: []float32{0, 2, 3, 4, 5}, TxPacketsPerSecond: []float32{0, 1, 1, 1, 1}},
			"wan": {FirstSeq: 4, RxBitsPerSecond: []float32{0, 40000}, TxBitsPerSecond: []float32{0, 800},
				RxPacketsPerSecond: []float32{0, 5}, TxPacketsPerSecond: []float32{0, 1}},
		},
		Ports: map[string]*status.RateHistory{
			"eth0": {FirstSeq: 1, RxBitsPerSecond: []float32{0, 16000, 24000, 32000, 40000}, TxBitsPerSecond: []float32{0, 800, 800, 800, 800},
				RxPacketsPerSecond: []float32{0, 2, 3, 4, 5}, TxPacketsPerSecond: []float32{0, 1, 1, 1, 1}},
		},
	}
	got.CPUPercent = nil // the test process's own
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/api/history (-want +got):\n%s", diff)
	}

	newer := getHistory(t, h, "/api/history?since=3")
	if newer.FirstSeq != 4 || len(newer.TimesUnixMS) != 2 || len(newer.Interfaces["lan"].RxBitsPerSecond) != 2 || newer.Interfaces["wan"].FirstSeq != 4 {
		t.Errorf("since=3: first_seq %d, %d times, lan %+v, wan %+v; want 4, 2 and 2 points each", newer.FirstSeq, len(newer.TimesUnixMS), newer.Interfaces["lan"], newer.Interfaces["wan"])
	}
	if none := getHistory(t, h, "/api/history?since=5"); none.FirstSeq != 6 || len(none.TimesUnixMS) != 0 || len(none.Interfaces) != 0 {
		t.Errorf("since=5 = %+v, want nothing from 6", none)
	}
	if res := get(t, h, "GET", "/api/history?since=x"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("since=x status = %d, want 400", res.StatusCode)
	}

	// wan removed: its history goes with it.
	clk.Forward(time.Second)
	snap.Interfaces = snap.Interfaces[:1]
	src.Set(snap)
	s.Sample()
	if got := getHistory(t, h, "/api/history"); got.Interfaces["wan"] != nil || len(got.Interfaces["lan"].RxBitsPerSecond) != 6 {
		t.Errorf("after removing wan: interfaces %v, want lan alone with 6 points", got.Interfaces)
	}

	// Wrap the ring: the last HistoryLen samples stay, in order.
	for k := 0; k < status.HistoryLen+10; k++ {
		clk.Forward(time.Second)
		s.Sample()
	}
	got = getHistory(t, h, "/api/history")
	last := uint64(6 + status.HistoryLen + 10)
	if got.Seq != last || got.FirstSeq != last-status.HistoryLen+1 || len(got.TimesUnixMS) != status.HistoryLen || len(got.Ports["eth0"].TxBitsPerSecond) != status.HistoryLen {
		t.Fatalf("wrapped history: seq %d first %d, %d times, %d eth0 points; want %d, %d, %d, %d",
			got.Seq, got.FirstSeq, len(got.TimesUnixMS), len(got.Ports["eth0"].TxBitsPerSecond), last, last-status.HistoryLen+1, status.HistoryLen, status.HistoryLen)
	}
	for k := 1; k < len(got.TimesUnixMS); k++ {
		if d := got.TimesUnixMS[k] - got.TimesUnixMS[k-1]; d != 1000 {
			t.Fatalf("times[%d] - times[%d] = %d ms, want 1000", k, k-1, d)
		}
	}
	if end := got.TimesUnixMS[len(got.TimesUnixMS)-1]; end != clk.Now().UnixMilli() {
		t.Errorf("newest time = %d, want %d", end, clk.Now().UnixMilli())
	}
}

// TestProcess checks that the Server reports its own process: CPU time
// that grows, a CPU rate, memory and goroutines.
func TestProcess(t *testing.T) {
	src := statustest.New(status.Snapshot{})
	s := status.New(src, nil)
	first := s.Sample().Process
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) { // burn some CPU
	}
	p := s.Sample().Process
	if first == nil || p == nil {
		t.Fatal("Process not filled in")
	}
	if p.CPUSeconds <= first.CPUSeconds || p.CPUPercent <= 0 || p.CPUs < 1 || p.HeapBytes == 0 || p.GoMemoryBytes < p.HeapBytes || p.Goroutines < 1 {
		t.Errorf("Process = %+v after %+v, want CPU time grown, a CPU rate, heap within Go memory, goroutines", p, first)
	}
	if runtime.GOOS == "linux" && p.RSSBytes < p.HeapBytes {
		t.Errorf("RSSBytes = %d, want at least the heap %d", p.RSSBytes, p.HeapBytes)
	}
	// A Source that reports a process (a router that knows better) wins.
	src.Set(status.Snapshot{Process: &status.Process{CPUSeconds: 3, CPUs: 2, RSSBytes: 7 << 20}})
	if got := s.Sample().Process; got.RSSBytes != 7<<20 || got.CPUs != 2 {
		t.Errorf("Source's Process = %+v, want RSS 7 MiB, 2 CPUs", got)
	}
}

// TestPageScript checks that the page carries its script verbatim and
// that the Content-Security-Policy admits it, and only it, by hash.
func TestPageScript(t *testing.T) {
	s, _, _ := newServer(t, statustest.Example(started))
	res := get(t, s.Handler(), "GET", "/")
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "<script>"+status.PageJS+"</script>") {
		t.Error("page does not contain page.js verbatim")
	}
	sum := sha256.Sum256([]byte(status.PageJS))
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline'; connect") || strings.Contains(csp, "script-src 'unsafe") {
		t.Errorf("Content-Security-Policy %q allows any inline script", csp)
	}
}
