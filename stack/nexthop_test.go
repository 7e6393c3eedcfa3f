package stack

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// TestNATNextHopNewFlows: once netstack has forwarded a packet to the WAN
// host (and one back to the LAN host), the first packets of later flows
// between them (handshakes, first data) are forwarded without netstack,
// still masqueraded; after InvalidateFastPath netstack decides again.
func TestNATNextHopNewFlows(t *testing.T) {
	l, nat := newNATLab(t, nil)
	peers := remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5003))
	first := dial(t, l.a, netip.AddrPortFrom(bIP4, 5003))
	exchange(t, first, 1<<10)
	peer(t, peers)
	first.Close()

	lan, wan := l.r.Interface("lan"), l.r.Interface("wan")
	nh0 := lan.Stats().NextHopForwarded + wan.Stats().NextHopForwarded
	rx0 := l.r.Stack().Stats().IP.PacketsReceived.Value()
	const flows = 20
	for range flows {
		c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5003))
		exchange(t, c, 1<<10)
		if got := peer(t, peers); got.Addr() != wanIP4 {
			t.Fatalf("WAN host saw %s, want the router's WAN address %s", got, wanIP4)
		}
		c.Close()
	}
	nh := lan.Stats().NextHopForwarded + wan.Stats().NextHopForwarded - nh0
	rx := l.r.Stack().Stats().IP.PacketsReceived.Value() - rx0
	t.Logf("%d flows: %d packets forwarded by next hop, %d into netstack", flows, nh, rx)
	// Each flow's SYN, SYN-ACK, ACK and first data at least.
	if nh < 3*flows {
		t.Errorf("next hop forwarded %d packets of %d new flows, want >= %d", nh, flows, 3*flows)
	}
	if rx*2 > nh {
		t.Errorf("netstack received %d packets while the next-hop cache forwarded %d", rx, nh)
	}

	nat.InvalidateFastPath()
	rx0 = l.r.Stack().Stats().IP.PacketsReceived.Value()
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5003))
	exchange(t, c, 1<<10)
	c.Close()
	peer(t, peers)
	if rx := l.r.Stack().Stats().IP.PacketsReceived.Value() - rx0; rx == 0 {
		t.Error("after InvalidateFastPath no packet went through netstack: stale next hops were used")
	}
}

// TestDecrementTTL4 checks the incremental checksum update against a
// full recomputation (RFC 1624) over random headers, TTL 2..255.
func TestDecrementTTL4(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		ip := make([]byte, 20)
		for i := range ip {
			ip[i] = byte(r.Uint32())
		}
		ip[0] = 0x45
		ip[8] = byte(2 + r.IntN(254))
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip, 0))
		want := ip[8] - 1
		decrementTTL4(ip)
		if ip[8] != want {
			t.Fatalf("TTL %d, want %d", ip[8], want)
		}
		if c := checksum.Checksum(ip, 0); c != 0xffff {
			t.Fatalf("header %x: checksum does not verify after the update (sum %#x)", ip, c)
		}
	}
}

// TestPlainUnicast4 lists what the next-hop path leaves to netstack.
func TestPlainUnicast4(t *testing.T) {
	for a, want := range map[string]bool{
		"10.0.0.1": true, "198.51.100.7": true, "0.1.2.3": false, "127.0.0.1": false,
		"169.254.1.1": false, "224.0.0.1": false, "240.0.0.1": false, "255.255.255.255": false,
	} {
		if got := plainUnicast4(netip.MustParseAddr(a).AsSlice()); got != want {
			t.Errorf("plainUnicast4(%s) = %v, want %v", a, got, want)
		}
	}
}

// TestNextHopCacheValidity: a decision is used only at the generation it
// was learned in, for nextHopTTL; learning again refreshes it only once it
// is half that old (no allocation per netstack forward).
func TestNextHopCacheValidity(t *testing.T) {
	var c nextHopCache
	dst := []byte{198, 51, 100, 7}
	eth := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	const t0 = int64(1e12)
	c.learn(dst, 3, eth, 7, t0)
	if h := c.lookup(dst, 7, t0+nextHopTTL/2); h == nil || h.out != 3 || string(h.eth[:]) != string(eth) {
		t.Fatalf("lookup = %+v, want the decision just learned", h)
	}
	if h := c.lookup(dst, 8, t0); h != nil {
		t.Error("a decision of generation 7 was used at generation 8")
	}
	if h := c.lookup(dst, 7, t0+nextHopTTL+1); h != nil {
		t.Error("a decision older than nextHopTTL was used")
	}
	if h := c.lookup([]byte{198, 51, 100, 8}, 7, t0); h != nil {
		t.Error("another destination's decision was used")
	}
	first := c.slots[nextHopSlot(dst)].Load()
	c.learn(dst, 3, eth, 7, t0+nextHopRefresh-1)
	if c.slots[nextHopSlot(dst)].Load() != first {
		t.Error("an unchanged, fresh decision was replaced")
	}
	c.learn(dst, 3, eth, 7, t0+nextHopRefresh)
	if h := c.lookup(dst, 7, t0+nextHopRefresh+nextHopTTL); h == nil {
		t.Error("learning a due decision again did not refresh it")
	}
	c.learn(dst, 4, eth, 7, t0+nextHopRefresh)
	if h := c.lookup(dst, 7, t0+nextHopRefresh); h == nil || h.out != 4 {
		t.Errorf("a changed decision was not taken: %+v", h)
	}
}

// TestNextHopLeavesOddSourcesToNetstack: with the WAN host's next hop
// known, a datagram from a LAN host leaves for the WAN host, one from the
// LAN subnet's broadcast address does not: netstack refuses that source,
// and the next-hop path must leave it to netstack.
func TestNextHopLeavesOddSourcesToNetstack(t *testing.T) {
	l, _ := newNATLab(t, nil)
	remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5004))
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5004))
	exchange(t, c, 1<<10)
	lan := l.r.Interface("lan")
	// seen reports whether a datagram to port 9 from sport leaves on the
	// WAN side within wait (masquerade keeps a free port).
	seen := func(src netip.Addr, sport uint16, wait time.Duration) bool {
		t.Helper()
		f := ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, ipv4Packet(src, bIP4, 64, header.UDPProtocolNumber, udpDatagram(sport, 9, []byte("probe"))))
		lan.HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f)}})
		return l.tapB.Wait(ctxTimeout(t, wait), func(f []byte) bool {
			ip := f[header.EthernetMinimumSize:]
			return binary.BigEndian.Uint16(f[12:]) == uint16(header.IPv4ProtocolNumber) && len(ip) >= 28 && ip[9] == 17 &&
				binary.BigEndian.Uint16(ip[20:]) == sport && binary.BigEndian.Uint16(ip[22:]) == 9 && string(ip[28:]) == "probe"
		}) != nil
	}
	nh0 := lan.Stats().NextHopForwarded
	if !seen(aIP4, 40001, 5*time.Second) {
		t.Fatal("a LAN host's datagram did not reach the WAN side")
	}
	if lan.Stats().NextHopForwarded == nh0 {
		t.Fatal("the next-hop path took nothing: the test does not exercise it")
	}
	if seen(netip.MustParseAddr("10.1.0.255"), 40002, 300*time.Millisecond) {
		t.Error("a datagram from the LAN subnet's broadcast address was forwarded")
	}
}
