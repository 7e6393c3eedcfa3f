package hw

import "testing"

func TestParseKernelRelease(t *testing.T) {
	for _, c := range []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v1300", 6, 18, true},
		{"6.2.0", 6, 2, true},
		{"5.15.0-91-generic", 5, 15, true},
		{"6.1", 6, 1, true},
		{"4.14.336", 4, 14, true},
		{"6", 0, 0, false},
		{"6.", 0, 0, false},
		{"", 0, 0, false},
		{"x.y", 0, 0, false},
	} {
		major, minor, ok := parseKernelRelease(c.in)
		if major != c.major || minor != c.minor || ok != c.ok {
			t.Errorf("parseKernelRelease(%q) = %d, %d, %v; want %d, %d, %v", c.in, major, minor, ok, c.major, c.minor, c.ok)
		}
	}
}
