package capture

import (
	"errors"
	"testing"
)

func TestFilter(t *testing.T) {
	tcp4 := tcp4Frame(t, "192.0.2.1", "198.51.100.7", 40000, 443)
	tcp6 := tcp6Frame(t, "fd00:1::9", "2001:db8::1", 40000, 22)
	vlan2 := tagged(tcp4, 0x8100, 2)
	qinq := tagged(tagged(tcp4, 0x8100, 10), 0x88a8, 100)
	sec := macsecFrame()
	tests := []struct {
		expr  string
		frame []byte
		want  bool
	}{
		{"", tcp4, true},
		{"host 192.0.2.1", tcp4, true},
		{"host 198.51.100.7", tcp4, true},
		{"host 192.0.2.2", tcp4, false},
		{"net 192.0.2.0/24", tcp4, true},
		{"net 10.0.0.0/8", tcp4, false},
		{"net fd00::/8", tcp6, true},
		{"host 2001:db8::1 and port 22", tcp6, true},
		{"port 443", tcp4, true},
		{"port 40000", tcp4, true},
		{"port 80", tcp4, false},
		{"tcp", tcp4, true},
		{"udp", tcp4, false},
		{"proto 6", tcp6, true},
		{"not tcp", tcp4, false},
		{"ip and not ip6", tcp4, true},
		{"ip6", tcp4, false},
		{"vlan 2", vlan2, true},
		{"vlan 2 and host 192.0.2.1 and tcp", vlan2, true},
		{"vlan 3", vlan2, false},
		{"vlan 2", tcp4, false},
		{"vlan 100 and port 443", qinq, true},
		{"vlan 10", qinq, false},
		{"macsec", sec, true},
		{"tcp", sec, false},
		{"not macsec", tcp4, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			f, err := Parse(tt.expr)
			if err != nil {
				t.Fatalf("Parse(%q) = %v", tt.expr, err)
			}
			if got := f.Match(tt.frame); got != tt.want {
				t.Errorf("Parse(%q).Match(%x) = %v, want %v", tt.expr, tt.frame[:min(len(tt.frame), 40)], got, tt.want)
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	for _, expr := range []string{
		"host", "host nope", "net 10.0.0.0", "port x", "port 70000", "vlan 4095",
		"proto sctpx", "tcp or udp", "(tcp)", "tcp udp", "and tcp", "not", "tcp and", "ether host 00:11:22:33:44:55",
	} {
		if _, err := Parse(expr); !errors.Is(err, ErrFilter) {
			t.Errorf("Parse(%q) = %v, want ErrFilter", expr, err)
		}
	}
}

func TestFilterMatchAllocs(t *testing.T) {
	f, err := Parse("host 192.0.2.1 and tcp and port 443 and not vlan 5")
	if err != nil {
		t.Fatal(err)
	}
	frame := tcp4Frame(t, "192.0.2.1", "198.51.100.7", 40000, 443)
	if n := testing.AllocsPerRun(100, func() { f.Match(frame) }); n != 0 {
		t.Errorf("Match allocates %v times, want 0", n)
	}
}

func FuzzFilter(f *testing.F) {
	f.Add("host 192.0.2.1 and tcp", []byte{})
	f.Add("vlan 2 and not port 22", tagged(macsecFrame(), 0x8100, 2))
	f.Fuzz(func(t *testing.T, expr string, frame []byte) {
		flt, err := Parse(expr)
		if err != nil {
			if !errors.Is(err, ErrFilter) {
				t.Fatalf("Parse(%q) = %v, not ErrFilter", expr, err)
			}
			return
		}
		flt.Match(frame) // must not panic on any frame
	})
}
