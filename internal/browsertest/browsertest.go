// Package browsertest starts Debian's chromium headless for the tests
// that load the status page in a real browser (router/status's
// TestBrowser against a fake router, lab's TestLabBrowser against
// the lab's), and collects what the page logs as an error.
package browsertest

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// Chromium returns the path of Debian's chromium. Outside CI a machine
// without it skips the test; under CI=true that is a failure, so a green
// CI means the page ran in a real browser.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	netnstest.SkipOrFail(t, "chromium is not installed (apt-get install chromium)")
	return ""
}

// Tab is one headless chromium tab (as root: no sandbox) whose uncaught
// exceptions, console.error/assert calls and error log entries (CSP
// violations, failed loads) are collected.
type Tab struct {
	// Ctx runs chromedp actions in the tab until the timeout given to
	// New.
	Ctx context.Context

	mu      sync.Mutex
	console []string
}

// New starts chromium at path with a window of width×height and opens a
// tab that lives until timeout or the end of t.
func New(t testing.TB, path string, width, height int, timeout time.Duration) *Tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.WindowSize(width, height))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab := &Tab{}
	bctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(tab.listen))
	ctx, cancel := context.WithTimeout(bctx, timeout)
	tab.Ctx = ctx
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc()
	})
	return tab
}

// listen records the events that mean the page went wrong.
func (b *Tab) listen(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			msg = "console." + string(e.Type) + ": " + strings.Join(args, " ")
		}
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError {
			msg = "log " + string(e.Entry.Source) + ": " + e.Entry.Text + " " + e.Entry.URL
		}
	}
	if msg != "" {
		b.mu.Lock()
		b.console = append(b.console, msg)
		b.mu.Unlock()
	}
}

// ConsoleErrors returns what the page logged as an error so far.
func (b *Tab) ConsoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.console...)
}
