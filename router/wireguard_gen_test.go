package router

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/firewall"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/wireguard"
)

// tcpPacket is an IPv4 TCP segment from src:sport to dst:dport with the
// given flags, sequence numbers and payload, checksums set.
func tcpPacket(t *testing.T, src, dst string, sport, dport uint16, syn, ack bool, seq, ackNum uint32, payload string) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: syn, ACK: ack,
		Seq: seq, Ack: ackNum, Window: 65535, PSH: payload != ""}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, tcp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestWireGuardOffloadGeneration: a LAN flow that netstack forwards
// into the tunnel is offloaded by the TUN's Out hook (natHooks) when the
// device dequeues the packet, which can be after a reload moved the
// flow's route. The offload must be dated by the fast-path generation
// read when netstack queued the packet: a packet queued at generation g
// and dequeued after a reload bumped it leaves the flow on the slow path
// (its next LAN packet is not sent into the tunnel by the fast path),
// while one queued and dequeued within a generation offloads it.
// Before the fix the hook read the generation at dequeue and offloaded
// the flow under the old route.
func TestWireGuardOffloadGeneration(t *testing.T) {
	const lan, wg natengine.Iface = 1, 2
	e := natengine.New(natengine.Config{})
	rs, err := firewall.Compile(firewall.Policy{Zones: []firewall.Zone{
		{Name: "lan", Ifaces: []int32{int32(lan)}, Input: firewall.Accept, Forward: firewall.Accept, Output: firewall.Accept},
		{Name: "vpn", Ifaces: []int32{int32(wg)}, Input: firewall.Accept, Forward: firewall.Accept, Output: firewall.Accept},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetRules(natengine.Rules{Zones: rs, Ifaces: []natengine.IfaceConfig{
		{ID: lan, Name: "lan", Addrs: []netip.Addr{netip.MustParseAddr("192.168.1.1")}, Subnets: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, MTU: 1500},
		{ID: wg, Name: "wg0", Addrs: []netip.Addr{netip.MustParseAddr("10.8.0.1")}, MTU: 1420},
	}}); err != nil {
		t.Fatal(err)
	}
	const host, peer = "192.168.1.10", "10.8.0.2"
	out := func(syn, ack bool, seq, ackNum uint32, data string) []byte {
		return tcpPacket(t, host, peer, 40000, 22, syn, ack, seq, ackNum, data)
	}
	// The handshake on the slow path: LAN Prerouting, tunnel Postrouting
	// and back.
	for i, s := range []struct {
		p       []byte
		in, out natengine.Iface
	}{
		{out(true, false, 100, 0, ""), lan, wg},
		{tcpPacket(t, peer, host, 22, 40000, true, true, 500, 101, ""), wg, lan},
		{out(false, true, 101, 501, ""), lan, wg},
	} {
		if v := e.Prerouting(s.p, s.in); v != natengine.Accept {
			t.Fatalf("handshake packet %d: Prerouting %v", i, v)
		}
		if v := e.Postrouting(s.p, s.out); v != natengine.Accept {
			t.Fatalf("handshake packet %d: Postrouting %v", i, v)
		}
	}

	tn := wireguard.NewTUN("wg0", 0)
	defer tn.Device().Close()
	tn.SetHooks(natHooks(e, wg))
	seq := uint32(101)
	// enqueue is netstack forwarding the flow's next LAN packet into the
	// tunnel: Prerouting on the LAN, then the TUN's WritePackets.
	enqueue := func() {
		t.Helper()
		p := out(false, true, seq, 501, "data")
		seq += 4
		if v := e.Prerouting(p, lan); v != natengine.Accept {
			t.Fatalf("Prerouting of a data packet: %v", v)
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(p)})
		pkt.NetworkPacketInfo.IsForwardedPacket = true
		var l stack.PacketBufferList
		l.PushBack(pkt)
		tn.WritePackets(l)
		pkt.DecRef()
	}
	// dequeue is the device's TUN reader taking it (the Out hook runs).
	dequeue := func() {
		t.Helper()
		bufs, sizes := [][]byte{make([]byte, 2048)}, []int{0}
		if n, err := tn.Device().Read(bufs, sizes, 16); n != 1 || err != nil {
			t.Fatalf("Read: %d, %v; want 1 packet", n, err)
		}
	}
	// fast reports whether the flow's next LAN frame takes the fast
	// path, and where to.
	fast := func() (natengine.Iface, bool) {
		frame := append(make([]byte, 14), out(false, true, seq, 501, "next")...)
		frame[12], frame[13] = 0x08, 0x00
		return e.FastPath(frame, lan)
	}

	enqueue()
	dequeue()
	if o, ok := fast(); !ok || o != wg {
		t.Fatalf("queued and dequeued within one generation: fast path (%d, %v), want (%d, true): the flow should be offloaded into the tunnel", o, ok, wg)
	}

	e.InvalidateFastPath() // a reload: the flow takes the slow path again
	enqueue()
	e.InvalidateFastPath() // another reload (a route moved) while the packet waits in the queue
	dequeue()
	if o, ok := fast(); ok {
		t.Errorf("queued at the generation before a reload, dequeued after it: the flow is offloaded into interface %d under the old route, want the slow path", o)
	}
	if n := e.Stats().Slow[natengine.SlowStale].Load(); n == 0 {
		t.Errorf("slow_stale = 0, want the stale offload counted")
	}
	// The flow's next packet, forwarded under the new generation,
	// offloads it again.
	enqueue()
	dequeue()
	if o, ok := fast(); !ok || o != wg {
		t.Errorf("queued and dequeued after the reload: fast path (%d, %v), want (%d, true)", o, ok, wg)
	}
}
