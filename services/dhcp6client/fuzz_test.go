package dhcp6client

import (
	"encoding/hex"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// keaReplyHex is a Reply of kea-dhcp6 2.2 to a Request, from
// TestInteropKea's log.
const keaReplyHex = "070000030001000a000300010200000009020002000a000300010200000009010017001020010db80000000000000000000000530018000a0369737004746573740000190029000009020000000400000006001a0019000000080000000a3820010db8aa0000000000000000000000"

// fuzzStates are the states handle is fuzzed in; Soliciting twice, in
// and after the first RT.
var fuzzStates = []State{Init, Soliciting, Soliciting, Requesting, Bound, Renewing, Rebinding, Confirming, Releasing}

var fuzzXID = dhcpv6.TransactionID{0xc0, 0xff, 0xee}

// fuzzLease is the lease fuzzClient holds in BOUND, RENEW and REBIND, and
// confirms or releases.
func fuzzLease() *Lease {
	return &Lease{
		Prefixes: []Prefix{{delegated, time.Hour, 2 * time.Hour, epoch.Add(time.Hour), epoch.Add(2 * time.Hour)}},
		DNS:      []netip.Addr{dnsServer}, ServerID: serverDUID, ServerAddr: serverLL, ServerMAC: serverMAC,
		Acquired: epoch, T1: epoch.Add(30 * time.Minute), T2: epoch.Add(48 * time.Minute),
	}
}

// fuzzClient returns a client (not running) put directly into the i-th
// fuzz state, as Run would have left it a second after its last
// transmission.
func fuzzClient(t *testing.T, i int) (*Client, *fakeTransport, *[]*Lease) {
	clk := newFakeClockAt(epoch.Add(40 * time.Minute))
	tr := &fakeTransport{clk: clk}
	changes := &[]*Lease{}
	c, err := New(Config{Transport: tr, HWAddr: clientMAC, PDLength: 56, WantAddress: true, Clock: clk, Rand: fakeclock.NewCounting(1),
		OnChange: func(l *Lease) { *changes = append(*changes, l) }})
	if err != nil {
		t.Fatal(err)
	}
	st := fuzzStates[i]
	c.state, c.xid = st, fuzzXID
	now := clk.Now()
	c.ex = exchange{params: params{irt: time.Second, mrt: time.Hour}, start: now.Add(-time.Second), lastSent: now.Add(-time.Second),
		rt: 2 * time.Second, sent: 1, next: now.Add(time.Second)}
	if i == 2 {
		c.ex.sent = 2 // SOLICIT after the first RT
	}
	switch st {
	case Requesting:
		c.chosen = &advert{serverID: serverDUID, prefixes: []netip.Prefix{delegated}, srcAddr: serverLL, srcMAC: serverMAC}
	case Bound, Renewing, Rebinding:
		c.lease = fuzzLease()
	case Confirming, Releasing:
		c.saved = fuzzLease()
	}
	c.next = c.ex.next
	if st == Init {
		c.next = now.Add(time.Second)
	}
	if st == Bound {
		c.next = c.lease.T1
	}
	return c, tr, changes
}

// FuzzHandleReply feeds arbitrary datagrams to the client's handler in
// every state. It never panics; each datagram is counted exactly once,
// as a drop or as the Advertise or Reply it was; a drop changes neither
// the state, the lease, the timer, the wire nor OnChange; a message taken
// has our transaction id and DUID; and any lease left applied is whole
// (Lease.check), its T1 not after T2, and survives the lease file round
// trip.
func FuzzHandleReply(f *testing.F) {
	sol := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeSolicit, TransactionID: fuzzXID}
	sol.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionClientID, OptionData: duidLLOf(clientMAC)})
	na := &dhcpv6.OptIANA{IaId: ourIAID, T1: time.Minute, T2: 2 * time.Minute}
	na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: leasedAddr.AsSlice(), PreferredLifetime: time.Hour, ValidLifetime: time.Hour})
	for i := range fuzzStates {
		f.Add(uint8(i), server(sol, dhcpv6.MessageTypeAdvertise, serverDUID).ToBytes())
		f.Add(uint8(i), server(sol, dhcpv6.MessageTypeReply, serverDUID, withOption(na)).ToBytes())
	}
	f.Add(uint8(5), server(sol, dhcpv6.MessageTypeReply, serverDUID, withIAPD(iaPDOpt(0, 0, statusOpt(iana.StatusNoBinding)))).ToBytes())
	f.Add(uint8(5), server(sol, dhcpv6.MessageTypeReply, serverDUID, withIAPD(iaPDOpt(0, 0, prefixOpt(delegated, 0, 0), prefixOpt(delegated2, Infinite, Infinite)))).ToBytes())
	f.Add(uint8(3), server(sol, dhcpv6.MessageTypeReply, serverDUID, withIAPD(iaPDOpt(0, 0, statusOpt(iana.StatusNoPrefixAvail)))).ToBytes())
	relay, _ := dhcpv6.EncapsulateRelay(server(sol, dhcpv6.MessageTypeReply, serverDUID), dhcpv6.MessageTypeRelayReply, net.IPv6zero, clientLL.AsSlice())
	f.Add(uint8(3), relay.ToBytes())
	kea, _ := hex.DecodeString(keaReplyHex)
	f.Add(uint8(3), kea)
	f.Add(uint8(1), []byte{})
	f.Fuzz(func(t *testing.T, sel uint8, payload []byte) {
		i := int(sel) % len(fuzzStates)
		c, tr, changes := fuzzClient(t, i)
		s := &c.stats
		count := func() uint64 { return s.Drops.Total() + s.Advertises.Load() + s.Replies.Load() }
		before, drops := count(), s.Drops.Total()
		state, next, lease := c.state, c.next, c.lease.clone()
		c.handle(rawudp.Packet{
			Payload: payload,
			Src:     netip.AddrPortFrom(serverLL, 547),
			Dst:     netip.AddrPortFrom(clientLL, 546),
			SrcMAC:  serverMAC,
			DstMAC:  clientMAC,
		}, c.clock.Now())
		if after := count(); after != before+1 {
			t.Fatalf("handle in %v counted %d events, want 1", fuzzStates[i], after-before)
		}
		if s.Drops.Total() == drops+1 {
			if c.state != state || !c.next.Equal(next) || cmp.Diff(lease, c.lease, eq) != "" || len(tr.out) != 0 || len(*changes) != 0 {
				t.Fatalf("a drop in %v changed the client: %v, next %v, sent %d, OnChange %d", state, c.state, c.next, len(tr.out), len(*changes))
			}
		} else if len(payload) < 4 || dhcpv6.TransactionID(payload[1:4]) != fuzzXID || string(rawOption(payload, dhcpv6.OptionClientID)) != string(c.duid) {
			t.Fatalf("handle in %v took a message not for its exchange: %x", state, payload)
		}
		if l := c.lease; l != nil {
			if err := l.check(); err != nil {
				t.Fatalf("lease after handle in %v: %v: %+v", state, err, l)
			}
			back, err := decodeLease(encodeLease(l, c.duid, 1), c.duid, 1)
			if err != nil || cmp.Diff(l, back, eq) != "" {
				t.Fatalf("lease file round trip: %v\n%s", err, cmp.Diff(l, back, eq))
			}
		}
		switch c.state {
		case Bound, Renewing, Rebinding:
			if c.lease == nil {
				t.Fatalf("state %v without a lease", c.state)
			}
		}
	})
}
