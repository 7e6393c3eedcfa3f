package stack

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// TestListenUDPConn: a datagram from host A arrives with its source by
// ReadFromUDPAddrPort, the reply by WriteToUDPAddrPort reaches A, and a
// past read deadline wakes a blocked reader (the DNS forwarder's stop).
func TestListenUDPConn(t *testing.T) {
	l := newLab(t)
	c, err := l.r.ListenUDPConn(netip.AddrPortFrom(lanIP4, 53))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, err := gonet.DialUDP(l.a.Stack, nil, &tcpip.FullAddress{Addr: tcpip.AddrFrom4(lanIP4.As4()), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "query" || from.Addr() != netip.MustParseAddr("10.1.0.2") {
		t.Fatalf("ReadFromUDPAddrPort = %q from %v, %v; want \"query\" from 10.1.0.2", buf[:n], from, err)
	}
	if _, err := c.WriteToUDPAddrPort([]byte("answer"), from); err != nil {
		t.Fatal(err)
	}
	q.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := q.Read(buf); err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("host A read %q, %v; want \"answer\"", buf[:n], err)
	}

	c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFromUDPAddrPort(buf)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("blocked read after a past deadline: %v, want os.ErrDeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a past read deadline did not wake the blocked reader")
	}
}

// TestUDPConnAllocs: a datagram read and a reply written allocate
// nothing in UDPConn itself (netstack's packet buffers are pooled).
func TestUDPConnAllocs(t *testing.T) {
	l := newLab(t)
	c, err := l.r.ListenUDPConn(netip.AddrPortFrom(lanIP4, 53))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, err := gonet.DialUDP(l.a.Stack, nil, &tcpip.FullAddress{Addr: tcpip.AddrFrom4(lanIP4.As4()), Port: 53}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	buf := make([]byte, 512)
	msg := []byte("query")
	// Warm up: neighbour entries, pools.
	for range 10 {
		q.Write(msg)
		_, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		c.WriteToUDPAddrPort(msg, from)
		q.Read(buf)
	}
	// Queue what AllocsPerRun reads (it runs the function once more
	// than asked, to warm up).
	for range 201 {
		if _, err := q.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	// AllocsPerRun counts every goroutine's allocations: let host A's
	// link deliver them all first.
	time.Sleep(200 * time.Millisecond)
	var from netip.AddrPort
	allocs := testing.AllocsPerRun(200, func() {
		var err error
		_, from, err = c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("ReadFromUDPAddrPort: %.1f allocations per datagram, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := c.WriteToUDPAddrPort(msg, from); err != nil {
			t.Fatal(err)
		}
	})
	// The write passes through netstack to host A's link, which may
	// allocate in the test host; UDPConn's own share must stay small.
	t.Logf("WriteToUDPAddrPort: %.1f allocations per datagram (netstack and the test host included)", allocs)
}

// TestUDPConnReadBatch: ReadBatchUDPAddrPort returns every datagram
// already queued, in order and with its source, in one call, up to the
// batch's size, without allocating.
func TestUDPConnReadBatch(t *testing.T) {
	l := newLab(t)
	c, err := l.r.ListenUDPConn(netip.AddrPortFrom(lanIP4, 51820))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q, err := gonet.DialUDP(l.a.Stack, nil, &tcpip.FullAddress{Addr: tcpip.AddrFrom4(lanIP4.As4()), Port: 51820}, ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	send := func(n int) {
		for i := range n {
			if _, err := q.Write([]byte{byte(i), 'w', 'g'}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond) // host A's link delivers them all
	}
	bufs, sizes, addrs := make([][]byte, 8), make([]int, 8), make([]netip.AddrPort, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 64)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	// One datagram first, so host A has resolved the router's address
	// before the ones whose order counts: netstack sends the packets
	// that waited for a resolution from another goroutine once it ends,
	// and the datagrams written meanwhile can overtake them (a CI run
	// under load: "second batch starts with datagram 1, want 8").
	send(1)
	if n, err := c.ReadBatchUDPAddrPort(bufs, sizes, addrs); err != nil || n != 1 {
		t.Fatalf("ReadBatchUDPAddrPort of the first datagram = %d, %v; want 1", n, err)
	}
	send(11)
	for _, want := range []int{8, 3} {
		n, err := c.ReadBatchUDPAddrPort(bufs, sizes, addrs)
		if err != nil || n != want {
			t.Fatalf("ReadBatchUDPAddrPort = %d, %v; want %d datagrams", n, err, want)
		}
		for i := range n {
			if sizes[i] != 3 || bufs[i][1] != 'w' || addrs[i].Addr() != netip.MustParseAddr("10.1.0.2") {
				t.Fatalf("datagram %d: %q from %v", i, bufs[i][:sizes[i]], addrs[i])
			}
		}
		if first := bufs[0][0]; want == 3 && first != 8 {
			t.Errorf("second batch starts with datagram %d, want 8 (in order)", first)
		}
	}
	send(8 * 101) // AllocsPerRun runs once more than asked
	if allocs := testing.AllocsPerRun(100, func() {
		if n, err := c.ReadBatchUDPAddrPort(bufs, sizes, addrs); err != nil || n != 8 {
			t.Fatalf("ReadBatchUDPAddrPort = %d, %v; want 8", n, err)
		}
	}); allocs > 0 && !raceEnabled { // -race: sync.Pool drops some of the ops
		t.Errorf("ReadBatchUDPAddrPort: %.1f allocations per batch, want 0", allocs)
	}
}

// hostAUDP binds a socket of host A at to (closed with the test) and
// sends it one datagram from c, so the router has resolved host A's
// address before a test's batch; its reads time out after 5 s.
func hostAUDP(t *testing.T, l *lab, c *UDPConn, to netip.AddrPort) *gonet.UDPConn {
	t.Helper()
	proto := ipv4.ProtocolNumber
	if to.Addr().Is6() {
		proto = ipv6.ProtocolNumber
	}
	q, err := gonet.DialUDP(l.a.Stack, &tcpip.FullAddress{Addr: tcpip.AddrFromSlice(to.Addr().AsSlice()), Port: to.Port()}, nil, proto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	q.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.WriteToUDPAddrPort([]byte("warm"), to); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, _, err := q.ReadFrom(buf); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestUDPConnWriteBatch: WriteBatchToUDPAddrPort's datagrams leave the
// interface in one write (txBatcher), not one each, and all arrive.
func TestUDPConnWriteBatch(t *testing.T) {
	l := newLab(t)
	c, err := l.r.ListenUDPConn(netip.AddrPortFrom(lanIP4, 51820))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := netip.MustParseAddrPort("10.1.0.2:4000")
	q := hostAUDP(t, l, c, to)
	buf := make([]byte, 64)
	bufs := make([][]byte, 32)
	for i := range bufs {
		bufs[i] = []byte{byte(i), 'w', 'g'}
	}
	// The batch shares one route (writeBatchRouted): the socket's TTL
	// and the send counters must be what netstack's own write gives.
	if err := c.ep.SetSockOptInt(tcpip.IPv4TTLOption, 7); err != nil {
		t.Fatal(err)
	}
	sentBefore := l.r.s.Stats().UDP.PacketsSent.Value()
	epBefore := c.ep.Stats().(*tcpip.TransportEndpointStats).PacketsSent.Value()
	before := l.tapA.Writes.Load()
	if n, err := c.WriteBatchToUDPAddrPort(bufs, to); err != nil || n != len(bufs) {
		t.Fatalf("WriteBatchToUDPAddrPort = %d, %v; want %d", n, err, len(bufs))
	}
	if w := l.tapA.Writes.Load() - before; w != 1 {
		t.Errorf("%d datagrams left in %d writes, want 1", len(bufs), w)
	}
	if d := l.r.s.Stats().UDP.PacketsSent.Value() - sentBefore; d != uint64(len(bufs)) {
		t.Errorf("stack UDP PacketsSent +%d, want +%d", d, len(bufs))
	}
	if d := c.ep.Stats().(*tcpip.TransportEndpointStats).PacketsSent.Value() - epBefore; d != uint64(len(bufs)) {
		t.Errorf("socket PacketsSent +%d, want +%d", d, len(bufs))
	}
	for i := range bufs {
		n, _, err := q.ReadFrom(buf)
		if err != nil || n != 3 || buf[0] != byte(i) {
			t.Fatalf("datagram %d at host A: %q, %v", i, buf[:n], err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	last := byte(len(bufs) - 1)
	f := l.tapA.Wait(ctx, func(f []byte) bool {
		return len(f) == header.EthernetMinimumSize+header.IPv4MinimumSize+header.UDPMinimumSize+3 &&
			header.IPv4(f[header.EthernetMinimumSize:]).Protocol() == uint8(header.UDPProtocolNumber) &&
			f[len(f)-3] == last && f[len(f)-2] == 'w'
	})
	if f == nil {
		t.Fatalf("datagram %d not seen on the LAN", last)
	}
	ip := header.IPv4(f[header.EthernetMinimumSize:])
	u := header.UDP(ip.Payload())
	if ip.TTL() != 7 || ip.Flags()&header.IPv4FlagDontFragment == 0 || !ip.IsChecksumValid() {
		t.Errorf("IP header: TTL %d, flags %#x, checksum valid %v; want TTL 7, DF, valid", ip.TTL(), ip.Flags(), ip.IsChecksumValid())
	}
	if u.SourcePort() != 51820 || u.DestinationPort() != 4000 || u.Length() != header.UDPMinimumSize+3 ||
		!u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)) {
		t.Errorf("UDP header: %d→%d, length %d, checksum %#x (valid %v)", u.SourcePort(), u.DestinationPort(), u.Length(), u.Checksum(),
			u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)))
	}
}

// TestUDPConnWriteBatch6: the batch write's shared route on an IPv6
// socket (a WireGuard Bind's udp6 socket): every datagram arrives, with
// the UDP checksum IPv6 requires, and is counted.
func TestUDPConnWriteBatch6(t *testing.T) {
	l := newLab(t)
	c, err := l.r.ListenUDP6Only(netip.AddrPortFrom(lanIP6, 51820))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := netip.MustParseAddrPort("[fd00:1::2]:4000")
	q := hostAUDP(t, l, c, to)
	buf := make([]byte, 64)
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = []byte{byte(i), 'w', 'g', '6'}
	}
	sentBefore := l.r.s.Stats().UDP.PacketsSent.Value()
	if n, err := c.WriteBatchToUDPAddrPort(bufs, to); err != nil || n != len(bufs) {
		t.Fatalf("WriteBatchToUDPAddrPort = %d, %v; want %d", n, err, len(bufs))
	}
	if d := l.r.s.Stats().UDP.PacketsSent.Value() - sentBefore; d != uint64(len(bufs)) {
		t.Errorf("stack UDP PacketsSent +%d, want +%d", d, len(bufs))
	}
	for i := range bufs {
		n, _, err := q.ReadFrom(buf)
		if err != nil || n != 4 || buf[0] != byte(i) {
			t.Fatalf("datagram %d at host A: %q, %v", i, buf[:n], err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := l.tapA.Wait(ctx, func(f []byte) bool {
		return len(f) == header.EthernetMinimumSize+header.IPv6MinimumSize+header.UDPMinimumSize+4 &&
			header.IPv6(f[header.EthernetMinimumSize:]).NextHeader() == uint8(header.UDPProtocolNumber) &&
			f[len(f)-1] == '6'
	})
	if f == nil {
		t.Fatal("no datagram of the batch seen on the LAN")
	}
	ip := header.IPv6(f[header.EthernetMinimumSize:])
	u := header.UDP(ip.Payload())
	if u.Checksum() == 0 || !u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)) {
		t.Errorf("UDP checksum %#x not valid over IPv6", u.Checksum())
	}
	if ip.SourceAddress() != tcpip.AddrFrom16(lanIP6.As16()) || ip.HopLimit() == 0 || u.SourcePort() != 51820 || u.DestinationPort() != 4000 {
		t.Errorf("headers: source %v port %d, hop limit %d, destination port %d", ip.SourceAddress(), u.SourcePort(), ip.HopLimit(), u.DestinationPort())
	}
}
