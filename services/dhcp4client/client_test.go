package dhcp4client

import (
	"bytes"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// eq compares the netip types in cmp.Diff.
var eq = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

var bcast = netip.MustParseAddr("255.255.255.255")

// checkBroadcast checks the addressing RFC 2131 §4.1 asks of a client
// without an address: from 0.0.0.0:68 to 255.255.255.255:67 in an
// Ethernet broadcast.
func checkBroadcast(t *testing.T, s sent, src netip.Addr) {
	t.Helper()
	if s.p.Src != netip.AddrPortFrom(src, 68) || s.p.Dst != netip.AddrPortFrom(bcast, 67) || !bytes.Equal(s.p.DstMAC, rawudp.Broadcast) {
		t.Errorf("%v sent %v -> %v (MAC %v), want %v:68 -> 255.255.255.255:67 (MAC broadcast)", s.msg.MessageType(), s.p.Src, s.p.Dst, s.p.DstMAC, src)
	}
}

func opt(m *dhcpv4.DHCPv4, code dhcpv4.OptionCode) []byte { return m.Options.Get(code) }

// TestRFC2131_4_4_1_Acquire walks INIT, SELECTING, REQUESTING, BOUND
// and checks each message's fields against RFC 2131 Table 5 and the
// lease against the DHCPACK.
func TestRFC2131_4_4_1_Acquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) {
			c.ClientID = append([]byte{1}, clientMAC...)
			c.Hostname = "gvrouter"
		}).start()
		if got := h.c.Status().State; got != "selecting" {
			t.Errorf("state after start = %s, want SELECTING", got)
		}
		d := h.one(dhcpv4.MessageTypeDiscover)
		checkBroadcast(t, d, netip.IPv4Unspecified())
		if !d.msg.IsBroadcast() {
			t.Errorf("DHCPDISCOVER without the BROADCAST flag (RFC 2131 §4.1)")
		}
		if !bytes.Equal(d.msg.ClientHWAddr, clientMAC) {
			t.Errorf("chaddr = %v, want %v", d.msg.ClientHWAddr, clientMAC)
		}
		prl := opt(d.msg, dhcpv4.OptionParameterRequestList)
		for _, code := range []byte{1, 3, 6, 15, 26, 51, 54, 58, 59, 121} {
			if !bytes.Contains(prl, []byte{code}) {
				t.Errorf("parameter request list %v lacks %d", prl, code)
			}
		}
		if got := opt(d.msg, dhcpv4.OptionClientIdentifier); !bytes.Equal(got, h.cfg.ClientID) {
			t.Errorf("option 61 = %x, want %x", got, h.cfg.ClientID)
		}
		if got := string(opt(d.msg, dhcpv4.OptionHostName)); got != "gvrouter" {
			t.Errorf("option 12 = %q, want gvrouter", got)
		}
		if opt(d.msg, dhcpv4.OptionRequestedIPAddress) != nil {
			t.Errorf("DHCPDISCOVER with option 50 and no address to ask for")
		}

		// A second server's offer comes too late: the first one wins.
		cid := withOption(dhcpv4.OptionClientIdentifier, h.cfg.ClientID)
		h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered, cid), serverIP, serverMAC))
		r := h.one(dhcpv4.MessageTypeRequest)
		h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, server2IP, netip.MustParseAddr("192.0.2.99"), cid), server2IP, server2MAC))
		h.none()
		checkBroadcast(t, r, netip.IPv4Unspecified())
		if r.msg.TransactionID != d.msg.TransactionID {
			t.Errorf("DHCPREQUEST xid %v, want the offer's %v (RFC 2131 Table 5)", r.msg.TransactionID, d.msg.TransactionID)
		}
		if got := opt(r.msg, dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, offered.AsSlice()) {
			t.Errorf("option 50 = %v, want %v", got, offered)
		}
		if got := opt(r.msg, dhcpv4.OptionServerIdentifier); !bytes.Equal(got, serverIP.AsSlice()) {
			t.Errorf("option 54 = %v, want %v", got, serverIP)
		}
		if !r.msg.ClientIPAddr.IsUnspecified() || !r.msg.IsBroadcast() {
			t.Errorf("SELECTING DHCPREQUEST ciaddr %v broadcast %v, want 0.0.0.0 and set", r.msg.ClientIPAddr, r.msg.IsBroadcast())
		}
		if got := h.c.Status(); got.State != "requesting" || got.Offered != offered {
			t.Errorf("Status = %s offered %v, want REQUESTING %v", got.State, got.Offered, offered)
		}

		h.clk.Advance(2 * time.Second) // the ACK takes 2 s; lease times count from the REQUEST
		h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeAck, serverIP, offered, cid, withSeconds(dhcpv4.OptionInterfaceMTU, 0)), serverIP, serverMAC))
		if got := h.prober.asked; !slices.Equal(got, []netip.Addr{offered}) {
			t.Errorf("probed %v, want %v", got, offered)
		}
		ch := h.takeChanges()
		if len(ch) != 1 || ch[0].old != nil {
			t.Fatalf("OnLease calls = %+v, want one (nil, lease)", ch)
		}
		want := &Lease{
			Addr:      netip.MustParsePrefix("192.0.2.50/24"),
			Server:    serverIP,
			ServerMAC: serverMAC,
			Routers:   []netip.Addr{serverIP},
			Routes:    []Route{{netip.MustParsePrefix("0.0.0.0/0"), serverIP}},
			DNS:       []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("198.51.100.53")},
			Domain:    "isp.example",
			Acquired:  epoch,
			T1:        epoch.Add(30 * time.Minute),
			T2:        epoch.Add(52*time.Minute + 30*time.Second),
			Expiry:    epoch.Add(time.Hour),
		}
		if diff := cmp.Diff(want, ch[0].new, eq); diff != "" {
			t.Errorf("lease (-want +got):\n%s", diff)
		}
		st := h.c.Status()
		if st.State != "bound" || st.Next != want.T1 || cmp.Diff(want, st.Lease, eq) != "" {
			t.Errorf("Status = %+v, want BOUND, next %v, lease %+v", st, want.T1, want)
		}
		s := h.c.Stats()
		for name, got := range map[string]uint64{"discovers": s.Discovers.Load(), "offers": s.Offers.Load(), "requests": s.Requests.Load(), "acks": s.Acks.Load()} {
			if got != 1 {
				t.Errorf("Stats %s = %d, want 1", name, got)
			}
		}
		if got := s.Drops.Type.Load(); got != 1 {
			t.Errorf("Drops.Type = %d, want 1 (the late offer)", got)
		}
	})
}

// TestRFC2131_4_1_Backoff checks the retransmission delays of
// DHCPDISCOVER: 4, 8, 16, 32, then 64 s forever, each within ±1 s, and
// the extremes of the jitter.
func TestRFC2131_4_1_Backoff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    uint64
		jitter time.Duration
	}{
		{"low", 0, -time.Second},
		{"middle", 1 << 63, 0},
		{"high", math.MaxUint64 - 100, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.Rand = fakeclock.NewCounting(tc.src) }).start()
				h.clk.Advance(10 * time.Minute)
				out := h.tr.take()
				var got []time.Duration
				for i := 1; i < len(out); i++ {
					if out[i].msg.MessageType() != dhcpv4.MessageTypeDiscover || out[i].msg.TransactionID != out[0].msg.TransactionID {
						t.Fatalf("message %d is %v xid %v, want a DHCPDISCOVER retransmission", i, out[i].msg.MessageType(), out[i].msg.TransactionID)
					}
					got = append(got, out[i].at.Sub(out[i-1].at))
				}
				var want []time.Duration
				for i, total := 0, time.Duration(0); ; i++ {
					d := 4*time.Second<<min(i, 4) + tc.jitter
					if total += d; total > 10*time.Minute {
						break
					}
					want = append(want, d)
				}
				if !slices.Equal(got, want) {
					t.Errorf("DHCPDISCOVER intervals = %v, want %v", got, want)
				}
				if secs := out[len(out)-1].msg.NumSeconds; int(secs) != int(out[len(out)-1].at.Sub(epoch)/time.Second) {
					t.Errorf("secs of the last DHCPDISCOVER = %d, want the seconds since the first", secs)
				}
			})
		})
	}
	t.Run("random", func(t *testing.T) {
		// The seeded source: every delay within the RFC's ±1 s.
		h := newHarness(t, func(c *Config) { c.Rand = nil })
		for i := range 1000 {
			base := 4 * time.Second << min(i%7, 4)
			if d := h.c.backoff(i % 7); d < base-time.Second || d > base+time.Second {
				t.Fatalf("backoff(%d) = %v, want %v ± 1s", i%7, d, base)
			}
		}
	})
}

// TestRFC2131_4_4_1_RequestGivesUp checks that REQUESTING retransmits
// with the back-off and returns to INIT after the last try.
func TestRFC2131_4_4_1_RequestGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		d := h.one(dhcpv4.MessageTypeDiscover)
		h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, serverMAC))
		h.clk.Advance(4*time.Second + 8*time.Second + 16*time.Second + 32*time.Second + 64*time.Second - time.Nanosecond)
		out := h.tr.take()
		var at []time.Duration
		for _, o := range out {
			if o.msg.MessageType() != dhcpv4.MessageTypeRequest {
				t.Fatalf("sent %v in REQUESTING, want DHCPREQUESTs only", types(out))
			}
			at = append(at, o.at.Sub(epoch))
		}
		if want := []time.Duration{0, 4 * time.Second, 12 * time.Second, 28 * time.Second, 60 * time.Second}; !slices.Equal(at, want) {
			t.Errorf("DHCPREQUESTs at %v, want %v", at, want)
		}
		h.clk.Advance(time.Nanosecond)
		h.one(dhcpv4.MessageTypeDiscover)
		if got := h.c.Status().State; got != "selecting" {
			t.Errorf("state = %s, want SELECTING", got)
		}
	})
}

// TestRFC2131_4_4_5_RenewAtT1 checks that nothing is sent before T1, and
// that at T1 the client unicasts a DHCPREQUEST from its address to the
// server, through the MAC the DHCPACK came from; that the DHCPACK to it
// moves the times on without calling OnLease.
func TestRFC2131_4_4_5_RenewAtT1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		// The ACK reaches the client through a relay: its Ethernet source
		// is the relay's MAC, not the server's.
		relayMAC := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
		d := h.one(dhcpv4.MessageTypeDiscover)
		h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, relayMAC))
		r := h.one(dhcpv4.MessageTypeRequest)
		h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeAck, serverIP, offered, withSeconds(dhcpv4.OptionRenewTimeValue, 600), withSeconds(dhcpv4.OptionRebindingTimeValue, 1200)), serverIP, relayMAC))
		l := h.takeChanges()[0].new
		if want := epoch.Add(10 * time.Minute); !l.T1.Equal(want) {
			t.Fatalf("T1 = %v, want %v (option 58)", l.T1, want)
		}
		h.clk.AdvanceTo(l.T1.Add(-time.Nanosecond))
		h.none()
		h.clk.Advance(time.Nanosecond)
		rn := h.one(dhcpv4.MessageTypeRequest)
		if rn.p.Src != netip.AddrPortFrom(offered, 68) || rn.p.Dst != netip.AddrPortFrom(serverIP, 67) || !bytes.Equal(rn.p.DstMAC, relayMAC) {
			t.Errorf("renewal sent %v -> %v (MAC %v), want %v:68 -> %v:67 (MAC %v)", rn.p.Src, rn.p.Dst, rn.p.DstMAC, offered, serverIP, relayMAC)
		}
		if !rn.msg.ClientIPAddr.Equal(offered.AsSlice()) || rn.msg.IsBroadcast() {
			t.Errorf("renewal ciaddr %v broadcast %v, want %v and unset", rn.msg.ClientIPAddr, rn.msg.IsBroadcast(), offered)
		}
		if opt(rn.msg, dhcpv4.OptionRequestedIPAddress) != nil || opt(rn.msg, dhcpv4.OptionServerIdentifier) != nil {
			t.Errorf("renewal carries option 50 or 54 (RFC 2131 Table 5: MUST NOT)")
		}
		if rn.msg.TransactionID == r.msg.TransactionID {
			t.Errorf("renewal reuses the xid of the first exchange")
		}
		if got := h.c.Status().State; got != "renewing" {
			t.Errorf("state = %s, want RENEWING", got)
		}
		h.clk.Advance(time.Second)
		h.inject(pkt(reply(rn.msg, dhcpv4.MessageTypeAck, serverIP, offered, withSeconds(dhcpv4.OptionRenewTimeValue, 600), withSeconds(dhcpv4.OptionRebindingTimeValue, 1200)), serverIP, relayMAC))
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Errorf("OnLease after a renewal with the same configuration = %+v, want no call", ch)
		}
		st := h.c.Status()
		if want := l.T1.Add(10 * time.Minute); st.State != "bound" || !st.Lease.T1.Equal(want) || !st.Lease.Acquired.Equal(l.T1) {
			t.Errorf("after the renewal: %s, acquired %v, T1 %v; want BOUND, %v, %v", st.State, st.Lease.Acquired, st.Lease.T1, l.T1, want)
		}
		if got := h.c.Stats().Renewals.Load(); got != 1 {
			t.Errorf("Renewals = %d, want 1", got)
		}
		h.none()
	})
}

// TestRFC2131_4_4_5_RenewRetransmit checks the retransmissions in
// RENEWING and REBINDING: half the time left until T2 (then expiry),
// never less than 60 s; and that T2 comes exactly on time.
func TestRFC2131_4_4_5_RenewRetransmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind(withSeconds(dhcpv4.OptionIPAddressLeaseTime, 8000), withSeconds(dhcpv4.OptionRenewTimeValue, 4000), withSeconds(dhcpv4.OptionRebindingTimeValue, 7000))
		h.clk.AdvanceTo(l.Expiry.Add(-time.Nanosecond))
		out := h.tr.take()
		var got []string
		for _, o := range out {
			kind := "unicast"
			if o.p.Dst.Addr() == bcast {
				kind = "broadcast"
			}
			got = append(got, o.at.Sub(epoch).String()+" "+kind)
		}
		s := func(sec float64, kind string) string {
			return (time.Duration(sec * float64(time.Second))).String() + " " + kind
		}
		want := []string{
			s(4000, "unicast"), s(5500, "unicast"), s(6250, "unicast"), s(6625, "unicast"), s(6812.5, "unicast"), s(6906.25, "unicast"),
			// T2-now is 93.75 s: half of it is under 60 s, so 60 s; then T2.
			s(6966.25, "unicast"),
			s(7000, "broadcast"), s(7500, "broadcast"), s(7750, "broadcast"), s(7875, "broadcast"), s(7937.5, "broadcast"),
			// 62.5 s left: 60 s, then expiry caps the next wait.
			s(7997.5, "broadcast"),
		}
		if diff := cmp.Diff(want, got, eq); diff != "" {
			t.Errorf("DHCPREQUESTs in RENEWING and REBINDING (-want +got):\n%s", diff)
		}
		for _, o := range out[7:] {
			checkBroadcast(t, o, offered)
			if !o.msg.ClientIPAddr.Equal(offered.AsSlice()) {
				t.Errorf("REBINDING ciaddr = %v, want %v", o.msg.ClientIPAddr, offered)
			}
		}
		if out[7].msg.TransactionID != out[0].msg.TransactionID {
			t.Errorf("REBINDING changed the renewal's xid, so a late DHCPACK to RENEWING would be lost")
		}
		st := h.c.Stats()
		if st.Renewals.Load() != 1 || st.Rebinds.Load() != 1 {
			t.Errorf("Renewals %d Rebinds %d, want 1 and 1", st.Renewals.Load(), st.Rebinds.Load())
		}
	})
}

// TestRFC2131_4_4_5_RebindAtT2 checks that REBINDING takes a DHCPACK
// from any server, and a changed configuration calls OnLease.
func TestRFC2131_4_4_5_RebindAtT2(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind()
		h.clk.AdvanceTo(l.T2)
		out := h.tr.take()
		last := out[len(out)-1]
		if got := h.c.Status().State; got != "rebinding" || last.p.Dst.Addr() != bcast {
			t.Fatalf("at T2: state %s, last sent to %v; want REBINDING, broadcast", got, last.p.Dst)
		}
		// The old server answers RENEWING-style from another server id:
		// in REBINDING any server may answer.
		h.inject(pkt(reply(last.msg, dhcpv4.MessageTypeAck, server2IP, offered, withOption(dhcpv4.OptionRouter, server2IP.AsSlice())), server2IP, server2MAC))
		ch := h.takeChanges()
		if len(ch) != 1 || ch[0].new == nil || ch[0].new.Server != server2IP || !bytes.Equal(ch[0].new.ServerMAC, server2MAC) {
			t.Fatalf("OnLease after rebinding to a new server = %+v, want one call with server %v", ch, server2IP)
		}
		if got := h.c.Status().State; got != "bound" {
			t.Errorf("state = %s, want BOUND", got)
		}
		if len(h.prober.asked) != 1 {
			t.Errorf("probed %v, want the first address only: the rebound address is the same", h.prober.asked)
		}
	})
}

// TestRFC2131_4_4_5_Expiry checks that a lease nobody renews ends
// exactly at its expiry: OnLease(old, nil) and a new DHCPDISCOVER asking
// for the old address.
func TestRFC2131_4_4_5_Expiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind()
		h.clk.AdvanceTo(l.Expiry.Add(-time.Nanosecond))
		h.tr.take()
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Fatalf("OnLease before expiry: %+v", ch)
		}
		h.clk.Advance(time.Nanosecond)
		ch := h.takeChanges()
		if len(ch) != 1 || ch[0].new != nil || ch[0].old == nil || ch[0].old.Addr != l.Addr {
			t.Fatalf("OnLease at expiry = %+v, want one (lease, nil)", ch)
		}
		d := h.one(dhcpv4.MessageTypeDiscover)
		if got := opt(d.msg, dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, offered.AsSlice()) {
			t.Errorf("DHCPDISCOVER after expiry asks for %v, want %v", got, offered)
		}
		if !d.p.Src.Addr().IsUnspecified() {
			t.Errorf("DHCPDISCOVER after expiry from %v, want 0.0.0.0", d.p.Src)
		}
		st := h.c.Status()
		if st.State != "selecting" || st.Lease != nil || h.c.Stats().Expiries.Load() != 1 {
			t.Errorf("after expiry: %s lease %v expiries %d, want SELECTING, none, 1", st.State, st.Lease, h.c.Stats().Expiries.Load())
		}
	})
}

// TestRFC2131_4_4_5_ClockJump checks that a clock that jumps past expiry
// (a suspended board) expires the lease rather than renewing.
func TestRFC2131_4_4_5_ClockJump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind()
		h.clk.Set(l.Expiry.Add(time.Minute))
		h.clk.Advance(0)
		if ch := h.takeChanges(); len(ch) != 1 || ch[0].new != nil {
			t.Errorf("OnLease after a jump past expiry = %+v, want (lease, nil)", ch)
		}
		h.one(dhcpv4.MessageTypeDiscover)
	})
}

// TestRFC2131_4_4_5_NakInRenewing checks that a DHCPNAK to a renewal
// loses the lease at once.
func TestRFC2131_4_4_5_NakInRenewing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		h := newHarness(t, func(c *Config) { c.LeaseFile = filepath.Join(dir, "lease.json") }).start()
		l := h.bind()
		h.clk.AdvanceTo(l.T1)
		rn := h.one(dhcpv4.MessageTypeRequest)
		// A NAK from another server is not the renewal's answer.
		h.inject(pkt(reply(rn.msg, dhcpv4.MessageTypeNak, server2IP, netip.IPv4Unspecified()), server2IP, server2MAC))
		if got := h.c.Stats().Drops.ServerID.Load(); got != 1 {
			t.Errorf("Drops.ServerID = %d, want 1", got)
		}
		h.inject(pkt(reply(rn.msg, dhcpv4.MessageTypeNak, serverIP, netip.IPv4Unspecified()), serverIP, serverMAC))
		if ch := h.takeChanges(); len(ch) != 1 || ch[0].new != nil {
			t.Errorf("OnLease after DHCPNAK = %+v, want (lease, nil)", ch)
		}
		d := h.one(dhcpv4.MessageTypeDiscover)
		if opt(d.msg, dhcpv4.OptionRequestedIPAddress) != nil {
			t.Errorf("DHCPDISCOVER after DHCPNAK asks for the NAKed address")
		}
		if _, err := os.Stat(h.cfg.LeaseFile); !os.IsNotExist(err) {
			t.Errorf("lease file after DHCPNAK: %v, want removed", err)
		}
	})
}

// TestRFC2131_3_1_4_RepeatedNaks checks that the first DHCPNAK restarts
// at once and further ones back off.
func TestRFC2131_3_1_4_RepeatedNaks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		var at []time.Duration
		for _, wait := range []time.Duration{0, 0, 4 * time.Second, 8 * time.Second} {
			h.clk.Advance(wait)
			d := h.one(dhcpv4.MessageTypeDiscover)
			at = append(at, d.at.Sub(epoch))
			if len(at) == 4 {
				break
			}
			h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, serverMAC))
			r := h.one(dhcpv4.MessageTypeRequest)
			h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeNak, serverIP, netip.IPv4Unspecified()), serverIP, serverMAC))
		}
		if want := []time.Duration{0, 0, 4 * time.Second, 12 * time.Second}; !slices.Equal(at, want) {
			t.Errorf("DHCPDISCOVERs at %v, want %v (the first NAK restarts at once, the next wait 4 s, 8 s)", at, want)
		}
		if got := h.c.Stats().Naks.Load(); got != 3 {
			t.Errorf("Naks = %d, want 3", got)
		}
	})
}

// TestRFC2131_3_2_InitReboot checks that a client with an unexpired
// saved lease starts in INIT-REBOOT: a broadcast DHCPREQUEST with option
// 50 and without 54, then BOUND on the DHCPACK; that a saved lease
// nobody confirms is given up after RebootTimeout; and that an expired
// one is only suggested in DHCPDISCOVER.
func TestRFC2131_3_2_InitReboot(t *testing.T) {
	saved := func(t *testing.T) (string, *Lease) {
		path := filepath.Join(t.TempDir(), "lease.json")
		h := newHarness(t, func(c *Config) { c.LeaseFile = path }).start()
		l := h.bind()
		h.stop()
		return path, l
	}
	t.Run("confirmed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path, l := saved(t)
			h := newHarness(t, func(c *Config) { c.LeaseFile = path }).start()
			r := h.one(dhcpv4.MessageTypeRequest)
			checkBroadcast(t, r, netip.IPv4Unspecified())
			if got := opt(r.msg, dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, l.Addr.Addr().AsSlice()) {
				t.Errorf("INIT-REBOOT option 50 = %v, want %v", got, l.Addr.Addr())
			}
			if opt(r.msg, dhcpv4.OptionServerIdentifier) != nil || !r.msg.ClientIPAddr.IsUnspecified() {
				t.Errorf("INIT-REBOOT DHCPREQUEST with option 54 or ciaddr %v (RFC 2131 §4.3.2: MUST NOT, 0)", r.msg.ClientIPAddr)
			}
			if st := h.c.Status(); st.State != "rebooting" || st.Offered != l.Addr.Addr() || st.Lease != nil {
				t.Errorf("Status = %+v, want REBOOTING for %v with no lease applied yet", st, l.Addr.Addr())
			}
			// Any server may answer INIT-REBOOT.
			h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeAck, server2IP, offered), server2IP, server2MAC))
			ch := h.takeChanges()
			if len(ch) != 1 || ch[0].old != nil || ch[0].new == nil || ch[0].new.Server != server2IP {
				t.Fatalf("OnLease after INIT-REBOOT = %+v, want (nil, lease from %v)", ch, server2IP)
			}
		})
	})
	t.Run("silent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path, l := saved(t)
			h := newHarness(t, func(c *Config) { c.LeaseFile = path }).start()
			h.clk.Advance(DefaultRebootTimeout - time.Nanosecond)
			for _, o := range h.tr.take() {
				if o.msg.MessageType() != dhcpv4.MessageTypeRequest {
					t.Errorf("sent %v in REBOOTING", o.msg.MessageType())
				}
			}
			h.clk.Advance(time.Nanosecond)
			d := h.one(dhcpv4.MessageTypeDiscover)
			if got := opt(d.msg, dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, l.Addr.Addr().AsSlice()) {
				t.Errorf("DHCPDISCOVER after REBOOTING asks for %v, want %v", got, l.Addr.Addr())
			}
		})
	})
	t.Run("expired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path, l := saved(t)
			h := newHarness(t, func(c *Config) { c.LeaseFile = path })
			h.clk.Set(l.Expiry)
			h.start()
			d := h.one(dhcpv4.MessageTypeDiscover)
			if got := opt(d.msg, dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, l.Addr.Addr().AsSlice()) {
				t.Errorf("DHCPDISCOVER with an expired saved lease asks for %v, want %v (RFC 2131 §4.4.1)", got, l.Addr.Addr())
			}
		})
	})
	t.Run("nak", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path, _ := saved(t)
			h := newHarness(t, func(c *Config) { c.LeaseFile = path }).start()
			r := h.one(dhcpv4.MessageTypeRequest)
			h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeNak, server2IP, netip.IPv4Unspecified()), server2IP, server2MAC))
			d := h.one(dhcpv4.MessageTypeDiscover)
			if opt(d.msg, dhcpv4.OptionRequestedIPAddress) != nil {
				t.Errorf("DHCPDISCOVER after an INIT-REBOOT DHCPNAK asks for the address again")
			}
			if ch := h.takeChanges(); len(ch) != 0 {
				t.Errorf("OnLease = %+v, want no call: the saved lease was never applied", ch)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("lease file after DHCPNAK: %v, want removed", err)
			}
		})
	})
	t.Run("foreign", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path, _ := saved(t)
			h := newHarness(t, func(c *Config) { c.LeaseFile = path; c.HWAddr = server2MAC }).start()
			d := h.one(dhcpv4.MessageTypeDiscover)
			if opt(d.msg, dhcpv4.OptionRequestedIPAddress) != nil {
				t.Errorf("a lease saved for another MAC is asked for")
			}
			if got := h.c.Stats().LeaseFileErrors.Load(); got != 0 {
				t.Errorf("LeaseFileErrors = %d, want 0: a foreign lease is not corrupt", got)
			}
		})
	})
}

// TestLeaseFileCorrupt checks that a truncated, corrupt or unreadable
// lease file is counted, reported and replaced at the next DHCPACK, never
// fatal.
func TestLeaseFileCorrupt(t *testing.T) {
	good := encodeLease(&Lease{
		Addr: netip.MustParsePrefix("192.0.2.50/24"), Server: serverIP, ServerMAC: serverMAC,
		Acquired: epoch, T1: epoch.Add(time.Minute), T2: epoch.Add(2 * time.Minute), Expiry: epoch.Add(3 * time.Minute),
	}, clientMAC, nil)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"truncated", good[:len(good)/2]},
		{"garbage", []byte("\x00\x01not json")},
		{"empty", nil},
		{"trailing", append(append([]byte(nil), good...), good...)},
		{"version", bytes.Replace(good, []byte(`"version": 1`), []byte(`"version": 9`), 1)},
		{"times", bytes.Replace(good, []byte(`"t1": "2026-01-02T03:05:05Z"`), []byte(`"t1": "2027-01-02T03:05:05Z"`), 1)},
		{"address", bytes.Replace(good, []byte(`192.0.2.50/24`), []byte(`224.0.0.1/24`), 1)},
		{"unknown field", bytes.Replace(good, []byte(`"version": 1`), []byte(`"version": 1, "x": 1`), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "lease.json")
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
				h := newHarness(t, func(c *Config) { c.LeaseFile = path }).start()
				if got := h.c.Stats().LeaseFileErrors.Load(); got != 1 {
					t.Errorf("LeaseFileErrors = %d, want 1", got)
				}
				if st := h.c.Status(); st.LeaseFileError == "" || !strings.Contains(st.LastError, "lease file") {
					t.Errorf("Status LeaseFileError %q LastError %q, want the error", st.LeaseFileError, st.LastError)
				}
				l := h.bind()
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				got, err := decodeLease(data, clientMAC, nil)
				if err != nil {
					t.Fatalf("lease file after the DHCPACK: %v\n%s", err, data)
				}
				if diff := cmp.Diff(l, got, eq); diff != "" {
					t.Errorf("saved lease (-want +got):\n%s", diff)
				}
			})
		})
	}
	t.Run("ok", func(t *testing.T) {
		if _, err := decodeLease(good, clientMAC, nil); err != nil {
			t.Errorf("decodeLease(good) = %v", err)
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "missing-dir", "lease.json")
			h := newHarness(t, func(c *Config) { c.LeaseFile = path }).start()
			h.bind()
			if got := h.c.Stats().LeaseFileErrors.Load(); got != 1 {
				t.Errorf("LeaseFileErrors after a failed write = %d, want 1", got)
			}
		})
	})
}

// TestRFC2131_3_1_5_DeclineInUse checks that an address the probe finds
// in use is declined (RFC 2131 §4.4.4: broadcast, options 50 and 54,
// ciaddr 0, no parameter list), never applied, and that the client
// starts again after ten seconds without asking for it.
func TestRFC2131_3_1_5_DeclineInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		h := newHarness(t, func(c *Config) { c.LeaseFile = filepath.Join(dir, "lease.json"); c.Hostname = "gvrouter" })
		h.prober.inUse = map[netip.Addr]bool{offered: true}
		h.start()
		d := h.one(dhcpv4.MessageTypeDiscover)
		h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, serverMAC))
		r := h.one(dhcpv4.MessageTypeRequest)
		h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeAck, serverIP, offered), serverIP, serverMAC))
		dc := h.one(dhcpv4.MessageTypeDecline)
		checkBroadcast(t, dc, netip.IPv4Unspecified())
		if got := opt(dc.msg, dhcpv4.OptionRequestedIPAddress); !bytes.Equal(got, offered.AsSlice()) {
			t.Errorf("DHCPDECLINE option 50 = %v, want %v", got, offered)
		}
		if got := opt(dc.msg, dhcpv4.OptionServerIdentifier); !bytes.Equal(got, serverIP.AsSlice()) {
			t.Errorf("DHCPDECLINE option 54 = %v, want %v", got, serverIP)
		}
		for _, code := range []dhcpv4.OptionCode{dhcpv4.OptionParameterRequestList, dhcpv4.OptionHostName, dhcpv4.OptionMaximumDHCPMessageSize} {
			if opt(dc.msg, code) != nil {
				t.Errorf("DHCPDECLINE carries %v (RFC 2131 Table 5: MUST NOT)", code)
			}
		}
		if !dc.msg.ClientIPAddr.IsUnspecified() {
			t.Errorf("DHCPDECLINE ciaddr = %v, want 0.0.0.0", dc.msg.ClientIPAddr)
		}
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Errorf("OnLease for a declined address: %+v", ch)
		}
		if _, err := os.Stat(h.cfg.LeaseFile); !os.IsNotExist(err) {
			t.Errorf("lease file for a declined address: %v, want none", err)
		}
		if st := h.c.Status(); st.State != "init" || !st.Next.Equal(epoch.Add(DefaultDeclineWait)) {
			t.Errorf("Status after DHCPDECLINE = %s next %v, want INIT until %v", st.State, st.Next, epoch.Add(DefaultDeclineWait))
		}
		h.clk.Advance(DefaultDeclineWait - time.Nanosecond)
		h.none()
		h.clk.Advance(time.Nanosecond)
		d2 := h.one(dhcpv4.MessageTypeDiscover)
		if opt(d2.msg, dhcpv4.OptionRequestedIPAddress) != nil || d2.msg.TransactionID == d.msg.TransactionID {
			t.Errorf("DHCPDISCOVER after DHCPDECLINE asks for the declined address or reuses the xid")
		}
		if got := h.c.Stats().Declines.Load(); got != 1 {
			t.Errorf("Declines = %d, want 1", got)
		}
		// The server offers another address: taken.
		other := netip.MustParseAddr("192.0.2.51")
		h.inject(pkt(reply(d2.msg, dhcpv4.MessageTypeOffer, serverIP, other), serverIP, serverMAC))
		r2 := h.one(dhcpv4.MessageTypeRequest)
		h.inject(pkt(reply(r2.msg, dhcpv4.MessageTypeAck, serverIP, other), serverIP, serverMAC))
		if ch := h.takeChanges(); len(ch) != 1 || ch[0].new.Addr.Addr() != other {
			t.Errorf("OnLease after the second offer = %+v, want %v", ch, other)
		}
	})
}

// TestRFC5227_ProbeError checks that a failed probe is counted and the
// address taken.
func TestRFC5227_ProbeError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		h.prober.err = errSend
		h.start()
		h.bind()
		if got := h.c.Stats().ProbeErrors.Load(); got != 1 {
			t.Errorf("ProbeErrors = %d, want 1", got)
		}
	})
}

// TestRFC2131_4_4_6_ReleaseOnStop checks that a clean stop sends
// DHCPRELEASE (unicast to the server, ciaddr, option 54) and drops the
// lease only when Config.Release is set.
func TestRFC2131_4_4_6_ReleaseOnStop(t *testing.T) {
	for _, release := range []bool{false, true} {
		t.Run(map[bool]string{false: "keep", true: "release"}[release], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "lease.json")
				h := newHarness(t, func(c *Config) { c.Release = release; c.LeaseFile = path }).start()
				l := h.bind()
				if err := h.stop(); err != nil {
					t.Fatalf("Run = %v, want nil after a clean stop", err)
				}
				_, statErr := os.Stat(path)
				if !release {
					h.none()
					if ch := h.takeChanges(); len(ch) != 0 {
						t.Errorf("OnLease on a stop without release: %+v", ch)
					}
					if statErr != nil {
						t.Errorf("lease file after a stop without release: %v", statErr)
					}
					return
				}
				rl := h.one(dhcpv4.MessageTypeRelease)
				if rl.p.Src != netip.AddrPortFrom(offered, 68) || rl.p.Dst != netip.AddrPortFrom(serverIP, 67) || !bytes.Equal(rl.p.DstMAC, serverMAC) {
					t.Errorf("DHCPRELEASE sent %v -> %v (MAC %v), want %v:68 -> %v:67 (MAC %v)", rl.p.Src, rl.p.Dst, rl.p.DstMAC, offered, serverIP, serverMAC)
				}
				if !rl.msg.ClientIPAddr.Equal(offered.AsSlice()) || !bytes.Equal(opt(rl.msg, dhcpv4.OptionServerIdentifier), serverIP.AsSlice()) {
					t.Errorf("DHCPRELEASE ciaddr %v option 54 %v, want %v and %v", rl.msg.ClientIPAddr, opt(rl.msg, dhcpv4.OptionServerIdentifier), offered, serverIP)
				}
				if ch := h.takeChanges(); len(ch) != 1 || ch[0].new != nil || ch[0].old.Addr != l.Addr {
					t.Errorf("OnLease on release = %+v, want (lease, nil)", ch)
				}
				if !os.IsNotExist(statErr) {
					t.Errorf("lease file after release: %v, want removed", statErr)
				}
				if got := h.c.Status().State; got != "stopped" {
					t.Errorf("state after Run = %s, want STOPPED", got)
				}
			})
		})
	}
}

// TestSendErrors checks that a failing Transport is counted and the
// retransmission goes on.
func TestSendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil)
		h.tr.fail = errSend
		h.start()
		h.clk.Advance(4 * time.Second)
		h.tr.mu.Lock()
		h.tr.fail = nil
		h.tr.mu.Unlock()
		h.clk.Advance(8 * time.Second)
		h.one(dhcpv4.MessageTypeDiscover)
		if got := h.c.Stats().SendErrors.Load(); got != 2 {
			t.Errorf("SendErrors = %d, want 2", got)
		}
		if st := h.c.Status(); !strings.Contains(st.LastError, "link down") {
			t.Errorf("LastError = %q, want the send error", st.LastError)
		}
	})
}

// TestRFC2131_4_4_DropChecks checks every test the client makes of an
// answer (RFC 2131 §4.4.1: xid, chaddr; Table 3: op, message type,
// server identifier; RFC 6842: client identifier), each counted under
// its own reason.
func TestRFC2131_4_4_DropChecks(t *testing.T) {
	type mod = func(*dhcpv4.DHCPv4)
	for _, tc := range []struct {
		name  string
		state string // SELECTING or REQUESTING
		mt    dhcpv4.MessageType
		mod   mod
		pkt   func(*rawudp.Packet)
		drop  func(*Drops) uint64
	}{
		{"xid", "SELECTING", dhcpv4.MessageTypeOffer, func(m *dhcpv4.DHCPv4) { m.TransactionID[0]++ }, nil, func(d *Drops) uint64 { return d.XID.Load() }},
		{"chaddr", "SELECTING", dhcpv4.MessageTypeOffer, func(m *dhcpv4.DHCPv4) { m.ClientHWAddr = server2MAC }, nil, func(d *Drops) uint64 { return d.HWAddr.Load() }},
		{"hlen", "SELECTING", dhcpv4.MessageTypeOffer, func(m *dhcpv4.DHCPv4) { m.ClientHWAddr = append(slices.Clone(clientMAC), 0) }, nil, func(d *Drops) uint64 { return d.HWAddr.Load() }},
		{"op", "SELECTING", dhcpv4.MessageTypeOffer, func(m *dhcpv4.DHCPv4) { m.OpCode = dhcpv4.OpcodeBootRequest }, nil, func(d *Drops) uint64 { return d.NotReply.Load() }},
		{"port", "SELECTING", dhcpv4.MessageTypeOffer, nil, func(p *rawudp.Packet) { p.Src = netip.AddrPortFrom(serverIP, 1067) }, func(d *Drops) uint64 { return d.NotReply.Load() }},
		{"ack in selecting", "SELECTING", dhcpv4.MessageTypeAck, nil, nil, func(d *Drops) uint64 { return d.Type.Load() }},
		{"offer in requesting", "REQUESTING", dhcpv4.MessageTypeOffer, nil, nil, func(d *Drops) uint64 { return d.Type.Load() }},
		{"no server id", "SELECTING", dhcpv4.MessageTypeOffer, without(dhcpv4.OptionServerIdentifier), nil, func(d *Drops) uint64 { return d.ServerID.Load() }},
		{"other server", "REQUESTING", dhcpv4.MessageTypeAck, withOption(dhcpv4.OptionServerIdentifier, server2IP.AsSlice()), nil, func(d *Drops) uint64 { return d.ServerID.Load() }},
		{"nak from other server", "REQUESTING", dhcpv4.MessageTypeNak, withOption(dhcpv4.OptionServerIdentifier, server2IP.AsSlice()), nil, func(d *Drops) uint64 { return d.ServerID.Load() }},
		{"client id", "SELECTING", dhcpv4.MessageTypeOffer, withOption(dhcpv4.OptionClientIdentifier, []byte{1, 2, 3}), nil, func(d *Drops) uint64 { return d.ClientID.Load() }},
		{"yiaddr zero", "SELECTING", dhcpv4.MessageTypeOffer, func(m *dhcpv4.DHCPv4) { m.YourIPAddr = net.IPv4zero }, nil, func(d *Drops) uint64 { return d.Address.Load() }},
		{"yiaddr multicast", "REQUESTING", dhcpv4.MessageTypeAck, func(m *dhcpv4.DHCPv4) { m.YourIPAddr = net.IPv4(224, 0, 0, 1) }, nil, func(d *Drops) uint64 { return d.Address.Load() }},
		{"bad mask", "REQUESTING", dhcpv4.MessageTypeAck, withOption(dhcpv4.OptionSubnetMask, []byte{255, 0, 255, 0}), nil, func(d *Drops) uint64 { return d.Address.Load() }},
		{"no lease time", "REQUESTING", dhcpv4.MessageTypeAck, without(dhcpv4.OptionIPAddressLeaseTime), nil, func(d *Drops) uint64 { return d.LeaseTime.Load() }},
		{"zero lease time", "REQUESTING", dhcpv4.MessageTypeAck, withSeconds(dhcpv4.OptionIPAddressLeaseTime, 0), nil, func(d *Drops) uint64 { return d.LeaseTime.Load() }},
		{"no message type", "SELECTING", dhcpv4.MessageTypeOffer, without(dhcpv4.OptionDHCPMessageType), nil, func(d *Drops) uint64 { return d.Malformed.Load() }},
		{"truncated", "SELECTING", dhcpv4.MessageTypeOffer, nil, func(p *rawudp.Packet) { p.Payload = p.Payload[:200] }, func(d *Drops) uint64 { return d.Malformed.Load() }},
		{"cookie", "SELECTING", dhcpv4.MessageTypeOffer, nil, func(p *rawudp.Packet) { p.Payload[236] = 0 }, func(d *Drops) uint64 { return d.Malformed.Load() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, nil).start()
				req := h.one(dhcpv4.MessageTypeDiscover).msg
				if tc.state == "REQUESTING" {
					h.inject(pkt(reply(req, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, serverMAC))
					req = h.one(dhcpv4.MessageTypeRequest).msg
				}
				var mods []func(*dhcpv4.DHCPv4)
				if tc.mod != nil {
					mods = append(mods, tc.mod)
				}
				p := pkt(reply(req, tc.mt, serverIP, offered, mods...), serverIP, serverMAC)
				if tc.pkt != nil {
					tc.pkt(&p)
				}
				h.inject(p)
				d := &h.c.Stats().Drops
				if got := tc.drop(d); got != 1 {
					t.Errorf("drop counter = %d, want 1", got)
				}
				if got := d.Total(); got != 1 {
					t.Errorf("Drops.Total = %d, want 1", got)
				}
				if got := h.c.Status().State; got != strings.ToLower(tc.state) {
					t.Errorf("state after a dropped answer = %s, want %s", got, tc.state)
				}
				h.none()
			})
		})
	}
}

// TestRFC3442_ClasslessRoutes checks that option 121 is preferred over
// option 3, that a malformed 121 falls back to 3, and the on-link form.
func TestRFC3442_ClasslessRoutes(t *testing.T) {
	pfx, ip := netip.MustParsePrefix, netip.MustParseAddr
	for _, tc := range []struct {
		name string
		mods []func(*dhcpv4.DHCPv4)
		want []Route
	}{
		{"router only", nil, []Route{{pfx("0.0.0.0/0"), serverIP}}},
		{"121 over 3", []func(*dhcpv4.DHCPv4){withOption(dhcpv4.OptionClasslessStaticRoute, []byte{
			0, 192, 0, 2, 254, // default via 192.0.2.254
			24, 198, 51, 100, 192, 0, 2, 253, // 198.51.100.0/24 via .253
			32, 203, 0, 113, 7, 0, 0, 0, 0, // 203.0.113.7/32 on the link
		})}, []Route{{pfx("0.0.0.0/0"), ip("192.0.2.254")}, {pfx("198.51.100.0/24"), ip("192.0.2.253")}, {pfx("203.0.113.7/32"), ip("0.0.0.0")}}},
		{"121 host bits", []func(*dhcpv4.DHCPv4){withOption(dhcpv4.OptionClasslessStaticRoute, []byte{9, 10, 255, 192, 0, 2, 254})},
			[]Route{{pfx("10.128.0.0/9"), ip("192.0.2.254")}}},
		{"121 malformed", []func(*dhcpv4.DHCPv4){withOption(dhcpv4.OptionClasslessStaticRoute, []byte{24, 198, 51})}, []Route{{pfx("0.0.0.0/0"), serverIP}}},
		{"121 mask 33", []func(*dhcpv4.DHCPv4){withOption(dhcpv4.OptionClasslessStaticRoute, []byte{33, 1, 2, 3, 4, 5, 192, 0, 2, 1})}, []Route{{pfx("0.0.0.0/0"), serverIP}}},
		{"no routes", []func(*dhcpv4.DHCPv4){without(dhcpv4.OptionRouter)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newHarness(t, nil).start().bind(tc.mods...)
				if diff := cmp.Diff(tc.want, l.Routes, eq); diff != "" {
					t.Errorf("routes (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestRFC2132_5_1_MTU checks that option 26 below Config.MinMTU is
// ignored and counted (576 for IPv4, 1280 where the router runs IPv6).
func TestRFC2132_5_1_MTU(t *testing.T) {
	for _, tc := range []struct {
		min, mtu, want int
		ignored        uint64
	}{
		{0, 1492, 1492, 0},
		{0, 576, 576, 0},
		{0, 575, 0, 1},
		{0, 68, 0, 1},
		{1280, 1279, 0, 1},
		{1280, 1280, 1280, 0},
		{1280, 9000, 9000, 0},
	} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.MinMTU = tc.min }).start()
				l := h.bind(withOption(dhcpv4.OptionInterfaceMTU, []byte{byte(tc.mtu >> 8), byte(tc.mtu)}))
				if l.MTU != tc.want || h.c.Stats().MTUIgnored.Load() != tc.ignored {
					t.Errorf("min %d, option 26 %d: MTU %d, ignored %d; want %d, %d", tc.min, tc.mtu, l.MTU, h.c.Stats().MTUIgnored.Load(), tc.want, tc.ignored)
				}
			})
		})
	}
}

// TestRFC2131_4_4_5_T1T2 checks the defaults of T1 and T2 (half and
// 7/8 of the lease) and how options 58 and 59 out of order are ignored.
func TestRFC2131_4_4_5_T1T2(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name       string
		lease      uint32
		t1, t2     int64 // -1: not sent
		want1, wnt time.Duration
	}{
		{"defaults", 3600, -1, -1, 1800 * s, 3150 * s},
		{"options", 3600, 100, 200, 100 * s, 200 * s},
		{"t2 past lease", 3600, 100, 4000, 100 * s, 3150 * s},
		{"t1 past t2", 3600, 3000, 2000, 1800 * s, 2000 * s},
		{"t2 before half", 3600, -1, 1000, 1000 * s, 1000 * s},
		{"infinite", 0xffffffff, -1, -1, infiniteLease / 2, infiniteLease / 8 * 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mods := []func(*dhcpv4.DHCPv4){withSeconds(dhcpv4.OptionIPAddressLeaseTime, tc.lease)}
				if tc.t1 >= 0 {
					mods = append(mods, withSeconds(dhcpv4.OptionRenewTimeValue, uint32(tc.t1)))
				}
				if tc.t2 >= 0 {
					mods = append(mods, withSeconds(dhcpv4.OptionRebindingTimeValue, uint32(tc.t2)))
				}
				l := newHarness(t, nil).start().bind(mods...)
				if got1, got2 := l.T1.Sub(l.Acquired), l.T2.Sub(l.Acquired); got1 != tc.want1 || got2 != tc.wnt {
					t.Errorf("T1, T2 = %v, %v; want %v, %v", got1, got2, tc.want1, tc.wnt)
				}
			})
		})
	}
}

// TestNew checks the configuration errors.
func TestNew(t *testing.T) {
	tr := &fakeTransport{}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no transport", Config{HWAddr: clientMAC}},
		{"no mac", Config{Transport: tr}},
		{"client id 1 byte", Config{Transport: tr, HWAddr: clientMAC, ClientID: []byte{1}}},
		{"hostname", Config{Transport: tr, HWAddr: clientMAC, Hostname: strings.Repeat("a", 256)}},
	} {
		if _, err := New(tc.cfg); err == nil {
			t.Errorf("New(%s) = nil error", tc.name)
		}
	}
	if got := State(42).String(); got != "State(42)" {
		t.Errorf("State(42).String() = %q", got)
	}
}

// TestRFC2132_3_17_DomainName checks which option 15 values are taken.
func TestRFC2132_3_17_DomainName(t *testing.T) {
	for in, want := range map[string]string{
		"isp.example":           "isp.example",
		"isp.example.":          "isp.example",
		"isp.example\x00\x00":   "isp.example",
		"home_lan":              "home_lan",
		"":                      "",
		"a..b":                  "",
		"bad name":              "",
		"caf\xc3\xa9.example":   "",
		"\xff":                  "",
		strings.Repeat("a", 64): "",
	} {
		if got := domainName([]byte(in)); got != want {
			t.Errorf("domainName(%q) = %q, want %q", in, got, want)
		}
	}
}
