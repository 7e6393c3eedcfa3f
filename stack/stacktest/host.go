// Package stacktest provides end hosts and frame taps for testing the
// router's netstack without root: a Host is a plain gVisor stack with one
// Ethernet NIC that exchanges whole frames with a hw.BatchHandler and
// through a hw.FrameWriter, as a port would.
package stacktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/gvrouter/gvrouter/hw"
)

// hostQueueLen is the host's outgoing queue: large enough that a TCP
// window's worth of segments is not dropped while the delivery goroutine
// is busy.
const hostQueueLen = 1024

// HostConfig describes a Host.
type HostConfig struct {
	// MAC is the host's Ethernet address, e.g. 02:00:00:00:01:02.
	MAC net.HardwareAddr
	// MTU is the L3 MTU; 0 means 1500.
	MTU uint32
	// Addresses are the host's addresses, e.g. 10.1.0.2/24. Each makes a
	// connected route.
	Addresses []netip.Prefix
	// Gateways become default routes by family, e.g. 10.1.0.1.
	Gateways []netip.Addr
}

// Host is an end host: a gVisor stack with one Ethernet NIC. Frames it
// sends go to the handler given to Start; frames written to it with
// WriteFrames are received by its stack. Host is safe for concurrent use.
type Host struct {
	// Stack is the host's netstack.
	Stack *stack.Stack
	// NIC is the host's only NIC.
	NIC tcpip.NICID
	// MAC is the host's Ethernet address.
	MAC net.HardwareAddr

	ch     *channel.Endpoint
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ hw.FrameWriter = (*Host)(nil)

// NewHost builds a host. Call Start to connect its output, Close to stop it.
func NewHost(cfg HostConfig) (*Host, error) {
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	s := stack.New(stack.Options{
		NetworkProtocols: []stack.NetworkProtocolFactory{
			ipv4.NewProtocol,
			ipv6.NewProtocolWithOptions(ipv6.Options{
				AutoGenLinkLocal: true,
				DADConfigs:       stack.DADConfigurations{DupAddrDetectTransmits: 0},
			}),
			arp.NewProtocol,
		},
		TransportProtocols: []stack.TransportProtocolFactory{
			tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4, icmp.NewProtocol6,
		},
	})
	ch := channel.New(hostQueueLen, mtu, tcpip.LinkAddress(cfg.MAC))
	h := &Host{Stack: s, NIC: 1, MAC: cfg.MAC, ch: ch}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if err := s.CreateNIC(h.NIC, ethernet.New(ch)); err != nil {
		s.Destroy()
		return nil, fmt.Errorf("stacktest: CreateNIC: %s", err)
	}
	var routes []tcpip.Route
	for _, p := range cfg.Addresses {
		proto := ipv4.ProtocolNumber
		if p.Addr().Is6() {
			proto = ipv6.ProtocolNumber
		}
		pa := tcpip.ProtocolAddress{Protocol: proto, AddressWithPrefix: tcpip.AddressWithPrefix{Address: addr(p.Addr()), PrefixLen: p.Bits()}}
		if err := s.AddProtocolAddress(h.NIC, pa, stack.AddressProperties{}); err != nil {
			s.Destroy()
			return nil, fmt.Errorf("stacktest: AddProtocolAddress(%s): %s", p, err)
		}
		routes = append(routes, tcpip.Route{Destination: pa.AddressWithPrefix.Subnet(), NIC: h.NIC})
	}
	for _, gw := range cfg.Gateways {
		dst := header.IPv4EmptySubnet
		if gw.Is6() {
			dst = header.IPv6EmptySubnet
		}
		routes = append(routes, tcpip.Route{Destination: dst, Gateway: addr(gw), NIC: h.NIC})
	}
	s.SetRouteTable(routes)
	return h, nil
}

// Start delivers the host's outgoing frames to rx, one frame per batch on
// queue 0, from one goroutine, until Close.
func (h *Host) Start(rx hw.BatchHandler) {
	h.wg.Add(1)
	go h.routineDeliver(rx)
}

func (h *Host) routineDeliver(rx hw.BatchHandler) {
	defer h.wg.Done()
	for {
		pkt := h.ch.ReadContext(h.ctx)
		if pkt == nil {
			return
		}
		v := pkt.ToView()
		pkt.DecRef()
		frame := bytes.Clone(v.AsSlice())
		v.Release()
		rx(0, []hw.Frame{{Data: frame, WireLen: len(frame)}})
	}
}

// WriteFrames implements hw.FrameWriter: the host receives the frames.
func (h *Host) WriteFrames(frames [][]byte) (int, error) {
	if h.ctx.Err() != nil {
		return 0, net.ErrClosed
	}
	for _, f := range frames {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(bytes.Clone(f))})
		h.ch.InjectInbound(0, pkt)
		pkt.DecRef()
	}
	return len(frames), nil
}

// Close stops the delivery goroutine and the host's stack.
func (h *Host) Close() {
	h.cancel()
	h.wg.Wait()
	h.Stack.Destroy()
	h.ch.Drain()
}

// Ping sends one ICMP or ICMPv6 echo request with payload to dst and
// returns the echo reply's payload.
func (h *Host) Ping(ctx context.Context, dst netip.Addr, payload []byte) ([]byte, error) {
	netProto, transProto := ipv4.ProtocolNumber, icmp.ProtocolNumber4
	hdrLen := header.ICMPv4MinimumSize
	if dst.Is6() {
		netProto, transProto = ipv6.ProtocolNumber, icmp.ProtocolNumber6
		hdrLen = header.ICMPv6EchoMinimumSize
	}
	var wq waiter.Queue
	ep, terr := h.Stack.NewEndpoint(transProto, netProto, &wq)
	if terr != nil {
		return nil, fmt.Errorf("stacktest: NewEndpoint: %s", terr)
	}
	defer ep.Close()
	msg := make([]byte, hdrLen+len(payload))
	if dst.Is6() {
		header.ICMPv6(msg).SetType(header.ICMPv6EchoRequest)
	} else {
		header.ICMPv4(msg).SetType(header.ICMPv4Echo)
	}
	copy(msg[hdrLen:], payload)
	we, ch := waiter.NewChannelEntry(waiter.ReadableEvents)
	wq.EventRegister(&we)
	defer wq.EventUnregister(&we)
	var r bytes.Reader
	r.Reset(msg)
	to := tcpip.FullAddress{Addr: addr(dst)}
	if _, terr := ep.Write(&r, tcpip.WriteOptions{To: &to}); terr != nil {
		return nil, fmt.Errorf("stacktest: ping %s: Write: %s", dst, terr)
	}
	for {
		var buf bytes.Buffer
		_, terr := ep.Read(&buf, tcpip.ReadOptions{})
		if _, ok := terr.(*tcpip.ErrWouldBlock); ok {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("stacktest: ping %s: %w", dst, ctx.Err())
			}
		}
		if terr != nil {
			return nil, fmt.Errorf("stacktest: ping %s: Read: %s", dst, terr)
		}
		if buf.Len() < hdrLen {
			return nil, errors.New("stacktest: short echo reply")
		}
		return buf.Bytes()[hdrLen:], nil
	}
}

// Tap is a hw.FrameWriter that keeps a copy of every frame and passes it
// on to Next. It is safe for concurrent use.
type Tap struct {
	Next hw.FrameWriter
	// Writes counts WriteFrames calls (one per batch the router sent).
	Writes atomic.Int64

	mu     sync.Mutex
	frames [][]byte
	notify chan struct{}
}

var _ hw.FrameWriter = (*Tap)(nil)

// WriteFrames implements hw.FrameWriter.
func (t *Tap) WriteFrames(frames [][]byte) (int, error) {
	t.Writes.Add(1)
	t.mu.Lock()
	for _, f := range frames {
		t.frames = append(t.frames, bytes.Clone(f))
	}
	if t.notify != nil {
		close(t.notify)
		t.notify = nil
	}
	t.mu.Unlock()
	if t.Next == nil {
		return len(frames), nil
	}
	return t.Next.WriteFrames(frames)
}

// Wait returns the first frame seen so far or later for which match is
// true, or nil when ctx is done.
func (t *Tap) Wait(ctx context.Context, match func(frame []byte) bool) []byte {
	seen := 0
	for {
		t.mu.Lock()
		for ; seen < len(t.frames); seen++ {
			if match(t.frames[seen]) {
				f := t.frames[seen]
				t.mu.Unlock()
				return f
			}
		}
		if t.notify == nil {
			t.notify = make(chan struct{})
		}
		n := t.notify
		t.mu.Unlock()
		select {
		case <-n:
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func addr(a netip.Addr) tcpip.Address { return tcpip.AddrFromSlice(a.Unmap().AsSlice()) }
