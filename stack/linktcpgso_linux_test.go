package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/natengine"
)

// TestLinkTCPGSOToKernel forwards a batch of a link's decrypted TCP
// segments (as wireguard-go hands the TUN, LinkFastPath.ForwardBatch) of
// an offloaded flow out of a LAN port with vnet headers into a veth whose
// peer has no segmentation or checksum offload, so the kernel cuts the
// superframe in software: a packet socket on the peer sees each segment
// as it was decrypted (TTL - 1), with its own IP length, header checksum,
// sequence number, payload and a correct TCP checksum, PSH on the last
// only, and the port counts one superframe sent whole for the batch.
func TestLinkTCPGSOToKernel(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool")
	n := netnstest.New(t, "ltg", netnstest.WithoutIPv6())
	n.IP(t, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	n.IP(t, "addr", "add", "192.168.1.2/24", "dev", "p0")
	n.IP(t, "link", "set", "p0", "up")
	n.IP(t, "link", "set", "p1", "up")
	n.Run(t, "ethtool", "-K", "p1", "tso", "off", "gso", "off", "tx", "off")
	var (
		p   *hw.Port
		err error
		pfd int
	)
	n.Do(t, func() {
		p, err = hw.Open(hw.Config{Name: "p1", KeepKernel: true, VnetHdr: hw.VnetOn}, nil)
	})
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "open p1: %v", err)
		t.Fatal(err)
	}
	defer p.Close()
	var hostMAC net.HardwareAddr
	n.Do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName("p0"); err == nil {
			hostMAC = ifi.HardwareAddr
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	nat := natengine.New(natengine.Config{})
	r, err := New(Config{
		Interfaces: []InterfaceConfig{{
			Name: "lan", MAC: p.HardwareAddr(), Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.1/24")}, Writer: p,
		}},
		Links: []LinkConfig{{Name: "wg0", Endpoint: channel.New(64, 1420, ""), Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}}},
		NAT:   nat,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, r.Interface("lan").HandleBatch) }()
	defer func() { cancel(); <-done }()

	lanID, _ := r.NATIface("lan")
	in, _ := r.NATIface("wg0")
	if err := nat.SetRules(natengine.Rules{Ifaces: []natengine.IfaceConfig{
		{ID: lanID, Name: "lan", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, MTU: 1500},
		{ID: in, Name: "wg0", Addrs: []netip.Addr{netip.MustParseAddr("10.8.0.1")}, MTU: 1420},
	}}); err != nil {
		t.Fatal(err)
	}
	// The flow from a peer (10.8.0.2:22) to the LAN host, admitted and
	// offloaded as netstack's forward out of the LAN port does.
	seg := func(flags header.TCPFlags, sport, dport uint16, seq, ack uint32, fromPeer bool) []byte {
		s := linkSeg{sport: sport, flags: flags, seq: seq, ack: ack}
		f := s.frame()
		ip := f[header.EthernetMinimumSize:]
		// linkSeg's frames go 10.8.0.2 -> 192.168.1.2, port sport -> 22.
		binary.BigEndian.PutUint16(ip[20+2:], dport)
		if !fromPeer {
			copy(ip[12:16], []byte{192, 168, 1, 2})
			copy(ip[16:20], []byte{10, 8, 0, 2})
		}
		header.IPv4(ip).SetChecksum(0)
		header.IPv4(ip).SetChecksum(^header.IPv4(ip).CalculateChecksum())
		setL4Checksum(ip[12:16], ip[16:20], protoTCP, ip[20:])
		return bytes.Clone(ip)
	}
	const peerPort, hostPort = 22, 40000
	for i, s := range []struct {
		p       []byte
		in, out natengine.Iface
	}{
		{seg(header.TCPFlagSyn, peerPort, hostPort, 99, 0, true), in, lanID},
		{seg(header.TCPFlagSyn|header.TCPFlagAck, hostPort, peerPort, 500, 100, false), lanID, in},
		{seg(header.TCPFlagAck, peerPort, hostPort, 100, 501, true), in, lanID},
	} {
		if v := nat.Prerouting(s.p, s.in); v != natengine.Accept {
			t.Fatalf("packet %d: Prerouting %v", i, v)
		}
		if v := nat.Postrouting(s.p, s.out); v != natengine.Accept {
			t.Fatalf("packet %d: Postrouting %v", i, v)
		}
	}
	var dst, src [6]byte
	copy(dst[:], hostMAC)
	copy(src[:], p.HardwareAddr())
	if !nat.OffloadAt(seg(header.TCPFlagAck, peerPort, hostPort, 100, 501, true), lanID, dst, src, nat.FastPathGeneration()) {
		t.Fatal("OffloadAt(wg0 -> lan) = false")
	}
	n.Do(t, func() { pfd = n.PacketSocket(t, "p0", unix.ETH_P_IP) })
	defer unix.Close(pfd)

	// 20 segments of 1,380 bytes and a shorter last one with PSH, each
	// its own pattern, in wireguard-go's buffers (16 bytes of room).
	const off, mss, count, last = 16, 1380, 20, 300
	var segs []linkSeg
	var bufs [][]byte
	seq := uint32(100)
	for i := range count + 1 {
		s := linkSeg{sport: peerPort, seq: seq, ack: 501, payload: mss, ipID: uint16(i), pattern: byte(i * 7)}
		if i == count {
			s.payload, s.flags = last, header.TCPFlagAck|header.TCPFlagPsh
		}
		f := s.frame()
		ip := f[header.EthernetMinimumSize:]
		binary.BigEndian.PutUint16(ip[20+2:], hostPort)
		setL4Checksum(ip[12:16], ip[16:20], protoTCP, ip[20:])
		segs = append(segs, s)
		b := make([]byte, off+len(f)-header.EthernetMinimumSize, 65535)
		copy(b[off:], f[header.EthernetMinimumSize:])
		bufs = append(bufs, b)
		seq += uint32(s.payload)
	}
	want := make([][]byte, len(bufs))
	for i, b := range bufs {
		want[i] = bytes.Clone(b[off:])
	}
	fp, _ := r.LinkFastPath("wg0")
	before := r.Interface("lan").Stats().GSO.SentWhole
	slow := 0
	if fwd, dropped := fp.ForwardBatch(bufs, off, func([]byte) { slow++ }); fwd != len(bufs) || dropped != 0 || slow != 0 {
		t.Fatalf("ForwardBatch: %d forwarded, %d dropped, %d to the slow path; want %d, 0, 0", fwd, dropped, slow, len(bufs))
	}
	if d := r.Interface("lan").Stats().GSO.SentWhole - before; d != 1 {
		t.Errorf("superframes sent whole: +%d, want +1 for the batch of %d segments", d, len(bufs))
	}

	match := make([]byte, header.EthernetMinimumSize+header.IPv4MinimumSize+header.TCPMinimumSize)
	binary.BigEndian.PutUint16(match[12:], uint16(header.IPv4ProtocolNumber))
	binary.BigEndian.PutUint16(match[34:], peerPort)
	binary.BigEndian.PutUint16(match[36:], hostPort)
	frames := readSegments(t, pfd, match, len(bufs))
	for i, f := range frames {
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		ip = ip[:min(len(ip), int(ip.TotalLength()))]
		tcp := header.TCP(ip.Payload())
		w := header.IPv4(want[i])
		wt := header.TCP(w.Payload())
		if !bytes.Equal(f[:6], hostMAC) || int(ip.TotalLength()) != len(w) || !ip.IsChecksumValid() || ip.TTL() != w.TTL()-1 ||
			tcp.SequenceNumber() != wt.SequenceNumber() || tcp.Flags() != wt.Flags() || !bytes.Equal(tcp.Payload(), wt.Payload()) ||
			!tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload()))) {
			t.Errorf("segment %d on the wire: to %x, IP length %d (want %d), header checksum valid %v, TTL %d (want %d), seq %d (want %d), flags %v (want %v), payload its own %v, TCP checksum valid %v",
				i, f[:6], ip.TotalLength(), len(w), ip.IsChecksumValid(), ip.TTL(), w.TTL()-1, tcp.SequenceNumber(), wt.SequenceNumber(),
				tcp.Flags(), wt.Flags(), bytes.Equal(tcp.Payload(), wt.Payload()),
				tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload()))))
		}
	}
}
