package stack

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// fgFrag4 is an IPv4 fragment src → dst of protocol proto with ID id,
// fragment offset fo (8-byte units), MF more and payload, with a correct
// header checksum.
func fgFrag4(src, dst netip.Addr, proto uint8, id, fo uint16, more bool, payload []byte) []byte {
	p := make([]byte, header.IPv4MinimumSize+len(payload))
	flags := uint8(0)
	if more {
		flags = header.IPv4FlagMoreFragments
	}
	ip := header.IPv4(p)
	ip.Encode(&header.IPv4Fields{
		TotalLength:    uint16(len(p)),
		ID:             id,
		Flags:          flags,
		FragmentOffset: fo * 8,
		TTL:            64,
		Protocol:       proto,
		SrcAddr:        tcpip.AddrFrom4(src.As4()),
		DstAddr:        tcpip.AddrFrom4(dst.As4()),
	})
	ip.SetChecksum(^ip.CalculateChecksum())
	copy(p[header.IPv4MinimumSize:], payload)
	return p
}

// fgFrag6 is an IPv6 packet src → dst whose payload is a Fragment header
// (next header first, offset fo, M more, ID id) and then payload.
func fgFrag6(src, dst netip.Addr, first uint8, id uint32, fo uint16, more bool, payload []byte) []byte {
	fh := make([]byte, 8, 8+len(payload))
	fh[0] = first
	v := fo << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(fh[2:], v)
	binary.BigEndian.PutUint32(fh[4:], id)
	return ipv6Packet(src, dst, 64, tcpip.TransportProtocolNumber(header.IPv6FragmentExtHdrIdentifier), append(fh, payload...))
}

// fgTCP is a TCP header (ports 40000 → dport, data offset 5, flags) and
// n-20 bytes of payload.
func fgTCP(dport uint16, flags header.TCPFlags, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint16(b[0:], 40000)
	binary.BigEndian.PutUint16(b[2:], dport)
	b[12], b[13] = 5<<4, uint8(flags)
	return b
}

// TestFragmentGuardDispatch sends the attacks of RFC 1858, RFC 5722 and
// RFC 7112 through the receive classifier without a NAT engine: each is
// an interface drop by reason, and legitimate fragments are delivered.
func TestFragmentGuardDispatch(t *testing.T) {
	d := &recordingDispatcher{}
	e := testEndpoint(d)
	e.frags = &fragFilter{}
	ip4 := func(id, fo uint16, more bool, proto uint8, pl []byte) []byte {
		return ethFrame(routerMAC, hostMAC, header.IPv4ProtocolNumber, fgFrag4(hostIP4, farIP4, proto, id, fo, more, pl))
	}
	ip6 := func(id uint32, fo uint16, more bool, first uint8, pl []byte) []byte {
		return ethFrame(routerMAC, hostMAC, header.IPv6ProtocolNumber, fgFrag6(hostIP6, farIP6, first, id, fo, more, pl))
	}
	syn := fgTCP(8080, header.TCPFlagSyn, 24)
	ack := fgTCP(8080, header.TCPFlagAck, 24)
	steps := []struct {
		name  string
		frame []byte
		drop  string // "" delivered
	}{
		{"RFC 1858 3.1 tiny first fragment (8 bytes of TCP)", ip4(1, 0, true, protoTCP, syn[:8]), "tiny_first_fragment"},
		{"RFC 1858 3.1 tiny UDP first fragment", ip4(2, 0, true, protoUDP, nil), "tiny_first_fragment"},
		{"RFC 1858 3.2 first fragment with an ACK", ip4(3, 0, true, protoTCP, ack), ""},
		{"RFC 1858 3.2 offset 1 rewriting the flags to SYN", ip4(3, 1, false, protoTCP, syn[8:]), "tcp_offset_8"},
		{"RFC 5722 first fragment", ip4(4, 0, true, protoUDP, make([]byte, 32)), ""},
		{"RFC 5722 overlapping fragment", ip4(4, 2, true, protoUDP, make([]byte, 32)), "overlap"},
		{"RFC 5722 rest of the condemned datagram", ip4(4, 6, false, protoUDP, make([]byte, 8)), "after_overlap"},
		{"legitimate IPv4 fragments 1", ip4(5, 0, true, protoUDP, make([]byte, 1480)), ""},
		{"legitimate IPv4 fragments 2", ip4(5, 185, false, protoUDP, make([]byte, 100)), ""},
		{"RFC 7112 destination options, TCP in the next fragment", ip6(6, 0, true, uint8(header.IPv6DestinationOptionsExtHdrIdentifier), []byte{protoTCP, 0, 1, 4, 0, 0, 0, 0}), "incomplete_chain"},
		{"RFC 7112 TCP header cut", ip6(7, 0, true, protoTCP, syn[:16]), "incomplete_chain"},
		{"RFC 5722 IPv6 first fragment", ip6(8, 0, true, protoTCP, syn), ""},
		{"RFC 5722 IPv6 overlap rewriting the port", ip6(8, 0, true, protoTCP, fgTCP(22, header.TCPFlagSyn, 24)), "overlap"},
		{"RFC 1858 3.2 on IPv6", ip6(9, 1, false, protoTCP, make([]byte, 16)), "tcp_offset_8"},
		{"legitimate IPv6 fragments 1", ip6(10, 0, true, protoUDP, make([]byte, 1232)), ""},
		{"legitimate IPv6 fragments 2", ip6(10, 154, false, protoUDP, make([]byte, 100)), ""},
		{"IPv6 atomic fragment (RFC 6946)", ip6(11, 0, false, protoTCP, syn[:8]), ""},
	}
	for _, s := range steps {
		var before InterfaceStats
		e.stats.fill(&before)
		n := len(d.pkts)
		e.HandleBatch(0, []hw.Frame{{Data: s.frame, WireLen: len(s.frame)}})
		var after InterfaceStats
		e.stats.fill(&after)
		delivered := len(d.pkts) > n
		switch {
		case s.drop == "" && !delivered:
			t.Errorf("%s: not delivered (drops %v)", s.name, after.Drops)
		case s.drop != "" && delivered:
			t.Errorf("%s: delivered, want a %s drop", s.name, s.drop)
		case s.drop != "" && after.Drops[s.drop] != before.Drops[s.drop]+1:
			t.Errorf("%s: drops[%s] = %d, want %d", s.name, s.drop, after.Drops[s.drop], before.Drops[s.drop]+1)
		}
	}
}

// TestFragmentGuardBeforeNAT: through a port forward, the guard refuses
// before the NAT engine sees the fragment (an interface drop by reason,
// not "nat"), and the router answers an incomplete IPv6 chain with
// Parameter Problem code 3, pointer 0 (RFC 7112 section 5).
func TestFragmentGuardBeforeNAT(t *testing.T) {
	l, nat := newNATLab(t, []natengine.Forward{{Proto: natengine.ProtoTCP, FirstPort: 8080, LastPort: 8080, To: netip.AddrPortFrom(aIP4, 80)}})
	ping(t, l.b, wanIP4)
	wan := l.r.Interface("wan")
	send := func(ip []byte, et tcpip.NetworkProtocolNumber) {
		f := ethFrame(wanMAC, bMAC, et, ip)
		wan.HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f)}})
	}
	natDrops := func() uint64 {
		var n uint64
		for i := range nat.Stats().Drops {
			n += nat.Stats().Drops[i].Load()
		}
		return n
	}
	nd := natDrops()
	send(fgFrag4(bIP4, wanIP4, protoTCP, 1, 0, true, fgTCP(8080, header.TCPFlagSyn, 24)[:8]), header.IPv4ProtocolNumber)
	send(fgFrag4(bIP4, wanIP4, protoTCP, 2, 0, true, fgTCP(8080, header.TCPFlagSyn, 24)), header.IPv4ProtocolNumber)
	send(fgFrag4(bIP4, wanIP4, protoTCP, 2, 1, false, make([]byte, 16)), header.IPv4ProtocolNumber)
	st := wan.Stats()
	if st.Drops["tiny_first_fragment"] != 1 || st.Drops["tcp_offset_8"] != 1 {
		t.Errorf("wan drops %v, want one tiny_first_fragment and one tcp_offset_8", st.Drops)
	}
	if got := natDrops(); got != nd {
		t.Errorf("NAT engine dropped %d packets: the guard should have refused them first", got-nd)
	}
	if got := l.tapA.Wait(ctxTimeout(t, 200*time.Millisecond), func(f []byte) bool {
		return len(f) > 34 && be16(f[12:]) == uint16(header.IPv4ProtocolNumber) && header.IPv4(f[14:]).ID() == 1
	}); got != nil {
		t.Errorf("the tiny first fragment reached the LAN: %x", got)
	}

	chain := fgFrag6(bIP6, aIP6, uint8(header.IPv6DestinationOptionsExtHdrIdentifier), 9, 0, true, []byte{protoTCP, 0, 1, 4, 0, 0, 0, 0})
	ping(t, l.b, aIP6) // neighbours
	send(chain, header.IPv6ProtocolNumber)
	f := l.tapB.Wait(ctxTimeout(t, 5*time.Second), func(f []byte) bool {
		if len(f) < 14+40+8 || be16(f[12:]) != uint16(header.IPv6ProtocolNumber) {
			return false
		}
		ip := header.IPv6(f[14:])
		return ip.TransportProtocol() == header.ICMPv6ProtocolNumber && header.ICMPv6(ip.Payload()).Type() == header.ICMPv6ParamProblem &&
			bytes.HasPrefix(chain, header.ICMPv6(ip.Payload()).Payload())
	})
	if f == nil {
		t.Fatal("no Parameter Problem about the incomplete chain")
	}
	ip := header.IPv6(f[14:])
	icmp := header.ICMPv6(ip.Payload())
	if icmp.Code() != 3 || icmp.TypeSpecific() != 0 {
		t.Errorf("Parameter Problem code %d pointer %d, want code 3 pointer 0", icmp.Code(), icmp.TypeSpecific())
	}
	if !bytes.Equal(icmp.Payload(), chain) {
		t.Errorf("Parameter Problem quotes %x, want the whole fragment %x", icmp.Payload(), chain)
	}
	if checksum.Checksum(icmp, header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(icmp)))) != 0xffff {
		t.Error("Parameter Problem has a bad checksum")
	}
	if got := wan.Stats().Drops["incomplete_chain"]; got != 1 {
		t.Errorf("incomplete_chain drops = %d, want 1", got)
	}
}

// TestFragmentGuardAllocs: with the guard in place, non-fragments cost no
// allocation (nor do fragments of a datagram already seen).
func TestFragmentGuardAllocs(t *testing.T) {
	e := testEndpoint(&nopDispatcher{})
	ff := &fragFilter{}
	local := e.local.Load()
	for _, tc := range []struct {
		name string
		et   tcpip.NetworkProtocolNumber
		ip   []byte
	}{
		{"ipv4 udp", header.IPv4ProtocolNumber, ipv4Packet(hostIP4, farIP4, 64, header.UDPProtocolNumber, udpDatagram(1, 2, make([]byte, 1400)))},
		{"ipv6 udp", header.IPv6ProtocolNumber, ipv6Packet(hostIP6, farIP6, 64, header.UDPProtocolNumber, udpDatagram(1, 2, make([]byte, 1400)))},
		{"ipv6 destination options", header.IPv6ProtocolNumber, ipv6Packet(hostIP6, farIP6, 64, tcpip.TransportProtocolNumber(header.IPv6DestinationOptionsExtHdrIdentifier), append([]byte{protoUDP, 0, 1, 4, 0, 0, 0, 0}, udpDatagram(1, 2, nil)...))},
		{"ipv4 later fragment", header.IPv4ProtocolNumber, fgFrag4(hostIP4, farIP4, protoUDP, 7, 100, true, make([]byte, 64))},
	} {
		frame := hw.Frame{Data: ethFrame(routerMAC, hostMAC, tc.et, tc.ip)}
		classify(&frame, &rxRun{mac: e.mac, mtu: 1500, local: local, frags: ff}) // a fragment's datagram entry, once
		got := testing.AllocsPerRun(1000, func() {
			if v := classify(&frame, &rxRun{mac: e.mac, mtu: 1500, local: local, frags: ff}); v.dropped && tc.name != "ipv4 later fragment" {
				t.Fatalf("%s: dropped: %s", tc.name, v.drop)
			}
		})
		if got != 0 {
			t.Errorf("%s: classify with the guard: %v allocs, want 0", tc.name, got)
		}
	}
}

// TestFragFilterClockOnlyForFragments: an IPv6 packet that may carry a
// Fragment header but does not (a GRE tunnel packet, a hop-by-hop option)
// passes without a clock read; a fragment reads it once.
func TestFragFilterClockOnlyForFragments(t *testing.T) {
	reads := 0
	ff := &fragFilter{now: func() int64 { reads++; return 1 }}
	var v verdict
	for _, ip := range [][]byte{
		ipv6Packet(bIP6, aIP6, 64, 47, []byte("gre payload")),
		chainPacket(bIP6, aIP6, nhHopByHop, optionsHeader(protoUDP, 8), udpDatagram(1, 2, nil)),
	} {
		if ff.refused(ip, true, &v) {
			t.Fatalf("refused a packet without a Fragment header: %s", v.drop)
		}
	}
	if reads != 0 {
		t.Errorf("clock read %d times for packets without a Fragment header", reads)
	}
	frag := chainPacket(bIP6, aIP6, nhFragment, fragmentHeader(protoUDP, 0, true, 9), udpDatagram(1, 2, make([]byte, 24)))
	ff.refused(frag, true, &v)
	if reads != 1 {
		t.Errorf("clock read %d times for one fragment, want 1", reads)
	}
}
