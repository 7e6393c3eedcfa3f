package hw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"golang.org/x/sys/unix"
)

// gsoRecorder is a port's handler in TestVnetSuperframes: it notes what
// the port received and forwards it to the other port as the Bridge does.
type gsoRecorder struct {
	mu     sync.Mutex
	supers []Frame // headers of the superframes seen (Data cut to 128 bytes)
	plain  int
	bq     *bridgeQueue
	dst    *Port
}

func (r *gsoRecorder) handle(_ int, frames []Frame) {
	r.mu.Lock()
	for _, f := range frames {
		if f.GSO.Type == GSONone {
			r.plain++
			continue
		}
		g := f
		g.Data = bytes.Clone(f.Data[:min(len(f.Data), 128)])
		g.WireLen = len(f.Data)
		r.supers = append(r.supers, g)
	}
	r.mu.Unlock()
	r.bq.forward(r.dst, frames)
}

// seen returns the superframes' headers and the count of plain frames
// so far (the port's goroutine is still adding to both: an ACK can
// arrive after the transfer).
func (r *gsoRecorder) seen() ([]Frame, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Frame(nil), r.supers...), r.plain
}

// TestVnetSuperframes runs TCP between two namespaces through two ports
// of a third that forward every frame (the Bridge's forwarding) with
// vnet headers on, the sender's veth with TSO, GSO and TX checksum
// offload on, as a container's host would be. The ports must see the
// sender's superframes with the kernel's metadata (TCP over IPv4 or IPv6,
// a segment size the size of the sender's MSS, the partial checksum at
// the TCP checksum), and the receiver must get every byte intact: sent
// on whole to a veth with TSO (which hands the superframe to the
// receiving host as it is), and to one without, where the kernel cuts it
// in software by our header's segment size and checksum offsets. Nothing
// is dropped as "oversize".
func TestVnetSuperframes(t *testing.T) {
	privileged(t)
	for _, tc := range []struct {
		name      string
		v6        bool
		egressTSO bool
	}{
		{"ipv4/egress-tso", false, true},
		{"ipv4/egress-no-tso", false, false},
		{"ipv6/egress-tso", true, true},
		{"ipv6/egress-no-tso", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, r, b := newNetns(t), newNetns(t), newNetns(t)
			r.IP(t, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
			r.IP(t, "link", "add", "q0", "type", "veth", "peer", "name", "q1")
			r.IP(t, "link", "set", "p0", "netns", a.Name())
			r.IP(t, "link", "set", "q0", "netns", b.Name())
			addrA, addrB, plen := "10.9.0.1", "10.9.0.2", "24"
			if tc.v6 {
				addrA, addrB, plen = "fd09::1", "fd09::2", "64"
			}
			a.IP(t, "addr", "add", addrA+"/"+plen, "dev", "p0", "nodad")
			b.IP(t, "addr", "add", addrB+"/"+plen, "dev", "q0", "nodad")
			for _, x := range []struct {
				ns  *netnstest.Netns
				dev string
			}{{a, "p0"}, {r, "p1"}, {r, "q1"}, {b, "q0"}} {
				x.ns.IP(t, "link", "set", x.dev, "up")
			}
			setOffloadsIn(t, a, "p0", Offloads{TSO: true, GSO: true, TxCsum: true, RxCsum: true})
			// The router's egress veth: with TSO it hands superframes on
			// whole; without TSO and GSO the kernel segments them.
			setOffloadsIn(t, r, "q1", Offloads{TSO: tc.egressTSO, GSO: tc.egressTSO, TxCsum: true, RxCsum: true})
			pa := openIn(t, r, Config{Name: "p1", VnetHdr: VnetOn})
			pb := openIn(t, r, Config{Name: "q1", VnetHdr: VnetOn})
			if !pa.VnetHdr() || pa.GSOMaxSize() != MaxGSOFrameLen {
				t.Fatalf("VnetHdr(), GSOMaxSize() = %v, %d; want true, %d", pa.VnetHdr(), pa.GSOMaxSize(), MaxGSOFrameLen)
			}
			for _, p := range []*Port{pa, pb} {
				if err := p.SetPromiscuous(true); err != nil {
					t.Fatal(err)
				}
			}
			fwd := &gsoRecorder{bq: newBridgeQueue(), dst: pb}
			back := &gsoRecorder{bq: newBridgeQueue(), dst: pa}
			runHandler(t, pa, fwd.handle)
			runHandler(t, pb, back.handle)

			sum, mss, n := tcpTransfer(t, a, b, addrA, addrB, 16<<20)
			if sum.sent != sum.got {
				t.Fatalf("receiver got %d bytes with SHA-256 %x, sender sent %d with %x", n.got, sum.got, n.sent, sum.sent)
			}
			supers, plain := fwd.seen()
			if len(supers) == 0 {
				t.Fatalf("no superframe reached the port (%d plain frames)", plain)
			}
			wantType, l3 := GSOTCPv4, 20
			if tc.v6 {
				wantType, l3 = GSOTCPv6, 40
			}
			for i, f := range supers {
				g := f.GSO
				if g.Type != wantType || !g.NeedsCsum || !f.CsumPartial || g.CsumStart != uint16(EthernetHeaderLen+l3) || g.CsumOffset != 16 ||
					g.Size == 0 || int(g.Size) > mss || f.WireLen <= EthernetHeaderLen+l3+20+int(g.Size) {
					t.Errorf("superframe %d of %d bytes: GSO %+v, CsumPartial %v; want %v, NEEDS_CSUM at %d+16, size at most the MSS %d, more than one segment",
						i, f.WireLen, g, f.CsumPartial, wantType, EthernetHeaderLen+l3, mss)
					break
				}
			}
			for _, p := range []*Port{pa, pb} {
				s := p.Stats()
				for _, d := range []string{DropOversize, DropVnetHdr, DropGSOUnsupported, DropTruncated, DropTxError} {
					if s.Drops[d] != 0 {
						t.Errorf("%s: %s drops = %d, want 0 (stats %+v)", p.Name(), d, s.Drops[d], s)
					}
				}
			}
			t.Logf("%d superframes (largest %d bytes; the first %+v), %d plain frames", len(supers), largest(supers), supers[0].GSO, plain)
		})
	}
}

func largest(fs []Frame) int {
	n := 0
	for _, f := range fs {
		n = max(n, f.WireLen)
	}
	return n
}

// setOffloadsIn sets ifname's offloads in namespace n.
func setOffloadsIn(t *testing.T, n *netnstest.Netns, ifname string, o Offloads) {
	t.Helper()
	var err error
	n.Do(t, func() { err = SetOffloads(ifname, o) })
	if err != nil {
		t.Fatalf("offloads of %s: %v", ifname, err)
	}
}

// runHandler runs p.Run with h until the test ends.
func runHandler(t *testing.T, p *Port, h BatchHandler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := p.Run(ctx, h); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Run() = %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

type transferSums struct{ sent, got [sha256.Size]byte }
type transferLens struct{ sent, got int64 }

// tcpTransfer sends size pseudo-random bytes over TCP from namespace a
// (address from) to namespace b (address to) and returns the SHA-256 of
// what was sent and received, the sender's MSS and the byte counts.
func tcpTransfer(t *testing.T, a, b *netnstest.Netns, from, to string, size int64) (transferSums, int, transferLens) {
	t.Helper()
	var ln net.Listener
	var err error
	b.Do(t, func() { ln, err = net.Listen("tcp", net.JoinHostPort(to, "0")) })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var sums transferSums
	var lens transferLens
	recvDone := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recvDone <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		h := sha256.New()
		lens.got, err = io.Copy(h, c)
		copy(sums.got[:], h.Sum(nil))
		recvDone <- err
	}()
	var c net.Conn
	a.Do(t, func() {
		d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err = d.Dial("tcp", ln.Addr().String())
	})
	if err != nil {
		t.Fatalf("dial %s: %v", ln.Addr(), err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	h := sha256.New()
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	buf := make([]byte, 256<<10)
	for lens.sent < size {
		rng.Read(buf)
		h.Write(buf)
		if _, err := c.Write(buf); err != nil {
			c.Close()
			t.Fatalf("send after %d bytes: %v", lens.sent, err)
		}
		lens.sent += int64(len(buf))
	}
	mss := 0
	if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { mss, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })
	}
	copy(sums.sent[:], h.Sum(nil))
	c.Close()
	select {
	case err := <-recvDone:
		if err != nil {
			t.Fatalf("receive: %v after %d bytes", err, lens.got)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("receiver did not finish")
	}
	if mss == 0 {
		t.Fatal("no TCP_MAXSEG from the sender")
	}
	return sums, mss, lens
}

// tcpSuperframe builds an untagged IPv4 TCP superframe of payload bytes
// from a to b with the partial checksum the kernel leaves (the
// pseudo-header sum), and its GSO metadata.
func tcpSuperframe(dst, src []byte, payload int) ([]byte, GSO) {
	f := make([]byte, EthernetHeaderLen+20+20+payload)
	copy(f, dst)
	copy(f[6:], src)
	f[12], f[13] = 0x08, 0x00
	ip := f[EthernetHeaderLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	putBE16(ip[2:], uint16(len(ip)))
	copy(ip[12:], []byte{10, 9, 0, 1, 10, 9, 0, 2})
	var s uint32
	for i := 0; i < 20; i += 2 {
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	putBE16(ip[10:], ^uint16(s))
	tcp := ip[20:]
	putBE16(tcp[0:], 40000)
	putBE16(tcp[2:], 5201)
	tcp[12], tcp[13] = 5<<4, 0x18 // ACK, PSH
	// Pseudo-header sum: addresses, protocol, TCP length.
	s = 0x0a09 + 0x0001 + 0x0a09 + 0x0002 + 6 + uint32(len(tcp))
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	putBE16(tcp[16:], uint16(s))
	return f, GSO{Type: GSOTCPv4, Size: 1448, HdrLen: 54, NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
}

func putBE16(b []byte, v uint16) { b[0], b[1] = byte(v>>8), byte(v) }

// TestWriteFramesGSOAllocs: sending superframes and plain frames with
// their vnet headers allocates nothing, and the kernel takes all of them
// (a superframe longer than the MTU would be EMSGSIZE without its
// header).
func TestWriteFramesGSOAllocs(t *testing.T) {
	privileged(t)
	n := newNetns(t)
	vethPair(t, n, "p0", "p1")
	p := openIn(t, n, Config{Name: "p1", KeepKernel: true, VnetHdr: VnetOn})
	super, g := tcpSuperframe(netnstest.Broadcast, p.HardwareAddr(), 30000)
	plain := netnstest.Frame(netnstest.Broadcast, p.HardwareAddr(), "allocs")
	frames := make([][]byte, 2*TxBatchSize+3) // three sendmmsg calls
	meta := make([]GSO, len(frames))
	for i := range frames {
		frames[i] = plain
		if i%2 == 0 {
			frames[i], meta[i] = super, g
		}
	}
	if a := testing.AllocsPerRun(20, func() { p.WriteFramesGSO(frames, meta) }); a != 0 {
		t.Errorf("WriteFramesGSO allocs = %v, want 0", a)
	}
	s := p.Stats()
	if s.TxPackets+s.Drops[DropTxNoBufs] != 21*uint64(len(frames)) || s.Drops[DropTxError] != 0 {
		t.Errorf("TxPackets + tx_nobufs = %d + %d, tx_error %d; want %d and 0", s.TxPackets, s.Drops[DropTxNoBufs], s.Drops[DropTxError], 21*len(frames))
	}
	// Without vnet headers the same batch has its superframes refused
	// (counted), the plain frames sent.
	q := openIn(t, n, Config{Name: "p0", KeepKernel: true, VnetHdr: VnetOff})
	if got := q.GSOMaxSize(); got != 0 {
		t.Errorf("GSOMaxSize() without vnet headers = %d, want 0", got)
	}
	sent, err := q.WriteFramesGSO(frames, meta)
	if s := q.Stats(); err != nil || sent+int(s.Drops[DropTxNoBufs]) != len(frames)/2 || s.Drops[DropTxError] != uint64(len(frames)/2+1) {
		t.Errorf("WriteFramesGSO without vnet headers = %d, %v, stats %+v; want %d sent or nobufs, %d tx_error", sent, err, s, len(frames)/2, len(frames)/2+1)
	}
}
