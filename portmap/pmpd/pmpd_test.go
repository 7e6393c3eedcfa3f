package pmpd

import (
	"net/netip"
	"testing"
)

type echo byte

func (e echo) Handle(b []byte, _ netip.AddrPort, out []byte) []byte { return append(out, byte(e)) }

// TestDispatch: version 0 goes to NAT-PMP, anything else to PCP; a
// protocol that is off and an empty datagram get no answer, counted.
func TestDispatch(t *testing.T) {
	from := netip.MustParseAddrPort("192.168.1.10:5350")
	s := &Server{NATPMP: echo('n'), PCP: echo('p')}
	for _, tc := range []struct {
		b    []byte
		want string
	}{{[]byte{0, 0}, "n"}, {[]byte{2, 1}, "p"}, {[]byte{1, 0}, "p"}, {nil, ""}} {
		if got := string(s.handle(tc.b, from, nil)); got != tc.want {
			t.Errorf("handle(% x) = %q, want %q", tc.b, got, tc.want)
		}
	}
	off := &Server{PCP: echo('p')}
	if got := off.handle([]byte{0, 0}, from, nil); got != nil {
		t.Errorf("NAT-PMP off: answered %q", got)
	}
	if s.Stats().Empty.Load() != 1 || off.Stats().Disabled.Load() != 1 {
		t.Errorf("empty %d disabled %d, want 1 1", s.Stats().Empty.Load(), off.Stats().Disabled.Load())
	}
}
