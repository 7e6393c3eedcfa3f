package dhcp6client

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gvrouter/gvrouter/internal/fakeclock"
	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

// epoch is where newFakeClock starts.
var epoch = fakeclock.Epoch

// fakeClock is a fakeclock.Clock as a Clock: the time moves only when a
// test says so (Advance, AdvanceTo, Set).
type fakeClock struct{ *fakeclock.Clock }

func newFakeClock() fakeClock { return newFakeClockAt(epoch) }

func newFakeClockAt(t time.Time) fakeClock { return fakeClock{fakeclock.NewAt(t)} }

// AfterFunc implements Clock.
func (c fakeClock) AfterFunc(d time.Duration, f func()) Timer { return c.Clock.AfterFunc(d, f) }

// middle starts a counting source whose draws are the middle of their
// ranges: RAND 0, a Solicit's first RAND 0.05, an initial delay of half
// SOL_MAX_DELAY.
const middle = 1 << 63

// sent is a datagram the client sent, with its time and parsed message.
type sent struct {
	at  time.Time
	p   rawudp.Packet
	msg *dhcpv6.Message
}

// fakeTransport records what the client sends and feeds it what the test
// injects.
type fakeTransport struct {
	clk  Clock
	in   chan rawudp.Packet
	mu   sync.Mutex
	out  []sent
	fail error
}

func (tr *fakeTransport) Send(p rawudp.Packet) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.fail != nil {
		return tr.fail
	}
	m, err := dhcpv6.MessageFromBytes(p.Payload)
	if err != nil {
		panic("client sent an unparsable message: " + err.Error())
	}
	tr.out = append(tr.out, sent{at: tr.clk.Now(), p: p, msg: m})
	return nil
}

func (tr *fakeTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	select {
	case p := <-tr.in:
		return p, nil
	case <-ctx.Done():
		return rawudp.Packet{}, ctx.Err()
	}
}

// take returns and forgets what was sent so far.
func (tr *fakeTransport) take() []sent {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.out
	tr.out = nil
	return out
}

// Addresses of the tests' link.
var (
	clientMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	serverMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x47}
	clientLL  = netip.MustParseAddr("fe80::ff:fe00:1") // LinkLocal(clientMAC)
	serverLL  = netip.MustParseAddr("fe80::ff:fe00:47")
	server2LL = netip.MustParseAddr("fe80::ff:fe00:48")
	// serverDUID and server2DUID are DUID-LL of the servers' MACs.
	serverDUID  = []byte{0, 3, 0, 1, 0x02, 0, 0, 0, 0, 0x47}
	server2DUID = []byte{0, 3, 0, 1, 0x02, 0, 0, 0, 0, 0x48}
	delegated   = netip.MustParsePrefix("2001:db8:aa00::/56")
	delegated2  = netip.MustParsePrefix("2001:db8:bb00::/56")
	leasedAddr  = netip.MustParseAddr("2001:db8:1::17")
	dnsServer   = netip.MustParseAddr("2001:db8::53")
)

// ourIAID is the default IAID: the last four octets of clientMAC.
var ourIAID = [4]byte{0, 0, 0, 1}

// harness runs a Client on a fake clock and transport inside a synctest
// bubble.
type harness struct {
	t   *testing.T
	clk fakeClock
	tr  *fakeTransport
	c   *Client
	cfg Config

	mu      sync.Mutex
	changes []*Lease

	cancel context.CancelFunc
	done   chan error
}

// newHarness builds a client with cfg changed by mod; start runs it.
func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	return newHarnessAt(t, epoch, mod)
}

// newHarnessAt is newHarness with the fake clock starting at at.
func newHarnessAt(t *testing.T, at time.Time, mod func(*Config)) *harness {
	t.Helper()
	clk := newFakeClockAt(at)
	h := &harness{t: t, clk: clk, tr: &fakeTransport{clk: clk, in: make(chan rawudp.Packet, 16)}}
	h.cfg = Config{
		Transport: h.tr,
		HWAddr:    clientMAC,
		PDLength:  56,
		Clock:     clk,
		Rand:      fakeclock.NewCounting(middle),
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnChange: func(l *Lease) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.changes = append(h.changes, l)
		},
	}
	if mod != nil {
		mod(&h.cfg)
	}
	c, err := New(h.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.c = c
	return h
}

// start runs the client and waits until it is idle.
func (h *harness) start() *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.c.Run(ctx) }()
	synctest.Wait()
	h.t.Cleanup(func() { h.stop() })
	return h
}

// stop cancels Run and returns its error; with a Release exchange to
// finish, the clock must be advanced while it waits (waitDone).
func (h *harness) stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	return <-h.done
}

// waitDone advances the clock until Run, already cancelled, returns.
func (h *harness) waitDone() error {
	for {
		synctest.Wait()
		select {
		case err := <-h.done:
			return err
		default:
			h.clk.Advance(100 * time.Millisecond)
		}
	}
}

// takeChanges returns and forgets the OnChange calls so far.
func (h *harness) takeChanges() []*Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.changes
	h.changes = nil
	return c
}

// one returns the single message sent since the last take, failing the
// test otherwise.
func (h *harness) one(want dhcpv6.MessageType) sent {
	h.t.Helper()
	out := h.tr.take()
	if len(out) != 1 {
		h.t.Fatalf("sent %d messages (%v), want one %v", len(out), types(out), want)
	}
	if got := out[0].msg.MessageType; got != want {
		h.t.Fatalf("sent %v, want %v", got, want)
	}
	return out[0]
}

// none fails the test if anything was sent since the last take.
func (h *harness) none() {
	h.t.Helper()
	if out := h.tr.take(); len(out) != 0 {
		h.t.Fatalf("sent %v, want nothing", types(out))
	}
}

func types(out []sent) []string {
	var s []string
	for _, o := range out {
		s = append(s, o.at.Sub(epoch).String()+" "+o.msg.MessageType.String())
	}
	return s
}

// inject hands the client a datagram and waits until it is idle.
func (h *harness) inject(p rawudp.Packet) {
	h.tr.in <- p
	synctest.Wait()
}

// state is the client's state name.
func (h *harness) state() string { return h.c.Status().State }

// server builds a server's message of type mt answering req, from the
// server with DUID sid, with an IA_PD delegating delegated (preferred 1 h,
// valid 2 h, T1 30 min, T2 48 min), DNS and a search domain, changed by
// mods.
func server(req *dhcpv6.Message, mt dhcpv6.MessageType, sid []byte, mods ...func(*dhcpv6.Message)) *dhcpv6.Message {
	m := &dhcpv6.Message{MessageType: mt, TransactionID: req.TransactionID}
	if cid := req.GetOneOption(dhcpv6.OptionClientID); cid != nil {
		m.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionClientID, OptionData: cid.ToBytes()})
	}
	m.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionServerID, OptionData: sid})
	m.AddOption(iaPDOpt(30*time.Minute, 48*time.Minute, prefixOpt(delegated, time.Hour, 2*time.Hour)))
	m.AddOption(dhcpv6.OptDNS(dnsServer.AsSlice()))
	m.AddOption(dhcpv6.OptDomainSearchList(&rfc1035label.Labels{Labels: []string{"isp.example"}}))
	for _, f := range mods {
		f(m)
	}
	return m
}

func iaPDOpt(t1, t2 time.Duration, opts ...dhcpv6.Option) *dhcpv6.OptIAPD {
	ia := &dhcpv6.OptIAPD{IaId: ourIAID, T1: t1, T2: t2}
	for _, o := range opts {
		ia.Options.Add(o)
	}
	return ia
}

func prefixOpt(p netip.Prefix, pref, valid time.Duration) *dhcpv6.OptIAPrefix {
	return &dhcpv6.OptIAPrefix{PreferredLifetime: pref, ValidLifetime: valid,
		Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}}
}

func statusOpt(code iana.StatusCode) *dhcpv6.OptStatusCode {
	return &dhcpv6.OptStatusCode{StatusCode: code, StatusMessage: code.String()}
}

// withIAPD replaces the IA_PD.
func withIAPD(ia *dhcpv6.OptIAPD) func(*dhcpv6.Message) {
	return func(m *dhcpv6.Message) { m.Options.Del(dhcpv6.OptionIAPD); m.AddOption(ia) }
}

func without(code dhcpv6.OptionCode) func(*dhcpv6.Message) {
	return func(m *dhcpv6.Message) { m.Options.Del(code) }
}

func withOption(o dhcpv6.Option) func(*dhcpv6.Message) {
	return func(m *dhcpv6.Message) { m.Options.Del(o.Code()); m.AddOption(o) }
}

// pkt wraps a server message in the datagram a server at src with MAC
// mac sends to the client.
func pkt(m dhcpv6.DHCPv6, src netip.Addr, mac net.HardwareAddr) rawudp.Packet {
	return rawudp.Packet{
		Payload: m.ToBytes(),
		Src:     netip.AddrPortFrom(src, 547),
		Dst:     netip.AddrPortFrom(clientLL, 546),
		SrcMAC:  mac,
		DstMAC:  clientMAC,
	}
}

// firstSolicitRT is the first Solicit RT under the middle source: IRT
// plus the smallest positive RAND the draw gives, 1 + IRT/20.
var firstSolicitRT = solTimeout + 1 + solTimeout/20

// bind runs a harness from its start through Solicit, Advertise (after
// the first RT), Request and Reply (changed by mods), and returns the
// lease OnChange got.
func (h *harness) bind(mods ...func(*dhcpv6.Message)) *Lease {
	h.t.Helper()
	h.clk.Advance(solMaxDelay)
	s := h.one(dhcpv6.MessageTypeSolicit)
	h.inject(pkt(server(s.msg, dhcpv6.MessageTypeAdvertise, serverDUID), serverLL, serverMAC))
	h.clk.AdvanceTo(s.at.Add(firstSolicitRT))
	r := h.one(dhcpv6.MessageTypeRequest)
	h.inject(pkt(server(r.msg, dhcpv6.MessageTypeReply, serverDUID, mods...), serverLL, serverMAC))
	ch := h.takeChanges()
	if len(ch) != 1 || ch[0] == nil {
		h.t.Fatalf("OnChange calls after the first Reply = %+v, want one with a lease", ch)
	}
	if got := h.state(); got != "bound" {
		h.t.Fatalf("state after Reply = %s, want BOUND", got)
	}
	return ch[0]
}

var errSend = errors.New("link down")
