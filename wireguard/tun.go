package wireguard

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/tun"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Tunables.
const (
	// txQueueLen is how many packets netstack may have written that the
	// device's TUN reader has not taken yet. Two reads' worth
	// (conn.IdealBatchSize each) keeps the reader busy; beyond it the
	// encryption side is behind: the router's own packets wait
	// (maxPark), forwarded ones are dropped (TxQueueFull), the signal
	// their senders' TCP needs, as a kernel TUN's qdisc gives. Four
	// reads' worth cut those drops sixfold in the lab but not the
	// throughput, which is CPU-bound here (docs/performance.md), and
	// would queue 19 ms at 300 Mbit/s.
	txQueueLen = 2 * conn.IdealBatchSize
	// maxPark is the longest the router's own packet (its TCP, its ICMP
	// replies) waits for room in a full queue before it is dropped:
	// longer than the device takes to drain the whole queue at the
	// slowest rate we run at (256 × 1420 bytes at 60 Mbit/s, 48 ms, an
	// ARM board's ChaCha20-Poly1305), short beside TCP's 200 ms minimum
	// RTO. A wait that long means the device is stalled (no CPU, or being
	// closed); dropping then keeps netstack's goroutine from hanging on it.
	maxPark = 50 * time.Millisecond
	// DefaultMTU is the tunnel's MTU when the config gives none:
	// wg-quick's and wireguard-go's 1420, which fits 1500-byte IPv6
	// underlay packets (80 bytes of IPv6, UDP and WireGuard headers).
	DefaultMTU = 1420
)

// TUNStats counts the TUN's packets and drops.
type TUNStats struct {
	// TxPackets counts packets the device took from the queue: those
	// netstack wrote and those of the fast path (TxFastPath).
	TxPackets atomic.Uint64 `counter:"inside/to_tunnel"`
	// TxFastPath counts packets the router's fast path wrote into the
	// tunnel (WriteFast), which netstack never saw.
	TxFastPath atomic.Uint64 `counter:"inside/fast_path_to_tunnel"`
	// TxQueueFull counts those dropped because the device was behind:
	// forwarded packets that found the queue full, and the router's own
	// that waited maxPark for room in vain.
	TxQueueFull atomic.Uint64 `counter:"drops/queue_full"`
	// TxParked counts the router's own packets that found the queue full
	// and waited for room (back-pressure on netstack's sender, as a
	// kernel TUN's full qdisc pushes back on a local socket).
	TxParked atomic.Uint64 `counter:"inside/parked"`
	// TxClosed counts packets written after the device closed, dropped.
	TxClosed atomic.Uint64 `counter:"drops/closed"`
	// TxTooBig counts packets larger than the device's buffer, dropped.
	TxTooBig atomic.Uint64 `counter:"drops/too_big"`
	// TxNoPeer counts packets to an address no peer's allowed IPs hold
	// (SetPeers), dropped: the device would drop them uncounted.
	TxNoPeer atomic.Uint64 `counter:"drops/no_peer"`
	// RxPackets counts decrypted packets delivered to netstack.
	RxPackets atomic.Uint64 `counter:"inside/from_tunnel"`
	// RxFastPath counts decrypted packets the Hooks' Forward sent on
	// itself (the router's fast path), which netstack never saw.
	RxFastPath atomic.Uint64 `counter:"inside/fast_path"`
	// RxFastDrop counts those Forward dropped (their egress was
	// removed after their flow was offloaded).
	RxFastDrop atomic.Uint64 `counter:"drops/fast_path"`
	// RxBadVersion counts decrypted packets that are neither IPv4 nor
	// IPv6 (the device checks this too), dropped.
	RxBadVersion atomic.Uint64 `counter:"drops/not_ip"`
	// RxNotAttached counts decrypted packets that came while no NIC was
	// attached, dropped.
	RxNotAttached atomic.Uint64 `counter:"drops/not_attached"`
	// RxHookDrop and TxHookDrop count packets the Hooks refused (the
	// router's NAT: malformed, no mapping, conntrack full).
	RxHookDrop atomic.Uint64 `counter:"drops/nat_in"`
	TxHookDrop atomic.Uint64 `counter:"drops/nat_out"`
}

// Hooks are the router's NAT on the tunnel's inside, the stages an
// Ethernet interface runs in its own receive and transmit paths
// (package stack): In sees each decrypted packet before netstack does
// (NAT Prerouting), Out each packet netstack sends into the tunnel once
// it is in the device's buffer (NAT Postrouting; forwarded says whether
// netstack forwarded it or the router sent it; gen is what Generation
// returned when netstack queued it). Both get the bare IP
// packet, may rewrite it in place without changing its length, and
// return false to drop it (counted as RxHookDrop or TxHookDrop).
// Forward, if set, sees each batch of decrypted packets before In: each
// bufs[i][offset:] is a packet and the bytes before it are room it may
// write into, and each buffer's capacity past its packet is room too
// (the device's MaxMessageSize buffers; its own Linux TUN grows packets
// there for GRO); it sends on the packets of flows it has offloaded itself
// (the router's fast path: package stack's LinkFastPath.ForwardBatch),
// before it returns, and calls slow with each other packet in order,
// which then takes In and netstack's way. Generation, if set, is read
// once per write of netstack's (WritePackets) and travels with its
// packets through the queue to Out (0 if it was unset then): the NAT
// engine's fast-path generation, so that Out offloads a flow under the
// forwarding decision netstack took, not under a reload that came while
// the packet waited for the device. All run on the device's goroutines
// (Generation on netstack's) and must not allocate.
type Hooks struct {
	In         func(ip []byte) bool
	Out        func(ip []byte, forwarded bool, gen uint64) bool
	Forward    func(bufs [][]byte, offset int, slow func(ip []byte)) (forwarded, dropped int)
	Generation func() uint64
}

// queued is a packet in the TUN's queue: it holds a reference that Read
// (or Close's drain) releases, and the Hooks' Generation when it was
// queued.
type queued struct {
	pkt *stack.PacketBuffer
	gen uint64
}

// TUN is the tunnel's inside: a tun.Device for the WireGuard device and,
// on the other face, a point-to-point stack.LinkEndpoint the router adds
// as a netstack NIC. Packets netstack writes are queued for the device's
// Read (encrypt and send); packets the device Writes (decrypted) go up
// to netstack. Neither side touches the kernel.
type TUN struct {
	name string
	mtu  atomic.Uint32

	// Stats are the TUN's counters.
	Stats TUNStats

	// tx carries netstack's packets to Read.
	tx     chan queued
	events chan tun.Event
	done   chan struct{}
	once   sync.Once

	// hooks are the Hooks in force, nil for none.
	hooks atomic.Pointer[Hooks]
	// allowed are the peers' allowed IPs (SetPeers), nil until set.
	allowed atomic.Pointer[allowedTable]
	// slow is deliverSlow as a func value, made once (Hooks.Forward's
	// argument; a method value per batch would allocate).
	slow func(ip []byte)

	// mu protects dispatcher, batcher and onClose.
	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	batcher    Batcher // the dispatcher, if it is one
	onClose    func()
}

var (
	_ stack.LinkEndpoint = (*TUN)(nil)
	_ tun.Device         = tunDevice{}
)

// NewTUN returns a TUN named name (the interface name, e.g. "wg0") with
// MTU mtu (0: DefaultMTU). Its Events already holds EventUp, so the
// device comes up once created.
func NewTUN(name string, mtu int) *TUN {
	if mtu <= 0 {
		mtu = DefaultMTU
	}
	t := &TUN{
		name:   name,
		tx:     make(chan queued, txQueueLen),
		events: make(chan tun.Event, 4),
		done:   make(chan struct{}),
	}
	t.mtu.Store(uint32(mtu))
	t.slow = t.deliverSlow
	t.events <- tun.EventUp
	return t
}

// File implements tun.Device: there is no kernel device.
func (*TUN) File() *os.File { return nil }

// Read implements tun.Device: it waits for netstack's next packet and
// copies it, and any that follow without waiting, into bufs at offset.
// Packets no peer takes (SetPeers) are dropped here, before the Out hook
// (a packet that never leaves confirms no flow).
func (t *TUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	var q queued
	select {
	case q = <-t.tx:
	case <-t.done:
		return 0, os.ErrClosed
	}
	n := 0
	h := t.hooks.Load()
	allowed := t.allowed.Load()
	for {
		pkt := q.pkt
		if t.copyOut(pkt, bufs[n][offset:]) {
			size := pkt.Size()
			if allowed != nil && !allowed.allows(bufs[n][offset:offset+size]) {
				t.Stats.TxNoPeer.Add(1)
			} else if pkt.Mark != fastMark && h != nil && h.Out != nil && !h.Out(bufs[n][offset:offset+size], pkt.NetworkPacketInfo.IsForwardedPacket, q.gen) {
				t.Stats.TxHookDrop.Add(1)
			} else {
				sizes[n] = size
				n++
			}
		}
		pkt.DecRef()
		if n == len(bufs) {
			break
		}
		select {
		case q = <-t.tx:
			continue
		default:
		}
		break
	}
	if n == 0 { // all too big, to no peer or refused: wait for the next one
		return t.Read(bufs, sizes, offset)
	}
	t.Stats.TxPackets.Add(uint64(n))
	return n, nil
}

// copyOut copies pkt's bytes into b, or counts it too big.
func (t *TUN) copyOut(pkt *stack.PacketBuffer, b []byte) bool {
	if pkt.Size() > len(b) {
		t.Stats.TxTooBig.Add(1)
		return false
	}
	// AsViewList, unlike AsSlices, builds no slice: no allocation.
	views, skip := pkt.AsViewList()
	n := 0
	for v := views.Front(); v != nil; v = v.Next() {
		s := v.AsSlice()
		if skip >= len(s) {
			skip -= len(s)
			continue
		}
		n += copy(b[n:], s[skip:])
		skip = 0
	}
	return true
}

// Batcher is a netstack dispatcher that can bracket a batch of
// deliveries, so that the packets netstack forwards out of them leave
// each egress interface in one write (the router's: package stack's
// link dispatcher). The TUN finds it by type assertion on Attach.
type Batcher interface {
	BeginBatch()
	EndBatch()
}

// Write implements tun.Device: each bufs[i][offset:] is one decrypted IP
// packet; the Hooks' Forward takes those of offloaded flows, the rest are
// copied into netstack. The batch is bracketed (Batcher) if the
// dispatcher can.
func (t *TUN) Write(bufs [][]byte, offset int) (int, error) {
	t.mu.RLock()
	d, bt := t.dispatcher, t.batcher
	t.mu.RUnlock()
	if bt != nil {
		bt.BeginBatch()
		defer bt.EndBatch()
	}
	h := t.hooks.Load()
	if h != nil && h.Forward != nil && d != nil {
		fwd, dropped := h.Forward(bufs, offset, t.slow)
		t.Stats.RxFastPath.Add(uint64(fwd))
		t.Stats.RxFastDrop.Add(uint64(dropped))
		return len(bufs), nil
	}
	for _, b := range bufs {
		t.deliver(d, h, b[offset:])
	}
	return len(bufs), nil
}

// deliverSlow is deliver with the dispatcher and Hooks in force.
func (t *TUN) deliverSlow(p []byte) {
	t.mu.RLock()
	d := t.dispatcher
	t.mu.RUnlock()
	t.deliver(d, t.hooks.Load(), p)
}

// deliver copies the decrypted packet p into netstack through d, after
// the Hooks' In, or counts why not.
func (t *TUN) deliver(d stack.NetworkDispatcher, h *Hooks, p []byte) {
	var proto tcpip.NetworkProtocolNumber
	switch {
	case len(p) > 0 && p[0]>>4 == 4:
		proto = header.IPv4ProtocolNumber
	case len(p) > 0 && p[0]>>4 == 6:
		proto = header.IPv6ProtocolNumber
	default:
		t.Stats.RxBadVersion.Add(1)
		return
	}
	if d == nil {
		t.Stats.RxNotAttached.Add(1)
		return
	}
	if h != nil && h.In != nil && !h.In(p) {
		t.Stats.RxHookDrop.Add(1)
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
	d.DeliverNetworkPacket(proto, pkt)
	pkt.DecRef()
	t.Stats.RxPackets.Add(1)
}

// SetHooks makes h (nil: none) the TUN's Hooks from the next packet on.
func (t *TUN) SetHooks(h *Hooks) { t.hooks.Store(h) }

// Name implements tun.Device.
func (t *TUN) Name() (string, error) { return t.name, nil }

// Events implements tun.Device.
func (t *TUN) Events() <-chan tun.Event { return t.events }

// closeDevice is tun.Device's Close: Read returns os.ErrClosed from now
// on, queued packets are released and the Events channel is closed.
func (t *TUN) closeDevice() error {
	t.once.Do(func() {
		close(t.done)
		close(t.events)
		t.drain()
	})
	return nil
}

// drain releases the queued packets; after Close, whoever queued last
// calls it again (WritePackets), so none stays referenced.
func (t *TUN) drain() {
	for {
		select {
		case q := <-t.tx:
			q.pkt.DecRef()
			continue
		default:
		}
		return
	}
}

// BatchSize implements tun.Device.
func (*TUN) BatchSize() int { return conn.IdealBatchSize }

// Device returns t's tun.Device face for device.NewDevice. The TUN
// itself is the stack.LinkEndpoint, whose MTU and Close have other
// signatures.
func (t *TUN) Device() tun.Device { return tunDevice{t} }

// tunDevice is t with tun.Device's MTU and Close.
type tunDevice struct{ *TUN }

// MTU implements tun.Device.
func (d tunDevice) MTU() (int, error) { return int(d.mtu.Load()), nil }

// Close implements tun.Device; the device calls it from its Close.
func (d tunDevice) Close() error { return d.closeDevice() }

// WritePackets implements stack.LinkWriter: netstack's packets are
// queued for the device's Read. When the queue is full, a forwarded
// packet is dropped at once (TxQueueFull: the writer is a port's receive
// goroutine, which must not stall every other flow on its port), and the
// router's own waits for room up to maxPark (TxParked), so that
// netstack's TCP is slowed down rather than made to retransmit. The
// Hooks' Generation is read once for the lot and queued with each.
func (t *TUN) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	var gen uint64
	if h := t.hooks.Load(); h != nil && h.Generation != nil {
		gen = h.Generation()
	}
	n := 0
	for _, pkt := range pkts.AsSlice() {
		n++
		select {
		case <-t.done:
			t.Stats.TxClosed.Add(1)
			continue
		default:
		}
		pkt.IncRef()
		q := queued{pkt: pkt, gen: gen}
		select {
		case t.tx <- q:
			continue
		default:
		}
		if pkt.NetworkPacketInfo.IsForwardedPacket || !t.park(q) {
			pkt.DecRef()
			t.Stats.TxQueueFull.Add(1)
		}
	}
	select {
	case <-t.done: // closed meanwhile: what got in after Close's drain is nobody's
		t.drain()
	default:
	}
	return n, nil
}

// fastMark marks in pkt.Mark a packet WriteFast queued: the fast path
// has run NAT on it, so Read skips the Out hook. Netstack's packets reach
// the TUN with Mark 0 (the router sets no marks; package stack's GRO tag
// is turned into GSOOptions before a forwarded packet leaves netstack).
const fastMark = 0x57470001 // "WG" 1

// WriteFast implements stack.FastLinkWriter (package stack finds it by
// type assertion; alias_test.go checks it): the fast path forwards a
// packet of an offloaded flow into the tunnel, already through NAT. It
// is queued like a forwarded packet of netstack's: dropped at once
// (TxQueueFull) if the queue is full.
func (t *TUN) WriteFast(ip []byte) {
	select {
	case <-t.done:
		t.Stats.TxClosed.Add(1)
		return
	default:
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(ip)})
	pkt.Mark = fastMark
	pkt.NetworkPacketInfo.IsForwardedPacket = true
	select {
	case t.tx <- queued{pkt: pkt}: // no Out hook, no generation
		t.Stats.TxFastPath.Add(1)
	default:
		pkt.DecRef()
		t.Stats.TxQueueFull.Add(1)
	}
	select {
	case <-t.done: // closed meanwhile, as WritePackets
		t.drain()
	default:
	}
}

// parkTimers are park's timers, reused: a packet that parks costs no
// allocation.
var parkTimers = sync.Pool{New: func() any {
	tm := time.NewTimer(time.Hour)
	tm.Stop()
	return tm
}}

// park waits up to maxPark for room for q in the queue and reports
// whether it got in.
func (t *TUN) park(q queued) bool {
	t.Stats.TxParked.Add(1)
	tm := parkTimers.Get().(*time.Timer)
	tm.Reset(maxPark)
	defer func() {
		tm.Stop() // since Go 1.23, no stale tick survives Stop
		parkTimers.Put(tm)
	}()
	select {
	case t.tx <- q:
		return true
	case <-t.done:
		return false
	case <-tm.C:
		return false
	}
}

// MTU implements stack.LinkEndpoint.
func (t *TUN) MTU() uint32 { return t.mtu.Load() }

// SetMTU implements stack.LinkEndpoint. The device reads the MTU when it
// comes up; a change later reaches it as tun.EventMTUUpdate.
func (t *TUN) SetMTU(mtu uint32) {
	if t.mtu.Swap(mtu) != mtu {
		select {
		case <-t.done:
		default:
			select {
			case t.events <- tun.EventMTUUpdate:
			default: // one pending update reads the latest value anyway
			}
		}
	}
}

// MaxHeaderLength implements stack.LinkEndpoint: the device prepends
// its own headers in its own buffers.
func (*TUN) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements stack.LinkEndpoint: a tunnel has none.
func (*TUN) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements stack.LinkEndpoint.
func (*TUN) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements stack.LinkEndpoint: no address resolution.
func (*TUN) Capabilities() stack.LinkEndpointCapabilities { return 0 }

// Attach implements stack.LinkEndpoint.
func (t *TUN) Attach(d stack.NetworkDispatcher) {
	t.mu.Lock()
	t.dispatcher = d
	t.batcher, _ = d.(Batcher)
	t.mu.Unlock()
}

// IsAttached implements stack.LinkEndpoint.
func (t *TUN) IsAttached() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.dispatcher != nil
}

// Wait implements stack.LinkEndpoint: the TUN owns no goroutine.
func (*TUN) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint.
func (*TUN) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements stack.LinkEndpoint: packets are bare IP.
func (*TUN) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint: packets are bare IP.
func (*TUN) ParseHeader(*stack.PacketBuffer) bool { return true }

// Close implements stack.LinkEndpoint: netstack removed the NIC. The
// device keeps running until its own Close; decrypted packets are
// counted as RxNotAttached meanwhile.
func (t *TUN) Close() {
	t.mu.Lock()
	f := t.onClose
	t.dispatcher, t.batcher, t.onClose = nil, nil, nil
	t.mu.Unlock()
	if f != nil {
		f()
	}
}

// SetOnCloseAction implements stack.LinkEndpoint.
func (t *TUN) SetOnCloseAction(f func()) {
	t.mu.Lock()
	t.onClose = f
	t.mu.Unlock()
}
