package wireguard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// node is one WireGuard device on our glue: a Bind over a loopback UDP
// socket and a TUN that is the only NIC of its own netstack.
type node struct {
	key   Key
	bind  *Bind
	tun   *TUN
	dev   *device.Device
	stats DeviceStats
	s     *stack.Stack
	addr  netip.Addr // inside the tunnel
	port  uint16     // the UDP listen port on underlay
	// underlay is the address the Bind's socket has.
	underlay netip.Addr

	mu         sync.Mutex
	sent       [][]byte // datagrams the Bind sent, unless unrecorded
	unrecorded bool

	reads atomic.Uint64 // datagrams the Bind read from its socket
}

// recordConn keeps a copy of each datagram sent through it.
type recordConn struct {
	*net.UDPConn
	n *node
}

func (c recordConn) WriteToUDPAddrPort(b []byte, a netip.AddrPort) (int, error) {
	c.n.mu.Lock()
	if !c.n.unrecorded {
		c.n.sent = append(c.n.sent, bytes.Clone(b))
	}
	c.n.mu.Unlock()
	return c.UDPConn.WriteToUDPAddrPort(b, a)
}

func (c recordConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	n, from, err := c.UDPConn.ReadFromUDPAddrPort(b)
	if err == nil {
		c.n.reads.Add(1)
	}
	return n, from, err
}

// loopback opens the Bind's socket on 127.0.0.1 in the kernel.
func loopback(n *node) Listener {
	return func(network string, port uint16) (PacketConn, error) {
		if network != "udp4" {
			return nil, nil
		}
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)))
		if err != nil {
			return nil, err
		}
		// The kernel's 208 KiB default holds ~90 full-size datagrams,
		// less than one device batch of 128: at TCP speed the kernel's
		// loopback drops (Udp RcvbufErrors), which the router's netstack
		// sockets (1 MiB) do not.
		c.SetReadBuffer(4 << 20)
		return recordConn{c, n}, nil
	}
}

func newNode(t testing.TB, addr string) *node {
	return newNodeOn(t, addr, loopback)
}

// newNodeOn is newNode with the Bind's sockets from listen.
func newNodeOn(t testing.TB, addr string, listen func(*node) Listener) *node {
	t.Helper()
	n := &node{addr: netip.MustParseAddr(addr), underlay: netip.MustParseAddr("127.0.0.1")}
	var err error
	if n.key, err = GenerateKey(); err != nil {
		t.Fatal(err)
	}
	n.bind = NewBind(listen(n))
	n.tun = NewTUN("wg0", 0)
	n.s = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, icmp.NewProtocol4},
	})
	if err := n.s.CreateNIC(1, n.tun); err != nil {
		t.Fatalf("CreateNIC: %s", err)
	}
	pa := tcpip.ProtocolAddress{Protocol: ipv4.ProtocolNumber, AddressWithPrefix: tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(n.addr.As4()), PrefixLen: 24}}
	if err := n.s.AddProtocolAddress(1, pa, stack.AddressProperties{}); err != nil {
		t.Fatalf("AddProtocolAddress: %s", err)
	}
	n.s.SetRouteTable([]tcpip.Route{{Destination: pa.AddressWithPrefix.Subnet(), NIC: 1}})
	n.dev = device.NewDevice(n.tun.Device(), n.bind, n.stats.Logger(nil))
	t.Cleanup(func() {
		n.dev.Close()
		n.s.Close()
		n.s.Wait()
	})
	return n
}

// configure gives n its key and peers and brings it up.
func (n *node) configure(t testing.TB, peers ...Peer) {
	t.Helper()
	c := Config{PrivateKey: n.key, Peers: peers}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := n.dev.IpcSet(c.UAPI()); err != nil {
		t.Fatalf("IpcSet: %v", err)
	}
	if err := n.dev.Up(); err != nil {
		t.Fatalf("Up: %v", err)
	}
	n.port = portOf(n.bind.v4)
}

// peerOf is n as a peer of another node.
func (n *node) peerOf(withEndpoint bool) Peer {
	p := Peer{Name: n.addr.String(), PublicKey: n.key.PublicKey(), AllowedIPs: []netip.Prefix{netip.PrefixFrom(n.addr, 32)}}
	if withEndpoint {
		p.Endpoint = netip.AddrPortFrom(n.underlay, n.port)
	}
	return p
}

// pair returns two nodes that are each other's peer; a knows b's endpoint.
func pair(t testing.TB) (a, b *node) {
	a, b = newNode(t, "10.9.0.1"), newNode(t, "10.9.0.2")
	b.configure(t, a.peerOf(false))
	a.configure(t, b.peerOf(true))
	return a, b
}

// echoTCP dials from→to's listener and checks that a line goes there
// and back.
func echoTCP(t *testing.T, from, to *node, port uint16) {
	t.Helper()
	ln, err := gonet.ListenTCP(to.s, tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(to.addr.As4()), Port: port}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, from.s, tcpip.FullAddress{Addr: tcpip.AddrFrom4(to.addr.As4()), Port: port}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("dial %s -> %s:%d through the tunnel: %v", from.addr, to.addr, port, err)
	}
	defer c.Close()
	msg := []byte(strings.Repeat(fmt.Sprintf("from %s to %s;", from.addr, to.addr), 300)) // several segments
	go c.Write(msg)
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo %s -> %s: %v, got %d bytes back equal=%v", from.addr, to.addr, err, len(got), bytes.Equal(got, msg))
	}
}

// ping sends one ICMP echo from→to and waits for the reply.
func ping(t *testing.T, from, to *node) {
	t.Helper()
	var wq waiter.Queue
	ep, terr := from.s.NewEndpoint(icmp.ProtocolNumber4, ipv4.ProtocolNumber, &wq)
	if terr != nil {
		t.Fatalf("NewEndpoint: %s", terr)
	}
	defer ep.Close()
	if terr := ep.Connect(tcpip.FullAddress{Addr: tcpip.AddrFrom4(to.addr.As4())}); terr != nil {
		t.Fatalf("Connect: %s", terr)
	}
	entry, ch := waiter.NewChannelEntry(waiter.ReadableEvents)
	wq.EventRegister(&entry)
	defer wq.EventUnregister(&entry)
	req := make([]byte, header.ICMPv4MinimumSize+4)
	icmpHdr := header.ICMPv4(req)
	icmpHdr.SetType(header.ICMPv4Echo)
	copy(req[header.ICMPv4MinimumSize:], "wg!!")
	deadline := time.After(10 * time.Second)
	for try := 0; ; try++ {
		if _, terr := ep.Write(bytes.NewReader(req), tcpip.WriteOptions{}); terr != nil {
			t.Fatalf("ping write: %s", terr)
		}
		var buf bytes.Buffer
		_, terr := ep.Read(&buf, tcpip.ReadOptions{})
		if _, ok := terr.(*tcpip.ErrWouldBlock); ok {
			select {
			case <-ch:
				_, terr = ep.Read(&buf, tcpip.ReadOptions{})
			case <-time.After(time.Second):
				continue
			case <-deadline:
				t.Fatalf("ping %s -> %s: no reply", from.addr, to.addr)
			}
		}
		if terr != nil {
			t.Fatalf("ping read: %s", terr)
		}
		if r := header.ICMPv4(buf.Bytes()); r.Type() != header.ICMPv4EchoReply || !bytes.HasSuffix(buf.Bytes(), []byte("wg!!")) {
			t.Fatalf("ping %s -> %s: got %x, want an echo reply", from.addr, to.addr, buf.Bytes())
		}
		return
	}
}

// goroutineLeakCheck fails t if, after its cleanups, more goroutines
// run than before it (wireguard-go device/device_test.go has the same).
func goroutineLeakCheck(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Errorf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// openUDP4Bind returns a Bind whose only socket is c, as its udp4 one,
// opened, with its receive function.
func openUDP4Bind(tb testing.TB, c PacketConn) (*Bind, []conn.ReceiveFunc) {
	tb.Helper()
	b := NewBind(func(network string, _ uint16) (PacketConn, error) {
		if network == "udp4" {
			return c, nil
		}
		return nil, nil
	})
	fns, _, err := b.Open(0)
	if err != nil {
		tb.Fatal(err)
	}
	return b, fns
}

// lastInitiation returns the last handshake initiation n sent (a
// replayed one passes MAC1 at its peer); the test fails if n sent none.
func lastInitiation(t *testing.T, n *node) []byte {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	var init []byte
	for _, d := range n.sent {
		if len(d) == sizeInitiation && d[0] == msgInitiation {
			init = d
		}
	}
	if init == nil {
		t.Fatal("no handshake initiation sent")
	}
	return init
}
