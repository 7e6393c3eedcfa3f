package status_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gvrouter/gvrouter/internal/browsertest"
	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/qdisc"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
	"github.com/gvrouter/gvrouter/sqm"
	"github.com/gvrouter/gvrouter/wireguard"
)

// browserRouter is a Server over a fake router whose counters move with
// every tick: a sine around 2 Mbit/s in, so the graphs have a shape.
type browserRouter struct {
	s   *status.Server
	src *statustest.Source
	clk *fakeclock.Clock

	// mu protects n and cur.
	mu  sync.Mutex
	n   int
	cur status.Snapshot
}

func newBrowserRouter() *browserRouter {
	snap := statustest.WithServices(statustest.Example(started), t0)
	a := netip.MustParseAddr
	snap.Neighbors = []status.Neighbor{
		{Interface: "lan", Address: a("192.168.1.100"), MAC: "02:00:00:00:01:0a", State: "reachable"},
		{Interface: "lan", Address: a("192.168.1.2"), MAC: "02:00:00:00:01:02", State: "stale"},
		{Interface: "lan", Address: a("192.168.1.77"), MAC: "02:00:00:00:01:77", State: "reachable"},
		{Interface: "lan", Address: a("fe80::ff:fe00:10a"), MAC: "02:00:00:00:01:0a", State: "stale"},
		{Interface: "wan", Address: a("198.51.100.1"), MAC: "02:00:5e:00:00:01", State: "reachable"},
		{Interface: "lan", Address: a("192.168.1.9"), State: "incomplete"},
	}
	snap.Interfaces[0].GROMode = "selective"
	snap.Interfaces[0].GRO = &status.GRO{Coalesced: 9000, Flushed: 1200, BypassedForward: 52_000, ChecksumVerified: 10_200, ChecksumBad: 3}
	snap.Interfaces[0].NextHopForwarded = 812
	snap.Interfaces[0].Drops["tiny_first_fragment"] = 2
	snap.Interfaces[0].Drops["egress_mtu_below_minimum"] = 1
	snap.Interfaces[1].Drops["spoofed_source"] = 17
	snap.Netstack = &status.Netstack{IPPacketsReceived: 1_000_000, IPPacketsDelivered: 40_000, IPPacketsSent: 960_000}
	snap.Fragments = &status.Fragments{Tracked: 3, Evicted: 0}
	snap.IPv6 = ipv6Snapshot().IPv6 // every IPv6 section, for the text comparison
	snap.MACsec = []status.MACsec{{
		Name: "ms1", On: "eth1", SCI: "0200000000010001", Cipher: "gcm-aes-128", Encrypt: true, Protect: true, Replay: true, Validate: "strict",
		Counters: map[string]uint64{"InPktsBadTag": 0}, TXSC: map[string]uint64{"OutPktsEncrypted": 10},
		TXSA: []status.MACsecSA{{AN: 0, State: "on", NextPN: 11, KeyID: "01", Counters: map[string]uint64{"OutPktsEncrypted": 10}}},
		RXSC: []status.MACsecRXSC{{SCI: "0200000000020001", Counters: map[string]uint64{"InPktsOK": 7},
			SA: []status.MACsecSA{{AN: 0, State: "on", NextPN: 8, KeyID: "02", Counters: map[string]uint64{"InPktsOK": 7}}}}},
	}}
	snap.PortMapping = portMapSnapshot()
	snap.WireGuard = []status.WireGuard{{Name: "wg0", Status: wireguard.Status{
		PublicKey: "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", ListenPort: 51820,
		Peers: []wireguard.PeerStatus{
			{Name: "phone", PublicKey: "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=", Endpoint: "198.51.100.7:41234",
				LastHandshake: t0.Add(-75 * time.Second), HandshakeAge: 75, RxBytes: 1_234_567, TxBytes: 9_876_543,
				AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.2/32"), netip.MustParsePrefix("fd00:8::2/128")}, PersistentKeepalive: 25},
			{Name: "laptop", PublicKey: "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=", HandshakeAge: -1, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.3/32")}},
		},
		Counters: map[string]map[string]uint64{"udp": {"rx_initiation": 3, "rx_transport": 1500, "tx": 1400}, "handshake": {"invalid_initiation": 2, "invalid_mac1": 0}, "drops": {"unknown_type": 5}},
	}}}
	// Both sqm directions of the wan, one with diffserv3's three tins,
	// for the sqm table (the script renders it as the template does).
	up := qdisc.Stats{NumTins: 3, Limit: 4096, MemoryBytes: 7_000_000}
	up.Tins[0] = qdisc.TinStats{SentPackets: 310, SentBytes: 450_000, CoDelDrops: 2, BacklogPackets: 1, BacklogBytes: 1514, Delay: 7_125_000, PeakDelay: 55_500_000}
	up.Tins[1] = qdisc.TinStats{SentPackets: 1_234_567, SentBytes: 1_800_000_000, CoDelDrops: 1_017, ECNMarks: 5_432, OverlimitDrops: 12,
		BacklogPackets: 23, BacklogBytes: 34_000, Delay: 3_250_000, PeakDelay: 41_000_000}
	up.Tins[2] = qdisc.TinStats{SentPackets: 9_001, SentBytes: 1_200_000, Delay: 120_000, PeakDelay: 1_990_000}
	down := qdisc.Stats{NumTins: 1, Limit: 4096, MemoryBytes: 6_742_016, OversizeDrops: 1_234}
	down.Tins[0] = qdisc.TinStats{SentPackets: 5_000_000, SentBytes: 7_500_000_000, ECNMarks: 77_000, Delay: 4_990_000, PeakDelay: 98_760_000}
	snap.SQM = []status.SQM{
		{sqm.Status{Interface: "wan", Stats: sqm.Stats{Direction: "upload", Rate: 19_000_000, Overhead: 44, Diffserv: "diffserv3",
			TinNames: []string{"bulk", "besteffort", "voice"}, Queue: up}}},
		{sqm.Status{Interface: "wan", Stats: sqm.Stats{Direction: "download", Rate: 95_000_000, Overhead: 44, Diffserv: "besteffort",
			TinNames: []string{"besteffort"}, Queue: down}}},
	}
	src := statustest.New(snap)
	clk := fakeclock.NewAt(t0)
	s := status.New(src, nil)
	s.SetClock(clk.Now)
	s.Sample()
	return &browserRouter{s: s, src: src, clk: clk, cur: snap}
}

// tick is one second of the fake router: counters move, edit changes
// anything else, and the Server samples.
func (r *browserRouter) tick(edit func(*status.Snapshot)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.clk.Forward(time.Second)
	rx := uint64(250_000 * (1 + 0.6*math.Sin(float64(r.n)/25)))
	r.cur = statustest.Advance(r.cur, rx/900, rx, rx/3000, rx/12)
	if edit != nil {
		edit(&r.cur)
	}
	r.src.Set(r.cur)
	r.s.Sample()
}

// TestBrowser loads the page in headless chromium against a fake router
// and checks what a person would: the graphs draw the history, the numbers
// are those of /api/status for the same sample, the page text before and
// after the script's first update is the same (no flicker), a link going
// down turns its badge red within two seconds without a reload, no
// console errors, only GETs, and no sideways scrolling at 1280 and 1400
// px or on a 390 px phone. Screenshots go to $STATUS_SCREENSHOTS (a
// directory) or t.TempDir().
func TestBrowser(t *testing.T) {
	leakCheck(t)
	path := browsertest.Chromium(t)
	r := newBrowserRouter()
	for range 299 { // with the first, 300 samples: five minutes of history
		r.tick(nil)
	}

	var (
		mu      sync.Mutex
		methods = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		methods[req.Method]++
		mu.Unlock()
		r.s.Handler().ServeHTTP(w, req)
	}))
	defer srv.Close()

	tab := browsertest.New(t, path, 1280, 900, 50*time.Second)
	ctx := tab.Ctx

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, js string, v any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s: decoding %s: %v", what, raw, err)
		}
	}
	waitFor := func(what, js string, timeout time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
	}
	const sectionText = `Object.fromEntries([...document.querySelectorAll("main section")].map(e => [e.id, e.innerText]))`

	// The page as the templates render it, without the script.
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("disabling scripts: %v", err)
	}
	do("loading the page without JavaScript", chromedp.Navigate(srv.URL+"/"))
	var static map[string]string
	eval("section text without JavaScript", sectionText, &static)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatalf("enabling scripts: %v", err)
	}

	// The live page: its script has drawn sample 300 and the graphs.
	do("loading the page", chromedp.Navigate(srv.URL+"/"))
	waitFor("the script draws sample 300", `document.documentElement.dataset.rendered === "300"`, 5*time.Second)
	var live map[string]string
	eval("section text", sectionText, &live)
	if diff := cmp.Diff(static, live); diff != "" {
		t.Errorf("page text changed on the script's first update (-templates +script):\n%s", diff)
	}
	for _, want := range []string{"WireGuard wg0", "phone\t198.51.100.7:41234\t10.8.0.2/32, fd00:8::2/128\t1m 15s ago\t1.18 MiB\t9.42 MiB",
		"laptop\tnone\t10.8.0.3/32\tnever\t0 B\t0 B", "port 51820", "handshake/invalid_initiation 2", "udp/rx_transport 1,500"} {
		if !strings.Contains(live["s-wireguard"], want) {
			t.Errorf("WireGuard section lacks %q:\n%s", want, live["s-wireguard"])
		}
	}
	if strings.Contains(live["s-wireguard"], "invalid_mac1") {
		t.Errorf("WireGuard section shows a zero counter:\n%s", live["s-wireguard"])
	}
	if !strings.Contains(static["s-sqm"], "Smart queue management") || !strings.Contains(static["s-sqm"], "98.76 ms") {
		t.Errorf("the sqm section without JavaScript lacks the table: %q", static["s-sqm"])
	}
	if len(live) < 8 {
		t.Errorf("page has %d sections, want the 11 of page.go: %v", len(live), live)
	}

	var graphs []struct {
		Graph  string `json:"graph"`
		Points int    `json:"points"`
		Lines  int    `json:"lines"`
	}
	const graphJS = `[...document.querySelectorAll("#graphs svg")].map(s => ({graph: s.closest(".graph").dataset.graph,
		points: +s.dataset.points, lines: [...s.querySelectorAll("polyline")].filter(p => p.getAttribute("points").split(" ").length > 1).length}))`
	eval("graphs", graphJS, &graphs)
	if want := 2 * (3 + 3); len(graphs) != want { // bits and packets for 3 interfaces and 3 ports
		t.Errorf("%d graphs drawn, want %d: %+v", len(graphs), want, graphs)
	}
	for _, g := range graphs {
		if g.Points != 300 || g.Lines != 2 {
			t.Errorf("graph %s has %d points in %d lines, want the 300 samples of the history in 2 (in and out)", g.Graph, g.Points, g.Lines)
		}
	}

	// The numbers are /api/status's for the sample the page shows.
	var shown struct {
		Seq  string `json:"seq"`
		Rows []struct {
			Name, State, Rx, Tx, Drops string
		} `json:"rows"`
	}
	eval("interface rows", `({seq: document.getElementById("sample").dataset.seq,
		rows: [...document.querySelectorAll("#ifaces tbody tr")].map(tr => ({Name: tr.cells[0].innerText,
			State: tr.querySelector(".badge").className + " " + tr.querySelector(".badge").innerText,
			Rx: tr.cells[6].innerText, Tx: tr.cells[7].innerText, Drops: tr.cells[8].innerText}))})`, &shown)
	var api status.Snapshot
	res, err := http.Get(srv.URL + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(res.Body).Decode(&api)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if shown.Seq != fmt.Sprint(api.Seq) {
		t.Fatalf("page shows sample %s, /api/status has %d", shown.Seq, api.Seq)
	}
	if len(shown.Rows) != len(api.Interfaces) {
		t.Fatalf("page shows %d interfaces, /api/status has %d", len(shown.Rows), len(api.Interfaces))
	}
	for k, i := range api.Interfaces {
		class := map[string]string{"up": "up", "down": "down"}[i.State]
		cell := func(bits, pps float64, by, pk uint64) string {
			return status.FormatBits(bits) + "\n" + status.FormatPPS(pps) + "\n" + status.FormatBytes(by) + ", " + status.FormatCount(pk) + " pkts"
		}
		want := struct{ Name, State, Rx, Tx, Drops string }{
			Name: i.Name, State: "badge " + class + " " + i.State,
			Rx:    cell(i.Rates.RxBitsPerSecond, i.Rates.RxPacketsPerSecond, i.RxBytes, i.RxPackets),
			Tx:    cell(i.Rates.TxBitsPerSecond, i.Rates.TxPacketsPerSecond, i.TxBytes, i.TxPackets),
			Drops: dropsText(i.Drops),
		}
		if diff := cmp.Diff(want, shown.Rows[k]); diff != "" {
			t.Errorf("interface %s on the page (-/api/status +page):\n%s", i.Name, diff)
		}
	}
	if i := api.Interfaces[0]; i.Rates.RxBitsPerSecond == 0 || i.RxPackets == 0 {
		t.Fatalf("the fake router did not move: %+v", i)
	}

	// wan goes down: its badge turns red within two seconds, in place
	// (no reload: the marker and the scroll position stay).
	var y float64
	eval("scrolling", `window.__noReload = 1; window.scrollTo(0, 300); window.scrollY`, &y)
	if y != 300 {
		t.Fatalf("scrollY = %v after scrolling to 300; is the page shorter than the window?", y)
	}
	start := time.Now()
	r.tick(func(s *status.Snapshot) {
		s.Interfaces[1].State = "down"
		s.Ports[1].State = "down"
		s.WireGuard[0].Peers[1].HandshakeAge, s.WireGuard[0].Peers[1].Endpoint = 3, "203.0.113.9:51820"
		// The upload's best-effort tin drops and queues more, and the
		// download's delay moves: the sqm table follows without a reload.
		tin := &s.SQM[0].Queue.Tins[1]
		tin.CoDelDrops, tin.BacklogPackets, tin.BacklogBytes, tin.Delay = 2_018, 40, 60_560, 12_345_678
		s.SQM[1].Queue.Tins[0].Delay = 2_500_000
		s.SQM[1].Queue.OversizeDrops, s.SQM[1].WriteErrors = 1_240, 3
	})
	waitFor("wan's badge turns red", `document.querySelector('.badge[data-iface="wan"]').classList.contains("down")`, 2*time.Second)
	waitFor("the laptop's handshake is drawn", `document.querySelector('[data-wg="wg0"]').innerText.includes("203.0.113.9:51820\t10.8.0.3/32\t3s ago")`, 2*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("wan's badge turned red %v after the link went down, want within 2 s", d)
	}
	var sqmRows []string
	eval("sqm rows", `[...document.querySelectorAll("#sqm tbody tr")].map(tr => [...tr.cells].map(c => c.innerText).join("|"))`, &sqmRows)
	wantRows := []string{
		"wan|upload|19.00 Mbit/s|bulk|7.12 ms|55.50 ms|310|2|0|0|1 pkts, 1.48 KiB",
		"wan|upload|19.00 Mbit/s|besteffort|12.35 ms|41.00 ms|1,234,567|2,018|5,432|12|40 pkts, 59.14 KiB",
		"wan|upload|19.00 Mbit/s|voice|0.12 ms|1.99 ms|9,001|0|0|0|0 pkts, 0 B",
		"wan|download|95.00 Mbit/s|besteffort|2.50 ms|98.76 ms|5,000,000|0|77,000|0|0 pkts, 0 B",
	}
	if diff := cmp.Diff(wantRows, sqmRows); diff != "" {
		t.Errorf("sqm table after the update, without a reload (-want +page):\n%s", diff)
	}
	var sqmLines []string
	eval("sqm lines", `[...document.querySelectorAll("#s-sqm p.sub")].map(p => p.innerText)`, &sqmLines)
	wantLines := []string{
		"wan upload: at most 4,096 packets in 6.68 MiB; oversize drops 0, write errors 0",
		"wan download: at most 4,096 packets in 6.43 MiB; oversize drops 1,240, write errors 3",
	}
	if diff := cmp.Diff(wantLines, sqmLines); diff != "" {
		t.Errorf("sqm limits and drops after the update (-want +page):\n%s", diff)
	}
	var after struct {
		Marker, Y, Points int
		Port              string
		Color             string
	}
	eval("after the update", `({Marker: window.__noReload || 0, Y: Math.round(window.scrollY),
		Points: +document.querySelector('[data-graph="ifs:lan"] svg').dataset.points,
		Port: document.querySelector('.badge[data-port="eth1"]').innerText,
		Color: getComputedStyle(document.querySelector('.badge[data-iface="wan"]')).color})`, &after)
	if after.Marker != 1 || after.Y != 300 || after.Points != 301 || after.Port != "down" || after.Color != "rgb(207, 34, 46)" {
		t.Errorf("after the update: reload marker %d (want 1), scrollY %d (want 300), lan graph %d points (want 301), eth1 %q (want down), wan badge colour %s (want rgb(207, 34, 46))",
			after.Marker, after.Y, after.Points, after.Port, after.Color)
	}

	// Layout: nothing scrolls sideways or is clipped at desktop widths,
	// and the page fits a phone.
	dir := os.Getenv("STATUS_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	eval("scrolling back", `window.scrollTo(0, 0); 0`, &y)
	for _, vp := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{{"1280", 1280, 900, false}, {"1400", 1400, 900, false}, {"phone", 390, 844, true}} {
		if vp.mobile {
			do("phone viewport", chromedp.EmulateViewport(vp.width, vp.height, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		} else {
			do(vp.name+" viewport", chromedp.EmulateViewport(vp.width, vp.height))
		}
		var lay struct {
			DocScroll, DocClient, TableScroll, TableClient int
			Clipped, Scrolling                             []string
		}
		eval(vp.name+" layout", `(() => { const de = document.documentElement, w = document.getElementById("ifaces").parentElement;
			const clipped = [...document.querySelectorAll("#ifaces td, #ports td, .drops-cell, .card, .graph")]
				.filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText.slice(0, 40));
			const scrolling = [...document.querySelectorAll(".wrap")].filter(e => e.scrollWidth > e.clientWidth)
				.map(e => (e.previousElementSibling || e.parentElement).innerText.slice(0, 40));
			return {DocScroll: de.scrollWidth, DocClient: de.clientWidth, TableScroll: w.scrollWidth, TableClient: w.clientWidth,
				Clipped: clipped, Scrolling: scrolling}; })()`, &lay)
		if lay.DocScroll > lay.DocClient {
			t.Errorf("%s: the page scrolls sideways: scrollWidth %d > clientWidth %d", vp.name, lay.DocScroll, lay.DocClient)
		}
		if lay.TableScroll > lay.TableClient {
			t.Errorf("%s: the interface table scrolls sideways: scrollWidth %d > clientWidth %d", vp.name, lay.TableScroll, lay.TableClient)
		}
		if len(lay.Clipped) > 0 {
			t.Errorf("%s: clipped cells: %q", vp.name, lay.Clipped)
		}
		// On a desktop no table scrolls; a phone may scroll the wide
		// ones (DNS, leases) inside their box, never the page.
		if !vp.mobile && len(lay.Scrolling) > 0 {
			t.Errorf("%s: tables that scroll sideways, after: %q", vp.name, lay.Scrolling)
		}
		if vp.name == "1400" {
			continue
		}
		top, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("%s screenshot: %v", vp.name, err)
		}
		full, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s full screenshot: %v", vp.name, err)
		}
		for name, b := range map[string][]byte{"status-" + vp.name + ".png": top, "status-" + vp.name + "-full.png": full} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("screenshots in %s", dir)

	mu.Lock()
	defer mu.Unlock()
	if console := tab.ConsoleErrors(); len(console) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(console, "\n"))
	}
	for m, n := range methods {
		if m != http.MethodGet {
			t.Errorf("the page sent %d %s requests, want GET only", n, m)
		}
	}
	if methods[http.MethodGet] < 5 {
		t.Errorf("the page sent %d GETs, want the page, its history and its polls", methods[http.MethodGet])
	}
}

// dropsText is the drops cell's text for m: non-zero reasons sorted, one
// a line, or "none".
func dropsText(m map[string]uint64) string {
	var l []string
	for r, n := range m {
		if n > 0 {
			l = append(l, r+" "+status.FormatCount(n))
		}
	}
	if len(l) == 0 {
		return "none"
	}
	slices.Sort(l)
	return strings.Join(l, "\n")
}
