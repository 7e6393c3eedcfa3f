package stack

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// UDPConn is a UDP socket in the router's netstack with, beside gonet's
// net.PacketConn, the allocation-free ReadFromUDPAddrPort and
// WriteToUDPAddrPort of *net.UDPConn: the DNS forwarder answers a cached
// question without allocating, and gonet's ReadFrom and WriteTo each
// allocate a net.UDPAddr (and their readers and waiters).
type UDPConn struct {
	*gonet.UDPConn
	ep tcpip.Endpoint
	wq *waiter.Queue
	// tx is the netstack's write batcher (WriteBatchToUDPAddrPort); nil
	// for sockets that do not batch.
	tx *txBatcher
	// s is the netstack, for the batch write's one route lookup.
	s *stack.Stack

	dmu      sync.Mutex    // dmu protects deadline and timer
	deadline chan struct{} // closed when the read deadline passed
	timer    *time.Timer
}

// udpOp is one read's or write's scratch, pooled: the endpoint takes an
// io.Writer or io.Reader and a waiter entry, which would escape per call.
type udpOp struct {
	w     tcpip.SliceWriter
	r     bytes.Reader
	to    tcpip.FullAddress
	entry waiter.Entry
	ch    chan struct{}
}

var udpOps = sync.Pool{New: func() any {
	op := &udpOp{ch: make(chan struct{}, 1)}
	op.entry.Init(waiter.ChannelNotifier(op.ch), waiter.ReadableEvents|waiter.WritableEvents)
	return op
}}

// listenUDPReceiveBuffer is the receive buffer of ListenUDPConn's sockets.
const listenUDPReceiveBuffer = 1 << 20

// ListenUDPConn is ListenUDP with the concrete type.
func (r *Netstack) ListenUDPConn(addr netip.AddrPort) (*UDPConn, error) {
	return r.listenUDPConn(addr, false)
}

// ListenUDP6Only is ListenUDPConn for an IPv6 address (e.g. [::]:51820)
// with IPV6_V6ONLY set, so that an IPv4 socket can hold the same port
// beside it (netstack's IPv6 sockets are dual-stack otherwise).
func (r *Netstack) ListenUDP6Only(addr netip.AddrPort) (*UDPConn, error) {
	if !addr.Addr().Is6() || addr.Addr().Is4In6() {
		return nil, errors.New("stack: listen udp6 " + addr.String() + ": not an IPv6 address")
	}
	return r.listenUDPConn(addr, true)
}

func (r *Netstack) listenUDPConn(addr netip.AddrPort, v6Only bool) (*UDPConn, error) {
	var wq waiter.Queue
	ep, terr := r.s.NewEndpoint(udp.ProtocolNumber, protoOf(addr.Addr()), &wq)
	if terr != nil {
		return nil, errors.New("stack: listen udp " + addr.String() + ": " + terr.String())
	}
	if v6Only {
		ep.SocketOptions().SetV6Only(true)
	}
	if terr := ep.Bind(*fullAddr(addr)); terr != nil {
		ep.Close()
		return nil, errors.New("stack: listen udp " + addr.String() + ": " + terr.String())
	}
	// A server socket: netstack's 32 KiB default holds a few dozen
	// datagrams, and a burst beyond it is lost, which a DNS client pays
	// for with a retry seconds later.
	ep.SocketOptions().SetReceiveBufferSize(listenUDPReceiveBuffer, true)
	return &UDPConn{UDPConn: gonet.NewUDPConn(&wq, ep), ep: ep, wq: &wq, deadline: make(chan struct{}), tx: &r.tx, s: r.s}, nil
}

// SetReadDeadline implements net.PacketConn, for ReadFrom and
// ReadFromUDPAddrPort alike.
func (c *UDPConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	select {
	case <-c.deadline:
		c.deadline = make(chan struct{}) // passed before: a fresh one
	default:
	}
	if !t.IsZero() {
		ch := c.deadline
		if d := time.Until(t); d <= 0 {
			close(ch)
		} else {
			c.timer = time.AfterFunc(d, func() {
				c.dmu.Lock()
				defer c.dmu.Unlock()
				select {
				case <-ch:
				default:
					if c.deadline == ch {
						close(ch)
					}
				}
			})
		}
	}
	c.dmu.Unlock()
	return c.UDPConn.SetReadDeadline(t)
}

// SetDeadline implements net.PacketConn.
func (c *UDPConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.UDPConn.SetDeadline(t)
}

func (c *UDPConn) readDeadline() <-chan struct{} {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	return c.deadline
}

// ReadFromUDPAddrPort reads one datagram into b, as *net.UDPConn does.
func (c *UDPConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	deadline := c.readDeadline()
	select {
	case <-deadline:
		return 0, netip.AddrPort{}, os.ErrDeadlineExceeded
	default:
	}
	op := udpOps.Get().(*udpOp)
	defer udpOps.Put(op)
	opts := tcpip.ReadOptions{NeedRemoteAddr: true}
	op.w = tcpip.SliceWriter(b)
	res, err := c.ep.Read(&op.w, opts)
	if _, ok := err.(*tcpip.ErrWouldBlock); ok {
		select { // a stale wake-up from the op's last use
		case <-op.ch:
		default:
		}
		c.wq.EventRegister(&op.entry)
		for {
			res, err = c.ep.Read(&op.w, opts)
			if _, ok := err.(*tcpip.ErrWouldBlock); !ok {
				break
			}
			select {
			case <-deadline:
				c.wq.EventUnregister(&op.entry)
				return 0, netip.AddrPort{}, os.ErrDeadlineExceeded
			case <-op.ch:
			}
		}
		c.wq.EventUnregister(&op.entry)
	}
	if err != nil {
		if _, ok := err.(*tcpip.ErrClosedForReceive); ok {
			return 0, netip.AddrPort{}, io.EOF
		}
		return 0, netip.AddrPort{}, errors.New("stack: udp read: " + err.String())
	}
	return res.Count, netip.AddrPortFrom(addrOf(res.RemoteAddr.Addr), res.RemoteAddr.Port), nil
}

// ReadBatchUDPAddrPort waits for a datagram as ReadFromUDPAddrPort does,
// then takes the datagrams already queued behind it without waiting, up
// to len(bufs): datagram i is bufs[i][:sizes[i]] from addrs[i]. A
// WireGuard Bind reads its batch this way (conn.ReceiveFunc), paying the
// wake-up once per batch instead of once per datagram.
func (c *UDPConn) ReadBatchUDPAddrPort(bufs [][]byte, sizes []int, addrs []netip.AddrPort) (int, error) {
	n, from, err := c.ReadFromUDPAddrPort(bufs[0])
	if err != nil {
		return 0, err
	}
	sizes[0], addrs[0] = n, from
	count := 1
	if count == len(bufs) {
		return count, nil
	}
	op := udpOps.Get().(*udpOp)
	defer udpOps.Put(op)
	opts := tcpip.ReadOptions{NeedRemoteAddr: true}
	for ; count < len(bufs); count++ {
		op.w = tcpip.SliceWriter(bufs[count])
		res, err := c.ep.Read(&op.w, opts)
		if err != nil { // would block, or closed: the next call says so
			break
		}
		sizes[count] = res.Count
		addrs[count] = netip.AddrPortFrom(addrOf(res.RemoteAddr.Addr), res.RemoteAddr.Port)
	}
	op.w = nil
	return count, nil
}

// WriteToUDPAddrPort sends b to addr, as *net.UDPConn does. It does not
// wait for room in the send buffer: a UDP socket in netstack has none to
// wait for, and a DNS reply that cannot be sent is the client's to retry.
func (c *UDPConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	op := udpOps.Get().(*udpOp)
	defer udpOps.Put(op)
	op.r.Reset(b)
	op.to = tcpip.FullAddress{Addr: tcpipAddrFast(addr.Addr()), Port: addr.Port()}
	n, err := c.ep.Write(&op.r, tcpip.WriteOptions{To: &op.to})
	op.r.Reset(nil)
	if err != nil {
		return int(n), errors.New("stack: udp write: " + err.String())
	}
	return int(n), nil
}

// WriteBatchToUDPAddrPort sends each of bufs as one datagram to addr and
// returns how many were sent, stopping at the first error. The datagrams
// leave the egress interface in one write (txBatcher), not one syscall
// each, as packets forwarded out of one receive batch do: a WireGuard
// Bind sends its device's batch of encrypted packets this way. The batch
// shares one route (writeBatchRouted); where that does not apply, each
// datagram takes the socket's own write.
func (c *UDPConn) WriteBatchToUDPAddrPort(bufs [][]byte, addr netip.AddrPort) (int, error) {
	if c.tx != nil {
		c.tx.begin()
		defer c.tx.end()
	}
	sent := 0
	if len(bufs) > 1 && c.s != nil {
		var err error
		if sent, err = c.writeBatchRouted(bufs, addr); err != nil {
			return sent, err
		}
	}
	for i := sent; i < len(bufs); i++ {
		if _, err := c.WriteToUDPAddrPort(bufs[i], addr); err != nil {
			return i, err
		}
	}
	return len(bufs), nil
}

// tcpipAddrFast converts without tcpipAddr's slice.
func tcpipAddrFast(a netip.Addr) tcpip.Address {
	a = a.Unmap()
	if a.Is4() {
		return tcpip.AddrFrom4(a.As4())
	}
	return tcpip.AddrFrom16(a.As16())
}

// addrOf converts a netstack address to netip.
func addrOf(a tcpip.Address) netip.Addr {
	if a.Len() == 4 {
		return netip.AddrFrom4(a.As4())
	}
	return netip.AddrFrom16(a.As16())
}

var _ net.PacketConn = (*UDPConn)(nil)
