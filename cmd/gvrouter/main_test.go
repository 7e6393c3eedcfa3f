package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRootConfig keeps the shipped appliance config valid under
// `gvrouter check`, which must not touch any interface.
func TestCheckRootConfig(t *testing.T) {
	var out strings.Builder
	if err := cmdCheck([]string{"-config", "../../config.yaml"}, &out); err != nil {
		t.Fatalf("router check config.yaml: %v", err)
	}
	if !strings.Contains(out.String(), "ok") {
		t.Errorf("router check output %q, want it to say ok", out.String())
	}
}

// TestCheckNamesLine checks that every problem in a bad config is reported
// with file:line:column.
func TestCheckNamesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "hardware: generic\nports:\n  - name: eth0\n    queus: 2\ninterfaces:\n  - {name: lan, port: eth9, role: lan, addresses: [10.0.0.1/24]}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	err := cmdCheck([]string{"-config", path}, &strings.Builder{})
	if err == nil {
		t.Fatal("router check accepted a bad config")
	}
	for _, want := range []string{path + ":4:5:", path + ":6:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}
