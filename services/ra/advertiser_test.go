package ra

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var (
	p1 = netip.MustParsePrefix("2001:db8:1:1::/64")
	p2 = netip.MustParsePrefix("2001:db8:2:1::/64")
	p3 = netip.MustParsePrefix("2001:db8:3:1::/64")
)

// advHarness runs an Advertiser on a fake clock and a recording link,
// inside a synctest bubble.
type advHarness struct {
	t      *testing.T
	clk    fakeClock
	link   *recLink
	a      *Advertiser
	cancel context.CancelFunc
	done   chan error
}

func newAdv(t *testing.T, mod func(*Config)) *advHarness {
	t.Helper()
	clk := newFakeClock()
	link := newRecLink(clk)
	cfg := Config{Link: link, SrcAddr: ourLL, Prefixes: []Prefix{{Prefix: p1}}, Clock: clk, Rand: drawMax}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &advHarness{t: t, clk: clk, link: link, a: a}
}

func (h *advHarness) start() *advHarness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.a.Run(ctx) }()
	synctest.Wait()
	h.t.Cleanup(func() { h.stop() })
	return h
}

// stop ends Run and returns the frames written since the last take.
func (h *advHarness) stop() []seenRA {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	if err := <-h.done; err != nil {
		h.t.Errorf("Run = %v", err)
	}
	return h.ras()
}

// ras decodes the RAs written since the last call.
func (h *advHarness) ras() []seenRA {
	h.t.Helper()
	var out []seenRA
	for _, f := range h.link.take() {
		out = append(out, decodeRA(h.t, f))
	}
	return out
}

func times(ras []seenRA) []time.Duration {
	var out []time.Duration
	for _, r := range ras {
		out = append(out, r.at)
	}
	return out
}

func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// TestRFC4861_6_2_1_Validate: every bound of §6.2.1 and of the fields'
// documentation is refused, all problems reported at once.
func TestRFC4861_6_2_1_Validate(t *testing.T) {
	link := newRecLink(fakeClock{})
	ok := Config{Link: link, SrcAddr: ourLL}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want []string
	}{
		{"no link, no source", func(c *Config) { c.Link, c.SrcAddr = nil, netip.Addr{} }, []string{"no link", "source invalid IP"}},
		{"global source", func(c *Config) { c.SrcAddr = netip.MustParseAddr("2001:db8::1") }, []string{"not an IPv6 link-local"}},
		{"multicast MAC", func(c *Config) { c.Link = &recLink{mac: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}} }, []string{"not a unicast Ethernet"}},
		{"max 3 s", func(c *Config) { c.MaxInterval = 3 * time.Second }, []string{"max interval 3s"}},
		{"max 1801 s", func(c *Config) { c.MaxInterval = 1801 * time.Second }, []string{"max interval 30m1s"}},
		{"min 2 s", func(c *Config) { c.MaxInterval, c.MinInterval = 10*time.Second, 2*time.Second }, []string{"min interval 2s"}},
		{"min over 0.75 max", func(c *Config) { c.MaxInterval, c.MinInterval = 10*time.Second, 8*time.Second }, []string{"min interval 8s"}},
		{"router lifetime under max", func(c *Config) { c.RouterLifetime = 100 * time.Second }, []string{"router lifetime 1m40s"}},
		{"router lifetime over 9000 s", func(c *Config) { c.RouterLifetime = 9001 * time.Second }, []string{"router lifetime"}},
		{"router lifetime not whole", func(c *Config) { c.RouterLifetime = 1000*time.Second + 1 }, []string{"router lifetime"}},
		{"DNS lifetime under max", func(c *Config) { c.DNSLifetime = 599 * time.Second }, []string{"DNS lifetime 9m59s"}},
		{"MTU 1279", func(c *Config) { c.MTU = 1279 }, []string{"MTU 1279"}},
		{"RDNSS multicast and IPv4", func(c *Config) {
			c.RDNSS = []netip.Addr{netip.MustParseAddr("ff02::1"), netip.MustParseAddr("192.0.2.1")}
		}, []string{"RDNSS[0] ff02::1 is not a unicast", "RDNSS[1] 192.0.2.1 is not an IPv6"}},
		{"DNSSL bad name", func(c *Config) { c.DNSSL = []string{"lan", "a..b", "-x"} }, []string{"DNSSL[1]", "DNSSL[2]"}},
		{"16 RDNSS servers", func(c *Config) {
			for i := range 16 {
				c.RDNSS = append(c.RDNSS, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)}))
			}
		}, []string{"16 RDNSS servers, at most 15"}},
		{"DNSSL too long", func(c *Config) {
			c.DNSSL = []string{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63), strings.Repeat("d", 60)}
		}, []string{"DNSSL would be 264 octets, more than 248"}},
		{"prefix /56, /64 with host bits, link-local, twice", func(c *Config) {
			c.Prefixes = []Prefix{
				{Prefix: netip.MustParsePrefix("2001:db8::/56")}, {Prefix: netip.MustParsePrefix("2001:db8::1/64")},
				{Prefix: netip.MustParsePrefix("fe80::/64")}, {Prefix: p1}, {Prefix: p1},
			}
		}, []string{"Prefixes[0]", "Prefixes[1]", "Prefixes[2] fe80::/64 is link-local", "Prefixes[4] 2001:db8:1:1::/64 is given twice"}},
		{"nine prefixes", func(c *Config) {
			for i := range 9 {
				c.Prefixes = append(c.Prefixes, Prefix{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 7: byte(i)}), 64)})
			}
		}, []string{"9 prefixes, at most 8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			_, err := New(c)
			if err == nil {
				t.Fatalf("New = nil error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New = %v, want it to say %q", err, w)
				}
			}
		})
	}
	for name, tc := range map[string]struct {
		maxI, wantMin time.Duration
	}{
		"default 600 s": {0, 198 * time.Second},
		"9 s":           {9 * time.Second, 3 * time.Second}, // 0.33 × 9 s is under the 3 s floor
		"4 s":           {4 * time.Second, 3 * time.Second}, // 0.75 × Max (package doc)
	} {
		c := ok
		c.MaxInterval = tc.maxI
		if _, minI := c.intervals(); minI != tc.wantMin {
			t.Errorf("%s: default min interval %v, want %v", name, minI, tc.wantMin)
		}
	}
	if _, err := New(Config{Link: link, SrcAddr: ourLL, MaxInterval: 4 * time.Second, RouterLifetime: 4 * time.Second,
		DNSLifetime: 4 * time.Second, NotDefaultRouter: true, MTU: 1280}); err != nil {
		t.Errorf("New at the bounds = %v", err)
	}
}

// TestRFC4861_6_2_4_InitialAdvertisements: the first RA goes at once,
// the next two at most MAX_INITIAL_RTR_ADVERT_INTERVAL (16 s) apart, then
// at MinInterval (the smallest draw) or MaxInterval (the largest).
func TestRFC4861_6_2_4_InitialAdvertisements(t *testing.T) {
	for name, tc := range map[string]struct {
		src  constSource
		want []time.Duration
	}{
		"largest draws":  {drawMax, []time.Duration{0, 16 * time.Second, 32 * time.Second, 632 * time.Second, 1232 * time.Second}},
		"smallest draws": {drawMin, []time.Duration{0, 16 * time.Second, 32 * time.Second, 230 * time.Second, 428 * time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newAdv(t, func(c *Config) { c.Rand = tc.src }).start()
				h.clk.Advance(1300 * time.Second)
				ras := h.ras()
				if got := times(ras); !slices.Equal(got[:min(len(got), len(tc.want))], tc.want) {
					t.Errorf("RAs at %v, want %v", got, tc.want)
				}
				for _, r := range ras {
					if r.dst != AllNodes || r.src != ourLL || r.hopLimit != 255 || r.dstMAC.String() != "33:33:00:00:00:01" {
						t.Errorf("RA %v -> %v (MAC %v) hop limit %d; want %v -> ff02::1 (33:33:00:00:00:01), 255", r.src, r.dst, r.dstMAC, r.hopLimit, ourLL)
					}
				}
			})
		})
	}
}

// TestRFC4861_6_2_4_IntervalsInRange: with random draws, after the
// initial three every interval lies in [MinInterval, MaxInterval], and
// they are not all the same.
func TestRFC4861_6_2_4_IntervalsInRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) {
			c.MaxInterval, c.MinInterval = 60*time.Second, 20*time.Second
			c.Rand = rand.NewPCG(1, 2)
		}).start()
		h.clk.Advance(3 * time.Hour)
		at := times(h.ras())
		if len(at) < 3*3600/60 {
			t.Fatalf("%d RAs in 3 h with intervals of 20 s to 60 s", len(at))
		}
		seen := map[time.Duration]bool{}
		for i := 1; i < len(at); i++ {
			d := at[i] - at[i-1]
			if i < 3 && d > 16*time.Second {
				t.Errorf("initial interval %d = %v, over 16 s", i, d)
			}
			if i >= 3 && (d < 20*time.Second || d > 60*time.Second) {
				t.Errorf("interval %d = %v, not in [20s, 60s]", i, d)
			}
			seen[d.Round(time.Second)] = true
		}
		if len(seen) < 10 {
			t.Errorf("only %d different intervals: not random", len(seen))
		}
	})
}

// TestRFC4861_6_2_6_SolicitedRA: an RS is answered by a multicast RA
// after MAX_RA_DELAY_TIME (the largest draw), 3 s after the previous
// multicast RA at the earliest, by the scheduled RA if that comes
// sooner, and once for a burst; each answer restarts the interval.
func TestRFC4861_6_2_6_SolicitedRA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, nil).start()
		h.clk.Advance(100 * time.Second) // 0, 16, 32 s; the next at 632 s
		if got := times(h.ras()); !slices.Equal(got, []time.Duration{0, 16 * time.Second, 32 * time.Second}) {
			t.Fatalf("initial RAs at %v", got)
		}
		rs := rsFrame(hostLL, 255, 0, false, optSLLAOf(hostMAC))
		deliver := func() {
			if !h.a.Deliver(rs) {
				t.Fatal("Deliver(RS) = false")
			}
		}

		deliver() // at 100 s: long after the last RA
		h.clk.Advance(sec(0.499))
		if r := h.ras(); len(r) != 0 {
			t.Fatalf("answered at %v, before the 0.5 s delay", times(r))
		}
		h.clk.Advance(sec(0.001))
		if got := times(h.ras()); !slices.Equal(got, []time.Duration{sec(100.5)}) {
			t.Fatalf("answer at %v, want 100.5 s", got)
		}

		h.clk.Advance(time.Second)
		deliver() // at 101.5 s, 1 s after an RA: at 100.5 + 3 + 0.5
		h.clk.Advance(10 * time.Second)
		if got := times(h.ras()); !slices.Equal(got, []time.Duration{sec(104)}) {
			t.Fatalf("answer at %v, want 104 s (MIN_DELAY_BETWEEN_RAS after the last, plus the delay)", got)
		}

		// The answer at 104 s restarted the interval: the next
		// unsolicited RA is at 704 s. An RS at 703.8 s is answered by it.
		h.clk.Advance(sec(703.8) - h.clk.since())
		if r := h.ras(); len(r) != 0 {
			t.Fatalf("RAs at %v before 704 s", times(r))
		}
		deliver()
		h.clk.Advance(sec(0.2))
		if got := times(h.ras()); !slices.Equal(got, []time.Duration{sec(704)}) {
			t.Fatalf("RAs at %v, want the scheduled one at 704 s", got)
		}

		// A burst at 800 s: one answer.
		h.clk.Advance(96 * time.Second)
		for range 50 {
			deliver()
		}
		h.clk.Advance(time.Second)
		if got := times(h.ras()); !slices.Equal(got, []time.Duration{sec(800.5)}) {
			t.Fatalf("burst answered at %v, want once at 800.5 s", got)
		}
		st := h.a.Stats()
		if st.RSReceived.Load() != 53 || st.SolicitedSent.Load() != 4 || st.RSCoalesced.Load() != 49 {
			t.Errorf("rs_received %d solicited_sent %d rs_coalesced %d, want 53, 4, 49",
				st.RSReceived.Load(), st.SolicitedSent.Load(), st.RSCoalesced.Load())
		}
	})
}

// TestRFC4861_6_2_6_RSFlood: an RS every 10 ms for a minute gets an RA
// within 3.5 s (MIN_DELAY_BETWEEN_RAS + MAX_RA_DELAY_TIME), multicast RAs
// stay 3 s apart, and every RS is accounted for.
func TestRFC4861_6_2_6_RSFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) { c.Rand = rand.NewPCG(3, 4) }).start()
		h.clk.Advance(time.Hour)
		h.ras()
		rs := rsFrame(netip.IPv6Unspecified(), 255, 0, false)
		var sentAt []time.Duration
		for range 6000 {
			sentAt = append(sentAt, h.clk.since())
			h.a.Deliver(rs)
			h.clk.Advance(10 * time.Millisecond)
		}
		h.clk.Advance(4 * time.Second)
		at := times(h.ras())
		for i := 1; i < len(at); i++ {
			if at[i]-at[i-1] < 3*time.Second {
				t.Errorf("RAs at %v and %v: under 3 s apart", at[i-1], at[i])
			}
		}
		if len(at) > 60/3+2 {
			t.Errorf("%d RAs for a one-minute flood", len(at))
		}
		for _, s := range sentAt {
			i, _ := slices.BinarySearch(at, s)
			if i == len(at) || at[i]-s > sec(3.5) {
				t.Fatalf("RS at %v: no RA within 3.5 s (RAs %v)", s, at)
			}
		}
		st := h.a.Stats()
		if st.RSReceived.Load() != 6000 || st.SolicitedSent.Load()+st.RSCoalesced.Load() != 6000 {
			t.Errorf("rs_received %d, solicited_sent %d + rs_coalesced %d, want 6000 = the sum",
				st.RSReceived.Load(), st.SolicitedSent.Load(), st.RSCoalesced.Load())
		}
	})
}

// TestRFC4861_6_1_1_RSValidation: an RS failing a check of §6.1.1 is
// consumed and counted under its reason, and asks for no RA.
func TestRFC4861_6_1_1_RSValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, nil).start()
		h.clk.Advance(time.Hour)
		h.ras()
		unspec := netip.IPv6Unspecified()
		slla := optSLLAOf(hostMAC)
		long := rsFrame(hostLL, 255, 0, false, slla)
		binary.BigEndian.PutUint16(long[14+4:], uint16(len(long)-54+1))
		jumbo := rsFrame(hostLL, 255, 0, false, slla)
		binary.BigEndian.PutUint16(jumbo[14+4:], 0)
		short := gvFrame(MulticastMAC(AllRouters), hostMAC, hostLL, AllRouters, 255, []byte{typeRS, 0, 0, 0, 0, 0}, false)
		for _, tc := range []struct {
			name  string
			frame []byte
			drop  DropReason
		}{
			{"hop limit 64", rsFrame(hostLL, 64, 0, false, slla), DropHopLimit},
			{"hop limit 254", rsFrame(hostLL, 254, 0, false), DropHopLimit},
			{"code 1", rsFrame(hostLL, 255, 1, false, slla), DropCode},
			{"bad checksum", rsFrame(hostLL, 255, 0, true, slla), DropChecksum},
			{"option length 0", rsFrame(hostLL, 255, 0, false, []byte{1, 0, 0, 0, 0, 0, 0, 0}), DropOptionLengthZero},
			{"unknown option length 0", rsFrame(hostLL, 255, 0, false, slla, []byte{200, 0, 0, 0, 0, 0, 0, 0}), DropOptionLengthZero},
			{"option past the end", rsFrame(hostLL, 255, 0, false, []byte{1, 2, 0, 0, 0, 0, 0, 0}), DropMalformed},
			{"option header cut", rsFrame(hostLL, 255, 0, false, []byte{1}), DropMalformed},
			{"ICMP length 6", short, DropMalformed},
			{"payload length past the frame", long, DropMalformed},
			{"payload length 0", jumbo, DropMalformed},
			{"unspecified with SLLA", rsFrame(unspec, 255, 0, false, slla), DropUnspecifiedWithSLLA},
		} {
			before := h.a.stats.Drops[tc.drop].Load()
			if !h.a.Deliver(tc.frame) {
				t.Errorf("%s: not consumed", tc.name)
			}
			if got := h.a.stats.Drops[tc.drop].Load(); got != before+1 {
				t.Errorf("%s: %s drops %d, want %d", tc.name, tc.drop, got, before+1)
			}
		}
		h.clk.Advance(5 * time.Second)
		if r := h.ras(); len(r) != 0 || h.a.stats.RSReceived.Load() != 0 {
			t.Fatalf("bad RSs got %d RAs, rs_received %d", len(r), h.a.stats.RSReceived.Load())
		}
		for name, good := range map[string][]byte{
			"with SLLA":         rsFrame(hostLL, 255, 0, false, slla),
			"from ::":           rsFrame(unspec, 255, 0, false),
			"unknown option":    rsFrame(hostLL, 255, 0, false, []byte{200, 1, 1, 2, 3, 4, 5, 6}),
			"padded frame":      append(rsFrame(hostLL, 255, 0, false), 0, 0, 0, 0),
			"to our link-local": gvFrame(net.HardwareAddr{2, 0, 0, 0, 0, 1}, hostMAC, hostLL, ourLL, 255, rsICMP(0, slla), false),
			"global source":     rsFrame(netip.MustParseAddr("2001:db8::22"), 255, 0, false),
		} {
			if !h.a.Deliver(good) {
				t.Errorf("%s: a valid RS was not consumed", name)
			}
		}
		h.clk.Advance(time.Second)
		if got := h.a.stats.RSReceived.Load(); got != 6 {
			t.Errorf("rs_received = %d, want 6", got)
		}
		if r := h.ras(); len(r) != 1 {
			t.Errorf("%d RAs for the valid RSs, want 1", len(r))
		}
	})
}

// TestDeliverLeavesOthers: NS, NA, echo, MLD, UDP, IPv4 and a fragment
// header are left to the caller and counted nowhere.
func TestDeliverLeavesOthers(t *testing.T) {
	a, err := New(Config{Link: newRecLink(fakeClock{}), SrcAddr: ourLL})
	if err != nil {
		t.Fatal(err)
	}
	frag := rsFrame(hostLL, 255, 0, false)
	frag[14+6] = 44
	v4 := rsFrame(hostLL, 255, 0, false)
	binary.BigEndian.PutUint16(v4[12:], 0x0800)
	for name, f := range map[string][]byte{
		"NS":       gvFrame(MulticastMAC(AllNodes), hostMAC, hostLL, ourLL, 255, []byte{135, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0x80, 15: 1}, false),
		"NA":       gvFrame(MulticastMAC(AllNodes), hostMAC, hostLL, ourLL, 255, []byte{136, 0, 0, 0, 0x60, 0, 0, 0, 0xfe, 0x80, 15: 0x22}, false),
		"echo":     gvFrame(MulticastMAC(AllNodes), hostMAC, hostLL, ourLL, 64, []byte{128, 0, 0, 0, 0, 1, 0, 1}, false),
		"MLDv2":    gvFrame(MulticastMAC(AllNodes), hostMAC, hostLL, netip.MustParseAddr("ff02::16"), 1, []byte{143, 0, 0, 0, 0, 0, 0, 0}, false),
		"fragment": frag, "IPv4": v4, "empty": nil, "short": rsFrame(hostLL, 255, 0, false)[:54],
	} {
		if a.Deliver(f) {
			t.Errorf("Deliver(%s) = true", name)
		}
	}
	var n uint64
	for i := range a.stats.Drops {
		n += a.stats.Drops[i].Load()
	}
	if n != 0 || a.stats.RSReceived.Load() != 0 || a.stats.OtherRA.Load() != 0 {
		t.Errorf("counters moved: drops %d rs %d other_ra %d", n, a.stats.RSReceived.Load(), a.stats.OtherRA.Load())
	}
}

// TestRFC4861_4_2_Fields: every field of Config reaches the wire as
// gVisor's NDP decoder reads it.
func TestRFC4861_4_2_Fields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) {
			c.MTU, c.HopLimit, c.Managed, c.Other = 1480, 64, true, true
			c.RDNSS = []netip.Addr{netip.MustParseAddr("2001:db8:1:1::53"), netip.MustParseAddr("fe80::53")}
			c.DNSSL = []string{"lan.", "Example.ORG"}
			c.MaxInterval, c.RouterLifetime, c.DNSLifetime = 100*time.Second, 250*time.Second, 400*time.Second
			c.Prefixes = []Prefix{
				{Prefix: p1},
				{Prefix: p2, Valid: Infinity, Preferred: Infinity},
				{Prefix: p3, Valid: 1000 * time.Second, Preferred: 2000 * time.Second}, // preferred cut to valid
			}
		}).start()
		r := h.ras()[0]
		if r.curHopLimit != 64 || !r.m || !r.o || r.routerLifetime != 250*time.Second || r.reach != 0 || r.retrans != 0 {
			t.Errorf("header: hop limit %d M %v O %v lifetime %v reach %v retrans %v", r.curHopLimit, r.m, r.o, r.routerLifetime, r.reach, r.retrans)
		}
		if r.slla.String() != "02:00:00:00:00:01" || r.srcMAC.String() != "02:00:00:00:00:01" || r.mtu != 1480 {
			t.Errorf("SLLA %v, source MAC %v, MTU %d", r.slla, r.srcMAC, r.mtu)
		}
		want := []seenPrefix{
			{p1, true, true, DefaultValidLifetime, DefaultPreferredLifetime},
			{p2, true, true, Infinity, Infinity},
			{p3, true, true, 1000 * time.Second, 1000 * time.Second},
		}
		if !slices.Equal(r.prefixes, want) {
			t.Errorf("prefixes %+v, want %+v", r.prefixes, want)
		}
		if !slices.Equal(r.rdnss, []netip.Addr{netip.MustParseAddr("2001:db8:1:1::53"), netip.MustParseAddr("fe80::53")}) || r.rdnssLifetime != 400*time.Second {
			t.Errorf("RDNSS %v lifetime %v", r.rdnss, r.rdnssLifetime)
		}
		if !slices.Equal(r.dnssl, []string{"lan", "example.org"}) || r.dnsslLifetime != 400*time.Second {
			t.Errorf("DNSSL %q lifetime %v", r.dnssl, r.dnsslLifetime)
		}
	})
	t.Run("NotDefaultRouter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newAdv(t, func(c *Config) { c.NotDefaultRouter = true }).start()
			if r := h.ras()[0]; r.routerLifetime != 0 || len(r.prefixes) != 1 {
				t.Errorf("router lifetime %v, %d prefixes; want 0 and the prefix", r.routerLifetime, len(r.prefixes))
			}
		})
	})
	t.Run("largest RA", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var rdnss []netip.Addr
			for i := range maxRDNSS {
				rdnss = append(rdnss, netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)}))
			}
			var ps, ps2 []Prefix
			for i := range maxPrefixes {
				ps = append(ps, Prefix{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 7: byte(i)}), 64)})
				ps2 = append(ps2, Prefix{Prefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb9, 7: byte(i)}), 64)})
			}
			dnssl := []string{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63), strings.Repeat("d", 40)}
			h := newAdv(t, func(c *Config) { c.MTU, c.RDNSS, c.DNSSL, c.Prefixes = 1500, rdnss, dnssl, ps }).start()
			if err := h.a.SetPrefixes(ps2); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(5 * time.Second)
			ras := h.ras()
			if len(ras) != 2 {
				t.Fatalf("%d RAs, want 2; send errors %d", len(ras), h.a.Stats().SendErrors.Load())
			}
			r := ras[1]
			if len(r.prefixes) != 2*maxPrefixes || r.icmpLen > maxRALen {
				t.Errorf("%d prefixes in %d octets, want %d in at most %d", len(r.prefixes), r.icmpLen, 2*maxPrefixes, maxRALen)
			}
		})
	})
}

// TestRFC4861_6_2_1_LifetimesCountDown: a prefix with ends announces
// what remains of them, in whole seconds, and is no longer announced
// once its valid lifetime has ended.
func TestRFC4861_6_2_1_LifetimesCountDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) {
			c.MaxInterval, c.MinInterval = 600*time.Second, 200*time.Second
			c.Prefixes = []Prefix{{Prefix: p1, ValidUntil: epoch.Add(3600*time.Second + 500*time.Millisecond), PreferredUntil: epoch.Add(1800 * time.Second)}}
		}).start()
		h.clk.Advance(33 * time.Second)
		for i, r := range h.ras() {
			p := r.prefixes[0]
			wantV := 3600*time.Second - r.at
			wantP := 1800*time.Second - r.at
			if p.valid != wantV || p.preferred != wantP {
				t.Errorf("RA %d at %v: valid %v preferred %v, want %v and %v", i, r.at, p.valid, p.preferred, wantV, wantP)
			}
		}
		h.clk.Advance(3000 * time.Second) // past the preferred end
		ras := h.ras()
		if len(ras) < 4 || ras[len(ras)-1].at < 1800*time.Second {
			t.Fatalf("RAs at %v, want some after the preferred end", times(ras))
		}
		for _, r := range ras {
			wantP := max(1800*time.Second-r.at, 0)
			if len(r.prefixes) != 1 || r.prefixes[0].preferred != wantP || r.prefixes[0].valid != 3600*time.Second-r.at {
				t.Errorf("RA at %v: %+v, want preferred %v, valid %v", r.at, r.prefixes, wantP, 3600*time.Second-r.at)
			}
		}
		h.clk.Advance(2000 * time.Second) // past the valid end
		for _, r := range h.ras() {
			if r.at > 3601*time.Second && len(r.prefixes) != 0 {
				t.Errorf("RA at %v still announces %+v after the valid end", r.at, r.prefixes)
			}
		}
		if st := h.a.Status(); len(st.Prefixes) != 0 {
			t.Errorf("Status prefixes %+v after the valid end", st.Prefixes)
		}
	})
}

// TestRFC7084_L13_WithdrawnPrefix: a prefix removed by SetPrefixes is
// announced at once (within MIN_DELAY_BETWEEN_RAS) with preferred
// lifetime 0 and a valid lifetime of the lower of what remains and two
// hours, counting down, until it ends; the next two RAs come within
// 16 s (§6.2.4); a prefix put back is announced afresh.
func TestRFC7084_L13_WithdrawnPrefix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) {
			c.Prefixes = []Prefix{
				{Prefix: p1, ValidUntil: epoch.Add(10 * time.Hour), PreferredUntil: epoch.Add(5 * time.Hour)},
				{Prefix: p3, Valid: 30 * time.Minute, Preferred: 10 * time.Minute},
			}
		}).start()
		h.clk.Advance(100 * time.Second)
		h.ras()
		if err := h.a.SetPrefixes([]Prefix{{Prefix: p2}}); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(40 * time.Second)
		ras := h.ras()
		if got := times(ras); len(got) < 3 || got[0] != 100*time.Second || got[1] != 116*time.Second || got[2] != 132*time.Second {
			t.Fatalf("RAs after the change at %v, want 100 s, 116 s, 132 s", got)
		}
		want := []seenPrefix{
			{p2, true, true, DefaultValidLifetime, DefaultPreferredLifetime},
			{p1, true, true, 2 * time.Hour, 0},
			{p3, true, true, 30 * time.Minute, 0},
		}
		if !slices.Equal(ras[0].prefixes, want) {
			t.Errorf("prefixes after the change %+v, want %+v", ras[0].prefixes, want)
		}
		st := h.a.Status()
		if len(st.Prefixes) != 3 || st.Prefixes[0].Withdrawn || !st.Prefixes[1].Withdrawn || !st.Prefixes[1].ValidUntil.Equal(epoch.Add(100*time.Second+2*time.Hour)) {
			t.Errorf("Status prefixes %+v", st.Prefixes)
		}
		// An hour later p1 counts down and p3 is gone.
		h.clk.Advance(time.Hour - 40*time.Second)
		if err := h.a.SetDNS([]netip.Addr{netip.MustParseAddr("2001:db8::53")}, nil); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		ras = h.ras()
		last := ras[len(ras)-1]
		want = []seenPrefix{
			{p2, true, true, DefaultValidLifetime, DefaultPreferredLifetime},
			{p1, true, true, time.Hour, 0},
		}
		if last.at != time.Hour+100*time.Second || !slices.Equal(last.prefixes, want) || len(last.rdnss) != 1 {
			t.Errorf("RA at %v: prefixes %+v RDNSS %v; want at 1h1m40s %+v and the new RDNSS", last.at, last.prefixes, last.rdnss, want)
		}
		// p1 back: announced with its own lifetimes, not withdrawn.
		if err := h.a.SetPrefixes([]Prefix{{Prefix: p2}, {Prefix: p1, Valid: time.Hour, Preferred: time.Hour}}); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(4 * time.Second)
		ras = h.ras()
		want = []seenPrefix{
			{p2, true, true, DefaultValidLifetime, DefaultPreferredLifetime},
			{p1, true, true, time.Hour, time.Hour},
		}
		if len(ras) == 0 || !slices.Equal(ras[0].prefixes, want) {
			t.Errorf("after p1 came back: %+v, want %+v", ras, want)
		}
		// The same set again is no change: no prompt RA.
		h.clk.Advance(time.Minute)
		h.ras()
		if err := h.a.SetPrefixes([]Prefix{{Prefix: p2}, {Prefix: p1, Valid: time.Hour, Preferred: time.Hour}}); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(5 * time.Second)
		if r := h.ras(); len(r) != 0 {
			t.Errorf("an unchanged SetPrefixes sent RAs at %v", times(r))
		}
		if err := h.a.SetPrefixes([]Prefix{{Prefix: netip.MustParsePrefix("2001:db8::/48")}}); err == nil {
			t.Error("SetPrefixes(/48) = nil")
		}
	})
}

// TestWithdrawnBounded: at most maxWithdrawn withdrawn prefixes are
// announced; the oldest are forgotten first, counted.
func TestWithdrawnBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, nil).start()
		for i := range 12 {
			p := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 7: byte(i)}), 64)
			if err := h.a.SetPrefixes([]Prefix{{Prefix: p}}); err != nil {
				t.Fatal(err)
			}
		}
		h.clk.Advance(5 * time.Second)
		ras := h.ras()
		r := ras[len(ras)-1]
		if len(r.prefixes) != 1+maxWithdrawn || r.prefixes[1].prefix != netip.MustParsePrefix("2001:db8:0:3::/64") {
			t.Errorf("announced %+v, want the current one and the %d latest withdrawn from 2001:db8:0:3::/64", r.prefixes, maxWithdrawn)
		}
		if got := h.a.Stats().WithdrawnForgotten.Load(); got != 4 {
			t.Errorf("withdrawn_forgotten = %d, want 4", got)
		}
	})
}

// TestRFC4861_6_2_5_FinalRA: when Run ends it sends one RA with Router
// Lifetime 0, every prefix deprecated with at most two hours valid, and
// DNS lifetimes 0.
func TestRFC4861_6_2_5_FinalRA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) {
			c.RDNSS, c.DNSSL = []netip.Addr{netip.MustParseAddr("2001:db8::53")}, []string{"lan"}
			c.Prefixes = []Prefix{
				{Prefix: p1, ValidUntil: epoch.Add(10 * time.Hour), PreferredUntil: epoch.Add(5 * time.Hour)},
				{Prefix: p2, Valid: time.Hour, Preferred: 30 * time.Minute},
			}
		}).start()
		h.clk.Advance(100 * time.Second)
		h.ras()
		if !h.a.Status().Running {
			t.Error("Status.Running = false during Run")
		}
		ras := h.stop()
		if len(ras) != 1 {
			t.Fatalf("%d RAs on stop, want 1", len(ras))
		}
		r := ras[0]
		want := []seenPrefix{{p1, true, true, 2 * time.Hour, 0}, {p2, true, true, time.Hour, 0}}
		if r.routerLifetime != 0 || !slices.Equal(r.prefixes, want) || r.rdnssLifetime != 0 || r.dnsslLifetime != 0 || len(r.rdnss) != 1 {
			t.Errorf("final RA: router lifetime %v, prefixes %+v, RDNSS %v lifetime %v, DNSSL lifetime %v",
				r.routerLifetime, r.prefixes, r.rdnss, r.rdnssLifetime, r.dnsslLifetime)
		}
		if st := h.a.Status(); st.Running || !st.NextSend.IsZero() {
			t.Errorf("Status after Run: running %v next %v", st.Running, st.NextSend)
		}
	})
}

// TestRunTwiceAndSendErrors: a second Run fails with ErrRunning; a link
// that refuses frames is counted and Run carries on.
func TestRunTwiceAndSendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, nil)
		h.link.err = errLinkDown
		h.start()
		if err := h.a.Run(context.Background()); err != ErrRunning {
			t.Errorf("second Run = %v, want ErrRunning", err)
		}
		h.clk.Advance(20 * time.Second)
		if got := h.a.Stats().SendErrors.Load(); got != 2 || h.a.Stats().Sent.Load() != 0 {
			t.Errorf("send_errors %d sent %d, want 2 and 0", got, h.a.Stats().Sent.Load())
		}
		h.link.mu.Lock()
		h.link.err = nil
		h.link.mu.Unlock()
		h.clk.Advance(20 * time.Second)
		if got := h.a.Stats().Sent.Load(); got != 1 {
			t.Errorf("sent %d once the link is back, want 1", got)
		}
	})
}

// TestRFC4861_6_2_7_OtherRouters: another router's RA is left to the
// caller and counted; when it contradicts ours in Cur Hop Limit, M or O,
// MTU or a prefix's lifetimes (beyond the skew) it is counted as
// inconsistent; unspecified values, other prefixes and lifetimes within
// the skew are not; comparisons are rate-limited; our own looped-back RA
// is not counted.
func TestRFC4861_6_2_7_OtherRouters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) {
			c.HopLimit, c.MTU, c.Other = 64, 1500, true
			c.Prefixes = []Prefix{{Prefix: p1, ValidUntil: epoch.Add(3600 * time.Second), PreferredUntil: epoch.Add(1800 * time.Second)}}
		}).start()
		hdr := raHdr{curHopLimit: 64, o: true, lifetime: 1800}
		for _, tc := range []struct {
			name         string
			icmp         []byte
			inconsistent bool
		}{
			{"same", raICMP(hdr, optMTU(1500), optPrefix(p1.String(), true, true, 3600, 1800)), false},
			{"unspecified hop limit, other prefix, no MTU", raICMP(raHdr{o: true, lifetime: 1800}, optPrefix("2001:db8:9::/64", true, true, 100, 50)), false},
			{"lifetimes 5 s off", raICMP(hdr, optPrefix(p1.String(), true, true, 3595, 1805)), false},
			{"hop limit 128", raICMP(raHdr{curHopLimit: 128, o: true}), true},
			{"M flag", raICMP(raHdr{m: true, o: true}), true},
			{"O flag clear", raICMP(raHdr{}), true},
			{"MTU 1492", raICMP(hdr, optMTU(1492)), true},
			{"valid lifetime", raICMP(hdr, optPrefix(p1.String(), true, true, 7200, 1800)), true},
			{"preferred infinite", raICMP(hdr, optPrefix(p1.String(), true, true, 3600, 0xffffffff)), true},
		} {
			before := h.a.stats.Inconsistent.Load()
			if h.a.Deliver(raFrame(otherMAC, otherLL, tc.icmp)) {
				t.Errorf("%s: another router's RA was consumed", tc.name)
			}
			if got := h.a.stats.Inconsistent.Load() - before; got != map[bool]uint64{false: 0, true: 1}[tc.inconsistent] {
				t.Errorf("%s: inconsistent moved by %d, want %v", tc.name, got, tc.inconsistent)
			}
			h.clk.Advance(otherRACheckEvery)
		}
		// The first is compared; the second, within otherRACheckEvery,
		// only counted.
		h.a.Deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{m: true})))
		h.a.Deliver(raFrame(other2MAC, other2LL, raICMP(raHdr{m: true})))
		// Invalid ones: counted, not compared.
		h.a.Deliver(gvFrame(MulticastMAC(AllNodes), otherMAC, otherLL, AllNodes, 64, raICMP(raHdr{m: true}), false))
		h.a.Deliver(gvFrame(MulticastMAC(AllNodes), otherMAC, netip.MustParseAddr("2001:db8::1"), AllNodes, 255, raICMP(raHdr{m: true}), false))
		// Our own, looped back.
		h.a.Deliver(gvFrame(MulticastMAC(AllNodes), h.link.mac, ourLL, AllNodes, 255, raICMP(raHdr{m: true}), false))
		st := h.a.Stats()
		if st.OtherRA.Load() != 13 || st.OtherRAInvalid.Load() != 2 || st.Inconsistent.Load() != 7 || st.OtherRAUnchecked.Load() != 1 {
			t.Errorf("other_ra %d invalid %d unchecked %d inconsistent %d, want 13, 2, 1, 7",
				st.OtherRA.Load(), st.OtherRAInvalid.Load(), st.OtherRAUnchecked.Load(), st.Inconsistent.Load())
		}
	})
}

// TestSetDNS: a change is announced promptly; an unchanged one and an
// invalid one are not, and the latter is refused.
func TestSetDNS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newAdv(t, func(c *Config) { c.RDNSS = []netip.Addr{netip.MustParseAddr("2001:db8::53")} }).start()
		h.clk.Advance(time.Minute)
		h.ras()
		if err := h.a.SetDNS([]netip.Addr{netip.MustParseAddr("2001:db8::53")}, nil); err != nil {
			t.Fatal(err)
		}
		if err := h.a.SetDNS([]netip.Addr{netip.MustParseAddr("ff02::1")}, nil); err == nil {
			t.Error("SetDNS(ff02::1) = nil")
		}
		h.clk.Advance(5 * time.Second)
		if r := h.ras(); len(r) != 0 {
			t.Errorf("RAs %v after an unchanged SetDNS", times(r))
		}
		if err := h.a.SetDNS(nil, []string{"home.arpa."}); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(time.Second)
		r := h.ras()
		if len(r) != 1 || len(r[0].rdnss) != 0 || !slices.Equal(r[0].dnssl, []string{"home.arpa"}) {
			t.Errorf("after SetDNS: %+v", r)
		}
		if st := h.a.Status(); !slices.Equal(st.DNSSL, []string{"home.arpa"}) || len(st.RDNSS) != 0 {
			t.Errorf("Status DNS %v %v", st.RDNSS, st.DNSSL)
		}
	})
}
