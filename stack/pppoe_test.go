package stack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/pppoe"
	"github.com/gvrouter/gvrouter/stack/stacktest"
)

// The PPPoE lab: host A — router (lan, wan as a PPPoE client) — an AC
// (acShim) — host B. The AC's framing is written here from RFC 2516
// section 4, byte by byte, apart from the code under test.

var acMAC = mustMAC("02:00:00:00:00:ac")

const (
	testSessionID = 0x1234
	pppoeTestMTU  = 1492
)

// acShim is the access concentrator between the router's wan and host B.
// Frames the router sends are checked and kept (wire), unwrapped and
// handed to B as Ethernet; B's IP frames are wrapped in the session and
// handed to the router's wan. Non-IP frames of B (ARP, NDP multicast)
// go nowhere: the link is point to point.
type acShim struct {
	t      testing.TB
	b      *stacktest.Host
	router hw.BatchHandler
	// plain makes it a plain Ethernet link to B instead (the same MACs
	// rewritten, no session): the benchmark's baseline.
	plain bool

	mu   sync.Mutex
	wire [][]byte // every frame the router sent, as sent
	odd  int      // of them, frames that were not PPPoE session frames
}

// WriteFrames implements hw.FrameWriter: the router's wan transmit.
func (s *acShim) WriteFrames(frames [][]byte) (int, error) {
	var out [][]byte
	s.mu.Lock()
	for _, f := range frames {
		if s.plain {
			e := bytes.Clone(f)
			copy(e, s.b.MAC)
			copy(e[6:], acMAC)
			out = append(out, e)
			continue
		}
		s.wire = append(s.wire, bytes.Clone(f))
		if len(f) < 22 || binary.BigEndian.Uint16(f[12:]) != 0x8864 || f[14] != 0x11 || f[15] != 0 ||
			binary.BigEndian.Uint16(f[16:]) != testSessionID || !bytes.Equal(f[:6], acMAC) {
			s.odd++
			continue
		}
		n := int(binary.BigEndian.Uint16(f[18:]))
		if 20+n > len(f) {
			s.odd++
			continue
		}
		var et uint16
		switch binary.BigEndian.Uint16(f[20:]) {
		case 0x0021:
			et = 0x0800
		case 0x0057:
			et = 0x86dd
		default:
			s.odd++
			continue
		}
		e := make([]byte, 14+n-2)
		copy(e, s.b.MAC)
		copy(e[6:], acMAC)
		binary.BigEndian.PutUint16(e[12:], et)
		copy(e[14:], f[22:20+n])
		out = append(out, e)
	}
	s.mu.Unlock()
	if len(out) > 0 {
		s.b.WriteFrames(out)
	}
	return len(frames), nil
}

// fromB wraps host B's frames for the router.
func (s *acShim) fromB(queue int, frames []hw.Frame) {
	for _, f := range frames {
		d := f.Data
		if len(d) < 14 {
			continue
		}
		var proto uint16
		switch binary.BigEndian.Uint16(d[12:]) {
		case 0x0800:
			proto = 0x0021
		case 0x86dd:
			proto = 0x0057
		default:
			continue
		}
		if s.plain {
			e := bytes.Clone(d)
			copy(e, wanMAC)
			copy(e[6:], acMAC)
			s.router(queue, []hw.Frame{{Data: e, WireLen: len(e)}})
			continue
		}
		s.router(queue, []hw.Frame{sessionFrame(wanMAC, proto, d[14:])}) // the session's peer: the router
	}
}

// sessionFrame is an IP packet in the test session from the AC to dst.
func sessionFrame(dst []byte, proto uint16, ip []byte) hw.Frame {
	f := make([]byte, 22+len(ip))
	copy(f, dst[:6])
	copy(f[6:], acMAC)
	binary.BigEndian.PutUint16(f[12:], 0x8864)
	f[14], f[15] = 0x11, 0
	binary.BigEndian.PutUint16(f[16:], testSessionID)
	binary.BigEndian.PutUint16(f[18:], uint16(len(ip)+2))
	binary.BigEndian.PutUint16(f[20:], proto)
	copy(f[22:], ip)
	return hw.Frame{Data: f, WireLen: len(f)}
}

func (s *acShim) frames() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wire[:len(s.wire):len(s.wire)]
}

func (s *acShim) counts() (frames, plain int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.wire), s.odd
}

// newPPPoELab is newNATLab with the wan a PPPoE link of MTU 1492 whose
// session is down, forwards on the wan as given and hosts A and B with
// hostMTU (0: 1500).
func newPPPoELab(t testing.TB, forwards []natengine.Forward, hostMTU uint32) (*lab, *acShim, *natengine.Engine) {
	t.Helper()
	l, ac, nat, _ := newPPPoELabWith(t, forwards, hostMTU, false, nil)
	return l, ac, nat
}

// newPPPoELabWith is newPPPoELab; plain makes the wan a plain Ethernet
// link to B (the AC's MAC its neighbour) and wrap, if set, wraps the
// handlers of both router interfaces. It also returns the config.
func newPPPoELabWith(t testing.TB, forwards []natengine.Forward, hostMTU uint32, plain bool, wrap func(name string, h hw.BatchHandler) hw.BatchHandler) (*lab, *acShim, *natengine.Engine, Config) {
	t.Helper()
	goroutineLeakCheck(t)
	nat := natengine.New(natengine.Config{})
	a, err := stacktest.NewHost(stacktest.HostConfig{MAC: aMAC, MTU: hostMTU,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.2/24")}, Gateways: []netip.Addr{lanIP4}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := stacktest.NewHost(stacktest.HostConfig{MAC: bMAC, MTU: hostMTU,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.2/24")}, Gateways: []netip.Addr{wanIP4}})
	if err != nil {
		t.Fatal(err)
	}
	// B is the AC's side: the router is its next hop at the AC's MAC.
	if err := b.Stack.AddStaticNeighbor(b.NIC, ipv4.ProtocolNumber, tcpip.AddrFromSlice(wanIP4.AsSlice()), tcpip.LinkAddress(acMAC)); err != nil {
		t.Fatal(err)
	}
	ac := &acShim{t: t, b: b, plain: plain}
	l := &lab{a: a, b: b, tapA: &stacktest.Tap{Next: a}}
	cfg := Config{NAT: nat, Interfaces: []InterfaceConfig{
		{Name: "lan", MAC: lanMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/24")}, Writer: l.tapA},
		{Name: "wan", MAC: wanMAC, MTU: pppoeTestMTU, PPPoE: !plain, Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.1/24")}, Writer: ac},
	}}
	if l.r, err = New(cfg, nil); err != nil {
		t.Fatalf("New: %v", err)
	}
	if plain {
		wan := l.r.Interface("wan")
		if err := l.r.Stack().AddStaticNeighbor(wan.id, ipv4.ProtocolNumber, tcpip.AddrFromSlice(bIP4.AsSlice()), tcpip.LinkAddress(acMAC)); err != nil {
			t.Fatal(err)
		}
	}
	lanID, _ := l.r.NATIface("lan")
	wanID, _ := l.r.NATIface("wan")
	for i := range forwards {
		forwards[i].In = wanID
	}
	if err := nat.SetRules(natengine.Rules{Ifaces: []natengine.IfaceConfig{
		{ID: lanID, Name: "lan", Addrs: []netip.Addr{lanIP4}, MTU: 1500},
		{ID: wanID, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{wanIP4}, MTU: pppoeTestMTU},
	}, Forwards: forwards}); err != nil {
		t.Fatal(err)
	}
	lanRx, wanRx := hw.BatchHandler(l.r.Interface("lan").HandleBatch), hw.BatchHandler(l.r.Interface("wan").HandleBatch)
	if wrap != nil {
		lanRx, wanRx = wrap("lan", lanRx), wrap("wan", wanRx)
	}
	ac.router = wanRx
	a.Start(lanRx)
	b.Start(ac.fromB)
	t.Cleanup(func() {
		a.Close()
		b.Close()
		l.r.Close()
	})
	return l, ac, nat, cfg
}

func upSession(l *lab) {
	l.r.Interface("wan").SetPPPoESession(&pppoe.Link{Peer: [6]byte(acMAC), SessionID: testSessionID})
}

// TestPPPoEDataPath: with the session down nothing passes and the drops
// say why; with it up a LAN host reaches B through NAT over the session
// (ping and 4 MiB of TCP echo, most of it on the fast path), every frame
// on the wire is a session frame to the AC, and the counters add up.
func TestPPPoEDataPath(t *testing.T) {
	l, ac, nat := newPPPoELab(t, nil, 0)
	wan := l.r.Interface("wan")
	if !wan.PPPoE() {
		t.Fatal("wan.PPPoE() = false, want true")
	}
	ctx := ctxTimeout(t, time.Second)
	if _, err := l.a.Ping(ctx, bIP4, []byte("down")); err == nil {
		t.Fatal("ping through a PPPoE wan with its session down succeeded")
	}
	// A plain IPv4 frame from the AC's side is not the session's.
	plain := make([]byte, 14+20)
	copy(plain, wanMAC)
	copy(plain[6:], acMAC)
	binary.BigEndian.PutUint16(plain[12:], 0x0800)
	plain[14] = 0x45
	wan.HandleBatch(0, []hw.Frame{{Data: plain, WireLen: len(plain)}})
	st := wan.Stats()
	if st.Drops["pppoe_down"] == 0 || st.Drops["pppoe_not_session"] != 1 {
		t.Fatalf("drops with the session down = %v, want pppoe_down > 0 and pppoe_not_session 1", st.Drops)
	}

	upSession(l)
	ping(t, l.a, bIP4)
	peers := remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5001))
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5001))
	exchange(t, c, 64<<10)
	if got := peer(t, peers); got.Addr() != wanIP4 {
		t.Fatalf("B saw the connection from %s, want the router's wan address %s", got, wanIP4)
	}
	hits0 := nat.Stats().FastPathHits.Load()
	exchange(t, c, 4<<20)
	hits := nat.Stats().FastPathHits.Load() - hits0
	if hits < 1000 {
		t.Errorf("fast path forwarded %d packets of a 4 MiB echo over PPPoE, want >= 1000", hits)
	}
	frames, bad := ac.counts()
	st = wan.Stats()
	t.Logf("wire: %d frames, %d not session frames; wan %+v; fast path %d", frames, bad, st.PPPoE, hits)
	if bad != 0 {
		t.Errorf("%d of %d frames on the wire were not session frames to the AC", bad, frames)
	}
	if st.PPPoE.Encapsulated < uint64(frames) || st.PPPoE.Decapsulated < 1000 {
		t.Errorf("PPPoE stats %+v with %d frames on the wire, want every frame encapsulated and >= 1000 decapsulated", st.PPPoE, frames)
	}
	for _, f := range ac.frames() {
		if len(f) > 1514 {
			t.Fatalf("frame of %d octets on a 1500-octet Ethernet", len(f))
		}
	}

	// Down again: nothing leaves.
	wan.SetPPPoESession(nil)
	before, _ := ac.counts()
	if _, err := l.a.Ping(ctxTimeout(t, 500*time.Millisecond), bIP4, []byte("down again")); err == nil {
		t.Fatal("ping after the session ended succeeded")
	}
	if after, _ := ac.counts(); after != before {
		t.Errorf("%d frames left after the session ended", after-before)
	}
}

// synMSS returns the MSS option of the TCP SYN in an Ethernet frame (0:
// none, or not a SYN). ipOff is the IP header's offset.
func synMSS(frame []byte, ipOff int) int {
	ip := header.IPv4(frame[ipOff:])
	if len(ip) < header.IPv4MinimumSize || ip.Protocol() != uint8(header.TCPProtocolNumber) {
		return 0
	}
	tcp := header.TCP(ip[ip.HeaderLength():])
	if tcp.Flags()&header.TCPFlagSyn == 0 {
		return 0
	}
	return int(header.ParseSynOptions(tcp.Options(), tcp.Flags()&header.TCPFlagAck != 0).MSS)
}

// TestPPPoEMSSClamp: SYNs are clamped to the session's MTU less 40 both
// ways: the LAN host's SYN leaving in the session (NAT Postrouting) and
// B's SYN arriving in it for a port forward (decapsulation); the
// checksums stay right (the connections work). A and B have an MTU of
// 9000, so their SYNs ask for more than the session carries.
func TestPPPoEMSSClamp(t *testing.T) {
	l, ac, nat := newPPPoELab(t, []natengine.Forward{{Proto: natengine.ProtoTCP, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(aIP4, 80)}}, 9000)
	upSession(l)
	want := pppoeTestMTU - 40

	// Outbound: A (MTU 1500, MSS 1460) to B.
	peers := remoteServer(t, l.b, netip.AddrPortFrom(bIP4, 5001))
	c := dial(t, l.a, netip.AddrPortFrom(bIP4, 5001))
	exchange(t, c, 256<<10)
	peer(t, peers)
	var out int
	for _, f := range ac.frames() {
		if m := synMSS(f, 22); m != 0 {
			out = m
			break
		}
	}
	if out != want {
		t.Errorf("MSS of A's SYN on the wire = %d, want %d", out, want)
	}

	// Inbound: B to the forward, A's SYN-ACK and B's SYN as A sees it.
	apeers := remoteServer(t, l.a, netip.AddrPortFrom(aIP4, 80))
	clampedIn := l.r.Interface("wan").Stats().PPPoE.MSSClampedIn
	cb := dial(t, l.b, netip.AddrPortFrom(wanIP4, 8080))
	exchange(t, cb, 256<<10)
	peer(t, apeers)
	syn := l.tapA.Wait(ctxTimeout(t, time.Second), func(f []byte) bool {
		return binary.BigEndian.Uint16(f[12:]) == 0x0800 && synMSS(f, 14) != 0 && header.TCP(f[34:]).Flags()&header.TCPFlagAck == 0
	})
	if syn == nil {
		t.Fatal("A got no SYN from B")
	}
	if m := synMSS(syn, 14); m != want {
		t.Errorf("MSS of B's SYN as A got it = %d, want %d", m, want)
	}
	if got := l.r.Interface("wan").Stats().PPPoE.MSSClampedIn - clampedIn; got != 1 {
		t.Errorf("MSSClampedIn rose by %d, want 1", got)
	}
	if nat.Stats().MSSClamped.Load() < 2 {
		t.Errorf("NAT MSSClamped = %d, want >= 2 (A's SYN, A's SYN-ACK)", nat.Stats().MSSClamped.Load())
	}
}

// TestPPPoEAllocs: decapsulation and encapsulation allocate nothing.
func TestPPPoEAllocs(t *testing.T) {
	e := newEndpoint(wanMAC, pppoeTestMTU, nil, nil)
	e.pppoeMode = true
	s := &pppoeSession{link: pppoe.Link{Peer: [6]byte(acMAC), SessionID: testSessionID}}
	e.pppoe.Store(s)
	ip := make([]byte, 1400)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	ip[9] = 17
	src := sessionFrame(wanMAC, 0x0021, ip)
	frames := make([]hw.Frame, 1)
	buf := make([]byte, len(src.Data))
	x := make([]byte, 8+14+len(ip))
	n := testing.AllocsPerRun(1000, func() {
		copy(buf, src.Data)
		frames[0] = hw.Frame{Data: buf, WireLen: len(buf)}
		got := e.decapPPPoE(frames)
		if len(got) != 1 || binary.BigEndian.Uint16(got[0].Data[12:]) != 0x0800 {
			panic("not decapsulated")
		}
		copy(x[8:], got[0].Data)
		copy(x[8+6:8+12], wanMAC) // the router's reply: from us, to the AC
		if !e.encapPPPoE(x, s) {
			panic("not encapsulated")
		}
	})
	if n != 0 {
		t.Errorf("decap + encap: %v allocations per packet, want 0", n)
	}
	want := bytes.Clone(src.Data)
	copy(want, acMAC)
	copy(want[6:], wanMAC)
	if !bytes.Equal(x, want) {
		t.Errorf("encap(decap(frame)) differs from frame:\n%x\n%x", x[:40], src.Data[:40])
	}
}

// BenchmarkPPPoEFastPath measures an offloaded flow's full-size TCP
// frame through the fast path, as BenchmarkNATFastPathDispatch does,
// with the wan a PPPoE session ("pppoe": decapsulation before the fast
// path on download, encapsulation into the transmit batch on upload), a
// plain Ethernet link ("plain") and a plain link tagged VLAN 7 ("vlan":
// the tag pushed on upload, taken from the ring's metadata on
// download), all with an MTU of 1492, so the segments are the same.
//
// The frames lie in a ring of the benchmark's own, RingHeadroom octets
// apart as in an AF_PACKET port's receive ring, and the last level says
// what the egress writer does with them: "ring" lends the room before
// them (hw.Port.ExtendFrame, since AF_PACKET rings keep that room; an
// af_xdp port over a shared UMEM), so a header is pushed in place;
// "copy" does not (an AF_PACKET port before), so a frame that needs one
// is copied into a buffer first. Each op is one frame (SetBytes is its
// length as received), plus the memcpy that restores it.
func BenchmarkPPPoEFastPath(b *testing.B) {
	for _, mode := range []string{"plain", "pppoe", "vlan"} {
		for _, dir := range []string{"upload", "download"} {
			for _, tx := range []string{"copy", "ring"} {
				b.Run(mode+"/"+dir+"/"+tx, func(b *testing.B) { benchPPPoEFastPath(b, mode, dir == "upload", tx == "ring") })
			}
		}
	}
}

// ringWriter is a writer over the benchmark's ring: with lend, it lends
// the room before a frame lying in ring, as an AF_PACKET or af_xdp port
// does before a frame of its receive ring.
type ringWriter struct {
	hw.FrameWriter
	ring []byte
	lend bool
}

func (w ringWriter) ExtendFrame(f []byte, head int) []byte {
	if !w.lend || len(f) == 0 || head > hw.RingHeadroom {
		return nil
	}
	off := uintptr(unsafe.Pointer(&f[0])) - uintptr(unsafe.Pointer(&w.ring[0]))
	if off < uintptr(head) || off >= uintptr(len(w.ring)) {
		return nil
	}
	return w.ring[int(off)-head : int(off)+len(f)]
}

func benchPPPoEFastPath(b *testing.B, mode string, upload, lend bool) {
	in := "wan"
	if upload {
		in = "lan"
	}
	plain := mode != "pppoe"
	var capt *capture
	l, _, nat, cfg := newPPPoELabWith(b, nil, 0, plain, func(name string, h hw.BatchHandler) hw.BatchHandler {
		if name != in {
			return h
		}
		capt = &capture{next: h, match: func(f []byte) bool { return len(f) > 1400 }}
		return capt.handle
	})
	if !plain {
		upSession(l)
	}
	frame := capt.echoFlow(b, l)
	if frame == nil {
		b.Fatal("no full-size frame of the flow captured")
	}
	// The frames' ring: each frame after RingHeadroom octets of room,
	// 2 KiB apart.
	const slot = 2048
	ring := make([]byte, benchBatch*slot)
	// Both writers discard all but ARP from here (see benchNATFastPath);
	// one slow-path frame offloads the flow again after the Apply.
	cfg.Interfaces[0].Writer = ringWriter{FrameWriter: arpOnly{next: cfg.Interfaces[0].Writer}, ring: ring, lend: lend}
	cfg.Interfaces[1].Writer = ringWriter{FrameWriter: arpOnly{next: cfg.Interfaces[1].Writer}, ring: ring, lend: lend}
	var vlanRx bool
	if mode == "vlan" {
		cfg.Interfaces[1].VLAN = []uint16{7}
		vlanRx = !upload // the wan's frames come tagged (ring metadata)
	}
	if err := l.r.Apply(cfg); err != nil {
		b.Fatal(err)
	}
	if mode == "vlan" {
		wan := l.r.Interface("wan")
		if err := l.r.Stack().AddStaticNeighbor(wan.id, ipv4.ProtocolNumber, tcpip.AddrFromSlice(bIP4.AsSlice()), tcpip.LinkAddress(acMAC)); err != nil {
			b.Fatal(err)
		}
	}
	ifc := l.r.Interface(in)
	var trunk *Trunk
	if vlanRx {
		// Tagged frames go through the port's trunk, which strips the
		// tag (here from the ring's metadata) and hands them to wan.
		trunk = l.r.NewTrunk()
		if err := trunk.Set(l.r.Interface("wan")); err != nil {
			b.Fatal(err)
		}
	}
	// A direct call, so that scripts/armproj.sh finds
	// Endpoint.HandleBatch called from this function.
	handle := func(frames []hw.Frame) {
		if trunk != nil {
			trunk.HandleBatch(0, frames)
		} else {
			ifc.HandleBatch(0, frames)
		}
	}
	frames := make([]hw.Frame, benchBatch)
	bufs := make([][]byte, benchBatch)
	reset := func(j int) {
		copy(bufs[j], frame)
		frames[j] = hw.Frame{Data: bufs[j], WireLen: len(frame), VLANValid: vlanRx, VLANTCI: 7}
	}
	for i := range frames {
		bufs[i] = ring[i*slot+hw.RingHeadroom : i*slot+hw.RingHeadroom+len(frame) : i*slot+hw.RingHeadroom+len(frame)]
		reset(i)
	}
	handle(frames[:1])
	reset(0)
	hits0 := nat.Stats().FastPathHits.Load()
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i += benchBatch {
		n := min(benchBatch, b.N-i)
		for j := range n {
			reset(j)
		}
		if trunk != nil {
			trunk.HandleBatch(0, frames[:n])
		} else {
			ifc.HandleBatch(0, frames[:n])
		}
	}
	b.StopTimer()
	// The process's CPU time per frame: on a machine that other work
	// keeps busy, wall time per op counts the time the benchmark
	// waited for a core, CPU time much less of it.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if hits := nat.Stats().FastPathHits.Load() - hits0; hits < uint64(b.N) {
		b.Fatalf("fast path took %d of %d frames", hits, b.N)
	}
}

// processCPU is the process's user and system CPU time in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestPushPPPoETagged: on a VLAN interface (ISPs' VID 7) the session
// header goes after the tag, which keeps its place (RFC 2516 over IEEE
// 802.1Q); pushPPPoE refuses what is not IP.
func TestPushPPPoETagged(t *testing.T) {
	s := &pppoeSession{link: pppoe.Link{Peer: [6]byte(acMAC), SessionID: 0xbeef}}
	ip := []byte{0x45, 0, 0, 20, 1, 2, 3, 4, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	eth := append(append(append([]byte{}, make([]byte, 6)...), wanMAC...), 0x81, 0x00, 0x00, 0x07, 0x08, 0x00)
	x := append(make([]byte, 8), append(eth, ip...)...)
	if !pushPPPoE(x, 4, s) {
		t.Fatal("pushPPPoE(tagged IPv4) = false")
	}
	want := append(append(append([]byte{}, acMAC...), wanMAC...),
		0x81, 0x00, 0x00, 0x07, 0x88, 0x64, 0x11, 0x00, 0xbe, 0xef, 0x00, 22, 0x00, 0x21)
	want = append(want, ip...)
	if !bytes.Equal(x, want) {
		t.Errorf("pushPPPoE =\n%x\nwant\n%x", x, want)
	}
	arp := append(make([]byte, 8), append(append([]byte{}, eth[:16]...), 0x08, 0x06, 0, 1)...)
	if pushPPPoE(arp, 4, s) {
		t.Error("pushPPPoE(ARP) = true, want false: only IP travels in the session")
	}
}

// FuzzPPPoEDecap: decapPPPoE never panics; a frame it keeps is either
// untouched or a plain Ethernet IPv4/IPv6 frame from the AC to us no
// longer than the session frame less 7 (a one-octet protocol field, RFC
// 1661 section 2, which pppoe.Link.Decap accepts); plain IP and ARP
// frames are removed.
func FuzzPPPoEDecap(f *testing.F) {
	ip := []byte{0x45, 0, 0, 20, 1, 2, 3, 4, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	f.Add(sessionFrame(wanMAC, 0x0021, ip).Data)
	f.Add(sessionFrame(wanMAC, 0x0057, make([]byte, 40)).Data)
	f.Add(sessionFrame(wanMAC, 0xc021, []byte{9, 1, 0, 8, 1, 2, 3, 4}).Data)
	short := sessionFrame(wanMAC, 0x0021, ip).Data
	binary.BigEndian.PutUint16(short[18:], 200) // LENGTH past the frame
	f.Add(short)
	f.Add(append(append(append([]byte{}, wanMAC...), acMAC...), 0x08, 0x00, 0x45))
	e := newEndpoint(wanMAC, pppoeTestMTU, nil, nil)
	e.pppoeMode = true
	e.pppoe.Store(&pppoeSession{link: pppoe.Link{Peer: [6]byte(acMAC), SessionID: testSessionID}})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		frames := e.decapPPPoE([]hw.Frame{{Data: data, WireLen: len(data)}})
		if len(data) >= 14 {
			switch binary.BigEndian.Uint16(in[12:]) {
			case 0x0800, 0x86dd, 0x0806:
				if len(frames) != 0 {
					t.Fatalf("plain frame %x kept", in)
				}
				return
			}
		}
		if len(frames) != 1 {
			t.Fatalf("%d frames out of 1", len(frames))
		}
		out := frames[0].Data
		if bytes.Equal(out, in) {
			return
		}
		et := binary.BigEndian.Uint16(out[12:])
		if (et != 0x0800 && et != 0x86dd) || len(out) > len(in)-7 || !bytes.Equal(out[:12], in[:12]) || frames[0].WireLen != len(out) {
			t.Fatalf("decapsulated %x into %x", in, out)
		}
	})
}

// TestFastPathPPPoEInPlace: a fast-path frame leaving a PPPoE interface
// gets its session header pushed in front of it where it lies when the
// writer lends the room (an af_xdp port's UMEM: 8 octets before, 12 with
// a VLAN tag), and is copied once otherwise; the bytes on the wire are
// the same, and in place it allocates nothing.
func TestFastPathPPPoEInPlace(t *testing.T) {
	const at = 256
	ip := append([]byte{0x45, 0, 0, 46}, bytes.Repeat([]byte{0x45}, 42)...)
	plain := ethFrame(acMAC, wanMAC, 0x0800, ip)
	s := &pppoeSession{link: pppoe.Link{Peer: [6]byte(acMAC), SessionID: 0x4242}}
	for _, tc := range []struct {
		name    string
		vlan    []uint16
		inMem   bool
		wantOff int
	}{
		{"in place", nil, true, at - 8},
		{"in place, VLAN 7", []uint16{7}, true, at - 12},
		{"other memory", nil, false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newLendWriter()
			e := testEndpoint(nil)
			e.pppoeMode = true
			e.pppoe.Store(s)
			e.setWriter(w)
			e.vlan.Store(newEgressVLAN(&InterfaceConfig{VLAN: tc.vlan}))
			e.tx = new(txBatcher)
			e.tx.begin()
			f := bytes.Clone(plain)
			if tc.inMem {
				f = w.received(plain, at)
			}
			e.txMu.Lock()
			fw := e.writer.Load()
			e.appendFastLocked(fw, f, -1, false)
			e.sendPendingLocked(fw)
			e.txMu.Unlock()
			if len(w.frames) != 1 {
				t.Fatalf("writer got %d frames, want 1", len(w.frames))
			}
			want := append([]byte{}, acMAC...)
			want = append(want, wanMAC...)
			if len(tc.vlan) > 0 {
				want = append(want, 0x81, 0x00, 0x00, byte(tc.vlan[0]))
			}
			want = append(want, 0x88, 0x64, 0x11, 0x00, 0x42, 0x42, 0x00, byte(len(ip)+2), 0x00, 0x21)
			want = append(want, ip...)
			if !bytes.Equal(w.frames[0], want) {
				t.Errorf("frame on the wire\n% x\nwant\n% x", w.frames[0], want)
			}
			if w.offs[0] != tc.wantOff {
				t.Errorf("frame sent from offset %d of the receive memory, want %d (-1: a copy)", w.offs[0], tc.wantOff)
			}
			if !tc.inMem {
				return
			}
			lw := discardLender{newLendWriter()}
			e.setWriter(lw)
			fw = e.writer.Load()
			run := func() {
				f := lw.received(plain, at)
				e.txMu.Lock()
				e.appendFastLocked(fw, f, -1, false)
				e.sendPendingLocked(fw)
				e.txMu.Unlock()
			}
			run()
			if n := testing.AllocsPerRun(1000, run); n != 0 {
				t.Errorf("a PPPoE fast-path frame sent in place allocates %v times, want 0", n)
			}
		})
	}
}

// TestPPPoEIPv6 carries IPv6 in the session both ways: an echo request
// from the AC's link-local address to the wan's IPv6CP link-local one
// (an address the wan holds like any other) arrives as a session frame
// of PPP protocol 0x0057 and netstack's echo reply leaves as one; and
// an IPv6 frame a service writes itself (WriteFrame: the RA learner's
// RS, the DHCPv6 client's Solicit) goes into the session too, while
// the session's own discovery frames go as they are and, with the
// session down, an IPv6 frame is refused and counted.
func TestPPPoEIPv6(t *testing.T) {
	l, ac, _, cfg := newPPPoELabWith(t, nil, 0, false, nil)
	wan := l.r.Interface("wan")
	local := netip.MustParseAddr("fe80::1c2d:3e4f:5a6b:7c8d") // IPv6CP's interface identifiers
	peer := netip.MustParseAddr("fe80::aaaa:bbbb:cccc:dddd")
	cfg.Interfaces[1].Addresses = append(cfg.Interfaces[1].Addresses, netip.PrefixFrom(local, 64))
	if err := l.r.Apply(cfg); err != nil {
		t.Fatal(err)
	}

	// A service's RS while the session is down: refused, counted.
	rs := ethFrame(mustMAC("33:33:00:00:00:02"), wanMAC, header.IPv6ProtocolNumber,
		ipv6Packet(local, netip.MustParseAddr("ff02::2"), 255, header.ICMPv6ProtocolNumber, []byte{133, 0, 0, 0, 0, 0, 0, 0}))
	if err := wan.WriteFrame(rs); !errors.Is(err, ErrPPPoEDown) {
		t.Fatalf("WriteFrame(IPv6) with the session down = %v, want ErrPPPoEDown", err)
	}
	if d := wan.Stats().Drops["pppoe_down"]; d != 1 {
		t.Errorf("pppoe_down = %d after a refused WriteFrame, want 1", d)
	}
	upSession(l)
	// A discovery frame (the session's own) leaves as it is.
	padt := ethFrame(net.HardwareAddr(acMAC), wanMAC, 0x8863, []byte{0x11, 0xa7, 0x12, 0x34, 0, 0})
	if err := wan.WriteFrame(padt); err != nil {
		t.Fatal(err)
	}
	if err := wan.WriteFrame(rs); err != nil {
		t.Fatalf("WriteFrame(IPv6) with the session up: %v", err)
	}
	wire := ac.frames()
	if len(wire) != 2 || !bytes.Equal(wire[0], padt) {
		t.Fatalf("wire after a PADT and an RS = %d frames, the first %x; want the PADT as written, then the RS", len(wire), wire[0])
	}
	want := sessionFrame(acMAC, 0x0057, rs[14:]).Data
	copy(want[6:], wanMAC)
	if !bytes.Equal(wire[1], want) {
		t.Errorf("RS on the wire:\n%x\nwant the session frame\n%x", wire[1], want)
	}

	// The AC pings the wan's link-local address in the session.
	echo := ipv6Packet(peer, local, 64, header.ICMPv6ProtocolNumber, icmpv6Echo(7, 1))
	wan.HandleBatch(0, []hw.Frame{sessionFrame(wanMAC, 0x0057, echo)})
	deadline := time.Now().Add(2 * time.Second)
	var reply []byte
	for reply == nil && time.Now().Before(deadline) {
		for _, f := range ac.frames()[2:] {
			if len(f) >= 22+40+8 && be16(f[12:]) == 0x8864 && be16(f[20:]) == 0x0057 && f[22+6] == 58 && header.ICMPv6Type(f[22+40]) == header.ICMPv6EchoReply {
				reply = f
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if reply == nil {
		t.Fatalf("no echo reply in the session; wire %d frames, wan drops %v", len(ac.frames()), wan.Stats().Drops)
	}
	ip := header.IPv6(reply[22:])
	if src, dst := netip.AddrFrom16(ip.SourceAddress().As16()), netip.AddrFrom16(ip.DestinationAddress().As16()); src != local || dst != peer ||
		!bytes.Equal(reply[:6], acMAC) || be16(reply[16:]) != testSessionID {
		t.Errorf("echo reply %s → %s to %x in session %#x, want %s → %s to the AC in %#x", src, dst, reply[:6], be16(reply[16:]), local, peer, testSessionID)
	}
	if st := wan.Stats().PPPoE; st.Decapsulated < 1 || st.Encapsulated < 2 {
		t.Errorf("PPPoE stats %+v, want the echo decapsulated and the RS and reply encapsulated", st)
	}
}
