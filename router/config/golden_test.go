package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/invalid/*.err from the current output")

// TestInvalidTestdata checks the full error output for each config in
// testdata/invalid against its .err file.
func TestInvalidTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("Glob(testdata/invalid/*.yaml) = %v, %v; want files", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err == nil {
				t.Fatalf("Load(%s) = %+v, nil; want errors", f, c)
			}
			checkErrorLines(t, f, err)
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".err"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("Load(%s) errors:\n%s\nwant (%s):\n%s", f, got, golden, want)
			}
		})
	}
}
