package stack

import (
	"bytes"
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/stack/stacktest"
)

// wire is one direction of a link between two routers' ports: frames
// written to it are copied and delivered, in order, from its own
// goroutine, to rx (the other router's trunk). It records the EtherType
// after any VLAN tags of every frame.
type wire struct {
	ch   chan []byte
	rx   atomic.Pointer[hw.BatchHandler]
	wg   sync.WaitGroup
	mu   sync.Mutex
	seen map[uint16]int
	tags map[uint16]int // outer VID → frames
}

func newWire(t *testing.T) *wire {
	w := &wire{ch: make(chan []byte, 4096), seen: map[uint16]int{}, tags: map[uint16]int{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for f := range w.ch {
			if rx := w.rx.Load(); rx != nil {
				(*rx)(0, []hw.Frame{{Data: f, WireLen: len(f)}})
			}
		}
	}()
	t.Cleanup(func() {
		close(w.ch)
		w.wg.Wait()
	})
	return w
}

func (w *wire) WriteFrames(frames [][]byte) (int, error) {
	w.mu.Lock()
	for _, f := range frames {
		et := binary.BigEndian.Uint16(f[12:])
		if et == etherTypeVLAN {
			w.tags[binary.BigEndian.Uint16(f[14:])&0xfff]++
			et = binary.BigEndian.Uint16(f[16:])
		}
		w.seen[et]++
	}
	w.mu.Unlock()
	for _, f := range frames {
		w.ch <- bytes.Clone(f)
	}
	return len(frames), nil
}

func (w *wire) count(et uint16) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[et]
}

// macsecPeer is one router of TestMACsecLink: host — router — link.
type macsecPeer struct {
	r    *Netstack
	secy *macsec.SecY
	link *MACsecLink
}

func newMACsecPeer(t *testing.T, mac, peerMAC []byte, host *stacktest.Host, out *wire, hostNet, msNet string, route RouteConfig, encrypt bool) *macsecPeer {
	t.Helper()
	p := &macsecPeer{link: NewMACsecLink()}
	var m, pm [6]byte
	copy(m[:], mac)
	copy(pm[:], peerMAC)
	cfg := macsec.DefaultConfig(macsec.MakeSCI(m, 1))
	cfg.Encrypt = encrypt
	cfg.ReplayProtect = true
	cfg.TX, cfg.RX = p.link.Transmit, p.link.Receive
	var err error
	if p.secy, err = macsec.New(cfg, nil); err != nil {
		t.Fatal(err)
	}
	key := macsec.NewKey(bytes.Repeat([]byte{0x42}, 16))
	if err := p.secy.InstallTXSA(macsec.SAConfig{AN: 0, PN: 1, Key: key}); err != nil {
		t.Fatal(err)
	}
	peer := macsec.MakeSCI(pm, 1)
	if err := p.secy.AddRXSC(peer); err != nil {
		t.Fatal(err)
	}
	if err := p.secy.InstallRXSA(peer, macsec.SAConfig{AN: 0, PN: 1, Key: key}); err != nil {
		t.Fatal(err)
	}
	p.link.SetSecY(p.secy)
	sc := Config{
		Interfaces: []InterfaceConfig{
			{Name: "lan", MAC: mustMAC("02:00:00:00:01:01"), Addresses: []netip.Prefix{netip.MustParsePrefix(hostNet)}, Writer: host},
			{Name: "link", MAC: mac, VLAN: []uint16{2}, Writer: out},
			{Name: "ms1", MAC: mac, MTU: 1500 - MACsecOverhead, Addresses: []netip.Prefix{netip.MustParsePrefix(msNet)}, Writer: p.link},
		},
		Routes: []RouteConfig{route},
	}
	if p.r, err = New(sc, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.r.BindMACsec(p.link, "link", "ms1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.r.Close()
		p.secy.Close()
	})
	return p
}

// TestMACsecLink joins two routers by a MACsec link on VLAN 2 and pings
// across it: every frame on the link is MACsec inside an 802.1Q tag, and
// both SecYs count what they protected and verified.
func TestMACsecLink(t *testing.T) {
	for _, encrypt := range []bool{false, true} {
		name := "integrity"
		if encrypt {
			name = "encrypt"
		}
		t.Run(name, func(t *testing.T) {
			goroutineLeakCheck(t)
			a, err := stacktest.NewHost(stacktest.HostConfig{MAC: aMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.2/24")}, Gateways: []netip.Addr{lanIP4}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := stacktest.NewHost(stacktest.HostConfig{MAC: bMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.2/24")}, Gateways: []netip.Addr{wanIP4}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close(); b.Close() })
			ab, ba := newWire(t), newWire(t)
			r1 := newMACsecPeer(t, lanMAC, wanMAC, a, ab, "10.1.0.1/24", "10.9.0.1/30",
				RouteConfig{To: netip.MustParsePrefix("10.2.0.0/24"), Via: netip.MustParseAddr("10.9.0.2")}, encrypt)
			r2 := newMACsecPeer(t, wanMAC, lanMAC, b, ba, "10.2.0.1/24", "10.9.0.2/30",
				RouteConfig{To: netip.MustParsePrefix("10.1.0.0/24"), Via: netip.MustParseAddr("10.9.0.1")}, encrypt)
			t1, t2 := r1.r.NewTrunk(), r2.r.NewTrunk()
			if err := t1.Set(r1.r.Interface("link")); err != nil {
				t.Fatal(err)
			}
			if err := t2.Set(r2.r.Interface("link")); err != nil {
				t.Fatal(err)
			}
			h1, h2 := hw.BatchHandler(t1.HandleBatch), hw.BatchHandler(t2.HandleBatch)
			ab.rx.Store(&h2)
			ba.rx.Store(&h1)
			a.Start(r1.r.Interface("lan").HandleBatch)
			b.Start(r2.r.Interface("lan").HandleBatch)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, dst := range []netip.Addr{bIP4, netip.MustParseAddr("10.9.0.2")} {
				payload := []byte("across macsec " + dst.String())
				got, err := a.Ping(ctx, dst, payload)
				if err != nil {
					t.Fatalf("ping %s: %v", dst, err)
				}
				if !bytes.Equal(got, payload) {
					t.Fatalf("ping %s: reply %q, want %q", dst, got, payload)
				}
			}
			if n := ab.count(0x0800) + ba.count(0x0800) + ab.count(0x0806) + ba.count(0x0806); n != 0 {
				t.Errorf("%d IPv4/ARP frames crossed the link in clear", n)
			}
			if ab.count(etherTypeMACsec) == 0 || ba.count(etherTypeMACsec) == 0 {
				t.Errorf("MACsec frames on the link: %d and %d, want some each way", ab.count(etherTypeMACsec), ba.count(etherTypeMACsec))
			}
			if ab.tags[2] == 0 {
				t.Errorf("frames on the link carry no VLAN 2 tag: %v", ab.tags)
			}
			for i, p := range []*macsecPeer{r1, r2} {
				s := p.secy.Snapshot()
				prot := s.TXSC["OutPktsProtected"] + s.TXSC["OutPktsEncrypted"]
				var ok uint64
				for _, sc := range s.RXSC {
					ok += sc.Counters["InPktsOK"]
				}
				if prot == 0 || ok == 0 {
					t.Errorf("router %d: protected %d, received OK %d; want both > 0 (%+v)", i+1, prot, ok, s)
				}
				st := p.r.Interface("ms1").Stats()
				if st.RxPackets == 0 || st.TxPackets == 0 {
					t.Errorf("router %d: ms1 rx %d tx %d, want both > 0", i+1, st.RxPackets, st.TxPackets)
				}
			}
		})
	}
}

// TestMACsecUncontrolledPort checks that frames without a SecTAG still
// reach the interface below the SecY, and the SecY sees them too (to
// count them, as Linux does).
func TestMACsecUncontrolledPort(t *testing.T) {
	l := NewMACsecLink()
	var got [][]byte
	l.SetSecY(fakeSecY{verify: func(f [][]byte) { got = append(got, f...) }})
	plain := ethFrame(routerMAC, hostMAC, 0x0800, make([]byte, 40))
	sec := ethFrame(routerMAC, hostMAC, etherTypeMACsec, make([]byte, 40))
	e := testEndpoint(nil)
	frames := []hw.Frame{{Data: plain, WireLen: len(plain)}, {Data: sec, WireLen: len(sec)}, {Data: plain, WireLen: len(plain)}}
	rest := l.divert(e, frames)
	if len(rest) != 2 || len(got) != 3 || &got[1][0] != &sec[0] || &rest[0].Data[0] != &plain[0] || &rest[1].Data[0] != &plain[0] {
		t.Fatalf("divert: %d frames stay, %d to the SecY; want 2 (the plain ones) and 3 (all, in order)", len(rest), len(got))
	}
	if n := e.stats.rxPackets.Load(); n != 1 {
		t.Errorf("lower rx_packets after divert = %d, want 1 (the MACsec frame)", n)
	}
}

type fakeSecY struct{ verify func([][]byte) }

func (fakeSecY) Protect([][]byte)         {}
func (fakeSecY) ProtectInPlace([][]byte)  {}
func (f fakeSecY) Verify(frames [][]byte) { f.verify(frames) }

// TestMACsecDivertAllocs checks that the receive split allocates nothing.
func TestMACsecDivertAllocs(t *testing.T) {
	l := NewMACsecLink()
	l.SetSecY(fakeSecY{verify: func([][]byte) {}})
	e := testEndpoint(nil)
	plain := ethFrame(routerMAC, hostMAC, 0x0800, make([]byte, 40))
	sec := ethFrame(routerMAC, hostMAC, etherTypeMACsec, make([]byte, 40))
	frames := make([]hw.Frame, 64)
	l.divert(e, frames) // warm the pool
	if n := testing.AllocsPerRun(1000, func() {
		for i := range frames {
			d := plain
			if i%2 == 0 {
				d = sec
			}
			frames[i] = hw.Frame{Data: d, WireLen: len(d)}
		}
		l.divert(e, frames)
	}); n != 0 {
		t.Errorf("divert allocates %v times per batch, want 0", n)
	}
}

// TestMACsecLinkAllocs checks that the link's transmit (VLAN tag pushed)
// and receive hand-offs allocate nothing per batch.
func TestMACsecLinkAllocs(t *testing.T) {
	l := NewMACsecLink()
	lower := testEndpoint(nil)
	lower.setWriter(discard{})
	lower.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: []uint16{2}}))
	upper := testEndpoint(nil)
	upper.Attach(nil) // frames are counted drops: only the link's work is measured
	l.lower.Store(lower)
	l.upper.Store(upper)
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = ethFrame(routerMAC, hostMAC, etherTypeMACsec, make([]byte, 1400))
	}
	l.Transmit(frames)
	l.Receive(frames)
	if n := testing.AllocsPerRun(1000, func() { l.Transmit(frames) }); n != 0 {
		t.Errorf("Transmit allocates %v times per batch, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { l.Receive(frames) }); n != 0 {
		t.Errorf("Receive allocates %v times per batch, want 0", n)
	}
	if got := lower.stats.txPackets.Load(); got != 1002*64 { // one call, then AllocsPerRun's warm-up and 1000 runs
		t.Errorf("lower tx_packets = %d, want %d", got, 1002*64)
	}
}

// TestMACsecRoom checks that the room the endpoint leaves around frames
// for a MACsecLink is what macsec.SecY.ProtectInPlace needs.
func TestMACsecRoom(t *testing.T) {
	head, tail := NewMACsecLink().FrameRoom()
	if head != macsec.Headroom || tail != macsec.Tailroom {
		t.Fatalf("FrameRoom %d, %d; macsec needs %d, %d", head, tail, macsec.Headroom, macsec.Tailroom)
	}
}

// roomWriter is an inPlaceWriter that keeps copies of what it is given.
type roomWriter struct {
	plain   int      // frames given to WriteFrames
	inPlace [][]byte // buffers given to WriteFramesInPlace, cloned
	tails   []int    // capacity after each of them
}

func (w *roomWriter) WriteFrames(f [][]byte) (int, error) { w.plain += len(f); return len(f), nil }
func (w *roomWriter) FrameRoom() (head, tail int)         { return macsecHeadroom, macsecTailroom }
func (w *roomWriter) WriteFramesInPlace(bufs [][]byte) (int, error) {
	for _, b := range bufs {
		w.inPlace = append(w.inPlace, bytes.Clone(b))
		w.tails = append(w.tails, cap(b)-len(b))
	}
	return len(bufs), nil
}

// TestEndpointInPlaceWriter checks that an endpoint whose writer wants
// room around frames (ms1's MACsecLink) builds each frame after head
// octets of its buffer with tail octets to spare, hands the buffers over
// that way and counts the frames' own length.
func TestEndpointInPlaceWriter(t *testing.T) {
	w := new(roomWriter)
	local := new(atomic.Pointer[localSet])
	local.Store(newLocalSet(nil, nil))
	e := newEndpoint(routerMAC, 1500, w, local)
	var frames [][]byte
	for _, n := range []int{60, 1514} {
		f := ethFrame(hostMAC, routerMAC, 0x88b5, bytes.Repeat([]byte{byte(n)}, n-14))
		frames = append(frames, f)
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
		pkt.NetworkPacketInfo.IsForwardedPacket = true
		var pkts stack.PacketBufferList
		pkts.PushBack(pkt)
		if _, err := e.WritePackets(pkts); err != nil {
			t.Fatal(err)
		}
		pkt.DecRef()
	}
	if w.plain != 0 || len(w.inPlace) != len(frames) {
		t.Fatalf("WriteFrames got %d frames, WriteFramesInPlace %d; want 0 and %d", w.plain, len(w.inPlace), len(frames))
	}
	var octets uint64
	for i, f := range frames {
		if b := w.inPlace[i]; len(b) != macsecHeadroom+len(f) || !bytes.Equal(b[macsecHeadroom:], f) || w.tails[i] < macsecTailroom {
			t.Errorf("frame %d: buffer of %d octets with %d to spare; want the %d-octet frame after %d octets of room, %d to spare", i, len(b), w.tails[i], len(f), macsecHeadroom, macsecTailroom)
		}
		octets += uint64(len(f))
	}
	if s := e.stats.txPackets.Load(); s != uint64(len(frames)) || e.stats.txBytes.Load() != octets {
		t.Errorf("counted %d frames, %d octets; want %d, %d", s, e.stats.txBytes.Load(), len(frames), octets)
	}
}

// TestTxBatchCutViews checks that a batch goes to an in-place writer only
// when every frame has its room: a frame from ring memory (no buffer),
// one built at the start of its buffer or one without tailroom sends the
// batch through WriteFrames instead.
func TestTxBatchCutViews(t *testing.T) {
	const head = macsecHeadroom
	roomy := func() (*[]byte, []byte) {
		buf := make([]byte, 100)
		return &buf, buf[head : head+60]
	}
	for _, tc := range []struct {
		name string
		odd  func() (*[]byte, []byte) // the second frame
		want bool
	}{
		{"all with room", roomy, true},
		{"ring frame", func() (*[]byte, []byte) { return nil, make([]byte, 60) }, false},
		{"built without room", func() (*[]byte, []byte) { buf := make([]byte, 100); return &buf, buf[:60] }, false},
		{"no tailroom", func() (*[]byte, []byte) { buf := make([]byte, head+60); return &buf, buf[head:] }, false},
	} {
		var b txBatch
		for _, mk := range []func() (*[]byte, []byte){roomy, tc.odd, roomy} {
			buf, f := mk()
			b.bufs, b.frames = append(b.bufs, buf), append(b.frames, f)
		}
		if got := b.cutViews(&frameWriter{}, head, macsecTailroom); got != tc.want {
			t.Errorf("%s: cutViews = %v, want %v", tc.name, got, tc.want)
		} else if got {
			for i, v := range b.views {
				if len(v) != head+len(b.frames[i]) || &v[head] != &b.frames[i][0] {
					t.Errorf("%s: view %d is not its frame with %d octets of room", tc.name, i, head)
				}
			}
		} else if len(b.views) != 0 {
			t.Errorf("%s: %d views left after refusing", tc.name, len(b.views))
		}
	}
}
