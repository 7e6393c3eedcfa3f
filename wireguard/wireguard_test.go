package wireguard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/device"

	"github.com/gvrouter/gvrouter/hw"
	gvstack "github.com/gvrouter/gvrouter/stack"
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

	mu   sync.Mutex
	sent [][]byte // datagrams the Bind sent, when recording
}

// recordConn keeps a copy of each datagram sent through it.
type recordConn struct {
	*net.UDPConn
	n *node
}

func (c recordConn) WriteToUDPAddrPort(b []byte, a netip.AddrPort) (int, error) {
	c.n.mu.Lock()
	c.n.sent = append(c.n.sent, bytes.Clone(b))
	c.n.mu.Unlock()
	return c.UDPConn.WriteToUDPAddrPort(b, a)
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
		return recordConn{c, n}, nil
	}
}

func newNode(t *testing.T, addr string) *node {
	return newNodeOn(t, addr, loopback)
}

// newNodeOn is newNode with the Bind's sockets from listen.
func newNodeOn(t *testing.T, addr string, listen func(*node) Listener) *node {
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
func (n *node) configure(t *testing.T, peers ...Peer) {
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
func pair(t *testing.T) (a, b *node) {
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

// TestTunnel: two devices on our Bind and TUN complete a handshake and
// carry ping and TCP both ways between their netstacks.
func TestTunnel(t *testing.T) {
	goroutineLeakCheck(t)
	a, b := pair(t)
	ping(t, a, b)
	ping(t, b, a)
	echoTCP(t, a, b, 7)
	echoTCP(t, b, a, 7)
	if a.bind.Stats.RxResponses.Load() == 0 || b.bind.Stats.RxInitiations.Load() == 0 || b.bind.Stats.RxTransport.Load() == 0 {
		t.Errorf("bind counters: a got %d responses, b %d initiations and %d transport packets; want each > 0",
			a.bind.Stats.RxResponses.Load(), b.bind.Stats.RxInitiations.Load(), b.bind.Stats.RxTransport.Load())
	}
	if x, y := a.bind.Stats.RxUnknownIndex.Load(), b.bind.Stats.RxUnknownIndex.Load(); x != 0 || y != 0 {
		t.Errorf("RxUnknownIndex = %d, %d on a live tunnel; want 0", x, y)
	}
	if a.tun.Stats.TxPackets.Load() == 0 || b.tun.Stats.RxPackets.Load() == 0 {
		t.Errorf("tun counters: a sent %d, b received %d; want > 0", a.tun.Stats.TxPackets.Load(), b.tun.Stats.RxPackets.Load())
	}
	checkStatus(t, a, b)
}

// checkStatus checks a's Status after traffic with its peer b.
func checkStatus(t *testing.T, a, b *node) {
	t.Helper()
	uapi, err := a.dev.IpcGet()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(uapi, map[Key]string{b.key.PublicKey(): "b"}, Stats{&a.bind.Stats, &a.tun.Stats, &a.stats}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.PublicKey != a.key.PublicKey().String() || st.ListenPort != a.port || len(st.Peers) != 1 {
		t.Fatalf("status = %+v, want a's public key, port %d and one peer", st, a.port)
	}
	p := st.Peers[0]
	if p.Name != "b" || p.PublicKey != b.key.PublicKey().String() || p.Endpoint != netip.AddrPortFrom(b.underlay, b.port).String() ||
		p.RxBytes == 0 || p.TxBytes == 0 || p.HandshakeAge < 0 || p.HandshakeAge > 60 ||
		len(p.AllowedIPs) != 1 || p.AllowedIPs[0] != netip.PrefixFrom(b.addr, 32) {
		t.Errorf("peer status = %+v", p)
	}
	if got := st.Counters["udp"]["rx_response"]; got == 0 {
		t.Errorf("counters[udp][rx_response] = %d, want > 0; counters %v", got, st.Counters)
	}
	if _, ok := st.Counters["drops"]["unknown_index"]; !ok {
		t.Errorf("counters lack drops/unknown_index: %v", st.Counters)
	}
	js, _ := json.Marshal(st)
	if strings.Contains(string(js), a.key.String()) || strings.Contains(string(js), a.key.hex()) {
		t.Errorf("status JSON holds the private key: %s", js)
	}
}

// TestTunnelOverNetstack: the same tunnel with each Bind on a UDP socket
// of the router's own netstack (*stack.UDPConn, as on the WAN), the two
// netstacks joined by an in-memory Ethernet wire: the kernel carries
// nothing.
func TestTunnelOverNetstack(t *testing.T) {
	goroutineLeakCheck(t)
	wan1, wan2 := wirePair(t, "203.0.113.1/24", "203.0.113.2/24")
	on := func(ns *gvstack.Netstack, addr string) func(*node) Listener {
		return func(n *node) Listener {
			n.underlay = netip.MustParseAddr(addr)
			return func(network string, port uint16) (PacketConn, error) {
				if network != "udp4" {
					return nil, nil
				}
				return ns.ListenUDPConn(netip.AddrPortFrom(n.underlay, port))
			}
		}
	}
	a := newNodeOn(t, "10.9.0.1", on(wan1, "203.0.113.1"))
	b := newNodeOn(t, "10.9.0.2", on(wan2, "203.0.113.2"))
	b.configure(t, a.peerOf(false))
	a.configure(t, b.peerOf(true))
	ping(t, a, b)
	echoTCP(t, a, b, 7)
	echoTCP(t, b, a, 7)
	if got := wan2.Interface("wan").Stats(); b.bind.Stats.RxTransport.Load() == 0 {
		t.Errorf("b's Bind got no transport packet over the netstack wire; wan stats %+v", got)
	}
}

// wireWriter carries one netstack's frames to another's interface, on
// a goroutine of its own, as a cable would.
type wireWriter struct{ ch chan []byte }

func (w wireWriter) WriteFrames(frames [][]byte) (int, error) {
	for _, f := range frames {
		select {
		case w.ch <- bytes.Clone(f):
		default: // a full wire drops, as a full ring would
		}
	}
	return len(frames), nil
}

// wirePair returns two router netstacks, each with one interface "wan"
// holding addr, joined back to back.
func wirePair(t *testing.T, addr1, addr2 string) (*gvstack.Netstack, *gvstack.Netstack) {
	t.Helper()
	w1, w2 := wireWriter{make(chan []byte, 512)}, wireWriter{make(chan []byte, 512)}
	mk := func(mac byte, addr string, w wireWriter) *gvstack.Netstack {
		ns, err := gvstack.New(gvstack.Config{Interfaces: []gvstack.InterfaceConfig{{
			Name: "wan", MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, mac}, MTU: 1500,
			Addresses: []netip.Prefix{netip.MustParsePrefix(addr)}, Writer: w,
		}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ns
	}
	n1, n2 := mk(1, addr1, w1), mk(2, addr2, w2)
	done := make(chan struct{})
	var wg sync.WaitGroup
	carry := func(from wireWriter, to *gvstack.Interface) {
		defer wg.Done()
		for {
			select {
			case f := <-from.ch:
				to.HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f)}})
			case <-done:
				return
			}
		}
	}
	wg.Add(2)
	go carry(w1, n2.Interface("wan"))
	go carry(w2, n1.Interface("wan"))
	t.Cleanup(func() {
		close(done)
		wg.Wait()
		n1.Close()
		n2.Close()
	})
	return n1, n2
}

// TestWrongKeyPeer: a device whose key the other side does not know gets
// no handshake and no packet through; the other side counts its
// initiations as invalid.
func TestWrongKeyPeer(t *testing.T) {
	a, b := pair(t)
	c := newNode(t, "10.9.0.1") // poses as a's inside address, with its own key
	c.configure(t, b.peerOf(true))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if conn, err := gonet.DialContextTCP(ctx, c.s, tcpip.FullAddress{Addr: tcpip.AddrFrom4(b.addr.As4()), Port: 9}, ipv4.ProtocolNumber); err == nil {
		conn.Close()
		t.Fatal("a peer with an unknown key reached b's netstack")
	}
	if got := b.stats.InvalidInitiation.Load(); got == 0 {
		t.Errorf("b counted %d invalid initiations from the unknown key, want > 0", got)
	}
	if got := c.bind.Stats.RxResponses.Load(); got != 0 {
		t.Errorf("the unknown key got %d handshake responses, want 0", got)
	}
	if got := b.tun.Stats.RxPackets.Load(); got != 0 {
		t.Errorf("b's netstack got %d packets, want 0", got)
	}
	uapi, _ := c.dev.IpcGet()
	st, err := ReadStatus(uapi, nil, Stats{}, time.Now())
	if err != nil || len(st.Peers) != 1 || st.Peers[0].HandshakeAge != -1 || !st.Peers[0].LastHandshake.IsZero() || st.Peers[0].RxBytes != 0 {
		t.Errorf("status of the unknown key's peer = %+v, %v; want no handshake, nothing received", st.Peers, err)
	}
	_ = a
}

// TestBadInput: random UDP to the listen port and a replayed initiation
// are counted and do no harm; the tunnel still works after.
func TestBadInput(t *testing.T) {
	a, b := pair(t)
	ping(t, a, b)
	a.mu.Lock()
	var init []byte
	for _, d := range a.sent {
		if len(d) == sizeInitiation && d[0] == msgInitiation {
			init = d
		}
	}
	a.mu.Unlock()
	if init == nil {
		t.Fatal("a sent no handshake initiation")
	}
	attacker, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.port))
	send := func(p []byte) {
		if _, err := attacker.WriteToUDP(p, to); err != nil {
			t.Fatal(err)
		}
	}
	send([]byte("short"))
	send(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 25))
	send(append([]byte{msgInitiation, 0, 0, 0}, make([]byte, 60)...))           // an initiation of the wrong size
	send(append([]byte{msgTransport, 0, 0, 0}, bytes.Repeat([]byte{7}, 60)...)) // a transport packet for no receiver index
	mac1 := bytes.Clone(init)
	mac1[sizeInitiation-20] ^= 1 // inside MAC1
	send(mac1)
	send(init) // the replay
	deadline := time.Now().Add(5 * time.Second)
	for b.stats.HandshakeReplay.Load() == 0 || b.stats.InvalidMAC1.Load() == 0 {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		name string
		got  uint64
		want uint64
	}{
		{"bind RxShort", b.bind.Stats.RxShort.Load(), 1},
		{"bind RxUnknownType", b.bind.Stats.RxUnknownType.Load(), 1},
		{"bind RxBadSize", b.bind.Stats.RxBadSize.Load(), 1},
		{"bind RxUnknownIndex", b.bind.Stats.RxUnknownIndex.Load(), 1},
		{"device HandshakeReplay", b.stats.HandshakeReplay.Load(), 1},
		{"device InvalidMAC1", b.stats.InvalidMAC1.Load(), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	ping(t, b, a) // still up
}

// TestHandshakeFlood: a flood of initiations (a captured one, replayed
// thousands of times, so MAC1 is valid) puts the device under load; it
// answers with cookie replies instead of doing Diffie-Hellman for each
// (whitepaper §5.3), the attacker's socket receives them, the handshake
// queue stays bounded and the tunnel survives.
func TestHandshakeFlood(t *testing.T) {
	a, b := pair(t)
	ping(t, a, b)
	var init []byte
	a.mu.Lock()
	for _, d := range a.sent {
		if len(d) == sizeInitiation && d[0] == msgInitiation {
			init = d
		}
	}
	a.mu.Unlock()
	attacker, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.port))
	cookies := make(chan int, 1)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		attacker.SetReadDeadline(time.Now().Add(15 * time.Second))
		for {
			m, err := attacker.Read(buf)
			if err != nil {
				break
			}
			if m == sizeCookieReply && buf[0] == msgCookieReply {
				n++
				if n == 1 {
					cookies <- n
				}
			}
		}
	}()
	var got bool
	for round := 0; round < 20 && !got; round++ {
		for range 2000 {
			attacker.WriteToUDP(init, to)
		}
		select {
		case <-cookies:
			got = true
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !got {
		t.Fatalf("no cookie reply reached the flooder; b counted %d cookie replies sent, %d replays, %d initiations received",
			b.stats.CookieRepliesSent.Load(), b.stats.HandshakeReplay.Load(), b.bind.Stats.RxInitiations.Load())
	}
	if b.stats.CookieRepliesSent.Load() == 0 {
		t.Errorf("CookieRepliesSent = 0 though the flooder got a cookie reply")
	}
	time.Sleep(500 * time.Millisecond) // let the queue drain
	ping(t, b, a)
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
	b := NewBind(func(network string, _ uint16) (PacketConn, error) {
		if network == "udp4" {
			return fc, nil
		}
		return nil, nil
	})
	fns, _, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
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
	tn.Attach(nopDispatcher{})
	wbufs := [][]byte{append(make([]byte, 16), ip...)}
	// NewPacketBuffer takes its buffer from gVisor's pools, which -race
	// empties at random.
	if got := testing.AllocsPerRun(1000, func() { tn.Write(wbufs, 16) }); got != 0 && !raceEnabled {
		t.Errorf("device -> netstack: %v allocations per packet, want 0", got)
	}
}
