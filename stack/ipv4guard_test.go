package stack

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// ipv4Fragments splits the IPv4 payload l4 (protocol proto) from src to
// dst into fragments of at most size payload bytes (a multiple of 8),
// with options opts (a multiple of 4 bytes) in every header.
func ipv4Fragments(src, dst netip.Addr, proto tcpip.TransportProtocolNumber, id uint16, l4, opts []byte, size int) [][]byte {
	var out [][]byte
	for off := 0; off < len(l4); off += size {
		end := min(off+size, len(l4))
		hl := header.IPv4MinimumSize + len(opts)
		p := make([]byte, hl+end-off)
		ip := header.IPv4(p)
		var flags uint8
		if end < len(l4) {
			flags = header.IPv4FlagMoreFragments
		}
		ip.Encode(&header.IPv4Fields{
			TotalLength:    uint16(len(p)),
			ID:             id,
			Flags:          flags,
			FragmentOffset: uint16(off),
			TTL:            64,
			Protocol:       uint8(proto),
			SrcAddr:        tcpip.AddrFrom4(src.As4()),
			DstAddr:        tcpip.AddrFrom4(dst.As4()),
		})
		p[0] = 0x40 | uint8(hl/4)
		copy(p[header.IPv4MinimumSize:], opts)
		ip.SetChecksum(^ip.CalculateChecksum())
		copy(p[hl:], l4[off:end])
		out = append(out, p)
	}
	return out
}

// bigEcho is an ICMP echo request of n bytes in all.
func bigEcho(id uint16, n int) []byte {
	m := icmpEcho(id, 1, bytes.Repeat([]byte{0x5a}, n-header.ICMPv4MinimumSize))
	icmp := header.ICMPv4(m)
	icmp.SetChecksum(0)
	icmp.SetChecksum(^checksum.Checksum(m, 0))
	return m
}

func echoReplyFrom(src netip.Addr, id uint16) func([]byte) bool {
	return func(f []byte) bool {
		return icmpFrom(src, header.ICMPv4EchoReply)(f) && header.ICMPv4(header.IPv4(f[14:]).Payload()).Ident() == id
	}
}

// TestPingOfDeath sends a fragmented echo request to the router whose
// fragments end past 65535 bytes with the header. gVisor reassembled it
// and its reply's total length overflowed: a panic in ipv4's icmp.go.
// Now the fragment past the limit is dropped and counted, and the
// largest legal echo (65507 bytes with a 20-byte header... here 65400) is
// still answered.
func TestPingOfDeath(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, lanIP4)
	for _, tc := range []struct {
		name string
		opts []byte
	}{
		{"no options", nil},
		{"record route in every fragment", append([]byte{7, 39, 4}, make([]byte, 37)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := l.r.Interface("lan").Stats().Drops["ipv4_fragment_too_big"]
			for _, f := range ipv4Fragments(aIP4, lanIP4, header.ICMPv4ProtocolNumber, 0x4444, bigEcho(0x44, 65520), tc.opts, 1400) {
				l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, f))
			}
			if got := l.r.Interface("lan").Stats().Drops["ipv4_fragment_too_big"]; got != before+1 {
				t.Errorf("ipv4_fragment_too_big = %d, want %d (the last fragment)", got, before+1)
			}
			if f := l.tapA.Wait(ctxTimeout(t, 300*time.Millisecond), echoReplyFrom(lanIP4, 0x44)); f != nil {
				t.Error("the router answered the oversized echo")
			}
		})
	}
	for _, f := range ipv4Fragments(aIP4, lanIP4, header.ICMPv4ProtocolNumber, 0x4545, bigEcho(0x45, 65400), nil, 1400) {
		l.inject(ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, f))
	}
	if l.tapA.Wait(ctxTimeout(t, 5*time.Second), echoReplyFrom(lanIP4, 0x45)) == nil {
		t.Error("no reply to a 65400-byte fragmented echo")
	}
	ping(t, l.a, bIP4)
}

// TestSourceRouteDropped checks that IPv4 packets with a loose or strict
// source route are dropped and counted, to the router and through it,
// while other options still pass.
func TestSourceRouteDropped(t *testing.T) {
	l := newLab(t)
	ping(t, l.a, bIP4)
	for i, tc := range []struct {
		name string
		opts []byte
		drop bool
	}{
		{"lsrr", []byte{131, 7, 4, 10, 2, 0, 2, 0}, true},
		{"ssrr after nops", []byte{1, 1, 1, 137, 7, 4, 10, 2, 0, 2, 0, 0}, true},
		{"record route", []byte{7, 7, 4, 0, 0, 0, 0, 0}, false},
		{"router alert", []byte{148, 4, 0, 0}, false},
	} {
		for _, dst := range []netip.Addr{lanIP4, bIP4} {
			id := uint16(0x100 + i)
			before := l.r.Interface("lan").Stats().Drops["ipv4_source_route"]
			pkts := ipv4Fragments(aIP4, dst, header.ICMPv4ProtocolNumber, id, icmpEcho(id, 1, []byte("route")), tc.opts, 1400)
			l.r.Interface("lan").HandleBatch(0, []hw.Frame{{Data: ethFrame(lanMAC, aMAC, header.IPv4ProtocolNumber, pkts[0]), WireLen: 14 + len(pkts[0])}})
			got := l.r.Interface("lan").Stats().Drops["ipv4_source_route"] - before
			if tc.drop && got != 1 || !tc.drop && got != 0 {
				t.Errorf("%s to %s: ipv4_source_route rose by %d, want drop %v", tc.name, dst, got, tc.drop)
			}
			reply := l.tapA.Wait(ctxTimeout(t, 300*time.Millisecond), echoReplyFrom(dst, id))
			if tc.drop && reply != nil {
				t.Errorf("%s to %s: answered", tc.name, dst)
			}
		}
	}
}
