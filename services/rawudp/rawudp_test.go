package rawudp

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

type fakeLink struct {
	mu     sync.Mutex
	frames [][]byte
}

func (l *fakeLink) WriteFrame(f []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, append([]byte(nil), f...))
	return nil
}

func (l *fakeLink) HardwareAddr() net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, 1} }

// TestBuildChecksums checks Build's headers with gVisor's independent
// header parsers and checksum code.
func TestBuildChecksums(t *testing.T) {
	src := netip.MustParseAddrPort("0.0.0.0:68")
	dst := netip.MustParseAddrPort("255.255.255.255:67")
	payload := []byte("hello dhcp, odd length")
	f := Build(Broadcast, net.HardwareAddr{2, 0, 0, 0, 0, 1}, src, dst, 7, payload)
	ip := header.IPv4(f[14:])
	if !ip.IsValid(len(f) - 14) {
		t.Fatalf("IPv4 header not valid")
	}
	if !ip.IsChecksumValid() {
		t.Errorf("IPv4 header checksum %#x not valid", ip.Checksum())
	}
	u := header.UDP(ip.Payload())
	if got, want := string(u.Payload()), string(payload); got != want {
		t.Errorf("payload = %q, want %q", got, want)
	}
	if !u.IsChecksumValid(tcpip.AddrFrom4([4]byte{}), tcpip.AddrFrom4([4]byte{255, 255, 255, 255}), checksumOf(u.Payload())) {
		t.Errorf("UDP checksum %#x not valid", u.Checksum())
	}
}

func checksumOf(b []byte) uint16 { return fold(sum(b, 0)) }

func TestDeliverRecv(t *testing.T) {
	l := &fakeLink{}
	c := New(l, 68, 2)
	src := netip.MustParseAddrPort("192.0.2.1:67")
	dst := netip.MustParseAddrPort("255.255.255.255:68")
	good := Build(Broadcast, net.HardwareAddr{2, 0, 0, 0, 0, 9}, src, dst, 1, []byte("offer"))
	if !c.Deliver(good) {
		t.Fatalf("Deliver(offer) = false, want true")
	}
	p, err := c.Recv(context.Background())
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	if string(p.Payload) != "offer" || p.Src != src || p.Dst != dst || !bytes.Equal(p.SrcMAC, net.HardwareAddr{2, 0, 0, 0, 0, 9}) {
		t.Errorf("Recv = %+v", p)
	}

	other := Build(Broadcast, l.HardwareAddr(), src, netip.MustParseAddrPort("192.0.2.2:53"), 1, []byte("dns"))
	if c.Deliver(other) {
		t.Errorf("Deliver(port 53) = true, want false")
	}
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1 // UDP checksum now wrong
	badIP := bytes.Clone(good)
	badIP[14+8] ^= 1 // TTL changed, IPv4 checksum now wrong
	short := bytes.Clone(good)
	short[14+3] = 20 // total length shorter than the headers
	frag := Build(Broadcast, l.HardwareAddr(), src, dst, 1, []byte("x"))
	frag[14+6] = 0x20 // MF
	for name, f := range map[string][]byte{"udp csum": bad, "ip csum": badIP, "short": short, "truncated": good[:14+20+8-1]} {
		_ = c.Deliver(f)
		_ = name
	}
	c.Deliver(frag)
	if got := c.Stats().Malformed.Load(); got != 3 {
		t.Errorf("Malformed = %d, want 3 (a truncated frame is not even ours)", got)
	}
	if got := c.Stats().Fragments.Load(); got != 1 {
		t.Errorf("Fragments = %d, want 1", got)
	}
	for range 3 {
		c.Deliver(good)
	}
	if got := c.Stats().QueueFull.Load(); got != 1 {
		t.Errorf("QueueFull = %d, want 1 with a queue of 2", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	c.Recv(ctx)
	c.Recv(ctx)
	if _, err := c.Recv(ctx); err == nil {
		t.Errorf("Recv on an empty queue = nil error")
	}
	c.Close()
	if _, err := c.Recv(context.Background()); err != ErrClosed {
		t.Errorf("Recv after Close = %v, want ErrClosed", err)
	}
}

func TestSend(t *testing.T) {
	l := &fakeLink{}
	c := New(l, 68, 1)
	err := c.Send(Packet{Payload: []byte("discover"), Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67")})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.frames) != 1 || !bytes.Equal(l.frames[0][:6], Broadcast) || !bytes.Equal(l.frames[0][6:12], l.HardwareAddr()) {
		t.Fatalf("frames = %x", l.frames)
	}
	if err := c.Send(Packet{Payload: make([]byte, MTU), Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67")}); err != ErrTooBig {
		t.Errorf("Send(too big) = %v, want ErrTooBig", err)
	}
	if err := c.Send(Packet{Src: netip.MustParseAddrPort("[::]:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67")}); err != ErrAddress {
		t.Errorf("Send(IPv6) = %v, want ErrAddress", err)
	}
}

// FuzzDeliver feeds arbitrary frames: Deliver never panics, and what it
// queues re-encodes to a datagram with the same payload and addresses.
func FuzzDeliver(f *testing.F) {
	f.Add(Build(Broadcast, Broadcast, netip.MustParseAddrPort("192.0.2.1:67"), netip.MustParseAddrPort("255.255.255.255:68"), 1, []byte("x")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c := New(&fakeLink{}, 68, 1)
		if !c.Deliver(frame) {
			return
		}
		select {
		case p := <-c.queue:
			again := Build(p.DstMAC, p.SrcMAC, p.Src, p.Dst, 0, p.Payload)
			q, ok := parse(again)
			if !ok || !bytes.Equal(q.Payload, p.Payload) || q.Src != p.Src || q.Dst != p.Dst {
				t.Fatalf("round trip: %+v vs %+v", q, p)
			}
		default:
		}
	})
}
