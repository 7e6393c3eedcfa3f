package ra

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/services/hwaddr"
)

// lrnHarness runs a Learner on a fake clock and a recording link, inside
// a synctest bubble, and records OnChange calls.
type lrnHarness struct {
	t      *testing.T
	clk    fakeClock
	link   *recLink
	l      *Learner
	cancel context.CancelFunc
	done   chan error

	mu      sync.Mutex
	changes []State
	silent  map[netip.Addr]bool // routers that answer no NS
}

func newLrn(t *testing.T, mod func(*LearnerConfig)) *lrnHarness {
	t.Helper()
	h := &lrnHarness{t: t, clk: newFakeClock(), silent: map[netip.Addr]bool{}}
	h.link = newRecLink(h.clk)
	h.link.answer = h.answerNS
	cfg := LearnerConfig{Link: h.link, Clock: h.clk, Rand: drawMax, OnChange: func(s State) {
		h.mu.Lock()
		h.changes = append(h.changes, s)
		h.mu.Unlock()
	}}
	if mod != nil {
		mod(&cfg)
	}
	l, err := NewLearner(cfg)
	if err != nil {
		t.Fatalf("NewLearner: %v", err)
	}
	h.l = l
	return h
}

func (h *lrnHarness) start() *lrnHarness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.l.Run(ctx) }()
	synctest.Wait()
	h.t.Cleanup(func() {
		cancel()
		if err := <-h.done; err != nil {
			h.t.Errorf("Run = %v", err)
		}
	})
	return h
}

// deliver hands frame to the Learner, which must consume it, and lets
// Run apply it.
func (h *lrnHarness) deliver(frame []byte) {
	h.t.Helper()
	if !h.l.Deliver(frame) {
		h.t.Fatalf("Deliver(% x) = false", frame)
	}
	synctest.Wait()
}

// answerNS plays the routers on the link: each NS the Learner writes
// is answered by a solicited NA from its target, unless the target is
// silent.
func (h *lrnHarness) answerNS(f []byte) {
	if t, ok := icmpType(f); !ok || t != typeNS {
		return
	}
	target := netip.AddrFrom16([16]byte(f[62:78]))
	h.mu.Lock()
	silent := h.silent[target]
	h.mu.Unlock()
	if silent {
		return
	}
	src := netip.AddrFrom16([16]byte(f[22:38]))
	mac := ownerMAC(target)
	if dst := net.HardwareAddr(f[0:6]); dst[0] != 0x33 && dst.String() != mac.String() {
		return // unicast to another MAC: the owner does not see it
	}
	if h.l.Deliver(gvFrame(net.HardwareAddr(f[6:12]), mac, target, src, 255, naICMP(naSolicited|0x20, target, mac), false)) {
		h.t.Errorf("Deliver(NA) = true, want it left to netstack")
	}
}

// ownerMAC is the MAC of the tests' neighbour at a: the test addresses'
// own, or the one a modified EUI-64 link-local address (LinkLocal) holds.
func ownerMAC(a netip.Addr) net.HardwareAddr {
	switch a {
	case otherLL:
		return otherMAC
	case other2LL:
		return other2MAC
	case hostLL:
		return hostMAC
	}
	b := a.As16()
	return net.HardwareAddr{b[8] ^ 2, b[9], b[10], b[13], b[14], b[15]}
}

// setSilent makes router a answer NSs or not.
func (h *lrnHarness) setSilent(a netip.Addr, silent bool) {
	h.mu.Lock()
	h.silent[a] = silent
	h.mu.Unlock()
}

// naICMP is a Neighbor Advertisement (RFC 4861 §4.4) with flags (R 0x80,
// S 0x40, O 0x20) and a Target Link-Layer Address option, checksum zero.
func naICMP(flags byte, target netip.Addr, tlla net.HardwareAddr) []byte {
	return slices.Concat([]byte{typeNA, 0, 0, 0, flags, 0, 0, 0}, target.AsSlice(), []byte{2, 1}, tlla)
}

// nchanges returns how many times OnChange was called.
func (h *lrnHarness) nchanges() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.changes)
}

func (h *lrnHarness) lastChange() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.changes) == 0 {
		h.t.Fatal("OnChange never called")
	}
	return h.changes[len(h.changes)-1]
}

func routerAddrs(s State) []netip.Addr {
	var out []netip.Addr
	for _, r := range s.Routers {
		out = append(out, r.Addr)
	}
	return out
}

// TestRFC4861_6_1_2_RAValidation: an RA failing a check of §6.1.2, or
// from our own address or MAC, is consumed, counted under its reason
// and changes nothing; RSs, NSs and the like are left to the caller.
func TestRFC4861_6_1_2_RAValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		good := raICMP(raHdr{curHopLimit: 64, lifetime: 1800}, optSLLAOf(otherMAC), optPrefix("2001:db8:9::/64", true, true, 3600, 1800))
		dst := MulticastMAC(AllNodes)
		long := raFrame(otherMAC, otherLL, good)
		binary.BigEndian.PutUint16(long[14+4:], uint16(len(good)+1))
		for _, tc := range []struct {
			name  string
			frame []byte
			drop  DropReason
		}{
			{"hop limit 64", gvFrame(dst, otherMAC, otherLL, AllNodes, 64, good, false), DropHopLimit},
			{"bad checksum", gvFrame(dst, otherMAC, otherLL, AllNodes, 255, good, true), DropChecksum},
			{"code 1", raFrame(otherMAC, otherLL, append([]byte{typeRA, 1}, good[2:]...)), DropCode},
			{"global source", raFrame(otherMAC, netip.MustParseAddr("2001:db8::1"), good), DropSourceNotLinkLocal},
			{"unspecified source", raFrame(otherMAC, netip.IPv6Unspecified(), good), DropSourceNotLinkLocal},
			{"option length 0", raFrame(otherMAC, otherLL, append(slices.Clone(good), 3, 0, 0, 0, 0, 0, 0, 0)), DropOptionLengthZero},
			{"option past the end", raFrame(otherMAC, otherLL, append(slices.Clone(good), 25, 3, 0, 0, 0, 0, 0, 0)), DropMalformed},
			{"ICMP length 15", raFrame(otherMAC, otherLL, good[:15]), DropMalformed},
			{"payload length past the frame", long, DropMalformed},
			{"our address", raFrame(otherMAC, LinkLocal(h.link.mac), good), DropOwn},
			{"our MAC", raFrame(h.link.mac, otherLL, good), DropOwn},
		} {
			before := h.l.stats.Drops[tc.drop].Load()
			h.deliver(tc.frame)
			if got := h.l.stats.Drops[tc.drop].Load(); got != before+1 {
				t.Errorf("%s: %s drops %d, want %d", tc.name, tc.drop, got, before+1)
			}
		}
		if st := h.l.State(); len(st.Routers)+len(st.Prefixes) != 0 || st.HopLimit != 0 || h.nchanges() != 0 || h.l.stats.Received.Load() != 0 {
			t.Fatalf("invalid RAs changed the state: %v (%d changes, received %d)", st, h.nchanges(), h.l.stats.Received.Load())
		}
		for name, f := range map[string][]byte{
			"RS": rsFrame(hostLL, 255, 0, false),
			"NS": gvFrame(dst, otherMAC, otherLL, AllNodes, 255, []byte{135, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0x80, 15: 1}, false),
		} {
			if h.l.Deliver(f) {
				t.Errorf("Deliver(%s) = true", name)
			}
		}
		h.deliver(raFrame(otherMAC, otherLL, good))
		// Two changes: the router learnt, then found reachable.
		if st := h.l.State(); len(st.Routers) != 1 || len(st.Prefixes) != 1 || st.HopLimit != 64 || h.nchanges() != 2 {
			t.Errorf("the valid RA: state %v, %d changes", st, h.nchanges())
		}
	})
}

// TestRFC4861_6_3_4_DefaultRouter: the source of an RA with a Router
// Lifetime becomes a default router with the SLLA's MAC (or the
// frame's), until the lifetime ends, a later RA renewing it; a lifetime
// of 0 removes it at once. OnChange is called for each addition and
// removal (and when a new router is found reachable), not for a
// renewal.
func TestRFC4861_6_3_4_DefaultRouter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		slla := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 30}, optSLLAOf(slla))))
		want := []Router{{Addr: otherLL, MAC: hwaddr.MAC(slla), Expires: epoch.Add(30 * time.Second)}}
		if st := h.lastChange(); !slices.EqualFunc(st.Routers, want, sameRouter) {
			t.Fatalf("routers %+v, want %+v", st.Routers, want)
		}
		h.deliver(raFrame(other2MAC, other2LL, raICMP(raHdr{lifetime: 600})))
		if st := h.l.State(); len(st.Routers) != 2 || st.Routers[1].MAC.String() != other2MAC.String() {
			t.Fatalf("routers %+v, want the second with the frame's MAC %v", st.Routers, other2MAC)
		}
		h.clk.Advance(20 * time.Second)
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 30}, optSLLAOf(slla)))) // renewed to 50 s
		if n := h.nchanges(); n != 4 {
			t.Errorf("%d changes after a renewal, want 4 (each router learnt and found reachable)", n)
		}
		h.clk.Advance(30*time.Second - time.Nanosecond)
		if st := h.l.State(); len(st.Routers) != 2 {
			t.Fatalf("router gone before its renewed lifetime: %+v", st.Routers)
		}
		h.clk.Advance(time.Nanosecond)
		if st := h.lastChange(); !slices.Equal(routerAddrs(st), []netip.Addr{other2LL}) || h.l.stats.Expired.Load() != 1 {
			t.Fatalf("at 50 s: routers %v (expired %d), want only %v", routerAddrs(st), h.l.stats.Expired.Load(), other2LL)
		}
		h.deliver(raFrame(other2MAC, other2LL, raICMP(raHdr{lifetime: 0})))
		if st := h.lastChange(); len(st.Routers) != 0 || h.nchanges() != 6 {
			t.Fatalf("router lifetime 0: routers %v, %d changes; want none and 6", st.Routers, h.nchanges())
		}
	})
}

func sameRouter(a, b Router) bool {
	return a.Addr == b.Addr && a.MAC.String() == b.MAC.String() && a.Preference == b.Preference && a.Expires.Equal(b.Expires)
}

// TestRFC4191_2_2_RouterPreference: routers are ordered by their Default
// Router Preference, the reserved value counting as medium.
func TestRFC4191_2_2_RouterPreference(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		for i, prf := range []uint8{3, 2, 0, 1} { // low, reserved, medium, high
			mac := net.HardwareAddr{2, 0, 0, 0, 1, byte(i)}
			h.deliver(raFrame(mac, LinkLocal(mac), raICMP(raHdr{lifetime: 100, prf: prf})))
		}
		var got []Preference
		var addrs []netip.Addr
		for _, r := range h.l.State().Routers {
			got = append(got, r.Preference)
			addrs = append(addrs, r.Addr)
		}
		if want := []Preference{PreferenceHigh, PreferenceMedium, PreferenceMedium, PreferenceLow}; !slices.Equal(got, want) {
			t.Errorf("preferences %v, want %v", got, want)
		}
		if addrs[1].Compare(addrs[2]) > 0 {
			t.Errorf("equal preferences not in address order: %v", addrs)
		}
		if PreferenceHigh.String() != "high" || PreferenceLow.String() != "low" || PreferenceMedium.String() != "medium" {
			t.Error("Preference.String")
		}
	})
}

// TestRFC4861_6_3_4_Prefixes: on-link and autonomous prefixes are learnt
// with their flags and lifetimes; the link-local prefix, a multicast
// one, a length over 128 and a preferred lifetime over the valid one are
// ignored and counted; an on-link prefix with valid lifetime 0 goes at
// once; a prefix ends with its valid lifetime; its deprecation is a
// change.
func TestRFC4861_6_3_4_Prefixes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		bad := optPrefix("2001:db8:bad::/64", true, true, 10, 10)
		bad[2] = 129
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800},
			optPrefix("2001:db8:1::/48", true, false, 100, 50),
			optPrefix("2001:db8:2:1::/64", true, true, 7200, 3600),
			optPrefix("2001:db8:3::/56", false, true, 7200, 3600), // A on a /56: not autonomous, not on-link
			optPrefix("2001:db8:4:1::/64", false, true, 0xffffffff, 0xffffffff),
			optPrefix("fe80::/64", true, true, 100, 100),
			optPrefix("ff02::/64", true, false, 100, 100),
			optPrefix("2001:db8:5::/64", true, true, 100, 200),
			bad,
		)))
		want := []LearnedPrefix{
			{netip.MustParsePrefix("2001:db8:1::/48"), true, false, epoch.Add(100 * time.Second), epoch.Add(50 * time.Second)},
			{netip.MustParsePrefix("2001:db8:2:1::/64"), true, true, epoch.Add(7200 * time.Second), epoch.Add(3600 * time.Second)},
			{netip.MustParsePrefix("2001:db8:4:1::/64"), false, true, time.Time{}, time.Time{}},
		}
		if got := h.lastChange().Prefixes; !slices.EqualFunc(got, want, samePrefixL) {
			t.Fatalf("prefixes %+v, want %+v", got, want)
		}
		if got := h.l.State().OnLinkPrefixes(); !slices.Equal(got, []netip.Prefix{want[0].Prefix, want[1].Prefix}) {
			t.Errorf("OnLinkPrefixes() = %v, want the first two", got)
		}
		if got := h.l.stats.PrefixesIgnored.Load(); got != 4 {
			t.Errorf("prefixes_ignored = %d, want 4", got)
		}
		n := h.nchanges()
		h.clk.Advance(50 * time.Second) // 2001:db8:1::/48 deprecated
		if h.nchanges() != n+1 {
			t.Errorf("deprecation at 50 s: %d changes, want %d", h.nchanges(), n+1)
		}
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800}, optPrefix("2001:db8:1::/48", true, false, 0, 0))))
		if got := len(h.l.State().Prefixes); got != 2 {
			t.Errorf("on-link prefix with valid lifetime 0: %d prefixes, want 2", got)
		}
		h.clk.Advance(7150*time.Second - time.Nanosecond)
		if got := len(h.l.State().Prefixes); got != 2 {
			t.Errorf("%d prefixes before 7200 s, want 2", got)
		}
		h.clk.Advance(time.Nanosecond)
		if got := h.lastChange().Prefixes; len(got) != 1 || got[0].Prefix != netip.MustParsePrefix("2001:db8:4:1::/64") {
			t.Errorf("prefixes after 7200 s %+v, want the infinite one", got)
		}
	})
}

func samePrefixL(a, b LearnedPrefix) bool {
	return a.Prefix == b.Prefix && a.OnLink == b.OnLink && a.Autonomous == b.Autonomous &&
		a.ValidUntil.Equal(b.ValidUntil) && a.PreferredUntil.Equal(b.PreferredUntil)
}

// TestRFC4862_5_5_3_e_TwoHourRule: the valid lifetime of an autonomous
// prefix follows §5.5.3 e); an on-link-only one takes what is sent.
func TestRFC4862_5_5_3_e_TwoHourRule(t *testing.T) {
	now := epoch
	h := time.Hour
	for _, tc := range []struct {
		name      string
		remaining time.Duration // 0: infinite
		received  time.Duration
		want      time.Duration // -1: infinite
	}{
		{"shortened to 1 h from 10 h: 2 h", 10 * h, h, 2 * h},
		{"shortened to 0 from 10 h: 2 h", 10 * h, 0, 2 * h},
		{"3 h from 10 h: over 2 h, taken", 10 * h, 3 * h, 3 * h},
		{"30 min with 1 h left: ignored", h, h / 2, h},
		{"90 min with 1 h left: over what remains, taken", h, 90 * time.Minute, 90 * time.Minute},
		{"1 h from infinite: 2 h", 0, h, 2 * h},
		{"infinite", 10 * h, Infinity, -1},
		{"exactly 2 h left, 0 received: ignored", 2 * h, 0, 2 * h},
	} {
		old := time.Time{}
		if tc.remaining != 0 {
			old = now.Add(tc.remaining)
		}
		got := twoHourRule(old, tc.received, now)
		want := time.Time{}
		if tc.want >= 0 {
			want = now.Add(tc.want)
		}
		if !got.Equal(want) {
			t.Errorf("%s: valid until %v, want %v", tc.name, got.Sub(now), tc.want)
		}
	}
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800},
			optPrefix("2001:db8:a::/64", true, true, 36000, 3600), optPrefix("2001:db8:b::/64", true, false, 36000, 3600))))
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800},
			optPrefix("2001:db8:a::/64", true, true, 0, 0), optPrefix("2001:db8:b::/64", true, false, 60, 0))))
		ps := h.l.State().Prefixes
		if len(ps) != 2 || !ps[0].ValidUntil.Equal(epoch.Add(2*time.Hour)) || !ps[0].PreferredUntil.Equal(epoch) ||
			!ps[1].ValidUntil.Equal(epoch.Add(time.Minute)) {
			t.Errorf("after the shortening RA: %+v; want the autonomous one valid 2 h and deprecated, the on-link one 60 s", ps)
		}
	})
}

// TestRFC8106_5_DNS: RDNSS and DNSSL entries are learnt with their
// lifetimes, renewed, removed by lifetime 0 and at their end; names are
// lower case without the final dot; non-unicast servers are ignored.
func TestRFC8106_5_DNS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800},
			optRDNSS(60, "2001:db8::53", "2001:db8::54", "ff02::1"), optDNSSL(60, "ISP.Example", "lan"))))
		st := h.lastChange()
		if len(st.RDNSS) != 2 || st.RDNSS[0].Addr != netip.MustParseAddr("2001:db8::53") || !st.RDNSS[1].Expires.Equal(epoch.Add(time.Minute)) {
			t.Errorf("RDNSS %+v", st.RDNSS)
		}
		if len(st.DNSSL) != 2 || st.DNSSL[0].Domain != "isp.example" || st.DNSSL[1].Domain != "lan" {
			t.Errorf("DNSSL %+v", st.DNSSL)
		}
		if got := st.DNSServers(); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("2001:db8::53"), netip.MustParseAddr("2001:db8::54")}) {
			t.Errorf("DNSServers() = %v", got)
		}
		if h.l.stats.DNSIgnored.Load() != 1 {
			t.Errorf("dns_ignored = %d, want 1 (ff02::1)", h.l.stats.DNSIgnored.Load())
		}
		h.clk.Advance(30 * time.Second)
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800},
			optRDNSS(0, "2001:db8::54"), optRDNSS(0xffffffff, "2001:db8::53"), optDNSSL(60, "lan"))))
		st = h.l.State()
		if len(st.RDNSS) != 1 || !st.RDNSS[0].Expires.IsZero() || len(st.DNSSL) != 2 || !st.DNSSL[1].Expires.Equal(epoch.Add(90*time.Second)) {
			t.Errorf("after lifetime 0 and renewal: RDNSS %+v DNSSL %+v", st.RDNSS, st.DNSSL)
		}
		h.clk.Advance(30 * time.Second) // isp.example ends at 60 s
		st = h.lastChange()
		if len(st.DNSSL) != 1 || st.DNSSL[0].Domain != "lan" {
			t.Errorf("DNSSL at 60 s: %+v, want lan only", st.DNSSL)
		}
		var many []string
		for i := range 10 {
			many = append(many, netip.AddrFrom16([16]byte{0x20, 0x01, 15: byte(i + 1)}).String())
		}
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800}, optRDNSS(100, many...))))
		if got := len(h.l.State().RDNSS); got != maxDNS || h.l.stats.DNSFull.Load() != 3 {
			t.Errorf("%d RDNSS kept, dns_full %d; want %d and 3", got, h.l.stats.DNSFull.Load(), maxDNS)
		}
	})
}

// TestRFC4861_6_3_4_MTUHopLimitFlags: an MTU option of 1280 or more is
// kept, a smaller one ignored and counted; a Cur Hop Limit of 0 leaves
// the last one; M and O are the last RA's.
func TestRFC4861_6_3_4_MTUHopLimitFlags(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{curHopLimit: 64, m: true, o: true, lifetime: 1800}, optMTU(1492))))
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{o: true, lifetime: 1800}, optMTU(1000))))
		st := h.l.State()
		if st.MTU != 1492 || st.HopLimit != 64 || st.Managed || !st.Other || h.l.stats.MTUIgnored.Load() != 1 {
			t.Errorf("MTU %d hop limit %d M %v O %v mtu_ignored %d; want 1492, 64, false, true, 1",
				st.MTU, st.HopLimit, st.Managed, st.Other, h.l.stats.MTUIgnored.Load())
		}
		if n := h.nchanges(); n != 3 {
			t.Errorf("%d changes, want 3 (the router learnt and found reachable, then the M flag changed)", n)
		}
	})
}

// seenRS is an RS as gVisor decodes it.
type seenRS struct {
	at       time.Duration
	dstMAC   string
	src, dst netip.Addr
	hopLimit uint8
	slla     net.HardwareAddr
}

func decodeRS(t *testing.T, f sentFrame) seenRS {
	t.Helper()
	ip := header.IPv6(f.data[14:])
	if !ip.IsValid(len(f.data)-14) || ip.TransportProtocol() != header.ICMPv6ProtocolNumber {
		t.Fatalf("frame % x is not ICMPv6", f.data)
	}
	h := header.ICMPv6(ip.Payload())
	sum := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: h, Src: ip.SourceAddress(), Dst: ip.DestinationAddress()})
	if h.Type() != header.ICMPv6RouterSolicit || h.Code() != 0 || h.Checksum() != sum {
		t.Fatalf("type %d code %d checksum %#x (gVisor: %#x), want an RS", h.Type(), h.Code(), h.Checksum(), sum)
	}
	s := seenRS{at: f.at, dstMAC: net.HardwareAddr(f.data[:6]).String(), hopLimit: ip.HopLimit(),
		src: netip.AddrFrom16(ip.SourceAddress().As16()), dst: netip.AddrFrom16(ip.DestinationAddress().As16())}
	it, err := header.NDPRouterSolicit(h.MessageBody()).Options().Iter(true)
	if err != nil {
		t.Fatal(err)
	}
	for {
		o, done, err := it.Next()
		if err != nil || done {
			break
		}
		if o, ok := o.(header.NDPSourceLinkLayerAddressOption); ok {
			s.slla = net.HardwareAddr(o.EthernetAddress())
		}
	}
	return s
}

// TestRFC4861_6_3_7_Solicit: with Solicit, the Learner sends up to three
// RSs to all-routers, the first after MAX_RTR_SOLICITATION_DELAY (the
// largest draw), then 4 s apart, and stops once an RA with a router
// comes; from :: it sends no SLLA option.
func TestRFC4861_6_3_7_Solicit(t *testing.T) {
	t.Run("three", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newLrn(t, func(c *LearnerConfig) { c.Solicit = true }).start()
			h.clk.Advance(time.Minute)
			fs := h.link.take()
			var at []time.Duration
			for _, f := range fs {
				rs := decodeRS(t, f)
				at = append(at, rs.at)
				if rs.dst != AllRouters || rs.dstMAC != "33:33:00:00:00:02" || rs.hopLimit != 255 ||
					rs.src != LinkLocal(h.link.mac) || rs.slla.String() != h.link.mac.String() {
					t.Errorf("RS %+v, want from %v with SLLA %v to ff02::2, hop limit 255", rs, LinkLocal(h.link.mac), h.link.mac)
				}
			}
			if want := []time.Duration{time.Second, 5 * time.Second, 9 * time.Second}; !slices.Equal(at, want) {
				t.Errorf("RSs at %v, want %v", at, want)
			}
			if h.l.Stats().RSSent.Load() != 3 {
				t.Errorf("rs_sent = %d", h.l.Stats().RSSent.Load())
			}
		})
	})
	t.Run("answered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newLrn(t, func(c *LearnerConfig) { c.Solicit = true }).start()
			h.clk.Advance(2 * time.Second)
			h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 0}))) // no router: keep asking
			h.clk.Advance(4 * time.Second)
			h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800})))
			h.clk.Advance(time.Minute)
			n := 0
			for _, f := range h.link.take() {
				if t, _ := icmpType(f.data); t == typeRS {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%d RSs, want 2: the second RA had a router", n)
			}
		})
	})
	t.Run("unspecified", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newLrn(t, func(c *LearnerConfig) { c.Solicit, c.SrcAddr = true, netip.IPv6Unspecified() }).start()
			h.clk.Advance(2 * time.Second)
			fs := h.link.take()
			if len(fs) != 1 {
				t.Fatalf("%d RSs", len(fs))
			}
			if rs := decodeRS(t, fs[0]); !rs.src.IsUnspecified() || rs.slla != nil {
				t.Errorf("RS from %v with SLLA %v, want from :: without", rs.src, rs.slla)
			}
		})
	})
	t.Run("off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newLrn(t, nil).start()
			h.clk.Advance(time.Minute)
			if n := len(h.link.take()); n != 0 {
				t.Errorf("%d RSs without Solicit", n)
			}
		})
	})
}

// TestLearnerBounds: at most maxRouters routers and maxLearnedPrefixes
// prefixes are kept; the ones beyond are counted; the kept ones stay.
func TestLearnerBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		for i := range maxRouters + 1 {
			mac := net.HardwareAddr{2, 0, 0, 0, 2, byte(i)}
			h.deliver(raFrame(mac, LinkLocal(mac), raICMP(raHdr{lifetime: 100})))
		}
		var opts [][]byte
		for i := range maxLearnedPrefixes + 1 {
			opts = append(opts, optPrefix(netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 7: byte(i)}), 64).String(), true, true, 100, 100))
		}
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{}, opts...)))
		st := h.l.State()
		if len(st.Routers) != maxRouters || len(st.Prefixes) != maxLearnedPrefixes ||
			h.l.stats.RoutersFull.Load() != 1 || h.l.stats.PrefixesFull.Load() != 1 {
			t.Errorf("%d routers %d prefixes, full %d/%d; want %d, %d, 1/1", len(st.Routers), len(st.Prefixes),
				h.l.stats.RoutersFull.Load(), h.l.stats.PrefixesFull.Load(), maxRouters, maxLearnedPrefixes)
		}
	})
}

// TestLearnerOptionsIgnored: an option the wire library refuses costs
// only itself: the router and the other options are learnt.
func TestLearnerOptionsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		badDNSSL := []byte{31, 2, 0, 0, 0, 0, 0, 60, 4, 'a', ' ', 'b', 'c', 0, 0, 0}      // a space in a label
		badRDNSS := []byte{25, 2, 0, 0, 0, 0, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0}              // length 2: no whole address
		badPrefix := []byte{3, 2, 64, 0xc0, 0, 0, 0, 60, 0, 0, 0, 60, 0, 0, 0, 0}         // length 2, not 4
		unknown := []byte{253, 1, 1, 2, 3, 4, 5, 6}                                       // RFC 4727 experiment
		route := []byte{24, 2, 48, 0x08, 0, 0, 0, 60, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0} // RFC 4191 Route Information
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800},
			badDNSSL, badRDNSS, badPrefix, unknown, route, optPrefix("2001:db8:7::/64", true, true, 100, 100), optDNSSL(60, "ok"))))
		st := h.l.State()
		if len(st.Routers) != 1 || len(st.Prefixes) != 1 || len(st.DNSSL) != 1 || len(st.RDNSS) != 0 {
			t.Errorf("state %v: want the router, the good prefix and domain", st)
		}
		if got := h.l.stats.OptionsIgnored.Load(); got != 3 {
			t.Errorf("options_ignored = %d, want 3", got)
		}
	})
}

// TestLearnerQueueFull: RAs that come faster than Run takes them are
// counted, learnerQueue of them kept.
func TestLearnerQueueFull(t *testing.T) {
	l, err := NewLearner(LearnerConfig{Link: newRecLink(fakeClock{})})
	if err != nil {
		t.Fatal(err)
	}
	f := raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800}))
	for range learnerQueue + 5 {
		if !l.Deliver(f) {
			t.Fatal("Deliver = false")
		}
	}
	if l.stats.Received.Load() != learnerQueue || l.stats.Drops[DropQueueFull].Load() != 5 {
		t.Errorf("received %d queue_full %d, want %d and 5", l.stats.Received.Load(), l.stats.Drops[DropQueueFull].Load(), learnerQueue)
	}
}

// TestNewLearnerErrors: no link, a multicast MAC, a global source.
func TestNewLearnerErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  LearnerConfig
		want string
	}{
		"no link":       {LearnerConfig{}, "no link"},
		"multicast MAC": {LearnerConfig{Link: &recLink{mac: net.HardwareAddr{1, 0, 0, 0, 0, 1}}}, "not a unicast Ethernet"},
		"global source": {LearnerConfig{Link: newRecLink(fakeClock{}), SrcAddr: netip.MustParseAddr("2001:db8::1")}, "neither link-local nor ::"},
	} {
		if _, err := NewLearner(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewLearner = %v, want %q", name, err, tc.want)
		}
	}
	l, err := NewLearner(LearnerConfig{Link: newRecLink(fakeClock{})})
	if err != nil || l.src != LinkLocal(net.HardwareAddr{2, 0, 0, 0, 0, 1}) {
		t.Errorf("NewLearner without SrcAddr: %v, source %v", err, l.src)
	}
}
