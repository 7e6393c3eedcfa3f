package router

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/router/config"
)

// TestNewRefusesWhenLocked checks that New refuses a state directory or a
// port that another router holds, naming its pid, before it opens any port
// (the port here does not exist: reaching hw.Open would be another error).
func TestNewRefusesWhenLocked(t *testing.T) {
	stateDir := t.TempDir()
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf(
		"ports: [{name: nope9}]\ninterfaces: [{name: lan, port: nope9, role: lan}]\nstate_dir: %s\n", stateDir)))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	held, err := LockStateDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, Build{}, log)
	want := fmt.Sprintf("state directory %s is in use by router pid %d", stateDir, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New with the state directory locked = %v, want %q", err, want)
	}
	held.Unlock()

	runDir := t.TempDir()
	pl, err := hw.LockPort(runDir, "nope9")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, Build{}, log, WithRunDir(runDir))
	want = fmt.Sprintf("port nope9 is in use by router pid %d", os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New with the port locked = %v, want %q", err, want)
	}
	pl.Unlock()

	// Both free: New gets as far as the missing interface, and lets the
	// locks go again.
	if _, err = New(cfg, Build{}, log, WithRunDir(runDir)); err == nil || strings.Contains(err.Error(), "in use") {
		t.Fatalf("New with nothing locked = %v, want the missing interface", err)
	}
	for _, l := range []func() error{
		func() error { l, err := LockStateDir(stateDir); l.Unlock(); return err },
		func() error { l, err := hw.LockPort(runDir, "nope9"); l.Unlock(); return err },
	} {
		if err := l(); err != nil {
			t.Errorf("lock after a failed New: %v, want it released", err)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "ports", "nope9.json")); !os.IsNotExist(err) {
		t.Errorf("record of a port that never opened: stat error %v, want none", err)
	}
}
