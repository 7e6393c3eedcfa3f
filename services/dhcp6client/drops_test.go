package dhcp6client

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// dropCase is one message a client must drop, and the counter it must
// land in.
type dropCase struct {
	name    string
	payload func(req *dhcpv6.Message) []byte
	port    uint16 // source port; 0 is 547
	counter func(d *Drops) *atomic.Uint64
}

// advertise is a valid Advertise for req changed by mods, as bytes.
func advertise(mods ...func(*dhcpv6.Message)) func(*dhcpv6.Message) []byte {
	return func(req *dhcpv6.Message) []byte {
		return server(req, dhcpv6.MessageTypeAdvertise, serverDUID, mods...).ToBytes()
	}
}

func replyTo(sid []byte, mods ...func(*dhcpv6.Message)) func(*dhcpv6.Message) []byte {
	return func(req *dhcpv6.Message) []byte {
		return server(req, dhcpv6.MessageTypeReply, sid, mods...).ToBytes()
	}
}

// solicitDrops are what a client in SOLICIT must drop (RFC 8415 §16.3,
// §18.2.9, §19).
var solicitDrops = []dropCase{
	{"wrong xid", func(req *dhcpv6.Message) []byte {
		b := advertise()(req)
		b[3] ^= 0xff
		return b
	}, 0, func(d *Drops) *atomic.Uint64 { return &d.XID }},
	{"truncated options", func(req *dhcpv6.Message) []byte {
		b := advertise()(req)
		return b[:len(b)-3] // the last option's length runs past the end
	}, 0, func(d *Drops) *atomic.Uint64 { return &d.Malformed }},
	{"truncated IA_PD", func(req *dhcpv6.Message) []byte {
		m := server(req, dhcpv6.MessageTypeAdvertise, serverDUID, without(dhcpv6.OptionIAPD))
		m.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionIAPD, OptionData: []byte{0, 0, 0, 1, 0, 0}})
		return m.ToBytes()
	}, 0, func(d *Drops) *atomic.Uint64 { return &d.Malformed }},
	{"three octets", func(*dhcpv6.Message) []byte { return []byte{2, 0, 0} },
		0, func(d *Drops) *atomic.Uint64 { return &d.Malformed }},
	{"Relay-reply", func(req *dhcpv6.Message) []byte {
		inner := server(req, dhcpv6.MessageTypeAdvertise, serverDUID)
		r, _ := dhcpv6.EncapsulateRelay(inner, dhcpv6.MessageTypeRelayReply, net.IPv6zero, clientLL.AsSlice())
		return r.ToBytes()
	}, 0, func(d *Drops) *atomic.Uint64 { return &d.Relay }},
	{"Relay-forward", func(req *dhcpv6.Message) []byte {
		r, _ := dhcpv6.EncapsulateRelay(req, dhcpv6.MessageTypeRelayForward, net.IPv6zero, clientLL.AsSlice())
		return r.ToBytes()
	}, 0, func(d *Drops) *atomic.Uint64 { return &d.Relay }},
	{"wrong client DUID", advertise(withOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionClientID, OptionData: server2DUID})),
		0, func(d *Drops) *atomic.Uint64 { return &d.ClientID }},
	{"no client DUID", advertise(without(dhcpv6.OptionClientID)), 0, func(d *Drops) *atomic.Uint64 { return &d.ClientID }},
	{"no server DUID", advertise(without(dhcpv6.OptionServerID)), 0, func(d *Drops) *atomic.Uint64 { return &d.ServerID }},
	{"server DUID of a type alone", advertise(withOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionServerID, OptionData: []byte{0xff, 0xff}})),
		0, func(d *Drops) *atomic.Uint64 { return &d.ServerID }},
	{"no IA_PD", advertise(without(dhcpv6.OptionIAPD)), 0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
	{"IA_PD of another IAID", advertise(withIAPD(&dhcpv6.OptIAPD{IaId: [4]byte{9, 9, 9, 9},
		Options: dhcpv6.PDOptions{Options: dhcpv6.Options{prefixOpt(delegated, time.Hour, 2*time.Hour)}}})),
		0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
	{"IA_PD with T1 above T2", advertise(withIAPD(iaPDOpt(time.Hour, time.Minute, prefixOpt(delegated, time.Hour, 2*time.Hour)))),
		0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
	{"preferred above valid", advertise(withIAPD(iaPDOpt(0, 0, prefixOpt(delegated, 3*time.Hour, 2*time.Hour)))),
		0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
	{"link-local prefix", advertise(withIAPD(iaPDOpt(0, 0, prefixOpt(netip.MustParsePrefix("fe80::/64"), time.Hour, 2*time.Hour)))),
		0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
	{"valid lifetime 0", advertise(withIAPD(iaPDOpt(0, 0, prefixOpt(delegated, 0, 0)))),
		0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
	{"status UnspecFail", advertise(withOption(statusOpt(iana.StatusUnspecFail))), 0, func(d *Drops) *atomic.Uint64 { return &d.Status }},
	{"status NoAddrsAvail", advertise(withOption(statusOpt(iana.StatusNoAddrsAvail))), 0, func(d *Drops) *atomic.Uint64 { return &d.Status }},
	{"Reply (no Rapid Commit)", replyTo(serverDUID), 0, func(d *Drops) *atomic.Uint64 { return &d.Type }},
	{"Reconfigure", func(req *dhcpv6.Message) []byte {
		m := server(req, dhcpv6.MessageTypeReconfigure, serverDUID)
		return m.ToBytes()
	}, 0, func(d *Drops) *atomic.Uint64 { return &d.Type }},
	{"another client's Solicit", func(req *dhcpv6.Message) []byte { return req.ToBytes() }, 546,
		func(d *Drops) *atomic.Uint64 { return &d.NotServer }},
	{"from port 1547", advertise(), 1547, func(d *Drops) *atomic.Uint64 { return &d.NotServer }},
}

// checkDrops injects each case into the harness, whose last message was
// req, and checks that it lands in its counter alone, that nothing is
// sent, and that neither the state nor the lease changes.
func checkDrops(t *testing.T, h *harness, req *dhcpv6.Message, cases []dropCase) {
	t.Helper()
	for _, tc := range cases {
		before := h.c.Status()
		d := &h.c.stats.Drops
		n, total := tc.counter(d).Load(), d.Total()
		p := pkt(&dhcpv6.Message{}, serverLL, serverMAC)
		p.Payload = tc.payload(req)
		if tc.port != 0 {
			p.Src = netip.AddrPortFrom(serverLL, tc.port)
		}
		h.inject(p)
		if got := tc.counter(d).Load(); got != n+1 || d.Total() != total+1 {
			t.Errorf("%s in %s: its counter %d -> %d, all drops %d -> %d; want one more each", tc.name, before.State, n, got, total, d.Total())
		}
		after := h.c.Status()
		if after.State != before.State || !after.Next.Equal(before.Next) || (after.Lease == nil) != (before.Lease == nil) {
			t.Errorf("%s in %s changed the client: now %s, next %v", tc.name, before.State, after.State, after.Next)
		}
		if out := h.tr.take(); len(out) != 0 {
			t.Errorf("%s in %s: sent %v", tc.name, before.State, types(out))
		}
		if ch := h.takeChanges(); len(ch) != 0 {
			t.Errorf("%s in %s: OnChange %v", tc.name, before.State, ch)
		}
	}
}

// TestRFC8415_16_Drops checks that bad or unexpected messages are
// counted drops that change nothing, in SOLICIT, REQUEST, BOUND and RENEW.
func TestRFC8415_16_Drops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, nil).start()
		h.clk.Advance(solMaxDelay)
		s := h.one(dhcpv6.MessageTypeSolicit)
		checkDrops(t, h, s.msg, solicitDrops)
		if got := h.c.Stats().Advertises.Load(); got != 0 {
			t.Errorf("Advertises = %d after only bad ones", got)
		}

		h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID, withOption(dhcpv6.OptPreference(255))), serverLL, serverMAC))
		r := h.one(dhcpv6.MessageTypeRequest)
		checkDrops(t, h, r.msg, []dropCase{
			{"Reply from another server", replyTo(server2DUID), 0, func(d *Drops) *atomic.Uint64 { return &d.ServerID }},
			{"Advertise", advertise(), 0, func(d *Drops) *atomic.Uint64 { return &d.Type }},
			{"Reply to the Solicit", func(*dhcpv6.Message) []byte { return replyTo(serverDUID)(s.msg) }, 0,
				func(d *Drops) *atomic.Uint64 { return &d.XID }},
			{"status UseMulticast", replyTo(serverDUID, withOption(statusOpt(iana.StatusUseMulticast))), 0,
				func(d *Drops) *atomic.Uint64 { return &d.Status }},
			{"Relay-reply", func(req *dhcpv6.Message) []byte {
				r, _ := dhcpv6.EncapsulateRelay(server(req, dhcpv6.MessageTypeReply, serverDUID), dhcpv6.MessageTypeRelayReply, net.IPv6zero, clientLL.AsSlice())
				return r.ToBytes()
			}, 0, func(d *Drops) *atomic.Uint64 { return &d.Relay }},
		})
		h.inject(pkt(server(r.msg, dhcpv6.MessageTypeReply, serverDUID), serverLL, serverMAC))
		l := h.takeChanges()[0]

		checkDrops(t, h, r.msg, []dropCase{
			{"Reply in BOUND", replyTo(serverDUID), 0, func(d *Drops) *atomic.Uint64 { return &d.Unexpected }},
		})
		h.clk.AdvanceTo(l.T1)
		rn := h.one(dhcpv6.MessageTypeRenew)
		checkDrops(t, h, rn.msg, []dropCase{
			{"Reply renewing nothing", replyTo(serverDUID, without(dhcpv6.OptionIAPD)), 0, func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
			{"Reply with NoPrefixAvail", replyTo(serverDUID, withIAPD(iaPDOpt(0, 0, statusOpt(iana.StatusNoPrefixAvail)))), 0,
				func(d *Drops) *atomic.Uint64 { return &d.NoPrefix }},
			{"Reply from another server", replyTo(server2DUID), 0, func(d *Drops) *atomic.Uint64 { return &d.ServerID }},
		})
		if st := h.c.Status(); st.State != "renew" || st.Lease == nil {
			t.Errorf("after the drops: %s, lease %v; want RENEW with the lease", st.State, st.Lease)
		}
	})
}
