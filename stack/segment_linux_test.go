package stack

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// TestSegmenterMatchesKernel sends superframes whole through a port with
// vnet headers into a veth whose TSO and GSO are off, so that the kernel
// cuts them in software (skb_gso_segment: tcp_gso_segment,
// __udp_gso_segment), and checks that what arrives at the peer is, byte
// for byte, what our segmenter makes of the same superframe: headers,
// IPv4 IDs, flags, lengths and checksums. TCP and UDP (USO), IPv4 and
// IPv6.
func TestSegmenterMatchesKernel(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool")
	n := netnstest.New(t, "stk")
	n.IP(t, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
	n.IP(t, "link", "set", "p0", "up")
	n.IP(t, "link", "set", "p1", "up")
	// No segmentation offload of any kind on p1 (USO has a flag of its
	// own), and no TX checksum offload, so that the kernel cuts and
	// checksums every superframe itself before p0 sees it.
	n.Run(t, "ethtool", "-K", "p1", "tso", "off", "gso", "off", "tx", "off", "tx-udp-segmentation", "off")
	var err error
	var p *hw.Port
	n.Do(t, func() { p, err = hw.Open(hw.Config{Name: "p1", KeepKernel: true, VnetHdr: hw.VnetOn}, nil) })
	if err != nil {
		netnstest.SkipIfNotPermitted(t, err, "open p1: %v", err)
		t.Fatal(err)
	}
	defer p.Close()
	fd := n.PacketSocket(t, "p0", unix.ETH_P_ALL)
	defer unix.Close(fd)
	for _, tc := range []struct {
		name    string
		v6, udp bool
		n, size int
	}{
		{"tcpv4", false, false, 30*1448 + 77, 1448},
		{"tcpv6", true, false, 20*1428 + 1, 1428},
		{"udpv4", false, true, 10*1200 + 5, 1200},
		{"udpv6", true, true, 7 * 1000, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, g := rawSuperframe(tc.v6, tc.udp, tc.n, tc.size)
			seg, ok := newSegmenter(f, header.EthernetMinimumSize, int(g.Size), 1500)
			if !ok {
				t.Fatal("newSegmenter refused the superframe")
			}
			want := make([][]byte, seg.count())
			for i := range want {
				b := make([]byte, seg.hdrLen()+seg.mss)
				want[i] = b[:seg.segment(i, b)]
			}
			if sent, err := p.WriteFramesGSO([][]byte{f}, []hw.GSO{g}); sent != 1 || err != nil {
				t.Fatalf("WriteFramesGSO() = %d, %v (stats %+v)", sent, err, p.Stats())
			}
			got := readSegments(t, fd, f, len(want))
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("segment %d of %d differs from the kernel's:\nkernel % x\nours   % x", i, len(want), got[i][:min(80, len(got[i]))], want[i][:min(80, len(want[i]))])
				}
			}
		})
	}
}

// readSegments reads frames on fd until n have arrived with super's
// Ethertype and L4 ports (the kernel's own frames are passed over), or
// two seconds pass.
func readSegments(t *testing.T, fd int, super []byte, n int) [][]byte {
	t.Helper()
	ipLen := 20
	if binary.BigEndian.Uint16(super[12:]) == uint16(header.IPv6ProtocolNumber) {
		ipLen = 40
	}
	ports := super[14+ipLen : 14+ipLen+4]
	var got [][]byte
	buf := make([]byte, 1<<16)
	for end := time.Now().Add(2 * time.Second); len(got) < n && time.Now().Before(end); {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || m < 14+ipLen+4 {
			continue
		}
		f := buf[:m]
		if !bytes.Equal(f[12:14], super[12:14]) || !bytes.Equal(f[14+ipLen:14+ipLen+4], ports) {
			continue
		}
		got = append(got, bytes.Clone(f))
	}
	if len(got) != n {
		t.Fatalf("%d segments arrived, want %d", len(got), n)
	}
	return got
}
