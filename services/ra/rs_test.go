package ra

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

var (
	hostMAC = net.HardwareAddr{2, 0, 0, 0, 0, 0x22}
	hostLL  = netip.MustParseAddr("fe80::22")
	allRtrs = netip.MustParseAddr("ff02::2")
)

// rsFrame builds a router solicitation (RFC 4861 §4.1) from src with
// hop limit hl, ICMP code, the given options, and a right checksum
// unless badSum.
func rsFrame(src netip.Addr, hl, code uint8, opts []byte, badSum bool) []byte {
	icmp := append([]byte{typeRS, code, 0, 0, 0, 0, 0, 0}, opts...)
	s, d := src.As16(), allRtrs.As16()
	binary.BigEndian.PutUint16(icmp[2:], checksum(s[:], d[:], icmp))
	if badSum {
		icmp[2] ^= 0xff
	}
	f := buildFrame(net.HardwareAddr{0x33, 0x33, 0, 0, 0, 2}, hostMAC, src, allRtrs, icmp)
	f[14+7] = hl
	return f
}

// slla is a Source Link-Layer Address option of hostMAC.
var slla = append([]byte{1, 1}, hostMAC...)

func newTestAdvertiser(t *testing.T, link *syncLink) *Advertiser {
	t.Helper()
	a, err := New(Config{Link: link, SrcAddr: netip.MustParseAddr("fe80::1"), MaxInterval: 10 * time.Second,
		Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("2001:db8:1::/64")}}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type syncLink struct {
	mu sync.Mutex
	fakeLink
}

func (s *syncLink) WriteFrame(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fakeLink.WriteFrame(b)
}

func (s *syncLink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.frames)
}

// TestRFC4861_6_1_1_RSValidation: an RS that fails a check of §6.1.1 is
// consumed and counted under its reason; a valid one is counted as
// received; RAs of other routers and other ICMPv6 are left to netstack.
func TestRFC4861_6_1_1_RSValidation(t *testing.T) {
	link := &syncLink{fakeLink: fakeLink{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}
	a := newTestAdvertiser(t, link)
	unspec := netip.IPv6Unspecified()
	truncated := rsFrame(hostLL, 255, 0, nil, false)
	binary.BigEndian.PutUint16(truncated[14+4:], 200)
	for _, tc := range []struct {
		name  string
		frame []byte
		drop  DropReason
	}{
		{"hop limit 64", rsFrame(hostLL, 64, 0, slla, false), DropHopLimit},
		{"code 1", rsFrame(hostLL, 255, 1, slla, false), DropCode},
		{"bad checksum", rsFrame(hostLL, 255, 0, slla, true), DropChecksum},
		{"option length 0", rsFrame(hostLL, 255, 0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, false), DropOptionZero},
		{"option past the end", rsFrame(hostLL, 255, 0, []byte{1, 2, 0, 0, 0, 0, 0, 0}, false), DropMalformed},
		{"unspecified with SLLA", rsFrame(unspec, 255, 0, slla, false), DropUnspecSLLA},
		{"payload length past the frame", truncated, DropMalformed},
	} {
		before := a.stats.Drops[tc.drop].Load()
		if !a.Deliver(tc.frame) {
			t.Errorf("%s: not consumed", tc.name)
		}
		if got := a.stats.Drops[tc.drop].Load(); got != before+1 {
			t.Errorf("%s: %s drops %d, want %d", tc.name, tc.drop, got, before+1)
		}
	}
	if a.stats.RSReceived.Load() != 0 {
		t.Fatalf("a bad RS was counted as received")
	}
	for _, good := range [][]byte{rsFrame(hostLL, 255, 0, slla, false), rsFrame(unspec, 255, 0, nil, false)} {
		if !a.Deliver(good) {
			t.Error("a valid RS was not consumed")
		}
	}
	if got := a.stats.RSReceived.Load(); got != 2 {
		t.Errorf("rs_received = %d, want 2", got)
	}
	ra := rsFrame(hostLL, 255, 0, nil, false)
	ra[14+40] = typeRA
	if a.Deliver(ra) || a.stats.OtherRA.Load() != 1 {
		t.Errorf("another router's RA consumed or not counted (other_ra %d)", a.stats.OtherRA.Load())
	}
	echo := rsFrame(hostLL, 255, 0, nil, false)
	echo[14+40] = 128
	if a.Deliver(echo) {
		t.Error("an echo request was consumed")
	}
}

// TestRFC4861_6_2_6_RSFlood: 5,000 RSs in a burst cost one counter each
// and at most one solicited RA per 3 s.
func TestRFC4861_6_2_6_RSFlood(t *testing.T) {
	link := &syncLink{fakeLink: fakeLink{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}
	a := newTestAdvertiser(t, link)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	time.Sleep(100 * time.Millisecond) // the first unsolicited RA
	rs := rsFrame(hostLL, 255, 0, slla, false)
	for range 5000 {
		a.Deliver(rs)
	}
	time.Sleep(3500 * time.Millisecond)
	cancel()
	<-done
	if got := a.stats.RSReceived.Load(); got != 5000 {
		t.Errorf("rs_received = %d, want 5000", got)
	}
	// The first RA, one solicited RA 3 s later, the final one.
	if sent, sol := a.stats.Sent.Load(), a.stats.SolicitedSent.Load(); sent > 3 || sol != 1 {
		t.Errorf("sent %d RAs (%d solicited) for a 5,000-RS flood, want at most 3 with 1 solicited", sent, sol)
	}
	if got := a.stats.RSCoalesced.Load(); got != 4999 {
		t.Errorf("rs_coalesced = %d, want 4999", got)
	}
}

// FuzzDeliver: any frame, no panic; a consumed frame moves exactly one
// counter (received or one drop reason); one not consumed moves none but
// other_ra.
func FuzzDeliver(f *testing.F) {
	f.Add(rsFrame(hostLL, 255, 0, slla, false))
	f.Add(rsFrame(hostLL, 255, 0, []byte{1, 0}, false))
	f.Add(rsFrame(netip.IPv6Unspecified(), 255, 0, slla, false))
	f.Add(rsFrame(hostLL, 64, 0, nil, true))
	link := &syncLink{fakeLink: fakeLink{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}}}
	a, err := New(Config{Link: link, SrcAddr: netip.MustParseAddr("fe80::1")})
	if err != nil {
		f.Fatal(err)
	}
	total := func() uint64 {
		n := a.stats.RSReceived.Load()
		for i := range a.stats.Drops {
			n += a.stats.Drops[i].Load()
		}
		return n
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		before := total()
		took := a.Deliver(frame)
		after := total()
		if took && after != before+1 || !took && after != before {
			t.Fatalf("consumed %v, counters moved %d", took, after-before)
		}
	})
}
