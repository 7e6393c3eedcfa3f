package dhcp6server

import (
	"net"
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
	clk.Forward(time.Second)
	if n := answered(s, 1, 10); n != 1 {
		t.Errorf("a second later: %d answered, want 1 (sourceRate)", n)
	}
	clk.Forward(time.Hour)
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

// fromHost is an Information-request from link-local source i of the
// host with Ethernet address 02:00:00:00:hh:hh.
func fromHost(i, host int) rawudp.Packet {
	p := from(i)
	p.SrcMAC = net.HardwareAddr{0x02, 0, 0, 0, byte(host >> 8), byte(host)}
	return p
}

// TestRateLimitGlobal: a flood from ever-new sources, each with its own
// MAC, gets globalBurst Replies, then globalRate per second.
func TestRateLimitGlobal(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	ask := func(first int) int {
		n := 0
		for i := range 3 * globalBurst {
			if _, ok := s.handle(fromHost(first+i, first+i)); ok {
				n++
			}
		}
		return n
	}
	if n := ask(1000); n != globalBurst {
		t.Errorf("%d new hosts at once: %d answered, want globalBurst (%d)", 3*globalBurst, n, globalBurst)
	}
	clk.Forward(time.Second)
	if n := ask(5000); n != int(globalRate) {
		t.Errorf("a second later: %d answered, want globalRate (%v)", n, globalRate)
	}
}

// TestRateLimitPerHost: one host's budget covers every source address it
// sends from, so a host that floods from ever-new spoofed link-local
// sources spends hostBurst and hostRate, not the server's globalRate,
// and a client on another host asking once a second (INF_TIMEOUT, RFC
// 8415 §18.2.6) keeps getting its Replies (10 of 25 without the per-host
// limit).
func TestRateLimitPerHost(t *testing.T) {
	s, clk := newTestServer(t, testConfig())
	const perSecond, seconds = 2000, 25
	client, flood, src := 0, 0, 0
	for range seconds {
		for i := range perSecond {
			src++
			if _, ok := s.handle(fromHost(1000+src, 0xbad)); ok {
				flood++
			}
			if i == perSecond/2 {
				if _, ok := s.handle(fromHost(7, 0x900d)); ok {
					client++
				}
			}
			clk.Forward(time.Second / perSecond)
		}
	}
	t.Logf("client %d/%d answered; flood %d of %d answered; rate_limited %d", client, seconds, flood, seconds*perSecond, s.stats.Drops[DropRateLimited].Load())
	if client != seconds {
		t.Errorf("the client on another host got %d of %d Replies during the flood, want all", client, seconds)
	}
	if max := hostBurst + seconds*int(hostRate) + 1; flood > max {
		t.Errorf("the flood of %d got %d Replies, want at most hostBurst + %d s × hostRate (%d)", seconds*perSecond, flood, seconds, max)
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
			clk.Forward(time.Second) // keep the global bucket from deciding
		}
		if n := s.limit.size(); n > maxSources {
			t.Fatalf("after %d sources the table holds %d, more than maxSources (%d)", i+1, n, maxSources)
		}
	}
	clk.Forward(sourceBurst * time.Second)
	if n := answered(s, 1<<30, 1); n != 1 {
		t.Error("a new source after the flood went quiet was not answered")
	}
	if n := s.Status().Sources; n > maxSources || n < 1 {
		t.Errorf("Status().Sources = %d", n)
	}
}
