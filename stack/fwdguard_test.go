package stack

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/stack/stacktest"
)

// IPv6 extension header numbers (RFC 8200 section 4).
const (
	nhHopByHop = 0
	nhRouting  = 43
	nhFragment = 44
	nhDestOpts = 60
	nhNoNext   = 59
)

// optionsHeader is a Hop-by-Hop or Destination Options header of size
// bytes (a multiple of 8, at least 8) followed by next, filled with PadN
// options of at most 250 bytes each (the packet that crashed the router
// is five of them and a 12-byte one).
func optionsHeader(next uint8, size int) []byte {
	h := make([]byte, size)
	h[0], h[1] = next, uint8(size/8-1)
	for off := 2; off < size; {
		n := min(size-off, 250)
		if n == 1 {
			h[off] = 0 // Pad1
			off++
			continue
		}
		if size-off-n == 1 {
			n-- // leave room for a Pad1 rather than one lone byte
		}
		h[off], h[off+1] = 1, uint8(n-2) // PadN
		off += n
	}
	return h
}

// routingHeader is a Routing header of the given type with n addresses
// (RFC 8200 section 4.4; type 0 as RFC 2460 had it, deprecated by RFC
// 5095), segments left sl.
func routingHeader(next, typ uint8, n int, sl uint8) []byte {
	h := make([]byte, 8+16*n)
	h[0], h[1], h[2], h[3] = next, uint8(2*n), typ, sl
	for i := range n {
		h[8+16*i] = 0xfd
		h[8+16*i+15] = byte(i + 1)
	}
	return h
}

// fragmentHeader is a Fragment header at offset off (8-byte units).
func fragmentHeader(next uint8, off uint16, more bool, id uint32) []byte {
	h := make([]byte, 8)
	h[0] = next
	v := off << 3
	if more {
		v |= 1
	}
	h[2], h[3] = byte(v>>8), byte(v)
	h[4], h[5], h[6], h[7] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
	return h
}

// chainPacket is an IPv6 packet from src to dst whose payload is the
// concatenation of parts (extension headers, then the upper layer); first
// is the next header of the fixed header.
func chainPacket(src, dst netip.Addr, first uint8, parts ...[]byte) []byte {
	payload := bytes.Join(parts, nil)
	return ipv6Packet(src, dst, 64, tcpip.TransportProtocolNumber(first), payload)
}

// paramProblemAbout matches an ICMPv6 Parameter Problem sent to dst
// whose quote is the start of pkt (the taps keep every frame, so earlier
// cases' errors are still there).
func paramProblemAbout(dst netip.Addr, pkt []byte) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14+40+8 || be16(f[12:]) != uint16(header.IPv6ProtocolNumber) {
			return false
		}
		ip := header.IPv6(f[14:])
		if ip.DestinationAddress() != tcpip.AddrFrom16(dst.As16()) ||
			ip.TransportProtocol() != header.ICMPv6ProtocolNumber ||
			header.ICMPv6(ip.Payload()).Type() != header.ICMPv6ParamProblem {
			return false
		}
		quoted := header.ICMPv6(ip.Payload()).Payload()
		return len(quoted) <= len(pkt) && bytes.Equal(quoted, pkt[:len(quoted)])
	}
}

// udpTo matches an IPv6 frame to dst carrying the marker somewhere.
func carries(marker []byte) func([]byte) bool {
	return func(f []byte) bool { return bytes.Contains(f, marker) }
}

// TestForwardHeaderChainTooLong sends the packet that crashed the router (a
// 1264-byte Destination Options header of PadN options, then UDP) and the
// other chains over 1280 bytes both ways through the router. Before the
// forward guard each one killed the process in gVisor's
// handleForwardingError ("unrecognized tcpip forwarding error: header is
// malformed"). Now each is dropped, counted as ipv6_header_chain on the
// ingress interface and answered with Parameter Problem code 7 pointing at
// octet 1280 (RFC 8883 section 4.3.3), and the router still forwards.
func TestForwardHeaderChainTooLong(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP6) // neighbours both ways
	marker := []byte("chain-too-long!!")
	udp := udpDatagram(4000, 53, marker)
	cases := []struct {
		name  string
		first uint8
		parts [][]byte
	}{
		{"crasher: destopts 1264 + udp", nhDestOpts, [][]byte{optionsHeader(protoUDP, 1264), udp}},
		{"hop-by-hop 1248 + udp", nhHopByHop, [][]byte{optionsHeader(protoUDP, 1248), udp}},
		{"hbh + routing type 0 + destopts", nhHopByHop, [][]byte{optionsHeader(nhRouting, 512), routingHeader(nhDestOpts, 0, 24, 0), optionsHeader(protoUDP, 360), udp}},
		{"many small destopts", nhDestOpts, append(repeat(func(last bool) []byte {
			if last {
				return optionsHeader(protoUDP, 8)
			}
			return optionsHeader(nhDestOpts, 8)
		}, 156), udp)},
		{"long chain then a first fragment", nhDestOpts, [][]byte{optionsHeader(nhFragment, 1248), fragmentHeader(protoUDP, 0, true, 7), udp}},
		{"long chain then no next header", nhDestOpts, [][]byte{optionsHeader(nhNoNext, 1256)}},
		// parse.IPv6 counts everything after No Next Header as header, so
		// a plain packet with 1248 bytes after it is a 1288-byte chain.
		{"no next header and 1248 bytes", nhNoNext, [][]byte{bytes.Repeat(marker[:8], 156)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, dir := range []struct {
				name     string
				src, dst netip.Addr
				inject   func([]byte)
				back     *stacktest.Tap
				far      *stacktest.Tap
				ifname   string
				inMAC    []byte
				hostMAC  []byte
			}{
				{"lan to wan", aIP6, bIP6, l.inject, l.tapA, l.tapB, "lan", lanMAC, aMAC},
				{"wan to lan", bIP6, aIP6, func(f []byte) {
					l.r.Interface("wan").HandleBatch(0, []hw.Frame{{Data: f, WireLen: len(f)}})
				}, l.tapB, l.tapA, "wan", wanMAC, bMAC},
			} {
				before := l.r.Interface(dir.ifname).Stats().Drops["ipv6_header_chain"]
				pkt := chainPacket(dir.src, dir.dst, tc.first, tc.parts...)
				if n := chainLen(pkt); n <= 1280 {
					t.Fatalf("%s: test packet's chain is %d bytes, want > 1280", dir.name, n)
				}
				dir.inject(ethFrame(dir.inMAC, dir.hostMAC, header.IPv6ProtocolNumber, pkt))
				f := dir.back.Wait(ctxTimeout(t, 5*time.Second), paramProblemAbout(dir.src, pkt))
				if f == nil {
					t.Fatalf("%s: no Parameter Problem back to %s", dir.name, dir.src)
				}
				ip := header.IPv6(f[14:])
				icmp := header.ICMPv6(ip.Payload())
				if icmp.Code() != icmpv6ParamProblemChainTooLong || icmp.TypeSpecific() != 1280 {
					t.Errorf("%s: Parameter Problem code %d pointer %d, want code 7 pointer 1280", dir.name, icmp.Code(), icmp.TypeSpecific())
				}
				if n := len(icmp.Payload()); n != header.IPv6MinimumMTU-40-8 {
					t.Errorf("%s: quote is %d bytes, want %d (as much as fits in 1280)", dir.name, n, header.IPv6MinimumMTU-40-8)
				}
				if checksum.Checksum(icmp, header.PseudoHeaderChecksum(header.ICMPv6ProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(icmp)))) != 0xffff {
					t.Errorf("%s: Parameter Problem has a bad checksum", dir.name)
				}
				if got := dir.far.Wait(ctxTimeout(t, 100*time.Millisecond), carries(marker)); got != nil {
					t.Errorf("%s: the router forwarded the packet", dir.name)
				}
				if got := l.r.Interface(dir.ifname).Stats().Drops["ipv6_header_chain"]; got != before+1 {
					t.Errorf("%s: ipv6_header_chain drops = %d, want %d", dir.name, got, before+1)
				}
			}
		})
	}
	ping(t, l.a, bIP6)
	ping(t, l.b, aIP6)

	// To ::1 from the wire: netstack drops it as an invalid destination
	// (with AllowExternalLoopbackTraffic, which the router never sets,
	// its FindRoute error would panic the forward path too).
	loop := chainPacket(aIP6, netip.IPv6Loopback(), protoUDP, udp)
	l.inject(ethFrame(lanMAC, aMAC, header.IPv6ProtocolNumber, loop))
	ping(t, l.a, bIP6)

	// The limit itself is forwarded: a chain of exactly 1280 bytes.
	marker = []byte("chain-at-limit!!")
	pkt := chainPacket(aIP6, bIP6, nhDestOpts, optionsHeader(protoUDP, 1240), udpDatagram(4000, 53, marker))
	if n := chainLen(pkt); n != 1280 {
		t.Fatalf("chain at the limit is %d bytes", n)
	}
	l.inject(ethFrame(lanMAC, aMAC, header.IPv6ProtocolNumber, pkt))
	if l.tapB.Wait(ctxTimeout(t, 5*time.Second), carries(marker)) == nil {
		t.Error("a 1280-byte header chain was not forwarded")
	}
}

// repeat returns n parts made by part, the last with last set.
func repeat(part func(last bool) []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = part(i == n-1)
	}
	return out
}

// chainLen is the header chain's length as gVisor's parse.IPv6 counts
// it: up to the upper-layer header or a Fragment header, or all of it
// after No Next Header.
func chainLen(ip []byte) int {
	nh, off := ip[6], header.IPv6MinimumSize
	for {
		switch nh {
		case nhHopByHop, nhRouting, nhDestOpts:
			nh, off = ip[off], off+(int(ip[off+1])+1)*8
		case nhFragment:
			return off + 8
		case nhNoNext:
			return len(ip) // all of the rest
		default:
			return off
		}
	}
}

// TestEndpointClaimsTXChecksumOffload guards a latent panic: without
// CapabilityTXChecksumOffload netstack's forward path recomputes transport
// checksums through PacketBuffer.GetHeaders, which panics on forwarded
// ICMP other than echo (packet_buffer.go, pinned version).
func TestEndpointClaimsTXChecksumOffload(t *testing.T) {
	l := newLab(t)
	for _, name := range []string{"lan", "wan"} {
		if l.r.Interface(name).ep.Capabilities()&stack.CapabilityTXChecksumOffload == 0 {
			t.Errorf("%s: endpoint does not claim TX checksum offload", name)
		}
	}
}

// TestForwardEgressMTUBelowMinimum forwards into an interface whose MTU
// is below the family's minimum (1000: too small for IPv6, which a SecY
// on a small lower MTU or an RA MTU option can cause). gVisor's
// calculateNetworkMTU returns ErrInvalidEndpointState there, which its
// forward path does not handle; the guard refuses it as a counted drop,
// IPv4 keeps flowing through the same interface, and IPv6 flows again
// once the MTU is back.
func TestForwardEgressMTUBelowMinimum(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP6)
	cfg := l.config()
	cfg.Interfaces[1].MTU = 1000
	if err := l.r.Apply(cfg); err != nil {
		t.Fatalf("Apply(wan mtu 1000): %v", err)
	}
	marker := []byte("small-egress-mtu")
	pkt := ipv6Packet(aIP6, bIP6, 64, header.UDPProtocolNumber, udpDatagram(4000, 53, marker))
	l.inject(ethFrame(lanMAC, aMAC, header.IPv6ProtocolNumber, pkt))
	if got := l.tapB.Wait(ctxTimeout(t, 200*time.Millisecond), carries(marker)); got != nil {
		t.Error("IPv6 was forwarded into a 1000-byte MTU")
	}
	if got := l.r.Interface("lan").Stats().Drops["egress_mtu_below_minimum"]; got != 1 {
		t.Errorf("egress_mtu_below_minimum drops = %d, want 1", got)
	}
	ping(t, l.a, bIP4)

	// IPv4 below 68 cannot be configured (stack.Config refuses it), so
	// the IPv4 branch is checked on the endpoint directly.
	l.r.Interface("wan").ep.SetMTU(60)
	pkt4 := ipv4Packet(aIP4, bIP4, 64, header.UDPProtocolNumber, udpDatagram(4000, 53, marker))
	l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, pkt4))
	if got := l.tapB.Wait(ctxTimeout(t, 200*time.Millisecond), carries(marker)); got != nil {
		t.Error("IPv4 was forwarded into a 60-byte MTU")
	}
	if got := l.r.Interface("lan").Stats().Drops["egress_mtu_below_minimum"]; got != 2 {
		t.Errorf("egress_mtu_below_minimum drops = %d, want 2", got)
	}

	cfg.Interfaces[1].MTU = 0
	if err := l.r.Apply(cfg); err != nil {
		t.Fatalf("Apply(wan mtu default): %v", err)
	}
	ping(t, l.a, bIP6)
	ping(t, l.a, bIP4)
}
