package wireguard

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"
)

// PacketConn is one UDP socket the Bind sends and receives on. The
// router passes its WAN netstack's *stack.UDPConn; tests pass a loopback
// *net.UDPConn. Both read and write without allocating. The Bind owns
// the socket from Listen on and closes it.
type PacketConn interface {
	// ReadFromUDPAddrPort reads one datagram into b; it blocks until one
	// comes or the socket is closed.
	ReadFromUDPAddrPort(b []byte) (n int, addr netip.AddrPort, err error)
	// WriteToUDPAddrPort sends b to addr; it copies b.
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
	// LocalAddr is the bound address; its port is the listen port.
	LocalAddr() net.Addr
	Close() error
}

// Listener opens the Bind's socket for network "udp4" or "udp6" on port
// (0: any free port). It returns a nil PacketConn and no error for a
// family the caller does not serve (a WAN without IPv6).
type Listener func(network string, port uint16) (PacketConn, error)

// Tunables.
const (
	// endpointCacheSize is how many source addresses keep their Endpoint
	// between packets, so a received datagram from a known peer costs no
	// allocation. A power of two for the index mask; 1024 pointers (8
	// KiB) cover a router's peers many times, and a flood of random
	// sources only churns it (one small allocation per new source).
	endpointCacheSize = 1024
)

// WireGuard message types and sizes (the whitepaper §5.4; wireguard-go
// device/noise-protocol.go). The Bind classifies received datagrams by
// them for its counters and drops what the device would drop silently.
const (
	msgInitiation  = 1
	msgResponse    = 2
	msgCookieReply = 3
	msgTransport   = 4

	sizeInitiation  = 148
	sizeResponse    = 92
	sizeCookieReply = 64
	minTransport    = 32 // header (16) + Poly1305 tag of an empty keepalive (16)
)

// BindStats counts the Bind's datagrams by WireGuard message type and
// its drops by reason. The tags name them on the status page and in
// the metrics (package svcstats).
type BindStats struct {
	// RxInitiations, RxResponses, RxCookieReplies and RxTransport count
	// well-formed datagrams of each message type handed to the device.
	RxInitiations   atomic.Uint64 `counter:"udp/rx_initiation"`
	RxResponses     atomic.Uint64 `counter:"udp/rx_response"`
	RxCookieReplies atomic.Uint64 `counter:"udp/rx_cookie_reply"`
	RxTransport     atomic.Uint64 `counter:"udp/rx_transport"`
	// RxShort counts datagrams shorter than a keepalive (32 bytes), dropped.
	RxShort atomic.Uint64 `counter:"drops/short"`
	// RxUnknownType counts datagrams whose first four bytes are no
	// WireGuard message type (random UDP to the listen port), dropped.
	RxUnknownType atomic.Uint64 `counter:"drops/unknown_type"`
	// RxBadSize counts handshake messages of the wrong length, dropped.
	RxBadSize atomic.Uint64 `counter:"drops/bad_size"`
	// RxHandshakeFlood counts initiations and responses from a source
	// the device sent a cookie reply less than a second before (or
	// whose last one was dropped so), dropped: the device, under load,
	// would only have answered with another cookie reply, and its
	// handshake queue would have had less room for other peers (flood.go).
	RxHandshakeFlood atomic.Uint64 `counter:"drops/handshake_flood"`
	// RxUnknownIndex counts transport packets and cookie replies naming
	// a receiver index this device did not hand out in the last
	// indexMemory (forged, or for a long-gone session); the device drops
	// them.
	RxUnknownIndex atomic.Uint64 `counter:"drops/unknown_index"`
	// RxBatches counts receive calls that handed the device datagrams:
	// RxTransport / RxBatches is the mean batch of a bulk transfer.
	RxBatches atomic.Uint64 `counter:"udp/rx_batches"`
	// RxErrors counts socket read errors other than a close.
	RxErrors atomic.Uint64 `counter:"errors/udp_read"`
	// TxDatagrams counts datagrams sent.
	TxDatagrams atomic.Uint64 `counter:"udp/tx"`
	// TxErrors counts datagrams the socket refused.
	TxErrors atomic.Uint64 `counter:"errors/udp_write"`
	// TxNoSocket counts datagrams to an address family with no socket.
	TxNoSocket atomic.Uint64 `counter:"drops/no_socket"`
}

// Bind is a conn.Bind over sockets a Listener opens: WireGuard's UDP
// leaves by the router's own netstack, so the host kernel never sees it.
type Bind struct {
	listen Listener

	// Stats are the Bind's counters.
	Stats BindStats

	// mu protects v4 and v6, replaced by Open and Close. Send reads them
	// under the read lock; the receive functions hold their own socket.
	mu     sync.RWMutex
	v4, v6 PacketConn

	cache [endpointCacheSize]atomic.Pointer[Endpoint]

	indices indexSet

	flood *floodFilter
}

var _ conn.Bind = (*Bind)(nil)

// NewBind returns a Bind whose Open calls listen.
func NewBind(listen Listener) *Bind { return &Bind{listen: listen, flood: newFloodFilter()} }

// Open implements conn.Bind: it opens a udp4 socket on port and a udp6
// socket on the same port, and returns one receive function per socket.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.v4 != nil || b.v6 != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	v4, err := b.listen("udp4", port)
	if err != nil {
		return nil, 0, err
	}
	if v4 != nil {
		port = portOf(v4)
	}
	v6, err := b.listen("udp6", port)
	if err != nil {
		if v4 != nil {
			v4.Close()
		}
		return nil, 0, err
	}
	if v6 != nil && v4 == nil {
		port = portOf(v6)
	}
	if v4 == nil && v6 == nil {
		return nil, 0, errors.New("wireguard: bind: the listener opened no socket")
	}
	b.v4, b.v6 = v4, v6
	var fns []conn.ReceiveFunc
	if v4 != nil {
		fns = append(fns, b.receiveFunc(v4))
	}
	if v6 != nil {
		fns = append(fns, b.receiveFunc(v6))
	}
	return fns, port, nil
}

func portOf(c PacketConn) uint16 {
	if a, ok := c.LocalAddr().(interface{ AddrPort() netip.AddrPort }); ok {
		return a.AddrPort().Port()
	}
	if a, err := netip.ParseAddrPort(c.LocalAddr().String()); err == nil {
		return a.Port()
	}
	return 0
}

// BatchReader is a PacketConn that can hand over several queued
// datagrams in one call (the router's netstack sockets,
// stack.UDPConn): it waits for the first, as ReadFromUDPAddrPort does,
// then takes those already queued behind it without waiting, up to
// len(bufs). Datagram i is bufs[i][:sizes[i]] from addrs[i]. The Bind
// finds it by type assertion and reads one datagram at a time without it.
type BatchReader interface {
	ReadBatchUDPAddrPort(bufs [][]byte, sizes []int, addrs []netip.AddrPort) (int, error)
}

// BatchWriter is a PacketConn that can send several datagrams to one
// address in one call (the router's netstack sockets, stack.UDPConn:
// they leave the egress interface in one write instead of one syscall
// each). It returns how many of bufs it sent, stopping at the first
// error. The Bind finds it by type assertion.
type BatchWriter interface {
	WriteBatchToUDPAddrPort(bufs [][]byte, addr netip.AddrPort) (int, error)
}

// receiveFunc reads a batch of datagrams per call (one, if c is no
// BatchReader), classifies them and drops what no WireGuard device
// accepts. A dropped datagram keeps its slot with size 0, which the
// device skips (it reads bufs by index into its own buffer array, so
// the slots cannot be compacted); a batch with nothing accepted is not
// returned at all. Each ReceiveFunc runs on one device goroutine
// (RoutineReceiveIncoming), so its address scratch is its own.
func (b *Bind) receiveFunc(c PacketConn) conn.ReceiveFunc {
	br, _ := c.(BatchReader)
	addrs := make([]netip.AddrPort, conn.IdealBatchSize)
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		for {
			n, err := b.read(c, br, bufs, sizes, addrs)
			if err != nil {
				if errors.Is(err, net.ErrClosed) || b.closed(c) {
					return 0, net.ErrClosed
				}
				b.Stats.RxErrors.Add(1)
				return 0, err
			}
			accepted, now := 0, b.flood.now() // one clock read per batch
			for i := range n {
				if !b.accept(bufs[i][:sizes[i]], addrs[i], now) {
					sizes[i], eps[i] = 0, nil
					continue
				}
				eps[i] = b.endpoint(addrs[i])
				accepted++
			}
			if accepted > 0 {
				b.Stats.RxBatches.Add(1)
				return n, nil
			}
		}
	}
}

// read fills bufs from c: a batch if it is a BatchReader, else one.
func (b *Bind) read(c PacketConn, br BatchReader, bufs [][]byte, sizes []int, addrs []netip.AddrPort) (int, error) {
	if len(bufs) > len(addrs) {
		bufs = bufs[:len(addrs)]
	}
	if br != nil {
		return br.ReadBatchUDPAddrPort(bufs, sizes, addrs)
	}
	n, from, err := c.ReadFromUDPAddrPort(bufs[0])
	if err != nil {
		return 0, err
	}
	sizes[0], addrs[0] = n, from
	return 1, nil
}

// closed reports whether c is no longer one of the Bind's sockets.
func (b *Bind) closed(c PacketConn) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return c != b.v4 && c != b.v6
}

// accept counts p, from from at now (the flood filter's clock), by its
// message type and reports whether it is worth the device's time.
func (b *Bind) accept(p []byte, from netip.AddrPort, now time.Duration) bool {
	if len(p) < minTransport {
		b.Stats.RxShort.Add(1)
		return false
	}
	switch binary.LittleEndian.Uint32(p) {
	case msgTransport:
		b.Stats.RxTransport.Add(1)
		b.checkIndex(binary.LittleEndian.Uint32(p[4:]))
		return true
	case msgInitiation:
		return b.handshake(p, from, now, sizeInitiation, &b.Stats.RxInitiations)
	case msgResponse:
		return b.handshake(p, from, now, sizeResponse, &b.Stats.RxResponses)
	case msgCookieReply:
		if !b.sized(p, sizeCookieReply, &b.Stats.RxCookieReplies) {
			return false
		}
		b.checkIndex(binary.LittleEndian.Uint32(p[4:]))
		return true
	}
	b.Stats.RxUnknownType.Add(1)
	return false
}

// handshake is sized for an initiation or response, which the flood
// filter may drop first.
func (b *Bind) handshake(p []byte, from netip.AddrPort, now time.Duration, want int, c *atomic.Uint64) bool {
	if len(p) == want && b.flood.drop(from, now) {
		b.Stats.RxHandshakeFlood.Add(1)
		return false
	}
	return b.sized(p, want, c)
}

func (b *Bind) sized(p []byte, want int, c *atomic.Uint64) bool {
	if len(p) != want {
		b.Stats.RxBadSize.Add(1)
		return false
	}
	c.Add(1)
	return true
}

// endpoint returns the cached Endpoint of ap, making one on a miss.
func (b *Bind) endpoint(ap netip.AddrPort) *Endpoint {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	slot := &b.cache[hashAddrPort(ap)&(endpointCacheSize-1)]
	if e := slot.Load(); e != nil && e.AddrPort == ap {
		return e
	}
	e := newEndpoint(ap)
	slot.Store(e)
	return e
}

// hashAddrPort is FNV-1a over the address and port: cheap, and a peer's
// slot need not be secret (a collision costs an allocation, not a drop).
func hashAddrPort(ap netip.AddrPort) uint32 {
	a := ap.Addr().As16()
	h := uint32(2166136261)
	for _, c := range a {
		h = (h ^ uint32(c)) * 16777619
	}
	h = (h ^ uint32(ap.Port()>>8)) * 16777619
	return (h ^ uint32(ap.Port()&0xff)) * 16777619
}

// Close implements conn.Bind: it closes the sockets, which ends the
// receive functions with net.ErrClosed.
func (b *Bind) Close() error {
	b.mu.Lock()
	v4, v6 := b.v4, b.v6
	b.v4, b.v6 = nil, nil
	b.mu.Unlock()
	var errs []error
	if v4 != nil {
		errs = append(errs, v4.Close())
	}
	if v6 != nil {
		errs = append(errs, v6.Close())
	}
	return errors.Join(errs...)
}

// SetMark implements conn.Bind: netstack sockets have no fwmark.
func (*Bind) SetMark(uint32) error { return nil }

// Send implements conn.Bind: each buffer is one datagram to ep.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	e, ok := ep.(*Endpoint)
	if !ok {
		return conn.ErrWrongEndpointType
	}
	b.mu.RLock()
	c := b.v6
	if e.AddrPort.Addr().Is4() {
		c = b.v4
	}
	b.mu.RUnlock()
	if c == nil {
		b.Stats.TxNoSocket.Add(uint64(len(bufs)))
		return net.ErrClosed
	}
	for _, p := range bufs {
		b.noteIndex(p)
		if len(p) == sizeCookieReply && binary.LittleEndian.Uint32(p) == msgCookieReply {
			b.flood.cookieReplySent(e.AddrPort, b.flood.now())
		}
	}
	if bw, ok := c.(BatchWriter); ok {
		n, err := bw.WriteBatchToUDPAddrPort(bufs, e.AddrPort)
		b.Stats.TxDatagrams.Add(uint64(n))
		if err != nil {
			b.Stats.TxErrors.Add(uint64(len(bufs) - n))
		}
		return err
	}
	var first error
	for _, p := range bufs {
		if _, err := c.WriteToUDPAddrPort(p, e.AddrPort); err != nil {
			b.Stats.TxErrors.Add(1)
			if first == nil {
				first = err
			}
			continue
		}
		b.Stats.TxDatagrams.Add(1)
	}
	return first
}

// ParseEndpoint implements conn.Bind: s is a literal address and port,
// e.g. "203.0.113.7:51820" or "[2001:db8::7]:51820"; names are resolved
// before they reach the device.
func (b *Bind) ParseEndpoint(s string) (conn.Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, err
	}
	return b.endpoint(ap), nil
}

// BatchSize implements conn.Bind: how many datagrams the device may hand
// Send at once, and the most a receive function returns.
func (*Bind) BatchSize() int { return conn.IdealBatchSize }

// Endpoint is a peer's address and port. It is immutable; the Bind
// shares one per source address between packets.
type Endpoint struct {
	netip.AddrPort
	dst []byte // AddrPort's binary form, the input of cookie MAC2
}

var _ conn.Endpoint = (*Endpoint)(nil)

func newEndpoint(ap netip.AddrPort) *Endpoint {
	dst, _ := ap.MarshalBinary()
	return &Endpoint{AddrPort: ap, dst: dst}
}

// ClearSrc implements conn.Endpoint: the netstack picks the source.
func (*Endpoint) ClearSrc() {}

// SrcToString implements conn.Endpoint.
func (*Endpoint) SrcToString() string { return "" }

// DstToString implements conn.Endpoint.
func (e *Endpoint) DstToString() string { return e.AddrPort.String() }

// DstToBytes implements conn.Endpoint: the bytes cookie replies are
// bound to (wireguard-go's StdNetEndpoint gives the same).
func (e *Endpoint) DstToBytes() []byte { return e.dst }

// DstIP implements conn.Endpoint.
func (e *Endpoint) DstIP() netip.Addr { return e.AddrPort.Addr() }

// SrcIP implements conn.Endpoint.
func (*Endpoint) SrcIP() netip.Addr { return netip.Addr{} }
