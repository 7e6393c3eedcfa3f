package dhcp6server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// from is an Information-request from link-local source i.
func from(i int) rawudp.Packet {
	p := pkt(infoReq())
	p.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte{0xfe, 0x80, 8: 0x99, 12: byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}), ClientPort)
	return p
}

// answered counts the Replies to n requests from source i.
func answered(s *Server, i, n int) int {
	k := 0
	for range n {
		if _, ok := s.handle(from(i)); ok {
			k++
		}
	}
	return k
}

// TestRateLimitPerSource: one source gets sourceBurst Replies at once,
// then sourceRate per second; meanwhile another source is served in full.
func TestRateLimitPerSource(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	if n := answered(s, 1, 100); n != sourceBurst {
		t.Errorf("100 at once from one source: %d answered, want sourceBurst (%d)", n, sourceBurst)
	}
	if n := answered(s, 2, sourceBurst); n != sourceBurst {
		t.Errorf("another source during the flood: %d of %d answered", n, sourceBurst)
	}
	clk.Advance(time.Second)
	if n := answered(s, 1, 10); n != 1 {
		t.Errorf("a second later: %d answered, want 1 (sourceRate)", n)
	}
	clk.Advance(time.Hour)
	if n := answered(s, 1, 100); n != sourceBurst {
		t.Errorf("an hour later: %d answered, want the full burst again", n)
	}
	if got := s.stats.Drops[DropRateLimited].Load(); got != 2*(100-sourceBurst)+9 {
		t.Errorf("rate_limited = %d, want %d", got, 2*(100-sourceBurst)+9)
	}
	if got := s.stats.Received.Load(); got != s.stats.Drops[DropRateLimited].Load()+uint64(3*sourceBurst+1) {
		t.Errorf("Received %d is not the Replies plus the drops (%v)", got, dropCounts(s))
	}
}

// TestRateLimitChecksFirst: a rate-limited source's bad messages are still
// counted under their own reason, so the counters say what was sent.
func TestRateLimitChecksFirst(t *testing.T) {
	s, _ := newTestServer(t, testConfig())
	answered(s, 1, sourceBurst+5)
	for _, b := range [][]byte{{11, 0}, msg(msgSolicit), infoReq(opt(optIANA))} {
		p := from(1)
		p.Payload = b
		s.handle(p)
	}
	want := map[string]uint64{"rate_limited": 5, "malformed": 1, "stateful_ignored": 1, "ia_option": 1}
	if got := dropCounts(s); len(got) != len(want) || got["rate_limited"] != 5 || got["malformed"] != 1 || got["stateful_ignored"] != 1 || got["ia_option"] != 1 {
		t.Errorf("drops %v, want %v", got, want)
	}
}

// TestRateLimitGlobal: a flood from ever-new sources gets globalBurst
// Replies, then globalRate per second.
func TestRateLimitGlobal(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	n := 0
	for i := range 3 * globalBurst {
		n += answered(s, 1000+i, 1)
	}
	if n != globalBurst {
		t.Errorf("%d new sources at once: %d answered, want globalBurst (%d)", 3*globalBurst, n, globalBurst)
	}
	clk.Advance(time.Second)
	n = 0
	for i := range 3 * globalBurst {
		n += answered(s, 5000+i, 1)
	}
	if n != int(globalRate) {
		t.Errorf("a second later: %d answered, want globalRate (%v)", n, globalRate)
	}
}

// TestRateLimitTable: the table of sources stays within maxSources under a
// flood of ever-new sources, and sources that went quiet are forgotten
// so that new clients are served again.
func TestRateLimitTable(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	for i := range 20 * maxSources {
		s.handle(from(i))
		if i%100 == 0 {
			clk.Advance(time.Second) // keep the global bucket from deciding
		}
		if n := s.limit.size(); n > maxSources {
			t.Fatalf("after %d sources the table holds %d, more than maxSources (%d)", i+1, n, maxSources)
		}
	}
	clk.Advance(sourceBurst * time.Second)
	if n := answered(s, 1<<30, 1); n != 1 {
		t.Error("a new source after the flood went quiet was not answered")
	}
	if n := s.Status().Sources; n > maxSources || n < 1 {
		t.Errorf("Status().Sources = %d", n)
	}
}
