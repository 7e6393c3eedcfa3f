package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gvrouter/gvrouter/internal/browsertest"
	"github.com/gvrouter/gvrouter/router/status"
)

// TestLabBrowser loads the status page of the running lab router in
// Debian's chromium, as a LAN guest would (through the lab's proxy to
// lan:80): the graphs draw from the router's history, every interface
// row shows what /api/status says for the same sample, the WAN cable
// taken out turns wan's badge red within two seconds without a reload,
// and the page logs no console error. router/status's TestBrowser checks
// the page's layout against a fake; this is the real router.
func TestLabBrowser(t *testing.T) {
	path := browsertest.Chromium(t)
	runWithHook(t, func(l *lab) error {
		base := "http://" + l.proxy.Addr().String()
		tab := browsertest.New(t, path, 1280, 900, 60*time.Second)
		ctx := tab.Ctx

		eval := func(what, js string, v any) error {
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js))
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := json.Unmarshal(raw, v); err != nil {
				return fmt.Errorf("%s: decoding %s: %w", what, raw, err)
			}
			return nil
		}
		waitFor := func(what, js string, timeout time.Duration) error {
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
				return fmt.Errorf("%s: not within %v: %w", what, timeout, err)
			}
			return nil
		}

		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
			return fmt.Errorf("loading %s: %w", base, err)
		}
		// The graphs: bits and packets for every interface and port,
		// with at least three of the router's samples in each.
		if err := waitFor("the graphs draw three samples", `(() => { const g = [...document.querySelectorAll("#graphs svg")];
			return g.length > 0 && g.every(s => +s.dataset.points >= 3); })()`, 15*time.Second); err != nil {
			return err
		}
		var graphs []struct {
			Graph  string `json:"graph"`
			Points int    `json:"points"`
		}
		if err := eval("graphs", `[...document.querySelectorAll("#graphs svg")].map(s => ({graph: s.closest(".graph").dataset.graph, points: +s.dataset.points}))`, &graphs); err != nil {
			return err
		}

		// The rows against /api/status of the sample the page shows.
		// The page and the API serve one cached snapshot per sample, so
		// a page caught between two polls is simply asked again.
		var api status.Snapshot
		var shown pageRows
		matched := false
		for try := 0; try < 20 && !matched; try++ {
			if err := eval("interface rows", pageRowsJS, &shown); err != nil {
				return err
			}
			if err := getJSON(base+"/api/status", &api); err != nil {
				return err
			}
			matched = shown.Seq == fmt.Sprint(api.Seq)
			if !matched {
				time.Sleep(150 * time.Millisecond)
			}
		}
		if !matched {
			return fmt.Errorf("page and /api/status never showed the same sample (last: page %s, api %d)", shown.Seq, api.Seq)
		}
		if want := 2 * (len(api.Interfaces) + len(api.Ports)); len(graphs) != want {
			return fmt.Errorf("%d graphs drawn, want %d (bits and packets of %d interfaces and %d ports): %+v",
				len(graphs), want, len(api.Interfaces), len(api.Ports), graphs)
		}
		if len(shown.Rows) != len(api.Interfaces) {
			return fmt.Errorf("page shows %d interfaces, /api/status has %d", len(shown.Rows), len(api.Interfaces))
		}
		var moved bool
		for k, i := range api.Interfaces {
			class := map[string]string{"up": "up", "down": "down"}[i.State]
			want := pageRow{Name: i.Name, State: "badge " + class + " " + i.State,
				Rx:    rateCell(i.Rates.RxBitsPerSecond, i.Rates.RxPacketsPerSecond, i.RxBytes, i.RxPackets),
				Tx:    rateCell(i.Rates.TxBitsPerSecond, i.Rates.TxPacketsPerSecond, i.TxBytes, i.TxPackets),
				Drops: labDropsText(i.Drops)}
			if shown.Rows[k] != want {
				return fmt.Errorf("interface %s: page shows %+v, /api/status (sample %d) says %+v", i.Name, shown.Rows[k], api.Seq, want)
			}
			moved = moved || i.RxPackets > 0
		}
		if !moved {
			return fmt.Errorf("no interface received a packet after the proofs: %+v", api.Interfaces)
		}

		// The WAN cable out: wan's badge turns red in place.
		if err := eval("reload marker", `window.__noReload = 1; 1`, new(int)); err != nil {
			return err
		}
		start := time.Now()
		if err := nsRun(context.Background(), l.wanNS, "ip", "link", "set", hostIf, "down"); err != nil {
			return err
		}
		defer func() {
			if err := nsRun(context.Background(), l.wanNS, "ip", "link", "set", hostIf, "up"); err != nil {
				t.Errorf("WAN host link up again: %v", err)
			}
		}()
		if err := waitFor("wan's badge turns red", `document.querySelector('.badge[data-iface="wan"]').classList.contains("down")`, 2*time.Second); err != nil {
			return err
		}
		took := time.Since(start)
		var marker int
		if err := eval("reload marker after", `window.__noReload || 0`, &marker); err != nil {
			return err
		}
		if marker != 1 {
			return fmt.Errorf("the page reloaded to show the link down")
		}
		t.Logf("wan badge red %v after the WAN host's link went down", took.Round(time.Millisecond))

		dir := os.Getenv("STATUS_SCREENSHOTS")
		if dir == "" {
			dir = t.TempDir()
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
		if err != nil {
			return fmt.Errorf("screenshot: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lab-status.png"), shot, 0o644); err != nil {
			return err
		}
		t.Logf("screenshot in %s", filepath.Join(dir, "lab-status.png"))

		if console := tab.ConsoleErrors(); len(console) > 0 {
			return fmt.Errorf("console errors:\n%s", strings.Join(console, "\n"))
		}
		return nil
	})
}

// pageRows is what the page shows in its interface table, as pageRowsJS
// reads it.
type pageRows struct {
	Seq  string    `json:"seq"`
	Rows []pageRow `json:"rows"`
}

type pageRow struct {
	Name, State, Rx, Tx, Drops string
}

const pageRowsJS = `({seq: document.getElementById("sample").dataset.seq,
	rows: [...document.querySelectorAll("#ifaces tbody tr")].map(tr => ({Name: tr.cells[0].innerText,
		State: tr.querySelector(".badge").className + " " + tr.querySelector(".badge").innerText,
		Rx: tr.cells[6].innerText, Tx: tr.cells[7].innerText, Drops: tr.cells[8].innerText}))})`

// rateCell is an rx or tx cell's text as the page formats it.
func rateCell(bits, pps float64, bytes, pkts uint64) string {
	return status.FormatBits(bits) + "\n" + status.FormatPPS(pps) + "\n" + status.FormatBytes(bytes) + ", " + status.FormatCount(pkts) + " pkts"
}

// labDropsText is the drops cell's text: non-zero reasons sorted, one a
// line, or "none".
func labDropsText(m map[string]uint64) string {
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

func getJSON(url string, v any) error {
	res, err := http.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	return json.Unmarshal(b, v)
}
