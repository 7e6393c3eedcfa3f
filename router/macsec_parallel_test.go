package router

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestSecYParallelWorkers checks that macsec[].parallel reaches the SecY:
// off leaves the crypto to the calling goroutine (one worker counter),
// auto and always give it one worker per core.
func TestSecYParallelWorkers(t *testing.T) {
	r := &Router{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	for _, tt := range []struct {
		parallel string
		workers  int
	}{{"off", 1}, {"auto", runtime.NumCPU()}, {"always", runtime.NumCPU()}, {"", runtime.NumCPU()}} {
		in := natBase + "macsec:\n  - {name: ms1, on: wan, pn_store: " + t.TempDir()
		if tt.parallel != "" {
			in += ", parallel: " + tt.parallel
		}
		in += "}\n"
		cfg, err := config.Parse("test.yaml", []byte(in))
		if err != nil {
			t.Fatalf("parallel %q: %v", tt.parallel, err)
		}
		rs, err := r.newSecY(&cfg.MACsec[0], mac, 1500)
		if err != nil {
			t.Fatalf("parallel %q: newSecY: %v", tt.parallel, err)
		}
		if got := len(rs.secy.Load().WorkerFrames()); got != tt.workers {
			t.Errorf("parallel %q: %d workers, want %d", tt.parallel, got, tt.workers)
		}
		rs.secy.Load().Close()
	}
}

// TestPNStoreDefault checks that a SecY without pn_store keeps its PN
// high-water marks in the state directory's macsec/.
func TestPNStoreDefault(t *testing.T) {
	dir := t.TempDir()
	r := &Router{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r.state.dir = dir
	cfg, err := config.Parse("test.yaml", []byte(natBase+"macsec:\n  - {name: ms1, on: wan}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := r.newSecY(&cfg.MACsec[0], net.HardwareAddr{0x02, 0, 0, 0, 0, 1}, 1500)
	if err != nil {
		t.Fatalf("newSecY: %v", err)
	}
	rs.secy.Load().Close()
	if st, err := os.Stat(filepath.Join(dir, "macsec")); err != nil || !st.IsDir() {
		t.Errorf("state_dir/macsec: %v, want the PN store's directory there", err)
	}
}
