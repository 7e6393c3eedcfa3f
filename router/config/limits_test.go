package config

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// aliasBomb returns a config whose SA list, RX SC list and SecY list are
// each n aliases of one anchor: n³ SAs once expanded, in ~35·n bytes.
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString(macsecBase + "macsec:\n  - &m\n    name: ms1\n    on: wan\n    rx:\n      - &r\n        sci: 1\n        sa:\n")
	b.WriteString("          - &s {an: 0, key_id: \"01\", key: " + testKey128 + "}\n")
	for range n - 1 {
		b.WriteString("          - *s\n")
	}
	for range n - 1 {
		b.WriteString("      - *r\n")
	}
	for range n - 1 {
		b.WriteString("  - *m\n")
	}
	return b.String()
}

// measure runs f and returns its wall time and the bytes it allocated.
func measure(f func()) (time.Duration, uint64) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start := time.Now()
	f()
	d := time.Since(start)
	runtime.ReadMemStats(&m1)
	return d, m1.TotalAlloc - m0.TotalAlloc
}

// TestAliasBomb checks that a ~2.5 KB file of aliases that expands to
// 373,248 SAs is refused in under a second and 100 MB, at the alias that
// passes the budget. Before the budget it took 2 s and 640 MB (11 s and
// 1.4 GB for the larger file first reported).
func TestAliasBomb(t *testing.T) {
	in := aliasBomb(72)
	if len(in) > 3000 {
		t.Fatalf("bomb is %d bytes, want ~2.5 KB", len(in))
	}
	var err error
	d, alloc := measure(func() { _, err = Parse("bomb.yaml", []byte(in)) })
	t.Logf("%d-byte bomb: %v, %.1f MB allocated", len(in), d, float64(alloc)/1e6)
	if err == nil {
		t.Fatal("Parse(bomb) = nil error")
	}
	if d > time.Second || alloc > 100<<20 {
		t.Errorf("Parse(bomb) took %v and allocated %d MB; want < 1 s and < 100 MB", d, alloc>>20)
	}
	// The bomb passes 65,536 nodes while the list of SecYs repeats *m:
	// each *m costs 72² SAs of 7 nodes.
	want := "bomb.yaml:"
	lines := strings.Split(in, "\n")
	for i, l := range lines {
		if l == "  - *m" {
			want = fmt.Sprintf("bomb.yaml:%d:5: yaml: alias *m expands the config past 65536 nodes", i+1)
			break
		}
	}
	if got := err.Error(); !strings.HasPrefix(got, want) || strings.Contains(got, "\n") {
		t.Errorf("Parse(bomb) = %q, want one line starting %q", got, want)
	}
}

func TestBudgetErrors(t *testing.T) {
	laughs := func(levels, width int) string {
		s := "ports: [{name: eth0}]\nlol0: &l0 [lol]\n"
		for i := 1; i <= levels; i++ {
			s += fmt.Sprintf("lol%d: &l%d [%s*l%d]\n", i, i, strings.Repeat(fmt.Sprintf("*l%d, ", i-1), width-1), i-1)
		}
		return s
	}
	big := strings.Repeat("v", 1<<20)
	for _, tt := range []struct{ name, in, want string }{
		{"billion laughs", laughs(9, 10), "name.yaml:7:12: yaml: alias *l4 expands the config past 65536 nodes"},
		{"plain nodes", "ports: [" + strings.Repeat("1, ", MaxNodes) + "]\n", "name.yaml:1:196605: yaml: the config is larger than 65536 nodes"},
		{"value bytes", "a: &a " + big + "\nb: [" + strings.Repeat("*a, ", 20) + "]\n", "name.yaml:2:61: yaml: alias *a expands the config past 16777216 bytes of values"},
		{"cycle", "ports: &p [{name: eth0}, *p]\n", "name.yaml:1:26: yaml: alias *p is inside its own anchor"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			d, alloc := measure(func() { _, err = Parse("name.yaml", []byte(tt.in)) })
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Parse() = %v, want %q", err, tt.want)
			}
			// yaml.v3 parsing the input itself is most of the time (1.3 s
			// for 1 MB under the race detector on a loaded machine).
			if d > time.Second*time.Duration(raceSlowdown) || alloc > 100<<20+uint64(len(tt.in))*8 {
				t.Errorf("Parse() took %v and allocated %d MB", d, alloc>>20)
			}
		})
	}
}

// TestBudgetAllowsLargeConfigs checks that large but plausible configs
// (2,000 port forwards, 500 VLAN interfaces) are within the budget and
// aliases that expand modestly still work.
func TestBudgetAllowsLargeConfigs(t *testing.T) {
	var b strings.Builder
	b.WriteString("ports: [{name: eth0}, {name: eth1}]\ninterfaces:\n  - {name: wan, port: eth1, role: wan, addresses: [203.0.113.2/24]}\n")
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&b, "  - {name: v%d, port: eth0, vlan: %d, role: lan, addresses: [10.%d.%d.1/24]}\n", i, i, i/256, i%256)
	}
	b.WriteString("nat:\n  masquerade: [wan]\n  forwards:\n")
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "    - {proto: tcp, port: %d, to: \"10.0.1.%d:80\", on: wan}\n", 20000+i, 2+i%250)
	}
	b.WriteString("x: &x {proto: udp, to: 10.0.1.2, on: wan}\n")
	if _, err := Parse("big.yaml", []byte(b.String())); err == nil || !strings.Contains(err.Error(), `unknown key "x"`) || strings.Contains(err.Error(), "expands") {
		t.Fatalf("Parse(big) = %v, want only the unknown key x", err)
	}
	in := strings.Replace(b.String(), "x: &x {proto: udp, to: 10.0.1.2, on: wan}\n", "", 1)
	if _, err := Parse("big.yaml", []byte(in)); err != nil {
		t.Fatalf("Parse(big) = %v", err)
	}
}

// TestLongValues checks that a bad value is quoted only up to maxEcho
// bytes, with an ellipsis and its length.
func TestLongValues(t *testing.T) {
	huge := strings.Repeat("a", 10<<20)
	for _, tt := range []struct{ name, in, want string }{
		{"10 MB hardware", "hardware: " + huge + "\n" + minimal,
			`name.yaml:1:11: hardware: unknown hardware profile "` + strings.Repeat("a", 80) + `"… (10485760 bytes); want one of: bcm47094, ixgbe, generic`},
		{"long port", "ports: [" + strings.Repeat("x", 200) + "]\n",
			`name.yaml:1:9: port: want a mapping, got "` + strings.Repeat("x", 80) + `"… (200 bytes)`},
		{"just over the limit", "ports: [" + strings.Repeat("x", 81) + "]\n",
			`name.yaml:1:9: port: want a mapping, got "` + strings.Repeat("x", 80) + `"… (81 bytes)`},
		{"long address", strings.Replace(minimal, "192.168.1.1/24", strings.Repeat("1", 100), 1),
			`name.yaml:7:17: interface "lan": addresses: bad address "` + strings.Repeat("1", 80) + `"… (100 bytes)`},
		{"long integer", minimal + "    mtu: " + strings.Repeat("9", 100) + "\n",
			`name.yaml:8:10: interface "lan": mtu: want an integer, got "` + strings.Repeat("9", 80) + `"… (100 bytes)`},
		{"long integer out of range", minimal + "    mtu: 9999999999" + strings.Repeat("_", 100) + "\n",
			`name.yaml:8:10: interface "lan": mtu: integer 9999999999` + strings.Repeat("_", 70) + `… (110 bytes) out of range`},
		{"long anchor", "ports: &" + strings.Repeat("a", 100) + " [{name: eth0}, *" + strings.Repeat("a", 100) + "]\n",
			`name.yaml:1:125: yaml: alias *` + strings.Repeat("a", 80) + `… (100 bytes) is inside its own anchor`},
		{"cut at a character", "hardware: " + strings.Repeat("é", 50) + "\n" + minimal,
			`"` + strings.Repeat("é", 40) + `"… (100 bytes)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("name.yaml", []byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse() = %.300v, want it to contain %q", err, tt.want)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("Parse() error is %d bytes", len(err.Error()))
			}
		})
	}
}

// TestValueAtTheLimit checks that a value of maxEcho bytes is quoted whole.
func TestValueAtTheLimit(t *testing.T) {
	x := strings.Repeat("x", maxEcho)
	_, err := Parse("name.yaml", []byte(minimal+"routes: ["+x+"]\n"))
	if want := `name.yaml:8:10: route: want a mapping, got "` + x + `"`; err == nil || err.Error() != want {
		t.Errorf("Parse() = %v, want %s", err, want)
	}
}

// TestLongValuesEverywhere replaces each scalar (key or value) of the
// example configs in turn with a 10,000-byte one and checks that no error
// line is longer than maxEcho plus a message's worth.
func TestLongValuesEverywhere(t *testing.T) {
	for _, f := range []string{"../../config.yaml", "testdata/nat.yaml", "testdata/ixgbe.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		var scalars []*yaml.Node
		var walk func(*yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode {
				scalars = append(scalars, n)
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&doc)
		for _, long := range []string{strings.Repeat("x", 10000), strings.Repeat("9", 10000)} {
			for _, n := range scalars {
				old, oldTag, oldStyle := n.Value, n.Tag, n.Style
				n.Value, n.Tag, n.Style = long, "", 0
				out, err := yaml.Marshal(&doc)
				n.Value, n.Tag, n.Style = old, oldTag, oldStyle
				if err != nil {
					t.Fatal(err)
				}
				_, err = Parse("long.yaml", out)
				if err == nil {
					continue
				}
				for _, line := range strings.Split(err.Error(), "\n") {
					if len(line) > 400 {
						t.Errorf("%s with %s = %.20s…: error line of %d bytes: %.500s", f, old, long, len(line), line)
					}
				}
			}
		}
	}
}

// TestErrorCap checks that an error lists the first maxErrors problems by
// position, then "and N more" at the first of the rest.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("ports: [{name: eth0}]\ninterfaces:\n  - name: lan\n    port: eth0\n    role: lan\n    addresses:\n")
	for i := range 120 {
		fmt.Fprintf(&b, "      - bad%d\n", i)
	}
	b.WriteString("hardware: none\n") // found first, listed last but one
	_, err := Parse("cap.yaml", []byte(b.String()))
	if err == nil {
		t.Fatal("Parse() = nil error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 {
		t.Fatalf("Parse() error has %d lines, want %d:\n%s", len(lines), maxErrors+1, err)
	}
	if !strings.HasPrefix(lines[0], `cap.yaml:7:9: interface "lan": addresses: bad address "bad0"`) ||
		!strings.HasPrefix(lines[maxErrors-1], `cap.yaml:56:9: interface "lan": addresses: bad address "bad49"`) {
		t.Errorf("Parse() error lines 1 and %d = %q, %q; want bad0 and bad49", maxErrors, lines[0], lines[maxErrors-1])
	}
	if want := "cap.yaml:57:9: and 71 more problems from here on (only the first 50 are listed)"; lines[maxErrors] != want {
		t.Errorf("last line = %q, want %q", lines[maxErrors], want)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != maxErrors+1 {
		t.Errorf("Parse() joined %d errors, want %d", n, maxErrors+1)
	}
	var e *Error
	if !errors.As(err, &e) || e.Pos != (Pos{7, 9}) {
		t.Errorf("errors.As(*Error) = %+v, want the first problem at 7:9", e)
	}
	checkErrorLines(t, "cap.yaml", err)
}

// TestSyntaxErrorPositions checks that YAML syntax errors name the line
// and column of the problem. yaml.v3 alone says one line early for parser
// errors, names the start of the enclosing collection rather than the
// problem, and gives no line for an unknown anchor or a problem on line 1.
func TestSyntaxErrorPositions(t *testing.T) {
	const hw = "hardware: generic\n"
	for _, tt := range []struct{ name, in, want string }{
		// yaml.v3 said line 1 (the sequence's start, from 0).
		{"bad indentation", "ports:\n  - name: eth0\n    queues: 1\n   mtu: 2\ninterfaces: []\n", "4:4: yaml: did not find expected '-' indicator"},
		{"key where a '-' belongs", hw + "ports:\n  - name: a\n  queues: 1\n", "4:3: yaml: did not find expected '-' indicator"},
		{"dash without space", hw + "ports:\n  - name: eth0\n  -name: eth1\n", "4:3: yaml: did not find expected '-' indicator"},
		{"item in a mapping", hw + "ports:\n  name: a\n  - b\n", "4:3: yaml: did not find expected key"},
		{"deeper indentation", hw + "ports:\n  - name: eth0\n    mtu: 1500\n      queues: 2\n", "5:13: yaml: mapping values are not allowed in this context"},
		{"continuation line", "ports:\n  - name: a\nb: c\n d: e\n", "4:3: yaml: mapping values are not allowed in this context"},
		{"colon in a value", hw + "ports:\n  - name: a: b\n", "3:12: yaml: mapping values are not allowed in this context"},
		{"unclosed double quote", "ports:\n  - name: \"eth0\n    queues: 1\n", "2:11: yaml: found unexpected end of stream"},
		{"unclosed single quote", hw + "ports:\n  - name: 'eth0\n", "3:11: yaml: found unexpected end of stream"},
		{"unknown escape", hw + "ports:\n  - name: \"a\\qb\"\n", "3:13: yaml: found unknown escape character"},
		{"tab indentation", "ports:\n  - name: eth0\n\tqueues: 1\n", "3:1: yaml: found a tab character that violates indentation"},
		{"tab on line 1", "\tports: []\n", "1:1: yaml: found character that cannot start any token"},
		{"unclosed flow list", "ports: [\n", "1:8: yaml: did not find expected node content"},
		{"wrong bracket", hw + "ports: [a, b}\n", "2:12: yaml: did not find expected ',' or ']'"},
		{"key without colon", hw + "ports\ninterfaces: []\n", "2:1: yaml: could not find expected ':'"},
		{"unknown anchor", hw + "ports:\n  - *nope\n", "3:5: yaml: unknown anchor 'nope' referenced"},
		{"empty anchor", hw + "ports: &\n", "2:8: yaml: did not find expected alphabetic or numeric character"},
		{"control character", "hardware: \x01\n", "1:11: yaml: control characters are not allowed"},
		{"in the second document", "a: 1\n---\nb: [\n", "3:4: yaml: did not find expected node content"},
		{"duplicate key", minimal + "    role: wan\n", `8:5: interface "lan": duplicate key "role" (first at line 6)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tt.in))
			if err == nil || err.Error() != "s.yaml:"+tt.want {
				t.Errorf("Parse(%q) = %v, want s.yaml:%s", tt.in, err, tt.want)
			}
		})
	}
}

// TestSyntaxErrorPositionLargeFile checks that locating a syntax error at
// the end of the largest file located (maxLocate) is right and linear in
// the file's size: a quarter of the file takes about a quarter of the
// time (a quadratic search would take a sixteenth). A ratio, not a time
// bound, so that a slow machine or an emulator (CI runs this package
// under qemu-arm) does not fail it.
func TestSyntaxErrorPositionLargeFile(t *testing.T) {
	file := func(size int) (string, int) {
		var b strings.Builder
		b.WriteString("ports:\n")
		for i := 0; b.Len() < size-100; i++ {
			fmt.Fprintf(&b, "  - {name: eth%d, mtu: 1500}\n", i)
		}
		lines := strings.Count(b.String(), "\n")
		b.WriteString("  name: a\n")
		return b.String(), lines
	}
	// The two sizes are timed in turn, five rounds, and the fastest
	// parse of each kept, the least disturbed: timing all of one size
	// and then the other let a burst of load on a shared machine land on
	// one side only (a ratio of 10.6 was seen beside a busy machine's
	// other tests).
	big, lines := file(maxLocate)
	small, _ := file(maxLocate / 4)
	dBig, dSmall := time.Duration(1<<63-1), time.Duration(1<<63-1)
	var err error
	for range 5 {
		d, _ := measure(func() { _, err = Parse("big.yaml", []byte(big)) })
		dBig = minDur(dBig, d)
		if want := fmt.Sprintf("big.yaml:%d:3: yaml: did not find expected '-' indicator", lines+1); err == nil || err.Error() != want {
			t.Fatalf("Parse() = %v, want %s", err, want)
		}
		d, _ = measure(func() { Parse("small.yaml", []byte(small)) })
		dSmall = minDur(dSmall, d)
	}
	ratio := float64(dBig) / float64(dSmall)
	t.Logf("%d bytes located in %v, %d bytes in %v: ratio %.1f (linear 4, quadratic 16)", len(big), dBig, len(small), dSmall, ratio)
	if ratio > 10 {
		t.Errorf("4x the file took %.1fx the time, want about 4x (linear)", ratio)
	}
}

func minDur(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// TestConntrackMemory checks that a conntrack limit whose full table
// needs more than half of the machine's memory is refused, with the
// estimate, and that the default and smaller limits are not.
func TestConntrackMemory(t *testing.T) {
	defer func(f func() (uint64, bool)) { memTotal = f }(memTotal)
	const board = 256 << 20 // the BCM47094's smaller variant
	for _, tt := range []struct {
		name  string
		total uint64
		max   string
		want  string // "" = valid
	}{
		{"1M on 256 MB", board, "1048576", "name.yaml:8:24: nat: conntrack: max 1048576 needs up to 1160 MiB (1160 bytes a flow), more than half of this machine's 256 MiB (MemTotal); at most 115704 fit"},
		{"16M on 256 MB", board, "16777216", "nat: conntrack: max 16777216 needs up to 18560 MiB"},
		{"default written on 256 MB", board, "65536", ""},
		{"most that fit on 256 MB", board, "115704", ""},
		{"one more", board, "115705", "at most 115704 fit"},
		{"1M on 8 GB", 8 << 30, "1048576", ""},
		{"16M on 8 GB", 8 << 30, "16777216", "more than half of this machine's 8192 MiB"},
		{"no meminfo", 0, "16777216", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			memTotal = func() (uint64, bool) { return tt.total, tt.total != 0 }
			_, err := Parse("name.yaml", []byte(minimal+"nat: {conntrack: {max: "+tt.max+"}}\n"))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Parse(max %s) = %v, want nil", tt.max, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Parse(max %s) = %v, want %q", tt.max, err, tt.want)
			}
		})
	}
	// This machine's own /proc/meminfo is read.
	if total, ok := defaultMemTotal(); ok && total < 1<<40 {
		memTotal = defaultMemTotal
		_, err := Parse("name.yaml", []byte(minimal+"nat: {conntrack: {max: 16777216}}\n"))
		if want := uint64(16777216) * ConntrackFlowBytes; (want > total/2) != (err != nil) {
			t.Errorf("Parse(max 16777216) with MemTotal %d = %v", total, err)
		}
	} else {
		netnstest.SkipOrFail(t, "no MemTotal in /proc/meminfo")
	}
}
