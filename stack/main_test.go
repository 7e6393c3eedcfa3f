package stack

import (
	"flag"
	"os"
	"testing"

	"gvisor.dev/gvisor/pkg/refs"
)

// TestMain turns on gVisor's reference leak checking, as gVisor's own
// tests do, except when benchmarking: leak tracking registers every
// buffer chunk in a global map and would dominate the figures.
func TestMain(m *testing.M) {
	flag.Parse()
	check := flag.Lookup("test.bench").Value.String() == ""
	if check {
		refs.SetLeakMode(refs.LeaksPanic)
	}
	code := m.Run()
	if check {
		refs.DoLeakCheck()
	}
	os.Exit(code)
}
