package stack

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// The whole-router fuzz harness (FuzzRouter): a two-port NAT router as the
// daemon builds it, each port's frames going through a Trunk into the
// real receive dispatch, and a fake port per side that records what the
// router sends and answers its ARP and neighbour solicitations.
//
//	LAN port (untagged)  lan  192.168.1.1/24  fd00:1::1/64   role lan, gro selective
//	WAN port (VLAN 2)    wan  203.0.113.2/24  2001:db8:2::2/64 masquerade, MTU 1400
//	default routes via 203.0.113.1 and 2001:db8:2::1 (static neighbours)
//	port forward tcp 8080 on wan -> 192.168.1.10:80
//	allow6 tcp to fd00:1::10 port 22; wan_input drop on wan
//	router listens on tcp port 80 (both families) and accepts
//
// Every other address is resolvable: the fake port answers solicitations for
// it with a MAC made from the address, so netstack forwards to any host a
// mutated packet names.

var (
	fzLANMAC  = mustMAC("02:00:00:00:01:01")
	fzWANMAC  = mustMAC("02:00:00:00:02:01")
	fzHostMAC = mustMAC("02:00:00:00:01:10") // the LAN host 192.168.1.10
	fzGwMAC   = mustMAC("02:00:00:00:02:fe") // the WAN gateway

	fzLAN4   = netip.MustParseAddr("192.168.1.1")
	fzLAN6   = netip.MustParseAddr("fd00:1::1")
	fzWAN4   = netip.MustParseAddr("203.0.113.2")
	fzWAN6   = netip.MustParseAddr("2001:db8:2::2")
	fzHost4  = netip.MustParseAddr("192.168.1.10")
	fzHost6  = netip.MustParseAddr("fd00:1::10")
	fzGw4    = netip.MustParseAddr("203.0.113.1")
	fzGw6    = netip.MustParseAddr("2001:db8:2::1")
	fzFar4   = netip.MustParseAddr("198.51.100.7") // a server on the Internet
	fzFar6   = netip.MustParseAddr("2001:db8:99::7")
	fzLANNet = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("fd00:1::/64")}
)

const (
	fzWANVID     = 2
	fzWANMTU     = 1400
	fzForwardExt = 8080 // tcp, on the WAN address
	fzForwardInt = 80   // on fzHost4
	fzAllow6Port = 22   // tcp, to fzHost6
	fzListenPort = 80   // the router's own socket
)

// fuzzPort is one port's far side: a FrameWriter that keeps what the router
// sends, for the harness to check and answer.
type fuzzPort struct {
	mu     sync.Mutex
	frames [][]byte
}

// WriteFrames implements hw.FrameWriter.
func (p *fuzzPort) WriteFrames(frames [][]byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range frames {
		p.frames = append(p.frames, append([]byte(nil), f...))
	}
	return len(frames), nil
}

// take returns the frames written since the last take.
func (p *fuzzPort) take() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.frames
	p.frames = nil
	return f
}

// fuzzNet is the router under fuzzing with its two ports.
type fuzzNet struct {
	r      *Netstack
	nat    *natengine.Engine
	ports  [2]*fuzzPort
	trunks [2]*Trunk
	macs   [2]net.HardwareAddr // the router's MAC on each port
	peers  [2]net.HardwareAddr // the source MAC of wrapped frames
	close  []func()
}

const (
	portLAN = 0
	portWAN = 1
)

// newFuzzNet builds the router described at the top of this file.
func newFuzzNet(tb testing.TB) *fuzzNet {
	tb.Helper()
	n := &fuzzNet{
		ports: [2]*fuzzPort{{}, {}},
		macs:  [2]net.HardwareAddr{fzLANMAC, fzWANMAC},
		peers: [2]net.HardwareAddr{fzHostMAC, fzGwMAC},
	}
	n.nat = natengine.New(natengine.Config{MaxConns: 1024})
	cfg := Config{
		Interfaces: []InterfaceConfig{
			{
				Name: "lan", MAC: fzLANMAC, Writer: n.ports[portLAN], GRO: GROSelective,
				Addresses: []netip.Prefix{netip.MustParsePrefix("192.168.1.1/24"), netip.MustParsePrefix("fd00:1::1/64")},
			},
			{
				Name: "wan", MAC: fzWANMAC, Writer: n.ports[portWAN], VLAN: []uint16{fzWANVID}, MTU: fzWANMTU, DropNewInput: true,
				Addresses: []netip.Prefix{netip.MustParsePrefix("203.0.113.2/24"), netip.MustParsePrefix("2001:db8:2::2/64")},
			},
		},
		Routes: []RouteConfig{
			{To: netip.MustParsePrefix("0.0.0.0/0"), Via: fzGw4},
			{To: netip.MustParsePrefix("::/0"), Via: fzGw6},
		},
		NAT: n.nat,
	}
	var err error
	if n.r, err = New(cfg, nil); err != nil {
		tb.Fatalf("New: %v", err)
	}
	lanID, _ := n.r.NATIface("lan")
	wanID, _ := n.r.NATIface("wan")
	err = n.nat.SetRules(natengine.Rules{
		Ifaces: []natengine.IfaceConfig{
			{ID: lanID, Name: "lan", Addrs: []netip.Addr{fzLAN4, fzLAN6}, MTU: 1500},
			{ID: wanID, Name: "wan", WAN: true, Masquerade: true, Addrs: []netip.Addr{fzWAN4, fzWAN6}, MTU: fzWANMTU},
		},
		Forwards: []natengine.Forward{{Proto: natengine.ProtoTCP, In: wanID, FirstPort: fzForwardExt, LastPort: fzForwardExt, To: netip.AddrPortFrom(fzHost4, fzForwardInt)}},
		Allow6:   []natengine.Allow6{{Proto: natengine.ProtoTCP, Dst: netip.PrefixFrom(fzHost6, 128), FirstPort: fzAllow6Port, LastPort: fzAllow6Port}},
		Hairpin:  true,
	})
	if err != nil {
		n.r.Close()
		tb.Fatalf("SetRules: %v", err)
	}
	for i, name := range []string{"lan", "wan"} {
		n.trunks[i] = n.r.NewTrunk()
		if err := n.trunks[i].Set(n.r.Interface(name)); err != nil {
			n.r.Close()
			tb.Fatal(err)
		}
	}
	s := n.r.Stack()
	for _, nb := range []struct {
		nic  string
		addr netip.Addr
		mac  net.HardwareAddr
	}{
		{"lan", fzHost4, fzHostMAC}, {"lan", fzHost6, fzHostMAC},
		{"wan", fzGw4, fzGwMAC}, {"wan", fzGw6, fzGwMAC},
	} {
		id, _ := n.r.NATIface(nb.nic)
		proto := header.IPv4ProtocolNumber
		if nb.addr.Is6() {
			proto = header.IPv6ProtocolNumber
		}
		if err := s.AddStaticNeighbor(tcpip.NICID(id), proto, tcpipAddr(nb.addr), tcpip.LinkAddress(nb.mac)); err != nil {
			n.r.Close()
			tb.Fatalf("AddStaticNeighbor(%s, %s): %s", nb.nic, nb.addr, err)
		}
	}
	// One dual-stack socket takes both families.
	for _, a := range []netip.Addr{netip.IPv6Unspecified()} {
		ln, err := n.r.ListenTCP(netip.AddrPortFrom(a, fzListenPort))
		if err != nil {
			n.r.Close()
			tb.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		n.close = append(n.close, func() { ln.Close(); <-done })
	}
	return n
}

// resolving reports whether netstack is resolving a neighbour: it sends
// the first solicitation from a timer, so it may not have been sent yet.
func (n *fuzzNet) resolving() bool {
	s := n.r.Stack()
	for _, name := range []string{"lan", "wan"} {
		id, _ := n.r.NATIface(name)
		for _, proto := range []tcpip.NetworkProtocolNumber{header.IPv4ProtocolNumber, header.IPv6ProtocolNumber} {
			nbs, err := s.Neighbors(tcpip.NICID(id), proto)
			if err != nil {
				continue
			}
			for _, nb := range nbs {
				if nb.State == stack.Incomplete {
					return true
				}
			}
		}
	}
	return false
}

// Close stops the router and the listeners' goroutines.
func (n *fuzzNet) Close() {
	for _, c := range n.close {
		c()
	}
	n.r.Close()
	for _, p := range n.ports {
		p.take()
	}
}

// fuzzFrame is one frame of an input, as a port delivers it, and what the
// harness knows about the IP packet in it.
type fuzzFrame struct {
	port int
	f    hw.Frame
	ip   ipInfo // of the untagged frame; valid iff ip.ok
	// orig is the frame before the router rewrote it in place, for
	// failure messages.
	orig []byte
}

// Control byte of a frame in a FuzzRouter input.
const (
	ctlWAN       = 1 << iota // arrives on the WAN port (else the LAN port)
	ctlRaw                   // payload is a whole Ethernet frame; else an IP packet the harness wraps
	ctlFix                   // fix lengths, the IPv4 header checksum and the L4 checksum
	ctlWrongTag              // tagged as the other port's interface would be
	ctlInband                // the outer tag in the frame, not in the ring header
	ctlCsumValid             // hw.Frame.CsumValid
	ctlPartial               // hw.Frame.CsumPartial (with ctlFix: a real CHECKSUM_PARTIAL frame)
	ctlBacklog               // hw.Frame.Backlogged
)

// maxFuzzFrames bounds the frames of one input.
const maxFuzzFrames = 8

// splitInput cuts an input into frames: each is a control byte, a 16-bit
// big-endian length and that many bytes (fewer at the end).
func (n *fuzzNet) splitInput(data []byte) []fuzzFrame {
	var out []fuzzFrame
	for len(data) >= 3 && len(out) < maxFuzzFrames {
		ctl := data[0]
		l := min(int(binary.BigEndian.Uint16(data[1:])), len(data)-3)
		payload := data[3 : 3+l]
		data = data[3+l:]
		out = append(out, n.buildFrame(ctl, payload))
	}
	return out
}

// buildFrame makes the frame a control byte and payload describe.
func (n *fuzzNet) buildFrame(ctl byte, payload []byte) fuzzFrame {
	port := portLAN
	if ctl&ctlWAN != 0 {
		port = portWAN
	}
	var frame []byte
	if ctl&ctlRaw != 0 {
		frame = append([]byte(nil), payload...)
	} else {
		et := uint16(header.ARPProtocolNumber)
		if len(payload) > 0 {
			switch payload[0] >> 4 {
			case 4:
				et = uint16(header.IPv4ProtocolNumber)
			case 6:
				et = uint16(header.IPv6ProtocolNumber)
			}
		}
		frame = make([]byte, header.EthernetMinimumSize+len(payload))
		copy(frame, n.macs[port])
		copy(frame[6:], n.peers[port])
		binary.BigEndian.PutUint16(frame[12:], et)
		copy(frame[header.EthernetMinimumSize:], payload)
	}
	if ctl&ctlFix != 0 {
		fixFrame(frame, ctl&ctlPartial != 0)
	}
	ff := fuzzFrame{port: port}
	// A copy: the router rewrites frames in place (NAT, untagging).
	ff.ip = parseIPFrame(append([]byte(nil), frame...))
	tagged := port == portWAN
	if ctl&ctlWrongTag != 0 {
		tagged = !tagged
	}
	vid := uint16(fzWANVID)
	if port == portLAN {
		vid = 1
	}
	f := hw.Frame{Data: frame, WireLen: len(frame), CsumValid: ctl&ctlCsumValid != 0, CsumPartial: ctl&ctlPartial != 0, Backlogged: ctl&ctlBacklog != 0}
	if ctl&ctlPartial != 0 && ctl&ctlFix != 0 && len(frame) > header.EthernetMinimumSize+1500 {
		f.GSO = fuzzGSO(frame)
	}
	switch {
	case !tagged:
	case ctl&ctlInband != 0 && len(frame) >= 12:
		if f.GSO.NeedsCsum {
			f.GSO.CsumStart += vlanTagLength // the port counts from the frame's start
		}
		t := make([]byte, 0, len(frame)+vlanTagLength)
		t = append(t, frame[:12]...)
		t = binary.BigEndian.AppendUint16(t, etherTypeVLAN)
		t = binary.BigEndian.AppendUint16(t, vid)
		f.Data = append(t, frame[12:]...)
		f.WireLen = len(f.Data)
	default:
		f.VLANValid, f.VLANTCI, f.VLANTPID = true, vid, etherTypeVLAN
	}
	ff.f = f
	ff.orig = append([]byte(nil), f.Data...)
	return ff
}

// fuzzGSO makes a frame longer than the MTU that ctlFix and ctlPartial
// made a CHECKSUM_PARTIAL packet a superframe (hw.Frame.GSO), as a port
// with vnet headers delivers a local sender's TSO/GSO frame. Its last
// bytes choose the segment size (200 to 1599) and, one time in four,
// a GSO type that need not match the packet (TCPv4, TCPv6, UDP), with ECN
// on TCP when their top bit is set; the checksum offsets are where the
// packet's L4 checksum is (or would be for IPv4 TCP).
func fuzzGSO(frame []byte) hw.GSO {
	n := len(frame)
	sel := frame[n-1]
	g := hw.GSO{Size: uint16(200 + int(binary.BigEndian.Uint16(frame[n-3:]))%1400), NeedsCsum: true, CsumStart: 14 + 20, CsumOffset: 16}
	ip := frame[header.EthernetMinimumSize:]
	proto := uint8(0)
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) > 9 {
			g.Type, proto, g.CsumStart = hw.GSOTCPv4, ip[9], uint16(14+int(ip[0]&0xf)*4)
		}
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) > 6 {
			g.Type, proto, g.CsumStart = hw.GSOTCPv6, ip[6], 14+40
		}
	}
	if proto == protoUDP {
		g.Type, g.CsumOffset = hw.GSOUDPL4, udpChecksumOffset
	}
	switch sel % 8 {
	case 1:
		g.Type = hw.GSOTCPv4
	case 2:
		g.Type = hw.GSOTCPv6
	case 3:
		g.Type = hw.GSOUDPL4
	}
	if g.Type == hw.GSONone {
		g.Type = hw.GSOTCPv4
	}
	g.ECN = sel&0x80 != 0 && g.Type != hw.GSOUDPL4
	g.HdrLen = g.CsumStart + 20
	return g
}

// fixFrame makes an untagged frame's IP packet consistent: IPv4 total length
// and header checksum, IPv6 payload length, and the TCP, UDP, ICMP or ICMPv6
// checksum of an unfragmented packet. With partial, a TCP or UDP checksum
// field gets what a CHECKSUM_PARTIAL sender leaves there: the folded
// pseudo-header sum.
func fixFrame(frame []byte, partial bool) {
	if len(frame) < header.EthernetMinimumSize {
		return
	}
	ip := frame[header.EthernetMinimumSize:]
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) < header.IPv4MinimumSize || len(ip) > 0xffff {
			return
		}
		ihl := int(ip[0]&0xf) * 4
		if ihl < header.IPv4MinimumSize || ihl > len(ip) {
			return
		}
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		h := header.IPv4(ip)
		h.SetChecksum(0)
		h.SetChecksum(^checksum.Checksum(ip[:ihl], 0))
		if h.More() || h.FragmentOffset() != 0 {
			return
		}
		fixL4(false, ip[12:16], ip[16:20], ip[9], ip[ihl:], partial)
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize || len(ip)-header.IPv6MinimumSize > 0xffff {
			return
		}
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-header.IPv6MinimumSize))
		proto, off, ok := ipv6Transport(ip)
		if !ok {
			return
		}
		fixL4(true, ip[8:24], ip[24:40], proto, ip[off:], partial)
	}
}

func fixL4(v6 bool, src, dst []byte, proto uint8, l4 []byte, partial bool) {
	switch {
	case proto == uint8(header.ICMPv4ProtocolNumber) && !v6 && len(l4) >= header.ICMPv4MinimumSize:
		l4[2], l4[3] = 0, 0
		binary.BigEndian.PutUint16(l4[2:], ^checksum.Checksum(l4, 0))
	case proto == uint8(header.ICMPv6ProtocolNumber) && v6 && len(l4) >= header.ICMPv6MinimumSize:
		l4[2], l4[3] = 0, 0
		binary.BigEndian.PutUint16(l4[2:], ^checksum.Checksum(l4, pseudoHeaderSum(src, dst, proto, len(l4))))
	case partial:
		if off, minLen, ok := checksumOffset(proto); ok && len(l4) >= minLen {
			binary.BigEndian.PutUint16(l4[off:], pseudoHeaderSum(src, dst, proto, len(l4)))
		}
	default:
		setL4Checksum(src, dst, proto, l4)
	}
}

// deliver hands frames to the ports' trunks, one batch per run of frames
// for the same port, in input order.
func (n *fuzzNet) deliver(frames []fuzzFrame) {
	for i := 0; i < len(frames); {
		j := i + 1
		for j < len(frames) && frames[j].port == frames[i].port {
			j++
		}
		batch := make([]hw.Frame, 0, j-i)
		for _, ff := range frames[i:j] {
			batch = append(batch, ff.f)
		}
		n.trunks[frames[i].port].HandleBatch(0, batch)
		i = j
	}
}

// answer builds the ARP replies and neighbour advertisements for the
// solicitations in frames sent on port, as the hosts on that link would
// send them, tagged as that port's interface expects.
func (n *fuzzNet) answer(port int, frames [][]byte) []fuzzFrame {
	var out []fuzzFrame
	for _, f := range frames {
		eth, ok := untagSent(f)
		if !ok {
			continue
		}
		var reply []byte
		switch binary.BigEndian.Uint16(eth[12:]) {
		case uint16(header.ARPProtocolNumber):
			reply = arpReply(eth[header.EthernetMinimumSize:])
		case uint16(header.IPv6ProtocolNumber):
			reply = naReply(eth[header.EthernetMinimumSize:], port)
		}
		if reply == nil {
			continue
		}
		ff := fuzzFrame{port: port, f: hw.Frame{Data: reply, WireLen: len(reply)}}
		if port == portWAN {
			ff.f.VLANValid, ff.f.VLANTCI, ff.f.VLANTPID = true, fzWANVID, etherTypeVLAN
		}
		out = append(out, ff)
	}
	return out
}

// hostMACFor is the MAC of the host with address a: the two known hosts', or
// one made from the address.
func hostMACFor(a netip.Addr) net.HardwareAddr {
	switch a {
	case fzHost4, fzHost6:
		return fzHostMAC
	case fzGw4, fzGw6:
		return fzGwMAC
	}
	b := a.As16()
	return net.HardwareAddr{0x02, 0xaa, b[12], b[13], b[14], b[15]}
}

// answered reports whether the fake port answers solicitations for a: it
// does for every unicast address but the router's, so that netstack
// forwards to whatever host a mutated packet names (it resolves only
// next hops on its links).
func answered(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !isRouterAddr(a)
}

func isRouterAddr(a netip.Addr) bool {
	switch a {
	case fzLAN4, fzLAN6, fzWAN4, fzWAN6:
		return true
	}
	return false
}

func arpReply(arp []byte) []byte {
	if len(arp) < header.ARPSize {
		return nil
	}
	a := header.ARP(arp)
	if !a.IsValid() || a.Op() != header.ARPRequest {
		return nil
	}
	target, _ := netip.AddrFromSlice(a.ProtocolAddressTarget())
	if !answered(target) {
		return nil
	}
	mac := hostMACFor(target)
	f := ethFrame(a.HardwareAddressSender(), mac, header.ARPProtocolNumber, make([]byte, header.ARPSize))
	r := header.ARP(f[header.EthernetMinimumSize:])
	r.SetIPv4OverEthernet()
	r.SetOp(header.ARPReply)
	copy(r.HardwareAddressSender(), mac)
	copy(r.ProtocolAddressSender(), a.ProtocolAddressTarget())
	copy(r.HardwareAddressTarget(), a.HardwareAddressSender())
	copy(r.ProtocolAddressTarget(), a.ProtocolAddressSender())
	return f
}

// naReply answers a neighbour solicitation (RFC 4861 section 7.2.4) with a
// solicited, overriding advertisement carrying the target's MAC.
func naReply(ip []byte, port int) []byte {
	if len(ip) < header.IPv6MinimumSize+header.ICMPv6NeighborSolicitMinimumSize || ip[6] != uint8(header.ICMPv6ProtocolNumber) {
		return nil
	}
	icmp := header.ICMPv6(ip[header.IPv6MinimumSize:])
	if icmp.Type() != header.ICMPv6NeighborSolicit {
		return nil
	}
	ns := header.NDPNeighborSolicit(icmp.MessageBody())
	t := ns.TargetAddress()
	target, _ := netip.AddrFromSlice(t.AsSlice())
	if !answered(target) {
		return nil
	}
	src, _ := netip.AddrFromSlice(ip[8:24])
	if src.IsUnspecified() {
		return nil // duplicate address detection: no one else has it
	}
	mac := hostMACFor(target)
	body := make([]byte, header.ICMPv6NeighborAdvertMinimumSize+8)
	na := header.ICMPv6(body)
	na.SetType(header.ICMPv6NeighborAdvert)
	adv := header.NDPNeighborAdvert(na.MessageBody())
	adv.SetSolicitedFlag(true)
	adv.SetOverrideFlag(true)
	adv.SetTargetAddress(ns.TargetAddress())
	opt := body[header.ICMPv6NeighborAdvertMinimumSize:]
	opt[0], opt[1] = 2, 1 // target link-layer address, 8 octets (RFC 4861 4.6.1)
	copy(opt[2:], mac)
	p := ipv6Packet(target, src, 255, header.ICMPv6ProtocolNumber, body)
	return ethFrame(fzMACFor(port), mac, header.IPv6ProtocolNumber, p)
}

// fzMACFor is the router's MAC on port.
func fzMACFor(port int) net.HardwareAddr {
	if port == portWAN {
		return fzWANMAC
	}
	return fzLANMAC
}

// untagSent returns a frame the router sent with its VLAN tags removed.
func untagSent(f []byte) ([]byte, bool) {
	if len(f) < header.EthernetMinimumSize {
		return nil, false
	}
	off := 12
	for len(f) >= off+2+vlanTagLength && isTPID(binary.BigEndian.Uint16(f[off:])) {
		off += vlanTagLength
	}
	if off == 12 {
		return f, true
	}
	if len(f) < off+2 {
		return nil, false
	}
	return append(append([]byte(nil), f[:12]...), f[off:]...), true
}

func (f fuzzFrame) String() string {
	return fmt.Sprintf("port %d ring-tagged=%v partial=%v len %d: %x", f.port, f.f.VLANValid, f.f.CsumPartial, len(f.orig), f.orig)
}
