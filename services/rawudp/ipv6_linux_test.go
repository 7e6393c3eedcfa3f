package rawudp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/net/ipv6"
)

// TestInteropIPv6Kernel runs an IPv6 Conn on a PacketLink6 against the
// Linux kernel's UDP over a veth: the kernel peer's socket sends to the
// Conn's link-local address and to a multicast group (the kernel builds
// the frames, checksums and MACs), and receives what the Conn sends,
// which the kernel only delivers with a valid checksum; the Hop Limit and
// destination it reports are the kernel's reading of our headers.
//
// The Conn's namespace has IPv6 off, so its kernel neither answers nor
// disturbs; the peer's kernel finds the Conn's MAC in a static neighbour
// entry (the router's netstack would answer neighbour solicitation).
func TestInteropIPv6Kernel(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool")
	peer := netnstest.New(t, "r6u")
	ours := netnstest.New(t, "r6u", netnstest.WithoutIPv6())
	peer.Do(t, func() {
		for _, f := range []string{"all", "default"} {
			// No DAD, so the peer's link-local address is usable at once.
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/accept_dad", []byte("0"), 0); err != nil {
				t.Errorf("accept_dad: %v", err)
			}
		}
	})
	const peerMACs, ourMACs = "02:00:00:00:06:01", "02:00:00:00:06:02"
	peerLL := netip.MustParseAddr("fe80::ff:fe00:601") // EUI-64 of peerMACs (RFC 4291 appendix A)
	ourLL := netip.MustParseAddr("fe80::ff:fe00:602")
	peerMAC, _ := net.ParseMAC(peerMACs)
	ourMAC, _ := net.ParseMAC(ourMACs)
	peer.IP(t, "link", "add", "k0", "address", peerMACs, "type", "veth", "peer", "name", "o0", "address", ourMACs, "netns", ours.Name())
	peer.IP(t, "link", "set", "k0", "up")
	ours.IP(t, "link", "set", "o0", "up")
	// Full checksums on the wire: a veth otherwise leaves them to an
	// offload that never happens, and rawudp rejects them.
	peer.Run(t, "ethtool", "-K", "k0", "tx", "off")
	peer.IP(t, "-6", "neigh", "add", ourLL.String(), "dev", "k0", "lladdr", ourMACs, "nud", "permanent")

	var link *PacketLink
	var err error
	ours.Do(t, func() { link, err = OpenPacketLink6("o0") })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(link.HardwareAddr(), ourMAC) {
		t.Fatalf("HardwareAddr() = %v, want %v", link.HardwareAddr(), ourMAC)
	}
	conn := New6(link, 546, 16)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); link.Run(ctx, conn) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The kernel peer: a UDP socket on port 547 in the group ff02::1:2
	// on k0, reporting each datagram's Hop Limit and destination.
	var uc *net.UDPConn
	var ifi *net.Interface
	peer.Do(t, func() {
		if ifi, err = net.InterfaceByName("k0"); err != nil {
			return
		}
		uc, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified, Port: 547})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	pc := ipv6.NewPacketConn(uc)
	if err := pc.JoinGroup(ifi, &net.UDPAddr{IP: agents.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	if err := pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst, true); err != nil {
		t.Fatal(err)
	}
	wire := peer.RawSocket(t, "k0")
	zone := "k0"

	t.Run("kernel to Conn", func(t *testing.T) {
		for _, dst := range []netip.Addr{ourLL, agents} {
			payload := []byte("from the kernel to " + dst.String() + ", odd")
			to := &net.UDPAddr{IP: dst.AsSlice(), Port: 546, Zone: zone}
			if _, err := pc.WriteTo(payload, &ipv6.ControlMessage{IfIndex: ifi.Index}, to); err != nil {
				t.Fatalf("WriteTo %v: %v", to, err)
			}
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			p, err := conn.Recv(rctx)
			rcancel()
			if err != nil {
				t.Fatalf("Recv of the datagram to %v: %v (stats: malformed %d)", dst, err, conn.Stats().Malformed.Load())
			}
			if string(p.Payload) != string(payload) || p.Src != netip.AddrPortFrom(peerLL, 547) || p.Dst != netip.AddrPortFrom(dst, 546) || !bytes.Equal(p.SrcMAC, peerMAC) {
				t.Errorf("Recv = %q %v -> %v from %v; want %q %v:547 -> %v:546 from %v", p.Payload, p.Src, p.Dst, p.SrcMAC, payload, peerLL, dst, peerMAC)
			}
			if dst.IsMulticast() && !bytes.Equal(p.DstMAC, MulticastMAC(dst)) {
				t.Errorf("kernel sent to %v, Conn read %v as the MAC for %v", p.DstMAC, MulticastMAC(dst), dst)
			}
		}
		if got := conn.Stats().Malformed.Load(); got != 0 {
			t.Errorf("Malformed = %d, want 0: the kernel's datagrams are valid", got)
		}
	})

	t.Run("Conn to kernel", func(t *testing.T) {
		for _, tc := range []struct {
			dst      netip.Addr
			mac      net.HardwareAddr
			hopLimit int
		}{
			{peerLL, peerMAC, 64},
			{agents, nil, 1}, // the MAC from the group (RFC 2464 §7)
		} {
			payload := []byte("from the Conn to " + tc.dst.String() + ", odd")
			if err := conn.Send(Packet{Payload: payload, Src: netip.AddrPortFrom(ourLL, 546), Dst: netip.AddrPortFrom(tc.dst, 547), DstMAC: tc.mac}); err != nil {
				t.Fatal(err)
			}
			uc.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 1500)
			n, cm, from, err := pc.ReadFrom(buf)
			if err != nil {
				t.Fatalf("kernel did not receive the datagram to %v: %v", tc.dst, err)
			}
			src := from.(*net.UDPAddr)
			if string(buf[:n]) != string(payload) || !src.IP.Equal(ourLL.AsSlice()) || src.Port != 546 {
				t.Errorf("kernel received %q from %v, want %q from [%v]:546", buf[:n], src, payload, ourLL)
			}
			if cm == nil || cm.HopLimit != tc.hopLimit || !cm.Dst.Equal(tc.dst.AsSlice()) {
				t.Errorf("kernel's control message %v, want hop limit %d, destination %v", cm, tc.hopLimit, tc.dst)
			}
			f, ok := wire.WaitFor(string(payload), 2*time.Second)
			want := tc.mac
			if want == nil {
				want = net.HardwareAddr{0x33, 0x33, 0, 1, 0, 2}
			}
			if !ok || !bytes.Equal(f.Data[:6], want) || !bytes.Equal(f.Data[6:12], ourMAC) {
				t.Errorf("frame on the wire %x, want from %v to %v", f.Data, ourMAC, want)
			}
		}
	})
}
