package stack

import (
	"bytes"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
)

var (
	routerMAC = mustMAC("02:00:00:00:00:01")
	hostMAC   = mustMAC("02:00:00:00:00:0a")
	otherMAC  = mustMAC("02:00:00:00:00:99")
	bcastMAC  = mustMAC("ff:ff:ff:ff:ff:ff")
	mcastMAC  = mustMAC("01:00:5e:00:00:01")

	routerIP4 = netip.MustParseAddr("10.1.0.1")
	hostIP4   = netip.MustParseAddr("10.1.0.2")
	farIP4    = netip.MustParseAddr("10.2.0.2")
	routerIP6 = netip.MustParseAddr("fd00:1::1")
	hostIP6   = netip.MustParseAddr("fd00:1::2")
	farIP6    = netip.MustParseAddr("fd00:2::2")
)

// recordingDispatcher is a stack.NetworkDispatcher that keeps a copy of
// each delivered packet's network layer.
type recordingDispatcher struct {
	mu   sync.Mutex
	pkts []delivered
}

type delivered struct {
	proto   tcpip.NetworkProtocolNumber
	pktType tcpip.PacketType
	l3      []byte
}

func (d *recordingDispatcher) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	v := pkt.ToView()
	defer v.Release()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pkts = append(d.pkts, delivered{proto, pkt.PktType, append([]byte(nil), v.AsSlice()[header.EthernetMinimumSize:]...)})
}

func (d *recordingDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// nopDispatcher discards packets; it is the hand-off point in benchmarks.
type nopDispatcher struct{ n atomic.Uint64 }

func (d *nopDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	d.n.Add(1)
}
func (d *nopDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func testEndpoint(d stack.NetworkDispatcher) *Endpoint {
	local := new(atomic.Pointer[localSet])
	local.Store(newLocalSet([]netip.Addr{routerIP4, routerIP6},
		[]netip.Prefix{netip.MustParsePrefix("10.1.0.1/24"), netip.MustParsePrefix("fd00:1::1/64")}))
	e := newEndpoint(routerMAC, 1500, nil, local)
	e.Attach(d)
	return e
}

func TestHandleBatchValidation(t *testing.T) {
	echo := icmpEcho(1, 1, []byte("abcdefgh"))
	udp := udpDatagram(1000, 53, []byte("payload!"))
	ip4 := func(dst netip.Addr, ttl uint8, proto tcpip.TransportProtocolNumber, l4 []byte) []byte {
		return ipv4Packet(hostIP4, dst, ttl, proto, l4)
	}
	eth4 := func(p []byte) []byte { return ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, p) }
	eth6 := func(p []byte) []byte { return ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, p) }
	arpReq := make([]byte, header.ARPSize)
	header.ARP(arpReq).SetIPv4OverEthernet()
	tagged := ethFrame(routerMAC, hostMAC, etherTypeVLAN, append([]byte{0, 10, 0x08, 0x00}, ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo)...))
	big := eth4(ip4(farIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 2, make([]byte, 1500-28+1))))
	maxOK := eth4(ip4(farIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 2, make([]byte, 1500-28))))

	tests := []struct {
		name  string
		frame hw.Frame
		drop  string // "" = delivered
	}{
		{name: "empty", frame: hw.Frame{}, drop: "truncated"},
		{name: "13 bytes", frame: hw.Frame{Data: make([]byte, 13)}, drop: "truncated"},
		{name: "ring truncated", frame: hw.Frame{Data: eth4(ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo)), WireLen: 2000}, drop: "truncated"},
		{name: "vlan in ring header", frame: hw.Frame{Data: eth4(ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo)), VLANValid: true, VLANTCI: 10, VLANTPID: 0x8100}, drop: "vlan_unknown"},
		{name: "vlan in band", frame: hw.Frame{Data: tagged}, drop: "vlan_unknown"},
		{name: "jumbo frame", frame: hw.Frame{Data: make([]byte, 9000)}, drop: "oversize"},
		{name: "ip over mtu", frame: hw.Frame{Data: big}, drop: "oversize"},
		{name: "ip at mtu", frame: hw.Frame{Data: maxOK}},
		{name: "other host", frame: hw.Frame{Data: ethFrame(otherMAC, hostMAC, header.IPv4ProtocolNumber, ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo))}, drop: "other_host"},
		{name: "unknown ethertype", frame: hw.Frame{Data: ethFrame(routerMAC, hostMAC, 0x88cc, make([]byte, 46))}, drop: "unknown_ethertype"},
		{name: "arp broadcast", frame: hw.Frame{Data: ethFrame(bcastMAC, hostMAC, header.ARPProtocolNumber, arpReq)}},
		{name: "arp short", frame: hw.Frame{Data: ethFrame(bcastMAC, hostMAC, header.ARPProtocolNumber, arpReq[:20])}, drop: "malformed"},
		{name: "ipv4 ok", frame: hw.Frame{Data: eth4(ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo))}},
		{name: "ipv4 multicast mac", frame: hw.Frame{Data: ethFrame(mcastMAC, hostMAC, header.IPv4ProtocolNumber, ip4(netip.MustParseAddr("224.0.0.1"), 1, header.UDPProtocolNumber, udp))}},
		{name: "ipv4 short", frame: hw.Frame{Data: eth4(make([]byte, 19))}, drop: "malformed"},
		{name: "ipv4 garbage", frame: hw.Frame{Data: eth4([]byte("this is not an ip packet, only text"))}, drop: "malformed"},
		{name: "ipv4 bad version", frame: hw.Frame{Data: eth4(func() []byte { p := ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo); p[0] = 0x65; return p }())}, drop: "malformed"},
		{name: "ipv4 ihl too small", frame: hw.Frame{Data: eth4(func() []byte { p := ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo); p[0] = 0x44; return p }())}, drop: "malformed"},
		{name: "ipv4 total length beyond frame", frame: hw.Frame{Data: eth4(ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo))[:14+30]}, drop: "malformed"},
		{name: "ipv4 bad header checksum", frame: hw.Frame{Data: eth4(corrupt(ip4(routerIP4, 64, header.ICMPv4ProtocolNumber, echo), 10))}, drop: "ipv4_header_checksum"},
		{name: "ipv4 bad header checksum forwarded", frame: hw.Frame{Data: eth4(corrupt(ip4(farIP4, 64, header.ICMPv4ProtocolNumber, echo), 10))}, drop: "ipv4_header_checksum"},
		{name: "udp bad checksum to router", frame: hw.Frame{Data: eth4(corrupt(ip4(routerIP4, 64, header.UDPProtocolNumber, udp), 20+9))}, drop: "l4_checksum"},
		{name: "udp bad checksum to subnet broadcast", frame: hw.Frame{Data: ethFrame(bcastMAC, hostMAC, header.IPv4ProtocolNumber, corrupt(ip4(netip.MustParseAddr("10.1.0.255"), 64, header.UDPProtocolNumber, udp), 20+9))}, drop: "l4_checksum"},
		{name: "udp bad checksum, ring says valid", frame: hw.Frame{Data: eth4(corrupt(ip4(routerIP4, 64, header.UDPProtocolNumber, udp), 20+9)), CsumValid: true}},
		{name: "udp partial checksum to router", frame: hw.Frame{Data: eth4(corrupt(ip4(routerIP4, 64, header.UDPProtocolNumber, udp), 20+9)), CsumPartial: true}},
		{name: "udp bad checksum forwarded", frame: hw.Frame{Data: eth4(corrupt(ip4(farIP4, 64, header.UDPProtocolNumber, udp), 20+9))}},
		{name: "tcp bad checksum to router", frame: hw.Frame{Data: eth4(corrupt(ip4(routerIP4, 64, header.TCPProtocolNumber, make([]byte, 20)), 20+4))}, drop: "l4_checksum"},
		{name: "ttl 1 forwarded", frame: hw.Frame{Data: eth4(ip4(farIP4, 1, header.ICMPv4ProtocolNumber, echo))}, drop: "ttl_exceeded"},
		{name: "ttl 0 forwarded", frame: hw.Frame{Data: eth4(ip4(farIP4, 0, header.ICMPv4ProtocolNumber, echo))}, drop: "ttl_exceeded"},
		{name: "ttl 1 to router", frame: hw.Frame{Data: eth4(ip4(routerIP4, 1, header.ICMPv4ProtocolNumber, echo))}},
		{name: "ttl 1 limited broadcast", frame: hw.Frame{Data: ethFrame(bcastMAC, hostMAC, header.IPv4ProtocolNumber, ip4(netip.MustParseAddr("255.255.255.255"), 1, header.UDPProtocolNumber, udp))}},
		{name: "ipv6 ok", frame: hw.Frame{Data: eth6(ipv6Packet(hostIP6, routerIP6, 64, header.ICMPv6ProtocolNumber, icmpv6Echo(1, 1)))}},
		{name: "ipv6 hop limit 1 left to netstack", frame: hw.Frame{Data: eth6(ipv6Packet(hostIP6, farIP6, 1, header.ICMPv6ProtocolNumber, icmpv6Echo(1, 1)))}},
		{name: "ipv6 short", frame: hw.Frame{Data: eth6(make([]byte, 39))}, drop: "malformed"},
		{name: "ipv6 bad version", frame: hw.Frame{Data: eth6(func() []byte {
			p := ipv6Packet(hostIP6, routerIP6, 64, header.UDPProtocolNumber, udp)
			p[0] = 0x40
			return p
		}())}, drop: "malformed"},
		{name: "ipv6 payload beyond frame", frame: hw.Frame{Data: eth6(ipv6Packet(hostIP6, routerIP6, 64, header.UDPProtocolNumber, udp))[:14+44]}, drop: "malformed"},
		{name: "ipv6 udp bad checksum to router", frame: hw.Frame{Data: eth6(corrupt(ipv6Packet(hostIP6, routerIP6, 64, header.UDPProtocolNumber, udp), 40+9))}, drop: "l4_checksum"},
		{name: "ipv6 udp bad checksum forwarded", frame: hw.Frame{Data: eth6(corrupt(ipv6Packet(hostIP6, farIP6, 64, header.UDPProtocolNumber, udp), 40+9))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d recordingDispatcher
			e := testEndpoint(&d)
			e.HandleBatch(0, []hw.Frame{tt.frame})
			var s InterfaceStats
			e.stats.fill(&s)
			want := map[string]uint64{}
			if tt.drop != "" {
				want[tt.drop] = 1
			}
			if !reflect.DeepEqual(s.Drops, want) {
				t.Errorf("HandleBatch(%s) drops = %v, want %v", tt.name, s.Drops, want)
			}
			if got, want := len(d.pkts), 1-len(want); got != want {
				t.Errorf("HandleBatch(%s) delivered %d packets, want %d", tt.name, got, want)
			}
			if s.RxPackets != 1 {
				t.Errorf("RxPackets = %d, want 1", s.RxPackets)
			}
		})
	}
}

// TestIPv6TrailingOctetsTrimmed: octets after an IPv6 packet's payload
// (link padding) are not delivered, so netstack, which keeps as many of
// them as the extension headers are long, does not forward them (found
// by FuzzRouter).
func TestIPv6TrailingOctetsTrimmed(t *testing.T) {
	p := ipv6Packet(hostIP6, farIP6, 64, header.UDPProtocolNumber, append([]byte{17, 0, 0, 0, 0, 0, 0, 0}, udpDatagram(1, 2, []byte("x"))...))
	p[6] = 43 // a Routing header (type 0, segments left 0) before the UDP datagram
	frame := ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, append(p, make([]byte, 8)...))
	var d recordingDispatcher
	testEndpoint(&d).HandleBatch(0, []hw.Frame{{Data: frame, WireLen: len(frame)}})
	if len(d.pkts) != 1 {
		t.Fatalf("delivered %d packets, want 1", len(d.pkts))
	}
	if got, want := len(d.pkts[0].l3), len(p); got != want {
		t.Errorf("delivered %d octets, want %d (the packet without its 8 trailing octets)", got, want)
	}
}

func TestHandleBatchPktType(t *testing.T) {
	var d recordingDispatcher
	e := testEndpoint(&d)
	p := ipv4Packet(hostIP4, routerIP4, 64, header.ICMPv4ProtocolNumber, icmpEcho(1, 1, nil))
	e.HandleBatch(0, []hw.Frame{
		{Data: ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, p)},
		{Data: ethFrame(bcastMAC, hostMAC, header.IPv4ProtocolNumber, p)},
		{Data: ethFrame(mcastMAC, hostMAC, header.IPv4ProtocolNumber, p)},
	})
	var got []tcpip.PacketType
	for _, p := range d.pkts {
		got = append(got, p.pktType)
	}
	want := []tcpip.PacketType{tcpip.PacketHost, tcpip.PacketBroadcast, tcpip.PacketMulticast}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PktType = %v, want %v", got, want)
	}
}

// TestPartialChecksumCompleted checks that a forwarded CHECKSUM_PARTIAL
// segment (a veth peer with TX offload) leaves with a full checksum.
func TestPartialChecksumCompleted(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		var d recordingDispatcher
		e := testEndpoint(&d)
		var p []byte
		var l4off int
		var src, dst []byte
		if v6 {
			p = ipv6Packet(hostIP6, farIP6, 64, header.UDPProtocolNumber, udpDatagram(1, 2, []byte("hello")))
			l4off, src, dst = 40, p[8:24], p[24:40]
		} else {
			p = ipv4Packet(hostIP4, farIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 2, []byte("hello")))
			l4off, src, dst = 20, p[12:16], p[16:20]
		}
		want := append([]byte(nil), p...)
		// What a Linux sender with TX offload puts on the wire: the
		// folded pseudo-header sum, not inverted.
		l4 := p[l4off:]
		ps := pseudoHeaderSum(src, dst, protoUDP, len(l4))
		l4[6], l4[7] = byte(ps>>8), byte(ps)
		e.HandleBatch(0, []hw.Frame{{Data: ethFrame(routerMAC, hostMAC, map[bool]tcpip.NetworkProtocolNumber{false: header.IPv4ProtocolNumber, true: header.IPv6ProtocolNumber}[v6], p), CsumPartial: true}})
		if len(d.pkts) != 1 {
			t.Fatalf("v6=%v: delivered %d packets, want 1", v6, len(d.pkts))
		}
		if got := d.pkts[0].l3; !bytes.Equal(got, want) {
			t.Errorf("v6=%v: forwarded packet = %x, want %x", v6, got, want)
		}
	}
}

// TestDispatchAllocs checks that our part of the receive path, from ring
// frame to the filled gVisor view, allocates nothing.
func TestDispatchAllocs(t *testing.T) {
	e := testEndpoint(&nopDispatcher{})
	frame := hw.Frame{Data: ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber,
		ipv4Packet(hostIP4, routerIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 2, make([]byte, 1400))))}
	local := e.local.Load()
	r := &rxRun{mac: e.mac, mtu: 1500, local: local}
	got := testing.AllocsPerRun(1000, func() {
		v := classify(&frame, r)
		if v.dropped {
			t.Fatalf("classify dropped the frame: %s", v.drop)
		}
		view := buffer.NewViewWithData(frame.Data)
		view.Release()
	})
	if got != 0 {
		t.Errorf("classify + copy: %v allocs per frame, want 0", got)
	}
	frames := []hw.Frame{frame}
	got = testing.AllocsPerRun(1000, func() { e.HandleBatch(0, frames) })
	t.Logf("HandleBatch to a no-op dispatcher (includes gVisor's NewPacketBuffer): %v allocs per frame", got)
}
