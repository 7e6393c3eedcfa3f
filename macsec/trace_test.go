package macsec

import (
	"fmt"
	"os"
	"testing"
)

// TestMain prints the pipeline's timeline after the tests and benchmarks
// when built with -tags macsectrace (see trace.go).
func TestMain(m *testing.M) {
	code := m.Run()
	if traceOn {
		fmt.Print(traceReport())
	}
	os.Exit(code)
}
