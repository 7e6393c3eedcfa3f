package dhcp6client

import (
	"bytes"
	"math"
	mrand "math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// eq compares the netip types in cmp.Diff.
var eq = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// raw returns the data of option code in m as the client encoded it.
func raw(m *dhcpv6.Message, code dhcpv6.OptionCode) []byte {
	return rawOption(m.ToBytes(), code)
}

// checkMulticast checks RFC 8415 §13.1's addressing: from the
// link-local address port 546 to ff02::1:2 port 547, the MAC left to the
// transport (the group's).
func checkMulticast(t *testing.T, s sent) {
	t.Helper()
	if s.p.Src != netip.AddrPortFrom(clientLL, 546) || s.p.Dst != netip.MustParseAddrPort("[ff02::1:2]:547") || s.p.DstMAC != nil {
		t.Errorf("%v sent %v -> %v (MAC %v), want [%v]:546 -> [ff02::1:2]:547, MAC nil", s.msg.MessageType, s.p.Src, s.p.Dst, s.p.DstMAC, clientLL)
	}
}

// iaPDOf returns the client's IA_PD of m, failing if there is not
// exactly one with our IAID.
func iaPDOf(t *testing.T, m *dhcpv6.Message) *dhcpv6.OptIAPD {
	t.Helper()
	ias := m.Options.IAPD()
	if len(ias) != 1 || ias[0].IaId != ourIAID {
		t.Fatalf("%v IA_PDs %v, want one with IAID %x", m.MessageType, ias, ourIAID)
	}
	return ias[0]
}

// hints returns the prefixes of an IA_PD, checking that a client's
// lifetimes are 0 (RFC 8415 §21.22) and T1, T2 too (§21.21).
func hints(t *testing.T, ia *dhcpv6.OptIAPD) []netip.Prefix {
	t.Helper()
	if ia.T1 != 0 || ia.T2 != 0 {
		t.Errorf("IA_PD T1 %v T2 %v, want 0, 0 from a client", ia.T1, ia.T2)
	}
	var out []netip.Prefix
	for _, p := range ia.Options.Prefixes() {
		if p.PreferredLifetime != 0 || p.ValidLifetime != 0 {
			t.Errorf("IAPREFIX %v with lifetimes %v/%v, want 0 from a client", p.Prefix, p.PreferredLifetime, p.ValidLifetime)
		}
		ones, _ := p.Prefix.Mask.Size()
		a, _ := netip.AddrFromSlice(p.Prefix.IP)
		out = append(out, netip.PrefixFrom(a, ones))
	}
	return out
}

// TestRFC8415_18_2_1_Solicit checks the first Solicit: its delay, its
// addressing and options (Appendix B), and its first retransmission.
func TestRFC8415_18_2_1_Solicit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		if got := h.state(); got != "init" {
			t.Errorf("state at start = %s, want INIT", got)
		}
		// The middle source draws half of SOL_MAX_DELAY.
		h.clk.Advance(solMaxDelay/2 - time.Nanosecond)
		h.none()
		h.clk.Advance(time.Nanosecond)
		s := h.one(dhcpv6.MessageTypeSolicit)
		checkMulticast(t, s)
		if got, want := raw(s.msg, dhcpv6.OptionClientID), []byte{0, 3, 0, 1, 2, 0, 0, 0, 0, 1}; !bytes.Equal(got, want) {
			t.Errorf("Client Identifier %x, want the DUID-LL %x (RFC 8415 §11.4)", got, want)
		}
		if raw(s.msg, dhcpv6.OptionServerID) != nil {
			t.Errorf("Solicit with a Server Identifier")
		}
		for _, code := range []dhcpv6.OptionCode{23, 24, 82} {
			if !s.msg.Options.RequestedOptions().Contains(code) {
				t.Errorf("Option Request %v lacks %d", s.msg.Options.RequestedOptions(), code)
			}
		}
		if got := raw(s.msg, dhcpv6.OptionElapsedTime); !bytes.Equal(got, []byte{0, 0}) {
			t.Errorf("Elapsed Time %x in the first Solicit, want 0 (RFC 8415 §21.9)", got)
		}
		if got := hints(t, iaPDOf(t, s.msg)); !slices.Equal(got, []netip.Prefix{netip.MustParsePrefix("::/56")}) {
			t.Errorf("IA_PD hints %v, want ::/56 (Config.PDLength)", got)
		}
		if s.msg.Options.IANA() != nil {
			t.Errorf("IA_NA without Config.WantAddress")
		}
		if got := h.state(); got != "solicit" {
			t.Errorf("state = %s, want SOLICIT", got)
		}
		h.clk.Advance(firstSolicitRT - time.Nanosecond)
		h.none()
		h.clk.Advance(time.Nanosecond)
		s2 := h.one(dhcpv6.MessageTypeSolicit)
		if s2.msg.TransactionID != s.msg.TransactionID {
			t.Errorf("retransmission with xid %v, want the first's %v", s2.msg.TransactionID, s.msg.TransactionID)
		}
		if got := s2.msg.Options.ElapsedTime(); got != firstSolicitRT.Round(10*time.Millisecond) {
			t.Errorf("Elapsed Time of the retransmission %v, want %v", got, firstSolicitRT)
		}
		if got := h.c.Stats().Solicits.Load(); got != 2 {
			t.Errorf("Solicits = %d, want 2", got)
		}
	})
	t.Run("WantAddress", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.WantAddress, c.PDLength = true, 0 }).start()
			h.clk.Advance(solMaxDelay)
			s := h.one(dhcpv6.MessageTypeSolicit)
			if nas := s.msg.Options.IANA(); len(nas) != 1 || nas[0].IaId != ourIAID || len(nas[0].Options.Options) != 0 {
				t.Errorf("IA_NA %v, want one, empty, IAID %x", nas, ourIAID)
			}
			if got := hints(t, iaPDOf(t, s.msg)); len(got) != 0 {
				t.Errorf("IA_PD hints %v with PDLength 0, want none", got)
			}
		})
	})
}

// expectRTs returns the transmission times (after the first, at 0) that
// RFC 8415 §15 gives for a first RT of first, MRT mrt and every later
// RAND r tenths (-1, 0 or 1), until total.
func expectRTs(first, mrt time.Duration, r int, total time.Duration) []time.Duration {
	var out []time.Duration
	rt := first
	at := time.Duration(0)
	for {
		if at += rt; at > total {
			return out
		}
		out = append(out, at)
		rt = 2*rt + time.Duration(r)*(rt/10)
		if mrt > 0 && rt > mrt {
			rt = mrt + time.Duration(r)*(mrt/10)
		}
	}
}

// TestRFC8415_15_Retransmission checks the Solicit retransmission times
// at the extremes of RAND, up to SOL_MAX_RT, and the ranges of RT with a
// real random source.
func TestRFC8415_15_Retransmission(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   uint64
		first time.Duration // IRT + RAND*IRT, RAND > 0 (RFC 8415 §18.2.1)
		r     int           // every later RAND, in tenths
	}{
		{"low", 0, solTimeout + 1, -1}, // the smallest RAND above 0 is 1 ns
		{"high", math.MaxUint64 - 100, solTimeout + solTimeout/10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, func(c *Config) { c.Rand = fakeclock.NewCounting(tc.src) }).start()
				h.clk.Advance(solMaxDelay)
				h.clk.Advance(5 * time.Hour)
				out := h.tr.take()
				var got []time.Duration
				for _, o := range out[1:] {
					if o.msg.MessageType != dhcpv6.MessageTypeSolicit || o.msg.TransactionID != out[0].msg.TransactionID {
						t.Fatalf("sent %v, want retransmissions of one Solicit", types(out))
					}
					got = append(got, o.at.Sub(out[0].at))
				}
				if want := expectRTs(tc.first, solMaxRT, tc.r, 5*time.Hour); !slices.Equal(got, want) {
					t.Errorf("Solicit retransmissions at %v, want %v", got, want)
				}
				if n := len(got); n < 3 || got[n-1]-got[n-2] < solMaxRT*9/10 || got[n-1]-got[n-2] > solMaxRT*11/10 {
					t.Errorf("last interval not SOL_MAX_RT ± 10%%: %v", got)
				}
			})
		})
	}
	t.Run("random", func(t *testing.T) {
		src := mrand.NewChaCha8([32]byte{1})
		const irt, mrt = time.Second, 30 * time.Second
		for range 1000 {
			e := exchange{params: params{irt: irt, mrt: mrt, positive: true}}
			e.sentAt(epoch, src)
			if e.rt <= irt || e.rt > irt*11/10 {
				t.Fatalf("first RT %v, want in (IRT, 1.1 IRT] (RFC 8415 §18.2.1: RAND > 0)", e.rt)
			}
			for range 8 {
				prev := e.rt
				e.sentAt(epoch, src)
				doubled := e.rt >= prev*19/10 && e.rt <= prev*21/10 && e.rt <= mrt
				capped := e.rt >= mrt*9/10 && e.rt <= mrt*11/10
				if !doubled && !capped {
					t.Fatalf("RT after %v is %v, want 2 RTprev ± 0.1 RTprev or MRT ± 0.1 MRT (RFC 8415 §15)", prev, e.rt)
				}
			}
		}
	})
}

// TestRFC8415_18_2_1_Advertise checks which Advertise is requested: the
// most preferred collected in the first RT, one with preference 255 at
// once, and after the first RT the first one that comes.
func TestRFC8415_18_2_1_Advertise(t *testing.T) {
	pref := func(v uint8) func(*dhcpv6.Message) { return withOption(dhcpv6.OptPreference(v)) }
	other := withIAPD(iaPDOpt(0, 0, prefixOpt(delegated2, time.Hour, 2*time.Hour)))
	t.Run("most preferred", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, nil).start()
			h.clk.Advance(solMaxDelay)
			s := h.one(dhcpv6.MessageTypeSolicit)
			h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, pref(10)), serverLL, serverMAC))
			h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, server2DUID, pref(20), other), server2LL, serverMAC))
			h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID), serverLL, serverMAC)) // no preference option: 0
			h.none()
			h.clk.AdvanceTo(s.at.Add(firstSolicitRT))
			r := h.one(dhcpv6.MessageTypeRequest)
			checkMulticast(t, r)
			if got := raw(r.msg, dhcpv6.OptionServerID); !bytes.Equal(got, server2DUID) {
				t.Errorf("Request to %x, want the preference-20 server %x", got, server2DUID)
			}
			if got := hints(t, iaPDOf(t, r.msg)); !slices.Equal(got, []netip.Prefix{delegated2}) {
				t.Errorf("Request hints %v, want the Advertise's %v", got, delegated2)
			}
			if r.msg.TransactionID == s.msg.TransactionID {
				t.Errorf("Request reuses the Solicit's xid")
			}
			if got := raw(r.msg, dhcpv6.OptionElapsedTime); !bytes.Equal(got, []byte{0, 0}) {
				t.Errorf("Request's Elapsed Time %x, want 0: a new exchange", got)
			}
			if st := h.c.Status(); st.State != "request" || !bytes.Equal(st.Server, server2DUID) {
				t.Errorf("Status %s server %x, want REQUEST %x", st.State, st.Server, server2DUID)
			}
			if got := h.c.Stats().Advertises.Load(); got != 3 {
				t.Errorf("Advertises = %d, want 3", got)
			}
		})
	})
	t.Run("255 at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, nil).start()
			h.clk.Advance(solMaxDelay)
			s := h.one(dhcpv6.MessageTypeSolicit)
			h.clk.AdvanceTo(s.at.Add(firstSolicitRT / 2))
			h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, server2DUID, pref(255)), server2LL, serverMAC))
			r := h.one(dhcpv6.MessageTypeRequest)
			if got := raw(r.msg, dhcpv6.OptionServerID); !bytes.Equal(got, server2DUID) || !r.at.Equal(s.at.Add(firstSolicitRT/2)) {
				t.Errorf("Request to %x at %v, want %x at once (%v)", got, r.at.Sub(s.at), server2DUID, firstSolicitRT/2)
			}
		})
	})
	t.Run("after the first RT", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, nil).start()
			h.clk.Advance(solMaxDelay)
			s := h.one(dhcpv6.MessageTypeSolicit)
			h.clk.AdvanceTo(s.at.Add(firstSolicitRT))
			s2 := h.one(dhcpv6.MessageTypeSolicit)
			h.clk.Advance(time.Second)
			h.inject(pkt(server(s2.msg, dhcpv6.MessageTypeAdvertise, serverDUID), serverLL, serverMAC))
			h.one(dhcpv6.MessageTypeRequest)
		})
	})
}

// TestRFC8415_18_2_2_RequestGivesUp checks Request's retransmissions
// (IRT 1 s, MRT 30 s, MRC 10) and the return to Solicit after them.
func TestRFC8415_18_2_2_RequestGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		h.clk.Advance(solMaxDelay)
		s := h.one(dhcpv6.MessageTypeSolicit)
		h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, withOption(dhcpv6.OptPreference(255))), serverLL, serverMAC))
		first := h.clk.Now()
		h.clk.Advance(181*time.Second - time.Nanosecond)
		var at []time.Duration
		for _, o := range h.tr.take() {
			if o.msg.MessageType != dhcpv6.MessageTypeRequest {
				t.Fatalf("sent %v in REQUEST", o.msg.MessageType)
			}
			at = append(at, o.at.Sub(first))
		}
		want := []time.Duration{0, 1, 3, 7, 15, 31, 61, 91, 121, 151}
		for i := range want {
			want[i] *= time.Second
		}
		if !slices.Equal(at, want) {
			t.Errorf("Requests at %v, want %v", at, want)
		}
		h.clk.Advance(time.Nanosecond)
		h.one(dhcpv6.MessageTypeSolicit)
		if got := h.c.Stats().Exhausted.Load(); got != 1 || h.state() != "solicit" {
			t.Errorf("Exhausted %d in %s, want 1 in SOLICIT", got, h.state())
		}
	})
}

// TestRFC8415_18_2_10_1_Bind checks the lease a Reply to Request gives.
func TestRFC8415_18_2_10_1_Bind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.WantAddress = true }).start()
		h.clk.Advance(solMaxDelay)
		s := h.one(dhcpv6.MessageTypeSolicit)
		h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, withOption(dhcpv6.OptPreference(255))), serverLL, serverMAC))
		r := h.one(dhcpv6.MessageTypeRequest)
		sentAt := r.at
		h.clk.Advance(reqTimeout / 2) // the Reply takes 0.5 s: lifetimes count from the Request
		na := &dhcpv6.OptIANA{IaId: ourIAID, T1: 20 * time.Minute, T2: 40 * time.Minute}
		na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: leasedAddr.AsSlice(), PreferredLifetime: 50 * time.Minute, ValidLifetime: time.Hour})
		h.inject(pkt(server(r.msg, dhcpv6.MessageTypeReply, serverDUID, withOption(na)), serverLL, serverMAC))
		ch := h.takeChanges()
		if len(ch) != 1 || ch[0] == nil {
			t.Fatalf("OnChange calls %v, want one lease", ch)
		}
		want := &Lease{
			Prefixes: []Prefix{{Prefix: delegated, PreferredLifetime: time.Hour, ValidLifetime: 2 * time.Hour,
				PreferredUntil: sentAt.Add(time.Hour), ValidUntil: sentAt.Add(2 * time.Hour)}},
			Address: &Address{Addr: leasedAddr, PreferredLifetime: 50 * time.Minute, ValidLifetime: time.Hour,
				PreferredUntil: sentAt.Add(50 * time.Minute), ValidUntil: sentAt.Add(time.Hour)},
			DNS: []netip.Addr{dnsServer}, Domains: []string{"isp.example"},
			ServerID: serverDUID, ServerAddr: serverLL, ServerMAC: serverMAC,
			Acquired: sentAt,
			T1:       sentAt.Add(20 * time.Minute), // the smaller of the IAs' (IA_NA's 20 min, IA_PD's 30)
			T2:       sentAt.Add(40 * time.Minute),
		}
		if diff := cmp.Diff(want, ch[0], eq); diff != "" {
			t.Errorf("lease (-want +got):\n%s", diff)
		}
		st := h.c.Status()
		if st.State != "bound" || !st.Next.Equal(want.T1) || cmp.Diff(want, st.Lease, eq) != "" || !bytes.Equal(st.Server, serverDUID) {
			t.Errorf("Status = %+v, want BOUND, next %v", st, want.T1)
		}
		if got := h.c.Stats().Replies.Load(); got != 1 {
			t.Errorf("Replies = %d, want 1", got)
		}
		// The Renew names the address too.
		h.clk.AdvanceTo(want.T1)
		rn := h.one(dhcpv6.MessageTypeRenew)
		if nas := rn.msg.Options.IANA(); len(nas) != 1 || nas[0].Options.OneAddress() == nil || !nas[0].Options.OneAddress().IPv6Addr.Equal(leasedAddr.AsSlice()) {
			t.Errorf("Renew IA_NA %v, want one naming %v", nas, leasedAddr)
		}
	})
}

// TestRFC8415_21_21_T1T2 checks T1 and T2 from the IA_PD, and the
// client's own 0.5 and 0.8 of the shortest preferred lifetime where the
// server sent 0.
func TestRFC8415_21_21_T1T2(t *testing.T) {
	for _, tc := range []struct {
		name           string
		t1, t2         time.Duration
		prefixes       []*dhcpv6.OptIAPrefix
		wantT1, wantT2 time.Duration
	}{
		{"given", 30 * time.Minute, 48 * time.Minute, nil, 30 * time.Minute, 48 * time.Minute},
		{"both 0", 0, 0, nil, 30 * time.Minute, 48 * time.Minute},
		{"T1 0", 0, 40 * time.Minute, nil, 30 * time.Minute, 40 * time.Minute},
		{"T2 0, T1 past 0.8", 50 * time.Minute, 0, nil, 48 * time.Minute, 48 * time.Minute},
		{"shortest of two", 0, 0, []*dhcpv6.OptIAPrefix{prefixOpt(delegated, time.Hour, 2*time.Hour), prefixOpt(delegated2, 20*time.Minute, 2*time.Hour)},
			10 * time.Minute, 16 * time.Minute},
		{"deprecated prefix: valid lifetime", 0, 0, []*dhcpv6.OptIAPrefix{prefixOpt(delegated, 0, 10*time.Minute)}, 5 * time.Minute, 8 * time.Minute},
		{"infinite", Infinite, Infinite, []*dhcpv6.OptIAPrefix{prefixOpt(delegated, Infinite, Infinite)}, infiniteSpan, infiniteSpan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ps := tc.prefixes
				if ps == nil {
					ps = []*dhcpv6.OptIAPrefix{prefixOpt(delegated, time.Hour, 2*time.Hour)}
				}
				var opts []dhcpv6.Option
				for _, p := range ps {
					opts = append(opts, p)
				}
				h := newHarness(t, nil).start()
				l := h.bind(withIAPD(iaPDOpt(tc.t1, tc.t2, opts...)))
				if got1, got2 := l.T1.Sub(l.Acquired), l.T2.Sub(l.Acquired); got1 != tc.wantT1 || got2 != tc.wantT2 {
					t.Errorf("T1, T2 = %v, %v; want %v, %v", got1, got2, tc.wantT1, tc.wantT2)
				}
			})
		})
	}
	t.Run("T1 above T2 discards the IA_PD", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, nil).start()
			h.clk.Advance(solMaxDelay)
			s := h.one(dhcpv6.MessageTypeSolicit)
			h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, withOption(dhcpv6.OptPreference(255))), serverLL, serverMAC))
			r := h.one(dhcpv6.MessageTypeRequest)
			h.inject(pkt(server(r.msg, dhcpv6.MessageTypeReply, serverDUID,
				withIAPD(iaPDOpt(50*time.Minute, 40*time.Minute, prefixOpt(delegated, time.Hour, 2*time.Hour)))), serverLL, serverMAC))
			if ch := h.takeChanges(); len(ch) != 0 || h.c.Stats().RequestRefused.Load() != 1 || h.state() != "init" {
				t.Errorf("OnChange %v, RequestRefused %d, %s; want none, 1, INIT", ch, h.c.Stats().RequestRefused.Load(), h.state())
			}
		})
	})
}

// TestRFC8415_18_2_4_RenewRebindExpiry walks a lease whose server is gone:
// Renew at T1 with its retransmissions until T2, Rebind until the valid
// lifetime ends, then the loss and a new Solicit.
func TestRFC8415_18_2_4_RenewRebindExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind()
		h.clk.AdvanceTo(l.T1.Add(-time.Nanosecond))
		h.none()
		h.clk.Advance(time.Nanosecond)
		rn := h.one(dhcpv6.MessageTypeRenew)
		checkMulticast(t, rn)
		if got := raw(rn.msg, dhcpv6.OptionServerID); !bytes.Equal(got, serverDUID) {
			t.Errorf("Renew to %x, want the lease's server %x (RFC 8415 §18.2.4)", got, serverDUID)
		}
		if got := hints(t, iaPDOf(t, rn.msg)); !slices.Equal(got, []netip.Prefix{delegated}) {
			t.Errorf("Renew names %v, want %v", got, delegated)
		}
		if !rn.msg.Options.RequestedOptions().Contains(dhcpv6.OptionDNSRecursiveNameServer) {
			t.Errorf("Renew without the Option Request option")
		}
		if st := h.c.Status(); st.State != "renew" || st.Lease == nil {
			t.Errorf("Status %s lease %v, want RENEW with the lease", st.State, st.Lease)
		}
		// REN_TIMEOUT 10 s doubling to REN_MAX_RT 600 s, until T2 (18 min on).
		h.clk.AdvanceTo(l.T2.Add(-time.Nanosecond))
		var at []time.Duration
		for _, o := range h.tr.take() {
			if o.msg.MessageType != dhcpv6.MessageTypeRenew || o.msg.TransactionID != rn.msg.TransactionID {
				t.Fatalf("sent %v %v in RENEW, want the Renew's retransmissions", o.msg.MessageType, o.msg.TransactionID)
			}
			at = append(at, o.at.Sub(rn.at))
		}
		if want := expectRTs(renTimeout, renMaxRT, 0, l.T2.Sub(l.T1)-time.Nanosecond); !slices.Equal(at, want) {
			t.Errorf("Renew retransmissions at %v, want %v", at, want)
		}
		h.clk.Advance(time.Nanosecond)
		rb := h.one(dhcpv6.MessageTypeRebind)
		if raw(rb.msg, dhcpv6.OptionServerID) != nil {
			t.Errorf("Rebind with a Server Identifier (RFC 8415 §18.2.5: MUST NOT)")
		}
		if got := hints(t, iaPDOf(t, rb.msg)); !slices.Equal(got, []netip.Prefix{delegated}) || rb.msg.TransactionID == rn.msg.TransactionID {
			t.Errorf("Rebind names %v, xid %v; want %v and a new xid", got, rb.msg.TransactionID, delegated)
		}
		if s := h.c.Stats(); h.state() != "rebind" || s.Renewals.Load() != 1 || s.Rebindings.Load() != 1 || s.Exhausted.Load() != 1 {
			t.Errorf("%s, renewals %d, rebindings %d, exhausted %d; want REBIND, 1, 1, 1", h.state(), s.Renewals.Load(), s.Rebindings.Load(), s.Exhausted.Load())
		}
		end := l.Prefixes[0].ValidUntil
		h.clk.AdvanceTo(end.Add(-time.Nanosecond))
		for _, o := range h.tr.take() {
			if o.msg.MessageType != dhcpv6.MessageTypeRebind {
				t.Fatalf("sent %v in REBIND", o.msg.MessageType)
			}
		}
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Fatalf("OnChange before the valid lifetime ended: %v", ch)
		}
		h.clk.Advance(time.Nanosecond)
		if ch := h.takeChanges(); len(ch) != 1 || ch[0] != nil {
			t.Fatalf("OnChange at the end of the valid lifetime = %v, want one nil", ch)
		}
		s := h.one(dhcpv6.MessageTypeSolicit)
		if !s.at.Equal(end) || h.state() != "solicit" {
			t.Errorf("Solicit at %v in %s, want at %v in SOLICIT", s.at, h.state(), end)
		}
		if st := h.c.Stats(); st.Losses.Load() != 1 || st.Expiries.Load() != 1 {
			t.Errorf("Losses %d Expiries %d, want 1, 1", st.Losses.Load(), st.Expiries.Load())
		}
	})
}

// TestRFC8415_18_2_10_1_Renewed checks what a Reply to Renew does: new
// lifetimes counted from the Renew, a new prefix added, one given valid
// lifetime 0 withdrawn, a Reply from another server dropped.
func TestRFC8415_18_2_10_1_Renewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind()
		h.clk.AdvanceTo(l.T1)
		rn := h.one(dhcpv6.MessageTypeRenew)
		h.inject(pkt(server(rn.msg, dhcpv6.MessageTypeReply, server2DUID), server2LL, serverMAC))
		if got := h.c.Stats().Drops.ServerID.Load(); got != 1 || h.state() != "renew" {
			t.Errorf("Reply from another server in RENEW: Drops.ServerID %d, %s; want 1, RENEW", got, h.state())
		}
		h.clk.Advance(3 * time.Second)
		h.inject(pkt(server(rn.msg, dhcpv6.MessageTypeReply, serverDUID, withIAPD(iaPDOpt(time.Hour, 90*time.Minute,
			prefixOpt(delegated, 2*time.Hour, 3*time.Hour), prefixOpt(delegated2, time.Hour, 2*time.Hour)))), serverLL, serverMAC))
		ch := h.takeChanges()
		if len(ch) != 1 || ch[0] == nil {
			t.Fatalf("OnChange after the renewal = %v, want one lease", ch)
		}
		n := ch[0]
		want := []Prefix{
			{delegated, 2 * time.Hour, 3 * time.Hour, rn.at.Add(2 * time.Hour), rn.at.Add(3 * time.Hour)},
			{delegated2, time.Hour, 2 * time.Hour, rn.at.Add(time.Hour), rn.at.Add(2 * time.Hour)},
		}
		if diff := cmp.Diff(want, n.Prefixes, eq); diff != "" || !n.Acquired.Equal(rn.at) || !n.T1.Equal(rn.at.Add(time.Hour)) {
			t.Errorf("renewed prefixes (-want +got):\n%s\nacquired %v T1 %v, want %v, %v", diff, n.Acquired, n.T1, rn.at, rn.at.Add(time.Hour))
		}
		if h.state() != "bound" {
			t.Errorf("state %s after the renewal, want BOUND", h.state())
		}
		h.clk.AdvanceTo(n.T1)
		rn2 := h.one(dhcpv6.MessageTypeRenew)
		h.inject(pkt(server(rn2.msg, dhcpv6.MessageTypeReply, serverDUID, withIAPD(iaPDOpt(0, 0,
			prefixOpt(delegated, 2*time.Hour, 3*time.Hour), prefixOpt(delegated2, 0, 0)))), serverLL, serverMAC))
		ch = h.takeChanges()
		if len(ch) != 1 || ch[0] == nil || len(ch[0].Prefixes) != 1 || ch[0].Prefixes[0].Prefix != delegated {
			t.Fatalf("OnChange after withdrawing %v = %+v, want a lease with %v only", delegated2, ch, delegated)
		}
	})
}

// TestRFC8415_18_2_10_1_NoPrefixAvail checks that a Request refused
// with NoPrefixAvail sends the client back to Solicit after a back-off
// that grows, and that an Advertise with it is ignored.
func TestRFC8415_18_2_10_1_NoPrefixAvail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		noPrefix := withIAPD(iaPDOpt(0, 0, statusOpt(iana.StatusNoPrefixAvail)))
		h.clk.Advance(solMaxDelay)
		s := h.one(dhcpv6.MessageTypeSolicit)
		h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, noPrefix, withOption(dhcpv6.OptPreference(255))), serverLL, serverMAC))
		h.none()
		if d := h.c.Stats().Drops.NoPrefix.Load(); d != 1 || h.state() != "solicit" {
			t.Errorf("Advertise with NoPrefixAvail: Drops.NoPrefix %d in %s, want 1 in SOLICIT (RFC 8415 §18.2.9)", d, h.state())
		}
		for i, wait := range []time.Duration{solTimeout, 2 * solTimeout, 4 * solTimeout} {
			h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, withOption(dhcpv6.OptPreference(255))), serverLL, serverMAC))
			r := h.one(dhcpv6.MessageTypeRequest)
			h.inject(pkt(server(r.msg, dhcpv6.MessageTypeReply, serverDUID, noPrefix), serverLL, serverMAC))
			if h.state() != "init" || h.c.Stats().RequestRefused.Load() != uint64(i+1) {
				t.Fatalf("refusal %d: %s, RequestRefused %d; want INIT, %d", i+1, h.state(), h.c.Stats().RequestRefused.Load(), i+1)
			}
			h.clk.Advance(wait - time.Nanosecond)
			h.none()
			h.clk.Advance(time.Nanosecond)
			s = h.one(dhcpv6.MessageTypeSolicit)
		}
		if got := h.c.Stats().NoPrefixAvail.Load(); got != 4 {
			t.Errorf("NoPrefixAvail = %d, want 4", got)
		}
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Errorf("OnChange %v without a lease", ch)
		}
	})
}

// TestRFC8415_18_2_10_1_NoBinding checks that a Reply to Renew with
// NoBinding in the IA_PD makes the client Request the prefix it holds.
func TestRFC8415_18_2_10_1_NoBinding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind()
		h.clk.AdvanceTo(l.T1)
		rn := h.one(dhcpv6.MessageTypeRenew)
		h.inject(pkt(server(rn.msg, dhcpv6.MessageTypeReply, serverDUID, withIAPD(iaPDOpt(0, 0, statusOpt(iana.StatusNoBinding)))), serverLL, serverMAC))
		r := h.one(dhcpv6.MessageTypeRequest)
		if got := hints(t, iaPDOf(t, r.msg)); !slices.Equal(got, []netip.Prefix{delegated}) || !bytes.Equal(raw(r.msg, dhcpv6.OptionServerID), serverDUID) {
			t.Errorf("Request after NoBinding names %v to %x, want %v to %x", got, raw(r.msg, dhcpv6.OptionServerID), delegated, serverDUID)
		}
		if h.c.Stats().NoBinding.Load() != 1 || len(h.takeChanges()) != 0 {
			t.Errorf("NoBinding %d, or OnChange called: the lease stays until it expires", h.c.Stats().NoBinding.Load())
		}
		h.inject(pkt(server(r.msg, dhcpv6.MessageTypeReply, serverDUID), serverLL, serverMAC))
		if ch := h.takeChanges(); len(ch) != 1 || ch[0] == nil || h.state() != "bound" {
			t.Errorf("after the Request's Reply: %v in %s, want one lease in BOUND", ch, h.state())
		}
	})
}

// TestPrefixExpiry checks that a prefix is withdrawn at its own valid
// lifetime while the others stay, whatever the state is waiting for.
func TestPrefixExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		l := h.bind(withIAPD(iaPDOpt(10*time.Minute, 20*time.Minute,
			prefixOpt(delegated, time.Hour, 2*time.Hour), prefixOpt(delegated2, 30*time.Minute, 30*time.Minute))))
		h.clk.AdvanceTo(l.Prefixes[1].ValidUntil.Add(-time.Nanosecond))
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Fatalf("OnChange %v before the expiry", ch)
		}
		h.clk.Advance(time.Nanosecond)
		ch := h.takeChanges()
		if len(ch) != 1 || ch[0] == nil || len(ch[0].Prefixes) != 1 || ch[0].Prefixes[0].Prefix != delegated {
			t.Fatalf("OnChange at %v's expiry = %+v, want a lease with %v only", delegated2, ch, delegated)
		}
		if h.state() != "rebind" || h.c.Stats().Expiries.Load() != 1 {
			t.Errorf("%s, Expiries %d; want REBIND (past T2), 1", h.state(), h.c.Stats().Expiries.Load())
		}
	})
}

// TestRFC8415_21_24_SolMaxRT checks that an SOL_MAX_RT option is taken
// even from an Advertise otherwise ignored, and only in its range.
func TestRFC8415_21_24_SolMaxRT(t *testing.T) {
	solMax := func(s uint32) func(*dhcpv6.Message) {
		return withOption(&dhcpv6.OptionGeneric{OptionCode: optSolMaxRT, OptionData: []byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)}})
	}
	for _, tc := range []struct {
		value uint32
		want  time.Duration
	}{{60, 60 * time.Second}, {59, solMaxRT}, {86401, solMaxRT}} {
		t.Run(strconv.Itoa(int(tc.value)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, nil).start()
				h.clk.Advance(solMaxDelay)
				s := h.one(dhcpv6.MessageTypeSolicit)
				h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, without(dhcpv6.OptionIAPD), solMax(tc.value)), serverLL, serverMAC))
				h.clk.Advance(3 * time.Hour)
				out := h.tr.take()
				last := out[len(out)-1].at.Sub(out[len(out)-2].at)
				if last != tc.want {
					t.Errorf("SOL_MAX_RT %d: last Solicit interval %v, want %v", tc.value, last, tc.want)
				}
			})
		})
	}
}

// TestSendError checks that a failed send is counted and retried by the
// retransmissions.
func TestSendError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		h.tr.mu.Lock()
		h.tr.fail = errSend
		h.tr.mu.Unlock()
		h.clk.Advance(solMaxDelay)
		if got := h.c.Stats().SendErrors.Load(); got != 1 || h.c.Status().LastError == "" {
			t.Errorf("SendErrors %d, LastError %q; want 1 and the error", got, h.c.Status().LastError)
		}
		h.tr.mu.Lock()
		h.tr.fail = nil
		h.tr.mu.Unlock()
		h.clk.Advance(firstSolicitRT)
		h.one(dhcpv6.MessageTypeSolicit)
	})
}
