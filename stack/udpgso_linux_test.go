package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestUDPGSOToKernel sends a batch of the router's own datagrams
// (UDPConn.WriteBatchToUDPAddrPort, as a WireGuard Bind does) out of a
// port with vnet headers into a veth, whose peer is a kernel UDP socket:
//
//   - "whole": the veth hands the superframe on as it is; a socket
//     without UDP_GRO reads each datagram intact and in order (the
//     kernel cuts it on receive), and the interface counts the
//     superframe;
//   - "gro": the same to a socket with UDP_GRO (wireguard-go's
//     StdNetBind), which reads the batch as one with the segment size in
//     its control message;
//   - "segmented": the port's veth has no segmentation or checksum
//     offload, so the kernel cuts and checksums the superframe in
//     software before the wire: a packet socket on the peer sees each
//     datagram with its own IP length and header checksum, UDP length and
//     a correct UDP checksum;
//   - "novnet": a port without vnet headers (the small boards' profiles)
//     does not take UDP superframes, and every datagram leaves as a frame
//     of its own.
func TestUDPGSOToKernel(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool")
	for _, mode := range []string{"whole", "gro", "segmented", "novnet"} {
		t.Run(mode, func(t *testing.T) { testUDPGSOToKernel(t, mode) })
	}
}

func testUDPGSOToKernel(t *testing.T, mode string) {
	n := netnstest.New(t, "ugs", netnstest.WithoutIPv6())
	n.IP(t, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	n.IP(t, "addr", "add", "10.9.0.2/24", "dev", "p0")
	n.IP(t, "link", "set", "p0", "up")
	n.IP(t, "link", "set", "p1", "up")
	if mode == "segmented" {
		n.Run(t, "ethtool", "-K", "p1", "tso", "off", "gso", "off", "tx", "off", "tx-udp-segmentation", "off")
	}
	var (
		p   *hw.Port
		err error
		fd  int // the peer's UDP socket
		pfd int // a packet socket on p0
	)
	n.Do(t, func() {
		vnet := hw.VnetOn
		if mode == "novnet" {
			vnet = hw.VnetOff
		}
		if p, err = hw.Open(hw.Config{Name: "p1", KeepKernel: true, VnetHdr: vnet}, nil); err != nil {
			return
		}
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err != nil {
			return
		}
		if err = unix.Bind(fd, &unix.SockaddrInet4{Port: 4000, Addr: [4]byte{10, 9, 0, 2}}); err != nil {
			return
		}
		if mode == "gro" {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1)
		}
	})
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "open p1: %v", err)
		t.Fatal(err)
	}
	defer p.Close()
	defer unix.Close(fd)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	if p.UDPGSO() != (mode != "novnet") {
		t.Fatalf("port p1 (vnet headers %v, sendmmsg): UDPGSO() = %v", p.VnetHdr(), p.UDPGSO())
	}

	r, err := New(Config{Interfaces: []InterfaceConfig{{
		Name: "wan", MAC: p.HardwareAddr(), Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}, Writer: p,
	}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, r.Interface("wan").HandleBatch) }()
	defer func() { cancel(); <-done }()

	c, err := r.ListenUDPConn(netip.MustParseAddrPort("10.9.0.1:51820"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := netip.MustParseAddrPort("10.9.0.2:4000")
	// The first datagram resolves the peer's MAC.
	if _, err := c.WriteToUDPAddrPort([]byte("warm"), to); err != nil {
		t.Fatal(err)
	}
	rbuf := make([]byte, 1<<16)
	if m, _, err := unix.Recvfrom(fd, rbuf, 0); err != nil || string(rbuf[:m]) != "warm" {
		t.Fatalf("first datagram: %q, %v", rbuf[:max(m, 0)], err)
	}
	if mode == "segmented" {
		n.Do(t, func() { pfd = n.PacketSocket(t, "p0", unix.ETH_P_IP) })
		defer unix.Close(pfd)
	}

	// 20 datagrams of 1,200 bytes and a shorter last one, each its own
	// pattern.
	const size, count, last = 1200, 20, 500
	bufs := make([][]byte, count+1)
	for i := range bufs {
		l := size
		if i == count {
			l = last
		}
		bufs[i] = make([]byte, l)
		for j := range bufs[i] {
			bufs[i][j] = byte(i*7 + j)
		}
	}
	before := r.Interface("wan").Stats().GSO.SentWhole
	if sent, err := c.WriteBatchToUDPAddrPort(bufs, to); sent != len(bufs) || err != nil {
		t.Fatalf("WriteBatchToUDPAddrPort = %d, %v; want %d", sent, err, len(bufs))
	}
	wantSuper := uint64(1)
	if mode == "novnet" {
		wantSuper = 0
	}
	if d := r.Interface("wan").Stats().GSO.SentWhole - before; d != wantSuper {
		t.Errorf("superframes sent whole: +%d, want +%d for the batch of %d datagrams", d, wantSuper, len(bufs))
	}

	switch mode {
	case "whole", "segmented", "novnet":
		for i, want := range bufs {
			m, _, err := unix.Recvfrom(fd, rbuf, 0)
			if err != nil || !bytes.Equal(rbuf[:m], want) {
				t.Fatalf("datagram %d at the peer's socket: %d bytes (%v), want %d bytes of its pattern", i, m, err, len(want))
			}
		}
	case "gro":
		oob := make([]byte, unix.CmsgSpace(4))
		var got []byte
		for len(got) < count*size+last {
			m, oobn, _, _, err := unix.Recvmsg(fd, rbuf, oob, 0)
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(got), err)
			}
			if len(got) == 0 {
				if gso := groSize(t, oob[:oobn]); m != count*size+last || gso != size {
					t.Errorf("the first read: %d bytes, segment size %d; want the whole batch (%d) in one, of %d", m, gso, count*size+last, size)
				}
			}
			got = append(got, rbuf[:m]...)
		}
		if !bytes.Equal(got, bytes.Join(bufs, nil)) {
			t.Error("the GRO reads are not the batch's datagrams in order")
		}
	}
	if mode != "segmented" {
		return
	}
	super := make([]byte, 14+20+8)
	binary.BigEndian.PutUint16(super[12:], uint16(header.IPv4ProtocolNumber))
	binary.BigEndian.PutUint16(super[34:], 51820)
	binary.BigEndian.PutUint16(super[36:], 4000)
	frames := readSegments(t, pfd, super, len(bufs))
	for i, f := range frames {
		ip := header.IPv4(f[header.EthernetMinimumSize:])
		u := header.UDP(ip.Payload())
		if int(ip.TotalLength()) != len(f)-header.EthernetMinimumSize || !ip.IsChecksumValid() ||
			int(u.Length()) != header.UDPMinimumSize+len(bufs[i]) || !bytes.Equal(u.Payload(), bufs[i]) ||
			!u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)) {
			t.Errorf("datagram %d on the wire: IP length %d (frame %d), header checksum valid %v, UDP length %d (want %d), checksum %#x valid %v, payload its own %v",
				i, ip.TotalLength(), len(f), ip.IsChecksumValid(), u.Length(), header.UDPMinimumSize+len(bufs[i]), u.Checksum(),
				u.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(u.Payload(), 0)), bytes.Equal(u.Payload(), bufs[i]))
		}
	}
}

// groSize returns the UDP_GRO segment size in a control message, 0 if
// there is none.
func groSize(t *testing.T, oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_UDP && m.Header.Type == unix.UDP_GRO && len(m.Data) >= 4 {
			return int(binary.NativeEndian.Uint32(m.Data))
		}
	}
	return 0
}
