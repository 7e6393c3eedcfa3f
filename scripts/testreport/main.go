// Command testreport reads `go test -json` on stdin and prints what
// `go test` would without -json (each package's ok, FAIL or "no test
// files" line, and the output of the tests that failed), then the ten
// slowest tests. It exits 1 if a test or a package failed, so a script
// can pipe go test through it and still judge by the closing lines:
//
//	go test -race -count=1 -json ./... | testreport
//
// CI uses it (scripts/test.sh) to show where the time of a run goes.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// slowest is how many tests the closing list names.
const slowest = 10

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Elapsed    float64 // seconds
	Output     string
}

// timing is a finished top-level test.
type timing struct {
	name    string // package.TestName
	elapsed time.Duration
}

type report struct {
	out     io.Writer
	pending map[string]*strings.Builder // package + "\x00" + test: output so far
	times   []timing
	failed  bool
}

func main() {
	r := &report{out: os.Stdout, pending: map[string]*strings.Builder{}}
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		os.Exit(2)
	}
	r.printSlowest()
	if r.failed {
		os.Exit(1)
	}
}

// read handles the events of in until its end; a line that is not JSON
// (go test's own messages) is printed as it is.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(r.out, sc.Text())
			continue
		}
		r.handle(e)
	}
	return sc.Err()
}

func (r *report) handle(e event) {
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "build-fail":
		r.failed = true
	case e.Test == "":
		r.packageEvent(e)
	default:
		r.testEvent(e)
	}
}

// packageEvent prints a package's own output, the summary lines among it,
// but not the bare PASS that go test without -v leaves out.
func (r *report) packageEvent(e event) {
	switch e.Action {
	case "output":
		if e.Output != "PASS\n" {
			fmt.Fprint(r.out, e.Output)
		}
	case "fail":
		r.failed = true
		// Tests that never ended (a panic, a timeout) show what they
		// printed before the package died.
		prefix := e.Package + "\x00"
		for _, k := range slices.Sorted(maps.Keys(r.pending)) {
			if strings.HasPrefix(k, prefix) {
				fmt.Fprint(r.out, r.pending[k].String())
				delete(r.pending, k)
			}
		}
	}
}

func (r *report) testEvent(e event) {
	k := e.Package + "\x00" + e.Test
	switch e.Action {
	case "output":
		if isFramingLine(e.Output) {
			return
		}
		b := r.pending[k]
		if b == nil {
			b = &strings.Builder{}
			r.pending[k] = b
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		if e.Action == "fail" {
			r.failed = true
			if b := r.pending[k]; b != nil {
				fmt.Fprint(r.out, failFirst(b.String()))
			}
		}
		delete(r.pending, k)
		if e.Action != "skip" && !strings.Contains(e.Test, "/") {
			r.times = append(r.times, timing{name: e.Package + "." + e.Test, elapsed: time.Duration(e.Elapsed * float64(time.Second))})
		}
	}
}

// failFirst puts a failed test's "--- FAIL" line before its log, where go
// test without -json prints it (-json streams the log as it comes).
func failFirst(out string) string {
	lines := strings.SplitAfter(out, "\n")
	var head, rest []string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "--- FAIL") {
			head = append(head, l)
		} else {
			rest = append(rest, l)
		}
	}
	return strings.Join(append(head, rest...), "")
}

// isFramingLine reports the lines go test -v adds around every test,
// which go test without -v does not print.
func isFramingLine(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(strings.TrimLeft(s, " "), p) {
			return true
		}
	}
	return false
}

func (r *report) printSlowest() {
	if len(r.times) == 0 {
		return
	}
	slices.SortStableFunc(r.times, func(a, b timing) int { return cmp.Compare(b.elapsed, a.elapsed) })
	n := min(slowest, len(r.times))
	fmt.Fprintf(r.out, "\nthe %d slowest tests:\n", n)
	for _, t := range r.times[:n] {
		fmt.Fprintf(r.out, "%9.2fs  %s\n", t.elapsed.Seconds(), t.name)
	}
}
