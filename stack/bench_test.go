package stack

import (
	"fmt"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/macsec"
)

// benchBatch is the receive batch size, wireguard-go's IdealBatchSize
// (STYLE.md).
const benchBatch = 128

// benchFrames returns a batch of identical UDP frames of the given frame
// size, sent by host A to dst.
func benchFrames(size int, dst netip.Addr) []hw.Frame {
	payload := size - header.EthernetMinimumSize - header.IPv4MinimumSize - header.UDPMinimumSize
	f := ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber,
		ipv4Packet(hostIP4, dst, 64, header.UDPProtocolNumber, udpDatagram(1000, 2000, make([]byte, payload))))
	frames := make([]hw.Frame, benchBatch)
	for i := range frames {
		frames[i] = hw.Frame{Data: f, WireLen: len(f)}
	}
	return frames
}

// runBatches calls fn with batches of frames until b.N frames were
// handled, so ns/op and allocs/op are per frame.
func runBatches(b *testing.B, frames []hw.Frame, fn func([]hw.Frame)) {
	b.SetBytes(int64(len(frames[0].Data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += benchBatch {
		fn(frames[:min(benchBatch, b.N-i)])
	}
}

// BenchmarkDispatch measures the receive path from ring frame to the
// hand-off to netstack. Each op is one frame.
//
//   - ours: validation, checksum checks and the copy into a pooled gVisor
//     view: everything our code does (must be 0 allocs); ours+ingress
//     with a lan interface's source filter.
//   - gvisor-packetbuffer: gVisor's part alone: NewPacketBuffer around
//     that view, Consume of the link header, DecRef.
//   - handoff: HandleBatch to a no-op dispatcher: both of the above plus
//     the per-batch bookkeeping.
//   - forward: HandleBatch into a real netstack that forwards every frame
//     to a discarding writer (netstack's full forward path, for scale).
func BenchmarkDispatch(b *testing.B) {
	for _, size := range []int{64, 1514} {
		for _, dst := range []struct {
			name string
			addr netip.Addr
		}{{"local", routerIP4}, {"transit", farIP4}} {
			frames := benchFrames(size, dst.addr)
			e := testEndpoint(&nopDispatcher{})
			local := e.local.Load()
			b.Run(fmt.Sprintf("ours/%s/%dB", dst.name, size), func(b *testing.B) {
				r := &rxRun{mac: e.mac, mtu: 1500, local: local}
				runBatches(b, frames, func(fs []hw.Frame) {
					for i := range fs {
						v := classify(&fs[i], r)
						if v.dropped {
							b.Fatalf("dropped: %s", v.drop)
						}
						buffer.NewViewWithData(fs[i].Data).Release()
					}
				})
			})
			// The same with a lan interface's ingress filter (srcfilter.go):
			// its subnet, a site behind it and the delegated /64.
			src := newSourceFilter([]netip.Prefix{
				netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("10.1.0.0/24"),
			}, []netip.Prefix{netip.MustParsePrefix("10.1.0.1/24"), netip.MustParsePrefix("fd00:1::1/64")})
			b.Run(fmt.Sprintf("ours+ingress/%s/%dB", dst.name, size), func(b *testing.B) {
				r := &rxRun{mac: e.mac, mtu: 1500, local: local, ingress: src}
				runBatches(b, frames, func(fs []hw.Frame) {
					for i := range fs {
						v := classify(&fs[i], r)
						if v.dropped {
							b.Fatalf("dropped: %s", v.drop)
						}
						buffer.NewViewWithData(fs[i].Data).Release()
					}
				})
			})
			b.Run(fmt.Sprintf("handoff/%s/%dB", dst.name, size), func(b *testing.B) {
				runBatches(b, frames, func(fs []hw.Frame) { e.HandleBatch(0, fs) })
			})
		}
		frames := benchFrames(size, farIP4)
		b.Run(fmt.Sprintf("gvisor-packetbuffer/%dB", size), func(b *testing.B) {
			runBatches(b, frames, func(fs []hw.Frame) {
				for i := range fs {
					pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
						Payload: buffer.MakeWithView(buffer.NewViewWithData(fs[i].Data)),
					})
					pkt.LinkHeader().Consume(header.EthernetMinimumSize)
					pkt.DecRef()
				}
			})
			b.ReportMetric(0, "MB/s") // not meaningful here
		})
		b.Run(fmt.Sprintf("forward/%dB", size), func(b *testing.B) {
			r := benchRouter(b)
			lan := r.Interface("lan")
			runBatches(b, frames, func(fs []hw.Frame) { lan.HandleBatch(0, fs) })
			b.StopTimer()
			if s := r.Interface("wan").Stats(); s.TxPackets < uint64(b.N) {
				b.Fatalf("wan sent %d frames, want %d; lan drops %v", s.TxPackets, b.N, lan.Stats().Drops)
			}
		})
	}
}

// discard is a hw.FrameWriter that drops everything.
type discard struct{}

func (discard) WriteFrames(frames [][]byte) (int, error) { return len(frames), nil }

// benchRouter is a router with lan 10.1.0.1/24 and wan 10.2.0.1/24 and a
// static neighbour for farIP4, so every frame is forwarded.
func benchRouter(b *testing.B) *Netstack {
	r, err := New(Config{Interfaces: []InterfaceConfig{
		{Name: "lan", MAC: routerMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/24")}, Writer: discard{}},
		{Name: "wan", MAC: mustMAC("02:00:00:00:00:02"), Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.1/24")}, Writer: discard{}},
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	wan := r.Interface("wan")
	if err := r.Stack().AddStaticNeighbor(wan.id, ipv4.ProtocolNumber, tcpip.AddrFrom4(farIP4.As4()), tcpip.LinkAddress(mustMAC("02:00:00:00:00:0b"))); err != nil {
		b.Fatalf("AddStaticNeighbor: %s", err)
	}
	return r
}

// BenchmarkMACsecForward measures forwarding from lan out of ms1, a SecY
// (one worker, GCM-AES-128) on a MACsecLink whose lower interface
// discards: each op is one frame, netstack's forward path plus Protect.
// "inplace" is how the router runs (the endpoint builds frames with room
// for SecTAG and ICV, ProtectInPlace); "copy" hides that from the
// endpoint, so the SecY builds each protected frame in its own storage
// (Protect).
func BenchmarkMACsecForward(b *testing.B) {
	for _, enc := range []bool{false, true} {
		for _, inPlace := range []bool{false, true} {
			name := fmt.Sprintf("%s/%s", map[bool]string{false: "integrity", true: "encrypt"}[enc], map[bool]string{false: "copy", true: "inplace"}[inPlace])
			b.Run(name, func(b *testing.B) {
				r, secy := benchMACsecRouter(b, enc, inPlace)
				lan := r.Interface("lan")
				runBatches(b, benchFrames(1514-MACsecOverhead, farIP4), func(fs []hw.Frame) { lan.HandleBatch(0, fs) })
				b.StopTimer()
				if got := secy.TXSCStats().OutPktsProtected.Load() + secy.TXSCStats().OutPktsEncrypted.Load(); got < uint64(b.N) {
					b.Fatalf("SecY protected %d frames, want %d", got, b.N)
				}
			})
		}
	}
}

// plainWriter hides a writer's in-place interface from the endpoint.
type plainWriter struct{ hw.FrameWriter }

// benchMACsecRouter returns a router with lan and ms1, whose SecY sits on
// link (a discarding writer), and a route to farIP4 out of ms1.
func benchMACsecRouter(b *testing.B, encrypt, inPlace bool) (*Netstack, *macsec.SecY) {
	link := NewMACsecLink()
	cfg := macsec.DefaultConfig(macsec.MakeSCI([6]byte(routerMAC), 1))
	cfg.Encrypt, cfg.Workers = encrypt, 1
	cfg.TX, cfg.RX = link.Transmit, link.Receive
	secy, err := macsec.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { secy.Close() })
	if err := secy.InstallTXSA(macsec.SAConfig{AN: 0, PN: 1, Key: macsec.NewKey(make([]byte, 16))}); err != nil {
		b.Fatal(err)
	}
	link.SetSecY(secy)
	var w hw.FrameWriter = link
	if !inPlace {
		w = plainWriter{link}
	}
	msMAC := mustMAC("02:00:00:00:00:02")
	r, err := New(Config{Interfaces: []InterfaceConfig{
		{Name: "lan", MAC: routerMAC, Addresses: []netip.Prefix{netip.MustParsePrefix("10.1.0.1/24")}, Writer: discard{}},
		{Name: "link", MAC: msMAC, Writer: discard{}},
		{Name: "ms1", MAC: msMAC, MTU: 1500 - MACsecOverhead, Addresses: []netip.Prefix{netip.MustParsePrefix("10.2.0.1/24")}, Writer: w},
	}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	if err := r.BindMACsec(link, "link", "ms1"); err != nil {
		b.Fatal(err)
	}
	ms1 := r.Interface("ms1")
	if err := r.Stack().AddStaticNeighbor(ms1.id, ipv4.ProtocolNumber, tcpip.AddrFrom4(farIP4.As4()), tcpip.LinkAddress(mustMAC("02:00:00:00:00:0b"))); err != nil {
		b.Fatalf("AddStaticNeighbor: %s", err)
	}
	return r, secy
}
