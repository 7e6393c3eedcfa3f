package capture

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestMain lets a test re-execute this binary as another user (see
// TestControlRefusesUnprivileged): with CAPTURE_DIAL set, the child dials
// that socket, prints the error and exits.
func TestMain(m *testing.M) {
	if path := os.Getenv("CAPTURE_DIAL"); path != "" {
		_, err := Dial(context.Background(), path, Request{Iface: "eth0", Count: 1}, os.Stdout)
		fmt.Fprintf(os.Stderr, "dial: %v\n", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// feeder sends f to p every millisecond until ctx ends.
func feeder(ctx context.Context, p *Point, f []byte) {
	for ctx.Err() == nil {
		p.CaptureRx([]hw.Frame{{Data: f, WireLen: len(f)}})
		time.Sleep(time.Millisecond)
	}
}

func serve(t *testing.T, dir string) (path string, p *Point) {
	t.Helper()
	p = NewPoint("eth0.2", nil)
	m := NewManager(func(string) (*Point, error) { return p, nil })
	path = filepath.Join(dir, SocketName)
	ln, err := Listen(path, os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := NewServer(m, os.Getegid(), slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	go feeder(ctx, p, tcp6Frame(t, "fd00:1::9", "2001:db8::1", 40000, 22))
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		<-done
		// Leak check: connection goroutines end with their captures.
		for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("%d goroutines after the server stopped, %d before", n, before)
		}
	})
	return path, p
}

// TestControlSocketTshark is `router capture -i X -w - | tshark -r -`:
// the stream Dial writes is read by tshark from stdin.
func TestControlSocketTshark(t *testing.T) {
	path, _ := serve(t, t.TempDir())
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, %v: want mode 0660", fi.Mode(), err)
	}
	var out bytes.Buffer
	res, err := Dial(context.Background(), path, Request{Iface: "eth0.2", Count: 5}, &out)
	if err != nil || res.Captured != 5 {
		t.Fatalf("Dial = %+v, %v; want 5 captured", res, err)
	}
	rows := tshark(t, "-", out.Bytes(), "frame.protocols", "ipv6.dst", "tcp.dstport")
	if len(rows) != 5 {
		t.Fatalf("tshark -r - read %d frames, want 5", len(rows))
	}
	for _, r := range rows {
		if !strings.HasPrefix(r[0], "eth:ethertype:ipv6:tcp") || r[1] != "2001:db8::1" || r[2] != "22" {
			t.Errorf("frame %q", r)
		}
	}
	// A refused request is an error, not a stream.
	if _, err := Dial(context.Background(), path, Request{Iface: "eth0.2", Filter: "tcp or udp"}, &out); err == nil || !strings.Contains(err.Error(), "bad filter") {
		t.Errorf("bad filter: %v", err)
	}
}

// TestControlRefusesUnprivileged runs a child as nobody: with the
// socket's mode 0660 the kernel refuses it; with the mode opened up
// SO_PEERCRED still does.
func TestControlRefusesUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		netnstest.SkipOrFail(t, "needs root to run a child as nobody")
	}
	dir, err := os.MkdirTemp("", "capture")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	exe, _ := os.Executable()
	// The child's binary must be readable by nobody too.
	bin := filepath.Join(dir, "capture.test")
	if b, err := os.ReadFile(exe); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatal(err)
	}
	path, _ := serve(t, dir)
	child := func() string {
		cmd := exec.Command(bin)
		cmd.Env = []string{"CAPTURE_DIAL=" + path}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("child: %v: %s", err, stderr.String())
		}
		if stdout.Len() > 0 {
			t.Errorf("nobody got %d octets of capture", stdout.Len())
		}
		return stderr.String()
	}
	if got := child(); !strings.Contains(got, "permission denied") {
		t.Errorf("nobody on a 0660 socket: %q, want permission denied", got)
	}
	os.Chmod(path, 0o666)
	if got := child(); !strings.Contains(got, ErrNotAllowed.Error()) {
		t.Errorf("nobody on a 0666 socket: %q, want %q", got, ErrNotAllowed)
	}
}

// TestHTTPHandler checks that the status page's /api/capture refuses
// what allow refuses and streams pcapng otherwise.
func TestHTTPHandler(t *testing.T) {
	p := NewPoint("eth0", nil)
	m := NewManager(func(string) (*Point, error) { return p, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go feeder(ctx, p, tcp6Frame(t, "fd00:1::9", "2001:db8::1", 40000, 22))
	h := HTTPHandler(m, func(r *http.Request) error {
		if r.Header.Get("X-Test-Token") != "secret" {
			return fmt.Errorf("capture: a wan listener never serves captures")
		}
		return nil
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/capture?iface=eth0&count=3")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("without token: %s, want 403", resp.Status)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/capture?iface=eth0&count=3&seconds=5", nil)
	req.Header.Set("X-Test-Token", "secret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-pcapng" {
		t.Fatalf("with token: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	if rows := tshark(t, "-", body.Bytes(), "frame.protocols"); len(rows) != 3 {
		t.Errorf("tshark read %d frames, want 3", len(rows))
	}
	req, _ = http.NewRequest("GET", srv.URL+"/api/capture?iface=eth0&count=x", nil)
	req.Header.Set("X-Test-Token", "secret")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("count=x: %s, want 400", resp.Status)
	}
}
