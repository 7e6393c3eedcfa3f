package ra

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// fuzzFrame turns a fuzz input into a frame: with mode&1 the input is an
// ICMPv6 message, wrapped by gVisor's encoders with a right checksum
// (mode&2 sets hop limit 64 instead of 255, mode&4 a global source), so
// that most inputs get past the checksum; else it is the frame itself.
func fuzzFrame(data []byte, mode byte, dst netip.Addr) []byte {
	if mode&1 == 0 {
		return data
	}
	hl := uint8(255)
	if mode&2 != 0 {
		hl = 64
	}
	src := otherLL
	if mode&4 != 0 {
		src = netip.MustParseAddr("2001:db8::33")
	}
	return gvFrame(MulticastMAC(dst), otherMAC, src, dst, hl, data, false)
}

// gvValidND reports whether gVisor's code finds frame an ICMPv6 message
// of type typ with hop limit 255, code 0 and a right checksum, the checks
// a consumed and accepted frame must have passed.
func gvValidND(frame []byte, typ header.ICMPv6Type) bool {
	if len(frame) < 14+40 {
		return false
	}
	ip := header.IPv6(frame[14:])
	if !ip.IsValid(len(frame)-14) || ip.TransportProtocol() != header.ICMPv6ProtocolNumber || ip.HopLimit() != 255 {
		return false
	}
	h := header.ICMPv6(ip.Payload())
	if len(h) < 4 || h.Type() != typ || h.Code() != 0 {
		return false
	}
	return h.Checksum() == header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: h, Src: ip.SourceAddress(), Dst: ip.DestinationAddress()})
}

func learnerSeeds() [][]byte {
	return [][]byte{
		raICMP(raHdr{curHopLimit: 64, o: true, lifetime: 1800, prf: 1},
			optSLLAOf(otherMAC), optMTU(1492), optPrefix("2001:db8:1::/64", true, true, 7200, 3600),
			optPrefix("2001:db8:2::/48", true, false, 0xffffffff, 0xffffffff),
			optRDNSS(600, "2001:db8::53"), optDNSSL(600, "isp.example", "lan")),
		raICMP(raHdr{lifetime: 0}, optPrefix("fe80::/64", true, true, 1, 1), optMTU(1000)),
		raICMP(raHdr{lifetime: 100}, []byte{3, 0, 0, 0, 0, 0, 0, 0}),
		raICMP(raHdr{lifetime: 100}, []byte{31, 2, 0, 0, 0, 0, 0, 60, 4, 'a', ' ', 'b', 'c', 0, 0, 0}),
		raICMP(raHdr{lifetime: 100}, []byte{24, 2, 48, 0x08, 0, 0, 0, 60, 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0}),
		raICMP(raHdr{})[:15],
	}
}

// FuzzLearner feeds arbitrary frames (or ICMPv6 messages, wrapped) to a
// Learner. Deliver never panics; it consumes exactly the RAs, each
// moving exactly one counter; one it takes gVisor finds valid (§6.1.2);
// applying it leaves a State within the bounds, with link-local routers,
// no link-local or multicast prefix and none shorter than MinOnLinkBits,
// autonomous prefixes only on /64s, an MTU of 0 or 1280 to 65575;
// applying it again changes nothing. An NA is never consumed, and one
// handed to Run as the answer to a probe is a solicited NA gVisor finds
// valid, for the probed router.
func FuzzLearner(f *testing.F) {
	for _, s := range learnerSeeds() {
		f.Add(s, byte(1))
		f.Add(raFrame(otherMAC, otherLL, s), byte(0))
	}
	f.Add(rsFrame(hostLL, 255, 0, false), byte(0))
	ourMAC := newRecLink(fakeClock{}).mac
	f.Add(gvFrame(ourMAC, otherMAC, otherLL, LinkLocal(ourMAC), 255, naICMP(naSolicited|0x20, otherLL, otherMAC), false), byte(0))
	f.Add([]byte{}, byte(0))
	f.Fuzz(func(t *testing.T, data []byte, mode byte) {
		clk := newFakeClock()
		l, err := NewLearner(LearnerConfig{Link: newRecLink(clk), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		l.awaited.Store(&[]netip.Addr{otherLL})
		frame := fuzzFrame(data, mode, AllNodes)
		in := bytes.Clone(frame)
		took := l.Deliver(frame)
		if !bytes.Equal(in, frame) {
			t.Fatal("Deliver changed the frame")
		}
		select {
		case a := <-l.naq:
			h := header.ICMPv6(frame[54:])
			if took || a != otherLL || !gvValidND(frame, header.ICMPv6NeighborAdvert) ||
				!header.NDPNeighborAdvert(h.MessageBody()).SolicitedFlag() {
				t.Fatalf("took %v, probe answer for %v from % x", took, a, frame)
			}
		default:
		}
		moved := l.stats.Received.Load()
		for i := range l.stats.Drops {
			moved += l.stats.Drops[i].Load()
		}
		typ, isICMP := icmpType(frame)
		if took != (isICMP && typ == typeRA) || moved != map[bool]uint64{false: 0, true: 1}[took] {
			t.Fatalf("consumed %v (ICMPv6 %v type %d), counters moved %d", took, isICMP, typ, moved)
		}
		if l.stats.Received.Load() == 0 {
			return
		}
		if !gvValidND(frame, header.ICMPv6RouterAdvert) {
			t.Fatalf("took an RA gVisor finds invalid: % x", frame)
		}
		r := <-l.queue
		l.apply(r, clk.Now())
		st := l.State()
		if len(st.Routers) > maxRouters || len(st.Prefixes) > maxLearnedPrefixes || len(st.RDNSS) > maxDNS || len(st.DNSSL) > maxDNS {
			t.Fatalf("state over its bounds: %v", st)
		}
		for _, rt := range st.Routers {
			if !rt.Addr.IsLinkLocalUnicast() || len(rt.MAC) != 6 || !rt.Expires.After(clk.Now()) {
				t.Fatalf("router %+v", rt)
			}
		}
		for _, p := range st.Prefixes {
			a := p.Prefix.Addr()
			if !p.Prefix.IsValid() || p.Prefix.Masked() != p.Prefix || a.IsLinkLocalUnicast() || a.IsMulticast() || p.Prefix.Bits() < MinOnLinkBits ||
				p.Autonomous && p.Prefix.Bits() != 64 || !p.OnLink && !p.Autonomous {
				t.Fatalf("prefix %+v", p)
			}
			if !p.ValidUntil.IsZero() && (p.PreferredUntil.IsZero() || p.PreferredUntil.After(p.ValidUntil)) {
				t.Fatalf("prefix %+v preferred beyond valid", p)
			}
		}
		if st.MTU != 0 && (st.MTU < minLinkMTU || st.MTU > maxMTU) {
			t.Fatalf("MTU %d", st.MTU)
		}
		l.apply(r, clk.Now())
		if again := l.State(); !sameHolding(st, clk.Now(), again, clk.Now()) || !slices.EqualFunc(st.Prefixes, again.Prefixes, samePrefixL) {
			t.Fatalf("applying the RA twice: %v, then %v", st, again)
		}
	})
}

// FuzzAdvertiserDeliver feeds arbitrary frames (or ICMPv6 messages,
// wrapped) to an Advertiser's tap. Deliver never panics and does not
// change the frame; it consumes exactly the RSs, each moving exactly one
// counter; one it accepts gVisor finds valid (§6.1.1); any other frame
// moves no RS counter; another router's RA is compared with ours without
// harm.
func FuzzAdvertiserDeliver(f *testing.F) {
	for _, s := range [][]byte{
		rsICMP(0, optSLLAOf(hostMAC)),
		rsICMP(0),
		rsICMP(0, []byte{1, 0, 0, 0, 0, 0, 0, 0}),
		rsICMP(1),
		rsICMP(0, []byte{200, 1, 1, 2, 3, 4, 5, 6}),
	} {
		f.Add(s, byte(1))
		f.Add(rsFrame(hostLL, 255, 0, false, s[8:]), byte(0))
	}
	f.Add(rsFrame(netip.IPv6Unspecified(), 255, 0, false, optSLLAOf(hostMAC)), byte(0))
	f.Add(rsFrame(hostLL, 64, 0, true), byte(0))
	for _, s := range learnerSeeds() {
		f.Add(s, byte(1))
	}
	f.Add([]byte{}, byte(0))
	clk := newFakeClock()
	a, err := New(Config{Link: newRecLink(clk), SrcAddr: ourLL, Clock: clk, HopLimit: 64, MTU: 1500,
		Prefixes: []Prefix{{Prefix: netip.MustParsePrefix("2001:db8:1::/64")}}})
	if err != nil {
		f.Fatal(err)
	}
	rsCounters := func() uint64 {
		n := a.stats.RSReceived.Load()
		for i := range a.stats.Drops {
			n += a.stats.Drops[i].Load()
		}
		return n
	}
	f.Fuzz(func(t *testing.T, data []byte, mode byte) {
		frame := fuzzFrame(data, mode, AllRouters)
		in := bytes.Clone(frame)
		before, received := rsCounters(), a.stats.RSReceived.Load()
		clk.Set(clk.Now().Add(time.Second)) // every RA compared
		took := a.Deliver(frame)
		if !bytes.Equal(in, frame) {
			t.Fatal("Deliver changed the frame")
		}
		typ, isICMP := icmpType(frame)
		moved := rsCounters() - before
		if took != (isICMP && typ == typeRS) || moved != map[bool]uint64{false: 0, true: 1}[took] {
			t.Fatalf("consumed %v (ICMPv6 %v type %d), RS counters moved %d", took, isICMP, typ, moved)
		}
		if a.stats.RSReceived.Load() > received && !gvValidND(frame, header.ICMPv6RouterSolicit) {
			t.Fatalf("accepted an RS gVisor finds invalid: % x", frame)
		}
	})
}
