package status_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/status/statustest"
)

// rawGet sends a GET for path on c and returns the response's status
// code, or the error that ended the exchange.
func rawGet(c net.Conn, path string) (int, error) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// TestConnLimit fills the status server with MaxConns idle connections,
// then checks that further connections get a fast 503 (or, when many
// arrive at once, a fast close), that they are counted, that the held
// connections still get their page, that the cap holds throughout, and
// that closing connections frees their slots. Before the cap every
// connection was served (1,000 concurrent GETs: RSS 41 -> 75 MB).
func TestConnLimit(t *testing.T) {
	leakCheck(t)
	s, _, _ := newServer(t, statustest.Example(started))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer s.Close()
	go s.Serve(l)
	addr := l.Addr().String()

	// The cap holds: sample the open count while the test runs.
	stop := make(chan struct{})
	var maxOpen int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if open, _ := s.Conns(); open > maxOpen {
				maxOpen = open
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()

	held := make([]net.Conn, status.MaxConns)
	for i := range held {
		if held[i], err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		defer held[i].Close()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if open, _ := s.Conns(); open == status.MaxConns {
			break
		}
		if time.Now().After(deadline) {
			open, _ := s.Conns()
			t.Fatalf("%d connections open after dialing %d", open, status.MaxConns)
		}
	}

	// One more: a 503 at once.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, err := rawGet(c, "/api/status")
	c.Close()
	if err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("GET past the cap = %d, %v; want 503", code, err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("503 took %v, want < 500ms", d)
	}

	// 200 more at once: each is answered (503) or closed, fast.
	const excess = 200
	var mu sync.Mutex
	answers := map[string]int{}
	var slowest time.Duration
	var cw sync.WaitGroup
	for range excess {
		cw.Add(1)
		go func() {
			defer cw.Done()
			start := time.Now()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			code, err := rawGet(c, "/")
			d := time.Since(start)
			what := fmt.Sprint(code)
			if err != nil {
				what = "closed"
			}
			mu.Lock()
			answers[what]++
			slowest = max(slowest, d)
			mu.Unlock()
		}()
	}
	cw.Wait()
	t.Logf("%d connections past the cap of %d: %v, slowest %v", excess, status.MaxConns, answers, slowest)
	if answers["503"]+answers["closed"] != excess || answers["503"] == 0 {
		t.Errorf("answers past the cap = %v, want 503 or closed, and some 503", answers)
	}
	if slowest > 2*time.Second {
		t.Errorf("slowest refusal took %v, want < 2s", slowest)
	}
	if _, refused := s.Conns(); refused != excess+1 {
		t.Errorf("refused = %d, want %d", refused, excess+1)
	}

	// The held connections are served.
	for _, c := range held[:4] {
		if code, err := rawGet(c, "/metrics"); err != nil || code != http.StatusOK {
			t.Errorf("GET on a held connection = %d, %v; want 200", code, err)
		}
	}
	close(stop)
	wg.Wait()
	if maxOpen > status.MaxConns {
		t.Errorf("%d connections were open at once, want at most %d", maxOpen, status.MaxConns)
	}

	// Freed slots serve again; the count shows on the page and metrics.
	for _, c := range held[:8] {
		c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if open, _ := s.Conns(); open <= status.MaxConns-8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("closed connections were not released")
		}
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for path, want := range map[string]string{
		"/metrics":     fmt.Sprintf("gvrouter_status_refused_connections_total %d", excess+1),
		"/api/status?": fmt.Sprintf(`"refused_connections": %d`, excess+1),
	} {
		s.Sample()
		res, err := client.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s after closing: %v", path, err)
		}
		b := body(t, res)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(b, want) {
			t.Errorf("GET %s = %d, want 200 with %q", path, res.StatusCode, want)
		}
	}
}
