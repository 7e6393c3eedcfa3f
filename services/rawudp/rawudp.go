package rawudp

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Link sends a link's Ethernet frames. Frames are untagged: the link adds
// and removes its interface's VLAN tags. Implementations are safe for
// concurrent use and do not keep frame after WriteFrame returns.
type Link interface {
	// WriteFrame sends one whole Ethernet frame, header included.
	WriteFrame(frame []byte) error
	// HardwareAddr is the link's MAC, the source of the frames Conn builds.
	HardwareAddr() net.HardwareAddr
}

// Packet is one UDP datagram with its addresses.
type Packet struct {
	Payload []byte
	// Src and Dst are the IP addresses and UDP ports: IPv4 on a Conn
	// from New, IPv6 on one from New6 (received addresses carry no
	// zone; on Send a zone is ignored).
	Src, Dst netip.AddrPort
	// SrcMAC and DstMAC are the Ethernet addresses. On Send, SrcMAC is
	// ignored (the link's); a nil DstMAC means broadcast on an IPv4
	// Conn, and on an IPv6 Conn the multicast MAC of a multicast Dst
	// (RFC 2464 §7) or, for a unicast Dst, ErrNoDstMAC.
	SrcMAC, DstMAC net.HardwareAddr
}

// Broadcast is the Ethernet broadcast address.
var Broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Errors of Send and Recv.
var (
	// ErrClosed: the Conn was closed.
	ErrClosed = errors.New("rawudp: closed")
	// ErrTooBig: the IP packet would be larger than MTU.
	ErrTooBig = errors.New("rawudp: datagram larger than the link MTU")
	// ErrAddress: Src or Dst is not of the Conn's IP version (IPv4 for
	// New, IPv6 for New6; an IPv4-mapped IPv6 address counts as IPv4).
	ErrAddress = errors.New("rawudp: source or destination of the wrong IP version")
	// ErrNoDstMAC: an IPv6 datagram to a unicast address without a
	// DstMAC. The Conn does no neighbour discovery: the caller knows the
	// peer's MAC (for DHCPv6, the Ethernet source of its message).
	ErrNoDstMAC = errors.New("rawudp: no destination MAC for a unicast IPv6 destination")
)

// Stats counts what a Conn did. Fields are read with Load.
type Stats struct {
	Received  atomic.Uint64 // datagrams queued for Recv
	Sent      atomic.Uint64 // datagrams sent
	Malformed atomic.Uint64 // frames for our port with a bad IP or UDP header or checksum
	QueueFull atomic.Uint64 // datagrams dropped because Recv was not keeping up
	Fragments atomic.Uint64 // IPv4 fragments, which DHCP never needs
}

// MTU is the largest IP packet Send builds (RFC 894, RFC 2464 Ethernet).
const MTU = 1500

// Conn is one UDP port on a Link, over IPv4 (New) or IPv6 (New6). It is
// safe for concurrent use.
type Conn struct {
	link  Link
	port  uint16
	v6    bool
	queue chan Packet
	done  chan struct{}
	once  sync.Once
	stats Stats
	ipID  atomic.Uint32
}

// New returns a Conn for IPv4 UDP port (e.g. 68) on link that queues at
// most queue received datagrams (e.g. 64; at least 1).
func New(link Link, port uint16, queue int) *Conn {
	return &Conn{link: link, port: port, queue: make(chan Packet, max(queue, 1)), done: make(chan struct{})}
}

// Stats returns the Conn's counters.
func (c *Conn) Stats() *Stats { return &c.stats }

// Port is the UDP port the Conn receives on.
func (c *Conn) Port() uint16 { return c.port }

// Close makes Recv and Send fail with ErrClosed.
func (c *Conn) Close() error {
	c.once.Do(func() { close(c.done) })
	return nil
}

// Match reports whether frame is a UDP datagram of the Conn's IP version
// to the Conn's port, the test a link's tap uses to steal the frame from
// the IP stack. It does not validate the frame. For IPv6 see New6: only
// a UDP header straight after the fixed header matches.
func (c *Conn) Match(frame []byte) bool {
	if c.v6 {
		return match6(frame, c.port)
	}
	if len(frame) < 14+20+8 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
		return false
	}
	ip := frame[14:]
	ihl := int(ip[0]&0xf) * 4
	if ip[9] != 17 || ihl < 20 || len(ip) < ihl+8 {
		return false
	}
	return binary.BigEndian.Uint16(ip[ihl+2:]) == c.port
}

// Deliver parses an Ethernet frame and queues it for Recv if it is a UDP
// datagram of the Conn's IP version to the Conn's port. It reports
// whether the frame was for the port (queued or counted as dropped);
// false leaves it to the caller. frame is not kept.
func (c *Conn) Deliver(frame []byte) bool {
	if !c.Match(frame) {
		return false
	}
	var p Packet
	var ok bool
	if c.v6 {
		p, ok = parse6(frame)
	} else {
		p, ok = parse(frame)
	}
	if !ok {
		if !c.v6 && isFragment(frame[14:]) {
			c.stats.Fragments.Add(1)
		} else {
			c.stats.Malformed.Add(1)
		}
		return true
	}
	select {
	case c.queue <- p:
		c.stats.Received.Add(1)
	default:
		c.stats.QueueFull.Add(1)
	}
	return true
}

// Recv returns the next datagram, or ctx's error, or ErrClosed.
func (c *Conn) Recv(ctx context.Context) (Packet, error) {
	select {
	case p := <-c.queue:
		return p, nil
	case <-ctx.Done():
		return Packet{}, ctx.Err()
	case <-c.done:
		return Packet{}, ErrClosed
	}
}

// Send builds one frame from p and writes it to the link.
func (c *Conn) Send(p Packet) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	if c.v6 {
		return c.send6(p)
	}
	if !p.Src.Addr().Unmap().Is4() || !p.Dst.Addr().Unmap().Is4() {
		return ErrAddress
	}
	if 20+8+len(p.Payload) > MTU {
		return ErrTooBig
	}
	dst := p.DstMAC
	if dst == nil {
		dst = Broadcast
	}
	frame := Build(dst, c.link.HardwareAddr(), p.Src, p.Dst, uint16(c.ipID.Add(1)), p.Payload)
	if err := c.link.WriteFrame(frame); err != nil {
		return err
	}
	c.stats.Sent.Add(1)
	return nil
}

// Build returns an Ethernet frame carrying payload in an IPv4 UDP
// datagram from src to dst, TTL 64 (RFC 1700), with both checksums set.
func Build(dstMAC, srcMAC net.HardwareAddr, src, dst netip.AddrPort, id uint16, payload []byte) []byte {
	f := make([]byte, 14+20+8+len(payload))
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	binary.BigEndian.PutUint16(ip[4:], id)
	ip[8] = 64
	ip[9] = 17
	s4, d4 := src.Addr().Unmap().As4(), dst.Addr().Unmap().As4()
	copy(ip[12:16], s4[:])
	copy(ip[16:20], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum(ip[:20], 0)))
	u := ip[20:]
	binary.BigEndian.PutUint16(u[0:], src.Port())
	binary.BigEndian.PutUint16(u[2:], dst.Port())
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	cs := ^fold(sum(u, pseudo(ip)))
	if cs == 0 {
		cs = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	binary.BigEndian.PutUint16(u[6:], cs)
	return f
}

// parse validates the IPv4 and UDP headers of a frame Match accepted and
// copies the datagram out.
func parse(frame []byte) (Packet, bool) {
	ip := frame[14:]
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || total < ihl+8 || total > len(ip) || fold(sum(ip[:ihl], 0)) != 0xffff || isFragment(ip) {
		return Packet{}, false
	}
	u := ip[ihl:total]
	ulen := int(binary.BigEndian.Uint16(u[4:]))
	if ulen < 8 || ulen > len(u) {
		return Packet{}, false
	}
	u = u[:ulen]
	if binary.BigEndian.Uint16(u[6:]) != 0 && fold(sum(u, pseudo(ip))) != 0xffff {
		return Packet{}, false
	}
	src, _ := netip.AddrFromSlice(ip[12:16])
	dst, _ := netip.AddrFromSlice(ip[16:20])
	return Packet{
		Payload: append([]byte(nil), u[8:]...),
		Src:     netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:])),
		Dst:     netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:])),
		SrcMAC:  append(net.HardwareAddr(nil), frame[6:12]...),
		DstMAC:  append(net.HardwareAddr(nil), frame[0:6]...),
	}, true
}

// isFragment reports a set MF flag or a non-zero fragment offset.
func isFragment(ip []byte) bool { return binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 }

// pseudo is the one's complement sum of the IPv4 pseudo header of the UDP
// datagram in ip (RFC 768): addresses, protocol and the UDP length.
func pseudo(ip []byte) uint32 {
	ihl := int(ip[0]&0xf) * 4
	return sum(ip[12:20], 0) + 17 + uint32(binary.BigEndian.Uint16(ip[ihl+4:]))
}

func sum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
