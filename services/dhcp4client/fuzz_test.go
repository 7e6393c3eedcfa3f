package dhcp4client

import (
	"context"
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// fuzzStates are the states handle is fuzzed in.
var fuzzStates = []State{Init, Selecting, Requesting, Bound, Renewing, Rebinding, Rebooting}

var fuzzXID = dhcpv4.TransactionID{0xde, 0xad, 0xbe, 0xef}

// fuzzClient returns a client (not running) put directly into st, as
// Run would have left it, with the probe answering inUse.
func fuzzClient(t *testing.T, st State, inUse bool) (*Client, *fakeTransport) {
	clk := newFakeClock()
	tr := &fakeTransport{clk: clk}
	pr := &fakeProber{inUse: map[netip.Addr]bool{}}
	c, err := New(Config{Transport: tr, HWAddr: clientMAC, Clock: clk, Rand: fakeclock.NewCounting(1), Prober: pr, MinMTU: 576})
	if err != nil {
		t.Fatal(err)
	}
	c.state, c.xid, c.started = st, fuzzXID, epoch
	switch st {
	case Requesting:
		c.offer = offer{server: serverIP, addr: offered}
		c.reqStart = epoch
	case Rebooting:
		c.want, c.rebootEnd = offered, epoch.Add(time.Minute)
	case Bound, Renewing, Rebinding:
		c.lease = &Lease{
			Addr: netip.PrefixFrom(offered, 24), Server: serverIP, ServerMAC: serverMAC,
			Acquired: epoch, T1: epoch.Add(time.Hour), T2: epoch.Add(2 * time.Hour), Expiry: epoch.Add(3 * time.Hour),
		}
	}
	c.next = epoch.Add(4 * time.Second)
	if c.lease != nil {
		c.next = c.lease.T1
	}
	if st == Init {
		c.next = time.Time{}
	}
	if inUse {
		for _, a := range []string{"192.0.2.50", "192.0.2.51", "10.0.0.1"} {
			pr.inUse[netip.MustParseAddr(a)] = true
		}
	}
	return c, tr
}

// FuzzHandleMessage feeds arbitrary datagrams to the client's handler in
// every state. It never panics; each datagram is counted exactly once,
// as a drop or as the offer, ACK or NAK it was; and any lease it leaves
// applied is whole (Lease.check), keeps the MTU rule, and survives the
// lease file round trip.
func FuzzHandleMessage(f *testing.F) {
	req := &dhcpv4.DHCPv4{TransactionID: fuzzXID, ClientHWAddr: clientMAC}
	for i := range fuzzStates {
		for _, mt := range []dhcpv4.MessageType{dhcpv4.MessageTypeOffer, dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak} {
			f.Add(uint8(i), reply(req, mt, serverIP, offered).ToBytes())
		}
	}
	rich := reply(req, dhcpv4.MessageTypeAck, serverIP, offered,
		withOption(dhcpv4.OptionClasslessStaticRoute, []byte{0, 192, 0, 2, 254, 24, 198, 51, 100, 192, 0, 2, 253}),
		withOption(dhcpv4.OptionInterfaceMTU, []byte{0x05, 0xdc}),
		withSeconds(dhcpv4.OptionRenewTimeValue, 100), withSeconds(dhcpv4.OptionRebindingTimeValue, 200))
	f.Add(uint8(2), rich.ToBytes())
	f.Add(uint8(4), rich.ToBytes())
	dnsmasq, _ := hex.DecodeString(dnsmasqAckHex)
	f.Add(uint8(6), dnsmasq) // REBOOTING takes any server
	f.Add(uint8(1), []byte{})
	f.Add(uint8(1), make([]byte, 240))
	f.Fuzz(func(t *testing.T, sel uint8, payload []byte) {
		st := fuzzStates[int(sel&0x7f)%len(fuzzStates)]
		c, _ := fuzzClient(t, st, sel&0x80 != 0)
		s := &c.stats
		before := s.Drops.Total() + s.Offers.Load() + s.Acks.Load() + s.Naks.Load()
		c.handle(context.Background(), rawudp.Packet{
			Payload: payload,
			Src:     netip.AddrPortFrom(serverIP, 67),
			Dst:     netip.AddrPortFrom(netip.MustParseAddr("255.255.255.255"), 68),
			SrcMAC:  serverMAC,
			DstMAC:  rawudp.Broadcast,
		}, c.clock.Now())
		after := s.Drops.Total() + s.Offers.Load() + s.Acks.Load() + s.Naks.Load()
		if after != before+1 {
			t.Fatalf("handle in %v counted %d events, want 1", st, after-before)
		}
		if s.Drops.Total() == 0 && (len(payload) < 8 || [4]byte(payload[4:8]) != fuzzXID) {
			t.Fatalf("handle in %v took a message with xid %x", st, payload[4:min(8, len(payload))])
		}
		if l := c.lease; l != nil {
			if err := l.check(); err != nil {
				t.Fatalf("lease after handle in %v: %v: %+v", st, err, l)
			}
			if l.MTU != 0 && l.MTU < c.cfg.MinMTU {
				t.Fatalf("lease MTU %d below the minimum %d", l.MTU, c.cfg.MinMTU)
			}
			back, err := decodeLease(encodeLease(l, clientMAC, nil), clientMAC, nil)
			if err != nil || !back.sameConfig(l) || !back.Expiry.Equal(l.Expiry) {
				t.Fatalf("lease file round trip: %v\n%+v\n%+v", err, l, back)
			}
		}
		switch c.state {
		case Bound, Renewing, Rebinding:
			if c.lease == nil {
				t.Fatalf("state %v without a lease", c.state)
			}
		default:
			if c.lease != nil {
				t.Fatalf("state %v with a lease", c.state)
			}
		}
		if c.next.IsZero() && c.state != Init {
			t.Fatalf("state %v with no timer", c.state)
		}
	})
}

// TestDnsmasqAck parses a real dnsmasq DHCPACK in REQUESTING: the golden
// counterpart of the interop test's lease.
func TestDnsmasqAck(t *testing.T) {
	payload, err := hex.DecodeString(dnsmasqAckHex)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fuzzClient(t, Requesting, false)
	server := netip.MustParseAddr("10.9.0.1")
	c.offer = offer{server: server, addr: netip.MustParseAddr("10.9.0.51")}
	c.handle(context.Background(), rawudp.Packet{Payload: payload, Src: netip.AddrPortFrom(server, 67), SrcMAC: serverMAC}, epoch)
	want := &Lease{
		Addr:      netip.MustParsePrefix("10.9.0.51/24"),
		Server:    server,
		ServerMAC: serverMAC,
		Routers:   []netip.Addr{server},
		Routes: []Route{
			{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParseAddr("10.9.0.254")},
			{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParseAddr("10.9.0.253")},
		},
		DNS:      []netip.Addr{netip.MustParseAddr("10.9.0.53")},
		Domain:   "isp.test",
		MTU:      1400,
		Acquired: epoch,
		T1:       epoch.Add(20 * time.Second),
		T2:       epoch.Add(40 * time.Second),
		Expiry:   epoch.Add(2 * time.Minute),
	}
	if diff := cmp.Diff(want, c.lease, eq); diff != "" {
		t.Errorf("lease from dnsmasq's DHCPACK (-want +got):\n%s", diff)
	}
}

// dnsmasqAckHex is a DHCPACK from dnsmasq 2.90 as the interop test's
// watcher saw it (options 53, 54, 51, 58, 59, 1, 28, 3, 15, 6, 26, 121,
// in dnsmasq's order), with the xid and chaddr replaced by the fuzz
// client's.
const dnsmasqAckHex = "02010600deadbeef00008000000000000a0900330a090001000000000200000000010000000000000000000000000000" +
	"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000" +
	"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000" +
	"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000" +
	"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000063825363" +
	"35010536040a0900013304000000783a04000000143b04000000280104ffffff001c040a0900ff03040a0900010f0869" +
	"73702e7465737406040a0900351a020578790d000a0900fe18c633640a0900fdff"
