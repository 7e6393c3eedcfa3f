package dhcp4client

import (
	"context"
	"encoding/binary"
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
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
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

// sent is a datagram the client sent, with its time and parsed message.
type sent struct {
	at  time.Time
	p   rawudp.Packet
	msg *dhcpv4.DHCPv4
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
	m, err := dhcpv4.FromBytes(p.Payload)
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

// fakeProber answers InUse from a table and records the questions.
type fakeProber struct {
	mu    sync.Mutex
	inUse map[netip.Addr]bool
	err   error
	asked []netip.Addr
}

func (p *fakeProber) InUse(ctx context.Context, a netip.Addr) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, a)
	return p.inUse[a], p.err
}

type change struct{ old, new *Lease }

// Addresses of the tests' link.
var (
	clientMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	serverMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x67}
	server2MAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x68}
	serverIP   = netip.MustParseAddr("192.0.2.1")
	server2IP  = netip.MustParseAddr("192.0.2.2")
	offered    = netip.MustParseAddr("192.0.2.50")
)

// harness runs a Client on a fake clock and transport inside a synctest
// bubble.
type harness struct {
	t      *testing.T
	clk    fakeClock
	tr     *fakeTransport
	prober *fakeProber
	c      *Client
	cfg    Config

	mu      sync.Mutex
	changes []change

	cancel context.CancelFunc
	done   chan error
}

// newHarness builds a client with cfg changed by mod; start runs it.
func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	clk := newFakeClock()
	h := &harness{t: t, clk: clk, tr: &fakeTransport{clk: clk, in: make(chan rawudp.Packet, 16)}, prober: &fakeProber{}}
	h.cfg = Config{
		Transport: h.tr,
		HWAddr:    clientMAC,
		Prober:    h.prober,
		Clock:     clk,
		Rand:      fakeclock.NewCounting(1 << 63), // the middle: every back-off without jitter
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnLease: func(old, new *Lease) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.changes = append(h.changes, change{old, new})
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

// stop cancels Run and returns its error.
func (h *harness) stop() error {
	if h.cancel == nil {
		return nil
	}
	h.cancel()
	h.cancel = nil
	return <-h.done
}

// takeChanges returns and forgets the OnLease calls so far.
func (h *harness) takeChanges() []change {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.changes
	h.changes = nil
	return c
}

// one returns the single message sent since the last take, failing the
// test otherwise.
func (h *harness) one(want dhcpv4.MessageType) sent {
	h.t.Helper()
	out := h.tr.take()
	if len(out) != 1 {
		h.t.Fatalf("sent %d messages (%v), want one %v", len(out), types(out), want)
	}
	if got := out[0].msg.MessageType(); got != want {
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
		s = append(s, o.at.Sub(epoch).String()+" "+o.msg.MessageType().String())
	}
	return s
}

// inject hands the client a datagram and waits until it is idle.
func (h *harness) inject(p rawudp.Packet) {
	h.tr.in <- p
	synctest.Wait()
}

// reply builds a server's BOOTREPLY of type mt answering req, from
// server sid with the standard options, changed by mods.
func reply(req *dhcpv4.DHCPv4, mt dhcpv4.MessageType, sid netip.Addr, yiaddr netip.Addr, mods ...func(*dhcpv4.DHCPv4)) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        iana.HWTypeEthernet,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  req.ClientIPAddr,
		YourIPAddr:    yiaddr.AsSlice(),
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: net.IPv4zero,
		ClientHWAddr:  req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	m.UpdateOption(dhcpv4.OptMessageType(mt))
	m.UpdateOption(dhcpv4.OptServerIdentifier(sid.AsSlice()))
	if mt != dhcpv4.MessageTypeNak {
		m.UpdateOption(dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)))
		m.UpdateOption(dhcpv4.OptRouter(net.IPv4(192, 0, 2, 1)))
		m.UpdateOption(dhcpv4.OptDNS(net.IPv4(192, 0, 2, 53), net.IPv4(198, 51, 100, 53)))
		m.UpdateOption(dhcpv4.OptDomainName("isp.example"))
		m.UpdateOption(dhcpv4.OptIPAddressLeaseTime(time.Hour))
	}
	for _, f := range mods {
		f(m)
	}
	return m
}

// pkt wraps a server message in the datagram a server at sid with MAC
// mac sends: to 255.255.255.255:68 when the request asked for broadcast,
// else to yiaddr.
func pkt(m *dhcpv4.DHCPv4, sid netip.Addr, mac net.HardwareAddr) rawudp.Packet {
	dst := netip.AddrFrom4([4]byte{255, 255, 255, 255})
	if !m.IsBroadcast() {
		dst, _ = netip.AddrFromSlice(m.YourIPAddr.To4())
	}
	return rawudp.Packet{
		Payload: m.ToBytes(),
		Src:     netip.AddrPortFrom(sid, 67),
		Dst:     netip.AddrPortFrom(dst, 68),
		SrcMAC:  mac,
		DstMAC:  rawudp.Broadcast,
	}
}

// with returns a modifier setting a uint32-seconds option.
func withSeconds(code dhcpv4.OptionCode, s uint32) func(*dhcpv4.DHCPv4) {
	return func(m *dhcpv4.DHCPv4) {
		m.UpdateOption(dhcpv4.OptGeneric(code, binary.BigEndian.AppendUint32(nil, s)))
	}
}

func withOption(code dhcpv4.OptionCode, v []byte) func(*dhcpv4.DHCPv4) {
	return func(m *dhcpv4.DHCPv4) { m.UpdateOption(dhcpv4.OptGeneric(code, v)) }
}

func without(code dhcpv4.OptionCode) func(*dhcpv4.DHCPv4) {
	return func(m *dhcpv4.DHCPv4) { m.Options.Del(code) }
}

// bind runs a harness through DISCOVER, OFFER, REQUEST, ACK with the
// ACK changed by mods, and returns the lease OnLease got.
func (h *harness) bind(mods ...func(*dhcpv4.DHCPv4)) *Lease {
	h.t.Helper()
	d := h.one(dhcpv4.MessageTypeDiscover)
	h.inject(pkt(reply(d.msg, dhcpv4.MessageTypeOffer, serverIP, offered), serverIP, serverMAC))
	r := h.one(dhcpv4.MessageTypeRequest)
	h.inject(pkt(reply(r.msg, dhcpv4.MessageTypeAck, serverIP, offered, mods...), serverIP, serverMAC))
	ch := h.takeChanges()
	if len(ch) != 1 || ch[0].old != nil || ch[0].new == nil {
		h.t.Fatalf("OnLease calls after the first DHCPACK = %+v, want one (nil, lease)", ch)
	}
	if got := h.c.Status().State; got != "bound" {
		h.t.Fatalf("state after DHCPACK = %s, want BOUND", got)
	}
	return ch[0].new
}

var errSend = errors.New("link down")
