package wireguard

import (
	"net"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// fakeConn returns the same datagram to every read and discards writes.
type fakeConn struct {
	p    []byte
	from netip.AddrPort
}

func (c *fakeConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return copy(b, c.p), c.from, nil
}
func (c *fakeConn) WriteToUDPAddrPort(b []byte, _ netip.AddrPort) (int, error) { return len(b), nil }
func (c *fakeConn) LocalAddr() net.Addr                                        { return &net.UDPAddr{Port: 51820} }
func (c *fakeConn) Close() error                                               { return nil }

// nopDispatcher takes netstack deliveries and drops them.
type nopDispatcher struct{}

func (nopDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}
func (nopDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer)    {}

// TestAllocs: our glue's per-packet paths allocate nothing: a received
// datagram from a known source, a sent batch, and a packet from netstack
// to the device's Read.
func TestAllocs(t *testing.T) {
	pkt := make([]byte, 200)
	pkt[0] = msgTransport
	fc := &fakeConn{p: pkt, from: netip.MustParseAddrPort("198.51.100.7:51820")}
	b, fns := openUDP4Bind(t, fc)
	bufs, sizes, eps := [][]byte{make([]byte, 1500)}, make([]int, 1), make([]connEndpoint, 1)
	if got := testing.AllocsPerRun(1000, func() { fns[0](bufs, sizes, eps) }); got != 0 {
		t.Errorf("receive: %v allocations per datagram, want 0", got)
	}
	ep := eps[0]
	out := [][]byte{pkt, pkt, pkt}
	if got := testing.AllocsPerRun(1000, func() { b.Send(out, ep) }); got != 0 {
		t.Errorf("send: %v allocations per batch, want 0", got)
	}

	tn := NewTUN("wg0", 0)
	ip := make([]byte, 100)
	ip[0] = 0x45
	rbufs, rsizes := [][]byte{make([]byte, 2000)}, make([]int, 1)
	p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: bufferOf(ip)})
	defer p.DecRef()
	var l stack.PacketBufferList
	l.PushBack(p)
	if got := testing.AllocsPerRun(1000, func() {
		tn.WritePackets(l) // takes a reference
		tn.Read(rbufs, rsizes, 16)
	}); got != 0 {
		t.Errorf("netstack -> device: %v allocations per packet, want 0", got)
	}
	var seen int
	var gen, sawGen uint64
	tn.SetHooks(&Hooks{
		In:         func(ip []byte) bool { seen += len(ip); return true },
		Out:        func(ip []byte, _ bool, g uint64) bool { seen += len(ip); sawGen = g; return true },
		Generation: func() uint64 { gen++; return gen },
	})
	if got := testing.AllocsPerRun(1000, func() {
		tn.WritePackets(l)
		tn.Read(rbufs, rsizes, 16)
	}); got != 0 || seen == 0 || sawGen == 0 {
		t.Errorf("netstack -> device with hooks: %v allocations per packet (want 0), hooks saw %d bytes, generation %d", got, seen, sawGen)
	}
	// With the peers' allowed IPs set (0.0.0.0/32 holds the packet's
	// destination, after a miss on the /8).
	tn.SetPeers([]Peer{{AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("0.0.0.0/32")}}})
	if got := testing.AllocsPerRun(1000, func() {
		tn.WritePackets(l)
		tn.Read(rbufs, rsizes, 16)
	}); got != 0 || tn.Stats.TxNoPeer.Load() != 0 {
		t.Errorf("netstack -> device with the peers' allowed IPs: %v allocations per packet (want 0), %d counted no_peer (want 0)", got, tn.Stats.TxNoPeer.Load())
	}
	tn.allowed.Store(nil) // back to no check: the rest sends to 0.0.0.0
	tn.Attach(nopDispatcher{})
	wbufs := [][]byte{append(make([]byte, 16), ip...)}
	// NewPacketBuffer takes its buffer from gVisor's pools, which -race
	// empties at random.
	if got := testing.AllocsPerRun(1000, func() { tn.Write(wbufs, 16) }); got != 0 && !raceEnabled {
		t.Errorf("device -> netstack (with hooks): %v allocations per packet, want 0", got)
	}
	drop := &Hooks{In: func([]byte) bool { return false }, Out: func([]byte, bool, uint64) bool { return false }}
	tn.SetHooks(drop)
	tn.Write(wbufs, 16)
	if n := tn.Stats.RxHookDrop.Load(); n != 1 {
		t.Errorf("RxHookDrop = %d after a refused packet, want 1", n)
	}
	calls := 0
	tn.SetHooks(&Hooks{Out: func([]byte, bool, uint64) bool { calls++; return calls > 1 }}) // refuses the first
	tn.WritePackets(l)
	tn.WritePackets(l)
	if n, _ := tn.Read(rbufs, rsizes, 16); n != 1 || tn.Stats.TxHookDrop.Load() != 1 {
		t.Errorf("Read with the first packet refused = %d packets, TxHookDrop %d; want 1 and 1", n, tn.Stats.TxHookDrop.Load())
	}
}

// TestAllocsHandshakeFlood: the flood filter costs no allocation: a
// cookie reply sent, and a receive call that drops a flooding source's
// initiation before it hands the device that source's transport packet.
func TestAllocsHandshakeFlood(t *testing.T) {
	b, _, recv, ep := floodScript(t, netip.MustParseAddrPort("192.0.2.7:40000"))
	cookie := make([]byte, sizeCookieReply)
	cookie[0] = msgCookieReply
	out := [][]byte{cookie}
	if got := testing.AllocsPerRun(1000, func() { b.Send(out, ep) }); got != 0 {
		t.Errorf("send of a cookie reply: %v allocations, want 0", got)
	}
	recv() // the first read may find the initiation or the transport packet
	before := b.Stats.RxHandshakeFlood.Load()
	if got := testing.AllocsPerRun(1000, func() { recv() }); got != 0 {
		t.Errorf("receive with a flood drop: %v allocations per call, want 0", got)
	}
	if n := b.Stats.RxHandshakeFlood.Load() - before; n < 1000 {
		t.Errorf("RxHandshakeFlood grew by %d in 1001 calls, want each call to drop one", n)
	}
}

// TestForwardHook: with a Forward hook, TUN.Write hands it the batch
// first; the packets it takes are counted as fast_path and never reach
// netstack, the ones it passes to slow go through In to netstack in
// order, and neither way allocates.
func TestForwardHook(t *testing.T) {
	tn := NewTUN("wg0", 0)
	var got []byte // the first byte after the version of each packet netstack got
	tn.Attach(dispatcherFunc(func(pkt *stack.PacketBuffer) {
		got = append(got, pkt.Data().AsRange().ToView().AsSlice()[1])
	}))
	bufs := make([][]byte, 6)
	for i := range bufs {
		bufs[i] = make([]byte, 16+40)
		bufs[i][16] = 0x45
		bufs[i][17] = byte(i)
	}
	var in int
	tn.SetHooks(&Hooks{
		In: func([]byte) bool { in++; return true },
		Forward: func(bufs [][]byte, offset int, slow func([]byte)) (int, int) {
			n := 0
			for _, b := range bufs {
				if b[offset+1]%2 == 0 {
					n++ // "forwarded"
					continue
				}
				slow(b[offset:])
			}
			return n, 0
		},
	})
	tn.Write(bufs, 16)
	if string(got) != "\x01\x03\x05" || in != 3 || tn.Stats.RxFastPath.Load() != 3 || tn.Stats.RxPackets.Load() != 3 {
		t.Errorf("netstack got packets %x (want 010305), In saw %d (want 3), fast_path %d, from_tunnel %d (want 3 each)",
			got, in, tn.Stats.RxFastPath.Load(), tn.Stats.RxPackets.Load())
	}
	tn.Attach(nopDispatcher{})
	if n := testing.AllocsPerRun(1000, func() { tn.Write(bufs, 16) }); n != 0 && !raceEnabled {
		t.Errorf("device -> Forward hook and netstack: %v allocations per batch, want 0", n)
	}
}

// dispatcherFunc is a netstack dispatcher that calls itself per packet.
type dispatcherFunc func(*stack.PacketBuffer)

func (f dispatcherFunc) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	f(pkt)
}
func (dispatcherFunc) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestWriteFast: a packet the router's fast path writes into the tunnel
// reaches the device's Read as it is, without the Out hook (the fast
// path ran NAT on it), and is counted; a full queue drops it as a
// forwarded packet; neither allocates.
func TestWriteFast(t *testing.T) {
	tn := NewTUN("wg0", 0)
	outs := 0
	tn.SetHooks(&Hooks{Out: func([]byte, bool, uint64) bool { outs++; return false }})
	ip := make([]byte, 60)
	ip[0], ip[1] = 0x45, 7
	tn.WriteFast(ip)
	bufs, sizes := [][]byte{make([]byte, 2000)}, make([]int, 1)
	if n, _ := tn.Read(bufs, sizes, 16); n != 1 || sizes[0] != len(ip) || bufs[0][17] != 7 || outs != 0 {
		t.Errorf("Read after WriteFast: %d packets of %d bytes (byte 1: %d), Out hook called %d times; want 1 of %d (7), 0", n, sizes[0], bufs[0][17], outs, len(ip))
	}
	if tn.Stats.TxFastPath.Load() != 1 {
		t.Errorf("TxFastPath = %d, want 1", tn.Stats.TxFastPath.Load())
	}
	if n := testing.AllocsPerRun(1000, func() {
		tn.WriteFast(ip)
		tn.Read(bufs, sizes, 16)
	}); n != 0 && !raceEnabled {
		t.Errorf("fast path -> device: %v allocations per packet, want 0", n)
	}
	for range txQueueLen + 1 {
		tn.WriteFast(ip)
	}
	if tn.Stats.TxQueueFull.Load() != 1 {
		t.Errorf("TxQueueFull = %d after %d writes into an empty queue, want 1", tn.Stats.TxQueueFull.Load(), txQueueLen+1)
	}
	tn.closeDevice()
	// The link went away on a reload (its interface removed) while the
	// fast path still had its flows: counted, no panic, nothing queued.
	closed := tn.Stats.TxClosed.Load()
	tn.WriteFast(ip)
	if tn.Stats.TxClosed.Load() != closed+1 || len(tn.tx) != 0 {
		t.Errorf("WriteFast after close: TxClosed +%d, %d queued; want +1, 0", tn.Stats.TxClosed.Load()-closed, len(tn.tx))
	}
}
