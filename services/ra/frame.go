package ra

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"

	"github.com/mdlayher/ndp"
)

// Link sends an interface's Ethernet frames: the router's
// stack.Interface, or a packet socket in tests. Frames are untagged (the
// link adds its interface's VLAN tags). Implementations are safe for
// concurrent use and do not keep frame after WriteFrame returns.
type Link interface {
	// WriteFrame sends one whole Ethernet frame, header included.
	WriteFrame(frame []byte) error
	// HardwareAddr is the link's MAC: the source of every frame built
	// here and the Source Link-Layer Address option's value.
	HardwareAddr() net.HardwareAddr
}

// Ethernet, IPv6 and ICMPv6 facts (RFC 2464, RFC 8200 §3, RFC 4861 §4).
const (
	etherTypeIPv6 = 0x86dd
	ethHeaderLen  = 14
	ipv6HeaderLen = 40
	protoICMPv6   = 58
	// ndpHopLimit is the Hop Limit of every RS and RA: a receiver drops
	// one with any other value, which proves it was not forwarded
	// (RFC 4861 §6.1.1, §6.1.2).
	ndpHopLimit = 255

	typeRS = 133 // Router Solicitation (§4.1)
	typeRA = 134 // Router Advertisement (§4.2)

	// rsMinLen and raMinLen are the ICMP lengths below which a message
	// is invalid: the ICMP header and the fixed part of the message
	// (§6.1.1: 8 octets; §6.1.2: 16 octets).
	rsMinLen = 8
	raMinLen = 16

	optSLLA = 1 // Source Link-Layer Address (§4.6.1)

	// minLinkMTU is the IPv6 minimum link MTU (RFC 8200 §5): an MTU
	// option below it is not announced and is ignored when learnt, and
	// no RA is built larger than it.
	minLinkMTU = 1280
	// maxRALen is the largest ICMPv6 RA the Advertiser builds, so that
	// it never needs fragmenting on any IPv6 link (RFC 6980 forbids
	// fragmented ND messages anyway).
	maxRALen = minLinkMTU - ipv6HeaderLen
)

var (
	// AllNodes is the link-local all-nodes group (RFC 4291 §2.7.1), the
	// destination of every RA the Advertiser sends. A Learner's link
	// must receive it.
	AllNodes = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 1})
	// AllRouters is the link-local all-routers group, the destination
	// of Router Solicitations. An Advertiser's link must receive it.
	AllRouters = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 2})
)

// MulticastMAC is the Ethernet group of an IPv6 multicast address: 33:33
// and its last four octets (RFC 2464 §7), e.g. 33:33:00:00:00:01 for
// ff02::1.
func MulticastMAC(group netip.Addr) net.HardwareAddr {
	a := group.As16()
	return net.HardwareAddr{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// LinkLocal is the link-local address with the modified EUI-64 interface
// identifier of an Ethernet MAC (RFC 4291 §2.5.6 and appendix A), the one
// netstack gives an interface, e.g. fe80::ff:fe00:1 for 02:00:00:00:00:01.
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]})
}

// icmpType returns the ICMPv6 type of frame, if frame is an IPv6 packet
// whose fixed header is followed by ICMPv6 (the frames a tap with
// stack.MatchICMPv6() is offered). It reads only the
// headers' first octets; nothing is validated.
func icmpType(frame []byte) (uint8, bool) {
	if len(frame) < ethHeaderLen+ipv6HeaderLen+1 || binary.BigEndian.Uint16(frame[12:]) != etherTypeIPv6 {
		return 0, false
	}
	ip := frame[ethHeaderLen:]
	if ip[0]>>4 != 6 || ip[6] != protoICMPv6 {
		return 0, false
	}
	return ip[ipv6HeaderLen], true
}

// ndMessage is a received RS or RA that passed the checks of RFC 4861
// §6.1.1 or §6.1.2. Its slices point into the received frame.
type ndMessage struct {
	srcMAC   []byte
	src, dst netip.Addr
	icmp     []byte // the whole ICMPv6 message, checksum checked
	opts     []byte // its options, every length checked
	hasSLLA  bool   // it has a Source Link-Layer Address option
	slla     []byte // the first such option's Ethernet address; nil if none of 8 octets
}

// checkND validates an RS or RA frame (icmpType returned typ) as RFC 4861
// §6.1 asks, minLen being the message's minimum ICMP length, and reports
// why it is invalid. What §6.1.1 and §6.1.2 add for one kind alone
// (RA: a link-local source; RS: no SLLA from ::) is the caller's.
func checkND(frame []byte, minLen int) (ndMessage, DropReason, bool) {
	ip := frame[ethHeaderLen:]
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if plen == 0 || ipv6HeaderLen+plen > len(ip) {
		return ndMessage{}, DropMalformed, false // a jumbogram, or cut short
	}
	icmp := ip[ipv6HeaderLen : ipv6HeaderLen+plen]
	if ip[7] != ndpHopLimit {
		return ndMessage{}, DropHopLimit, false
	}
	if len(icmp) < minLen {
		return ndMessage{}, DropMalformed, false
	}
	if icmp[1] != 0 {
		return ndMessage{}, DropCode, false
	}
	if checksum(ip[8:24], ip[24:40], icmp) != 0 {
		return ndMessage{}, DropChecksum, false
	}
	m := ndMessage{
		srcMAC: frame[6:12],
		src:    netip.AddrFrom16([16]byte(ip[8:24])),
		dst:    netip.AddrFrom16([16]byte(ip[24:40])),
		icmp:   icmp,
		opts:   icmp[minLen:],
	}
	for o := m.opts; len(o) > 0; {
		if len(o) < 2 {
			return ndMessage{}, DropMalformed, false
		}
		n := int(o[1]) * 8
		if n == 0 {
			return ndMessage{}, DropOptionLengthZero, false
		}
		if n > len(o) {
			return ndMessage{}, DropMalformed, false
		}
		if o[0] == optSLLA {
			if m.slla == nil && n == 8 {
				m.slla = o[2:8] // Ethernet (RFC 2464 §6)
			}
			m.hasSLLA = true
		}
		o = o[n:]
	}
	return m, 0, true
}

// splitOptions calls f with each option of opts, which checkND has
// checked.
func splitOptions(opts []byte, f func(opt []byte)) {
	for len(opts) >= 2 && opts[1] != 0 && int(opts[1])*8 <= len(opts) {
		n := int(opts[1]) * 8
		f(opts[:n])
		opts = opts[n:]
	}
}

// parseRA decodes an RA that checkND passed with the wire library, one
// option at a time, so that an option the library refuses costs only
// itself (counted in ignored) and not the router or the other options.
// It returns nil if the fixed part is refused.
func parseRA(icmp []byte) (ra *ndp.RouterAdvertisement, ignored int) {
	msg, err := ndp.ParseMessage(icmp[:raMinLen])
	if err != nil {
		return nil, 0
	}
	ra, ok := msg.(*ndp.RouterAdvertisement)
	if !ok {
		return nil, 0
	}
	splitOptions(icmp[raMinLen:], func(opt []byte) {
		one, err := ndp.ParseMessage(slices.Concat(icmp[:raMinLen], opt))
		if err != nil {
			ignored++
			return
		}
		ra.Options = append(ra.Options, one.(*ndp.RouterAdvertisement).Options...)
	})
	return ra, ignored
}

// buildFrame wraps an ICMPv6 message whose checksum is set in IPv6 with
// Hop Limit 255 and in Ethernet from srcMAC to dstMAC.
func buildFrame(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, icmp []byte) []byte {
	f := make([]byte, ethHeaderLen+ipv6HeaderLen+len(icmp))
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:], etherTypeIPv6)
	ip := f[ethHeaderLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(icmp)))
	ip[6] = protoICMPv6
	ip[7] = ndpHopLimit
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	copy(ip[ipv6HeaderLen:], icmp)
	return f
}

// checksum is the Internet checksum of msg with the ICMPv6 pseudo-header
// of src and dst (RFC 8200 §8.1, RFC 4443 §2.3): 0 when msg's checksum
// field is right.
func checksum(src, dst, msg []byte) uint16 {
	var s uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			s += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			s += uint32(b[0]) << 8
		}
	}
	add(src)
	add(dst)
	s += uint32(len(msg)>>16) + uint32(len(msg)&0xffff) + protoICMPv6
	add(msg)
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
