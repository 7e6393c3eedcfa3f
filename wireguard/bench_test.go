package wireguard

import (
	"context"
	"io"
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/conn"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// BenchmarkBindReceive is the Bind's per-datagram cost on a transport
// packet from a known source (the socket is a fake that never blocks).
func BenchmarkBindReceive(b *testing.B) {
	pkt := make([]byte, 1440)
	pkt[0] = msgTransport
	fc := &fakeConn{p: pkt, from: netip.MustParseAddrPort("198.51.100.7:51820")}
	_, fns := openUDP4Bind(b, fc)
	bufs, sizes, eps := [][]byte{make([]byte, 1500)}, make([]int, 1), make([]conn.Endpoint, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	for b.Loop() {
		fns[0](bufs, sizes, eps)
	}
}

// BenchmarkBindReceiveBatch is BenchmarkBindReceive from a socket that
// hands over 128 datagrams per read (stack.UDPConn's batch read): the
// per-datagram cost, from one source.
func BenchmarkBindReceiveBatch(b *testing.B) {
	pkt := make([]byte, 1440)
	pkt[0] = msgTransport
	fc := &fakeBatchConn{}
	for range conn.IdealBatchSize {
		fc.dgrams = append(fc.dgrams, pkt)
		fc.from = append(fc.from, netip.MustParseAddrPort("198.51.100.7:51820"))
	}
	_, fns := openUDP4Bind(b, fc)
	bufs, sizes, eps := make([][]byte, conn.IdealBatchSize), make([]int, conn.IdealBatchSize), make([]conn.Endpoint, conn.IdealBatchSize)
	for i := range bufs {
		bufs[i] = make([]byte, 1500)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)) * conn.IdealBatchSize)
	for b.Loop() {
		fns[0](bufs, sizes, eps)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conn.IdealBatchSize), "ns/datagram")
}

// BenchmarkTUNToDevice is a packet's way from netstack's WritePackets to
// the device's Read.
func BenchmarkTUNToDevice(b *testing.B) {
	tn := NewTUN("wg0", 0)
	ip := make([]byte, 1400)
	ip[0] = 0x45
	p := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: bufferOf(ip)})
	defer p.DecRef()
	var l stack.PacketBufferList
	l.PushBack(p)
	bufs, sizes := [][]byte{make([]byte, 2000)}, make([]int, 1)
	b.ReportAllocs()
	b.SetBytes(int64(len(ip)))
	for b.Loop() {
		tn.WritePackets(l)
		tn.Read(bufs, sizes, 16)
	}
}

// BenchmarkTUNFromDevice is a decrypted packet's way into netstack (to a
// dispatcher that drops it).
func BenchmarkTUNFromDevice(b *testing.B) {
	tn := NewTUN("wg0", 0)
	tn.Attach(nopDispatcher{})
	ip := make([]byte, 1400)
	ip[0] = 0x45
	bufs := [][]byte{append(make([]byte, 16), ip...)}
	b.ReportAllocs()
	b.SetBytes(int64(len(ip)))
	for b.Loop() {
		tn.Write(bufs, 16)
	}
}

// BenchmarkTunnelTCP is TCP through a tunnel between two of our devices
// on loopback UDP, each side a gVisor netstack: the userspace path's
// throughput on this machine (both devices, both stacks and the kernel's
// loopback share its cores), for docs/performance.md.
func BenchmarkTunnelTCP(b *testing.B) {
	x, y := pair(b)
	ln, err := gonet.ListenTCP(y.s, tcpip.FullAddress{NIC: 1, Addr: tcpip.AddrFrom4(y.addr.As4()), Port: 9}, ipv4.ProtocolNumber)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, x.s, tcpip.FullAddress{Addr: tcpip.AddrFrom4(y.addr.As4()), Port: 9}, ipv4.ProtocolNumber)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	b.ReportMetric(float64(x.tun.Stats.TxQueueFull.Load())/float64(b.N), "queue_full/op")
	b.ReportMetric(float64(x.tun.Stats.TxParked.Load())/float64(b.N), "parked/op")
	if n := <-got; n < int64(b.N)*int64(len(buf)) {
		b.Fatalf("receiver got %d bytes, want %d", n, int64(b.N)*int64(len(buf)))
	}
}
