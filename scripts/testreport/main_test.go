package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport runs go test -json on a small module with a slow passing
// test, a failing test, a failing subtest and a skipped test, and checks
// that the report reads as go test without -json would (the failures'
// output and the FAIL lines, not the passing tests' logs or the -v
// framing, with each "--- FAIL" line before its log) and lists the slow
// test first; skipped tests are not timed.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("m_test.go", `package m

import (
	"testing"
	"time"
)

func TestSlow(t *testing.T) { t.Log("slow test log"); time.Sleep(300 * time.Millisecond) }

func TestFails(t *testing.T) { t.Log("why it failed"); t.Error("boom") }

func TestParent(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Error("sub boom") })
}

func TestSkipped(t *testing.T) { t.Skip("not here") }
`)
	cmd := exec.Command("go", "test", "-count=1", "-json", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	js, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); !ok && err != nil {
		t.Fatalf("go test -json: %v", err)
	}
	var out strings.Builder
	r := &report{out: &out, pending: map[string]*strings.Builder{}}
	if err := r.read(strings.NewReader(string(js))); err != nil {
		t.Fatal(err)
	}
	r.printSlowest()
	got := out.String()
	if !r.failed {
		t.Errorf("report of a failing run did not fail")
	}
	for _, want := range []string{"--- FAIL: TestFails", "why it failed", "boom", "--- FAIL: TestParent/bad", "sub boom", "FAIL\texample.com/m", "the 3 slowest tests:"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"slow test log", "=== RUN", "--- PASS", "not here"} {
		if strings.Contains(got, not) {
			t.Errorf("report has %q, which go test without -v hides:\n%s", not, got)
		}
	}
	if i, j := strings.Index(got, "--- FAIL: TestFails"), strings.Index(got, "why it failed"); i > j {
		t.Errorf("the FAIL line comes after the test's log:\n%s", got)
	}
	_, list, _ := strings.Cut(got, "slowest tests:\n")
	if first, _, _ := strings.Cut(list, "\n"); !strings.HasSuffix(first, "example.com/m.TestSlow") {
		t.Errorf("slowest first: %q, want example.com/m.TestSlow", first)
	}
}
