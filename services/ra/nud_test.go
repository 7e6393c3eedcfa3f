package ra

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// seenNS is an NS the Learner wrote, as gVisor decodes it.
type seenNS struct {
	at             time.Duration
	dstMAC         string
	src, dst       netip.Addr
	hopLimit       uint8
	target         netip.Addr
	slla           net.HardwareAddr
	checksumIsGood bool
}

// sentNS returns the NSs among fs.
func sentNS(t *testing.T, fs []sentFrame) []seenNS {
	t.Helper()
	var out []seenNS
	for _, f := range fs {
		if typ, _ := icmpType(f.data); typ != typeNS {
			continue
		}
		ip := header.IPv6(f.data[14:])
		h := header.ICMPv6(ip.Payload())
		sum := header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: h, Src: ip.SourceAddress(), Dst: ip.DestinationAddress()})
		ns := header.NDPNeighborSolicit(h.MessageBody())
		s := seenNS{at: f.at, dstMAC: net.HardwareAddr(f.data[:6]).String(), hopLimit: ip.HopLimit(),
			src: netip.AddrFrom16(ip.SourceAddress().As16()), dst: netip.AddrFrom16(ip.DestinationAddress().As16()),
			target: netip.AddrFrom16(ns.TargetAddress().As16()), checksumIsGood: h.Checksum() == sum}
		it, err := ns.Options().Iter(true)
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
		out = append(out, s)
	}
	return out
}

func reachOf(st State) map[netip.Addr]Reachability {
	m := map[netip.Addr]Reachability{}
	for _, r := range st.Routers {
		m[r.Addr] = r.Reachability
	}
	return m
}

// TestRFC4861_6_3_6_UnreachableRouter: each router is probed by NSs to
// its solicited-node group (§7.2.2, as gVisor computes it); one that
// answers is Reachable and used before
// a more preferred one that does not (RFC 4191 §3.2), which after three
// unanswered NSs 1 s apart is Unreachable (counted) and asked again only
// a minute later (RFC 4191 §3.5). When the reachable one stops answering
// at its next round (30 s on), the most preferred router is used again
// (§6.3.6: none reachable); when it answers again, it is first again.
func TestRFC4861_6_3_6_UnreachableRouter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.setSilent(other2LL, true)
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800}, optSLLAOf(otherMAC))))
		if st := h.l.State(); len(st.Routers) != 1 || st.Routers[0].Reachability != Reachable {
			t.Fatalf("the answering router: %v, want reachable", st)
		}
		h.deliver(raFrame(other2MAC, other2LL, raICMP(raHdr{lifetime: 9000, prf: 1}, optSLLAOf(other2MAC))))
		if st := h.lastChange(); !slices.Equal(routerAddrs(st), []netip.Addr{otherLL, other2LL}) || st.Routers[1].Reachability != Probing {
			t.Fatalf("after the silent high-preference RA: %v, want %v (reachable) first", st, otherLL)
		}
		h.clk.Advance(3 * time.Second)
		st := h.lastChange()
		if !slices.Equal(routerAddrs(st), []netip.Addr{otherLL, other2LL}) || st.Routers[1].Reachability != Unreachable ||
			h.l.stats.RouterUnreachable.Load() != 1 {
			t.Fatalf("3 s on: %v, router_unreachable %d; want %v first, %v unreachable, 1", st, h.l.stats.RouterUnreachable.Load(), otherLL, other2LL)
		}
		var toSilent []time.Duration
		for _, ns := range sentNS(t, h.link.take()) {
			if ns.target == other2LL {
				toSilent = append(toSilent, ns.at)
			}
			group := netip.AddrFrom16(header.SolicitedNodeAddr(tcpip.AddrFrom16(ns.target.As16())).As16())
			if ns.dst != group || ns.dstMAC != MulticastMAC(group).String() || ns.src != LinkLocal(h.link.mac) || ns.hopLimit != 255 ||
				ns.slla.String() != h.link.mac.String() || !ns.checksumIsGood {
				t.Errorf("NS %+v: want to %v (%v), from %v with SLLA, hop limit 255, good checksum",
					ns, group, MulticastMAC(group), LinkLocal(h.link.mac))
			}
		}
		if want := []time.Duration{0, time.Second, 2 * time.Second}; !slices.Equal(toSilent, want) {
			t.Errorf("NSs to the silent router at %v, want %v", toSilent, want)
		}
		h.clk.Advance(56 * time.Second) // 59 s: no NS to the unreachable router within its minute
		for _, ns := range sentNS(t, h.link.take()) {
			if ns.target == other2LL {
				t.Errorf("NS to the unreachable router at %v, before a minute passed", ns.at)
			}
		}
		h.clk.Advance(time.Second) // 60 s after it failed... 63 s on: asked again
		// The answering router goes silent: its round at 62 s or 63 s
		// fails, and the preferred one is first again.
		h.setSilent(otherLL, true)
		h.clk.Advance(40 * time.Second)
		if st := h.l.State(); st.Routers[0].Addr != other2LL || reachOf(st)[otherLL] != Unreachable {
			t.Fatalf("both silent: %v, want %v (high preference) first, %v unreachable", st, other2LL, otherLL)
		}
		h.setSilent(otherLL, false)
		h.clk.Advance(61 * time.Second)
		if st := h.l.State(); st.Routers[0].Addr != otherLL || st.Routers[0].Reachability != Reachable {
			t.Fatalf("answering again: %v, want %v reachable first", st, otherLL)
		}
	})
}

// TestLearnerNAChecks: an NA confirms a router only if solicited, sent
// to the Learner's address and for the router's address; every NA is
// left to the caller.
func TestLearnerNAChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.setSilent(otherLL, true)
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800}, optSLLAOf(otherMAC))))
		ours := LinkLocal(h.link.mac)
		for name, f := range map[string][]byte{
			"not solicited":  gvFrame(h.link.mac, otherMAC, otherLL, ours, 255, naICMP(0x20, otherLL, otherMAC), false),
			"to all-nodes":   gvFrame(MulticastMAC(AllNodes), otherMAC, otherLL, AllNodes, 255, naICMP(naSolicited, otherLL, otherMAC), false),
			"other target":   gvFrame(h.link.mac, otherMAC, otherLL, ours, 255, naICMP(naSolicited, other2LL, otherMAC), false),
			"hop limit 64":   gvFrame(h.link.mac, otherMAC, otherLL, ours, 64, naICMP(naSolicited, otherLL, otherMAC), false),
			"bad checksum":   gvFrame(h.link.mac, otherMAC, otherLL, ours, 255, naICMP(naSolicited, otherLL, otherMAC), true),
			"cut short (20)": gvFrame(h.link.mac, otherMAC, otherLL, ours, 255, naICMP(naSolicited, otherLL, otherMAC)[:20], false),
		} {
			if h.l.Deliver(f) {
				t.Errorf("Deliver(NA %s) = true", name)
			}
			synctest.Wait()
			if r := h.l.State().Routers[0].Reachability; r != Probing {
				t.Errorf("NA %s: router %v, want probing", name, r)
			}
		}
		if h.l.Deliver(gvFrame(h.link.mac, otherMAC, otherLL, ours, 255, naICMP(naSolicited, otherLL, otherMAC), false)) {
			t.Error("Deliver(NA) = true")
		}
		synctest.Wait()
		if r := h.l.State().Routers[0].Reachability; r != Reachable {
			t.Errorf("after a good NA: router %v, want reachable", r)
		}
	})
}

// TestLearnerRoutersReplaced: with maxRouters kept, a new router takes
// the place of an unreachable one (counted), and is refused (counted)
// while none is unreachable; the reachable one stays.
func TestLearnerRoutersReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800})))
		for i := range maxRouters - 1 {
			mac := net.HardwareAddr{2, 0, 0, 0, 3, byte(i)}
			h.setSilent(LinkLocal(mac), true)
			h.deliver(raFrame(mac, LinkLocal(mac), raICMP(raHdr{lifetime: 9000, prf: 1})))
		}
		late := net.HardwareAddr{2, 0, 0, 0, 4, 1}
		h.deliver(raFrame(late, LinkLocal(late), raICMP(raHdr{lifetime: 1800})))
		if got := h.l.stats.RoutersFull.Load(); got != 1 {
			t.Errorf("routers_full = %d while all were probed, want 1", got)
		}
		h.clk.Advance(3 * time.Second)
		h.deliver(raFrame(late, LinkLocal(late), raICMP(raHdr{lifetime: 1800})))
		st := h.l.State()
		if len(st.Routers) != maxRouters || h.l.stats.RoutersReplaced.Load() != 1 || h.l.stats.RoutersFull.Load() != 1 {
			t.Errorf("%d routers, replaced %d, full %d; want %d, 1, 1", len(st.Routers), h.l.stats.RoutersReplaced.Load(), h.l.stats.RoutersFull.Load(), maxRouters)
		}
		if r := reachOf(st); r[otherLL] != Reachable || r[LinkLocal(late)] != Reachable || st.Routers[0].Addr != LinkLocal(late) && st.Routers[0].Addr != otherLL {
			t.Errorf("routers %v: want the two answering ones reachable and first", st)
		}
	})
}

// TestLearnerOwnedAndShortPrefixes (a hostile neighbour's RAs): a Prefix
// Information option overlapping a prefix Config.Owned returns (the LAN
// /64, a /80 and a /128 in it, a /48 around it, the delegated /56 and a /64
// of it) or shorter than MinOnLinkBits (::/1, 8000::/1, a /47) is ignored
// and counted; one learnt before its prefix became owned is dropped at its
// next option; others are learnt.
func TestLearnerOwnedAndShortPrefixes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		owned := []netip.Prefix{netip.MustParsePrefix("fd77:1::/64")}
		var mu sync.Mutex // owned
		h := newLrn(t, func(c *LearnerConfig) {
			c.Owned = func() []netip.Prefix {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(owned)
			}
		}).start()
		opt := func(p string) []byte { return optPrefix(p, true, false, 9000, 9000) }
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{}, opt("2001:db8:aa00:1::/64"), opt("2001:db8:1::/48"))))
		mu.Lock()
		owned = append(owned, netip.MustParsePrefix("2001:db8:aa00::/56"))
		mu.Unlock()
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{},
			opt("fd77:1::/64"), opt("fd77:1::/80"), opt("fd77:1::2/128"), opt("fd77:1::/48"),
			opt("2001:db8:aa00::/56"), opt("2001:db8:aa00:1::/64"),
			opt("::/1"), opt("8000::/1"), opt("2001:db8:fe::/47"),
			opt("2001:db8:2::/64"))))
		got := h.l.State().OnLinkPrefixes()
		if want := []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/48"), netip.MustParsePrefix("2001:db8:2::/64")}; !slices.Equal(got, want) {
			t.Errorf("on-link prefixes %v, want %v", got, want)
		}
		if o, s := h.l.stats.PrefixOverlapIgnored.Load(), h.l.stats.PrefixTooShort.Load(); o != 6 || s != 3 {
			t.Errorf("prefix_overlap_ignored %d, prefix_too_short %d; want 6 and 3", o, s)
		}
	})
}

// TestLearnerWrongMACInRA: an RA from a reachable router's address that
// names another MAC (a neighbour's forgery) does not make the router look
// unreachable: the probes go to its solicited-node group, which its
// owner answers, not to the MAC the RA named.
func TestLearnerWrongMACInRA(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newLrn(t, nil).start()
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800}, optSLLAOf(otherMAC))))
		forger := net.HardwareAddr{2, 0x66, 0, 0, 0, 1}
		h.deliver(raFrame(forger, otherLL, raICMP(raHdr{lifetime: 9000, prf: 1}, optSLLAOf(forger))))
		h.clk.Advance(2 * time.Minute)
		if st := h.l.State(); len(st.Routers) != 1 || st.Routers[0].Reachability != Reachable || h.l.stats.RouterUnreachable.Load() != 0 {
			t.Errorf("after an RA naming %v for %v: %v, router_unreachable %d; want it reachable", forger, otherLL, st, h.l.stats.RouterUnreachable.Load())
		}
	})
}

// TestLearnerPointToPoint: on a PPP link (PointToPoint) a router is
// Reachable as soon as its RA is learnt, even one that answers no NS,
// no NS is ever sent, and the RSs carry no SLLA option (the link has
// no link-layer addresses).
func TestLearnerPointToPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ll := netip.MustParseAddr("fe80::1c2d:3e4f:5a6b:7c8d") // IPv6CP's
		h := newLrn(t, func(c *LearnerConfig) { c.PointToPoint, c.Solicit, c.SrcAddr = true, true, ll }).start()
		h.setSilent(otherLL, true)
		h.clk.Advance(2 * time.Second)
		h.deliver(raFrame(otherMAC, otherLL, raICMP(raHdr{lifetime: 1800})))
		h.clk.Advance(time.Minute)
		if st := h.l.State(); len(st.Routers) != 1 || st.Routers[0].Reachability != Reachable {
			t.Errorf("routers a minute after the RA: %v, want %v reachable", st.Routers, otherLL)
		}
		rss := 0
		for _, f := range h.link.take() {
			switch typ, _ := icmpType(f.data); typ {
			case typeNS:
				t.Errorf("NS sent on a point-to-point link: % x", f.data)
			case typeRS:
				rss++
				if rs := decodeRS(t, f); rs.src != ll || rs.slla != nil {
					t.Errorf("RS %+v, want from %v without SLLA", rs, ll)
				}
			}
		}
		if rss != 1 {
			t.Errorf("%d RSs, want 1 (the RA answered it)", rss)
		}
	})
}
