package stack

import (
	"encoding/binary"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/pppoe"
)

// PPPoE on an interface (InterfaceConfig.PPPoE).
//
// The interface stays an Ethernet endpoint to everything above it; only
// its frames differ on the wire. Its NIC is point to point (no ARP or
// NDP: Capabilities has no CapabilityResolutionRequired), and while a
// session is up (Interface.SetPPPoESession) every IP frame it receives
// from the AC is decapsulated in place and every IP frame it sends is
// encapsulated in place, so NAT, the input policy, the fast path, the
// next-hop cache, GRO and SQM all work on it as on any wan:
//
//   - receive (decapPPPoE, at the head of Endpoint.handleFramesInto,
//     after the interface's capture and before the raw-frame taps): a
//     session frame (0x8864) of the session's id from the AC's MAC that
//     carries IPv4 or IPv6 becomes an Ethernet frame of that type from
//     the AC to us: the MAC addresses move 8 octets forward over the
//     PPPoE header and the PPP protocol field, the EtherType goes where
//     the protocol field was, padding is cut (pppoe.Link.Decap checks
//     the header). The TCP MSS of a SYN is clamped to the session's MTU
//     here (the egress side is natengine's Postrouting clamp, which uses
//     the interface's MTU); Stats().PPPoE counts both. Discovery and
//     PPP control frames (LCP, PAP, CHAP, IPCP, IPv6CP), and any session
//     frame that does not match, stay as they are for the taps of
//     router/pppoelink, which runs the session. A plain IPv4, IPv6 or
//     ARP frame is dropped ("pppoe_not_session"): on a PPPoE link only
//     the AC speaks, and only inside the session.
//   - transmit (pushPPPoE): after NAT Postrouting, the 8 octets go in
//     after the MAC addresses and tags (the EtherType becomes 0x8864 and
//     the PPP protocol field takes its place), in the headroom of the
//     frame's buffer: WritePackets and software segmentation build their
//     frames 8 octets in; the fast path (appendFastLocked) pushes them
//     in place where the writer lends room before a ring frame
//     (frameExtender: an af_xdp UMEM frame, an AF_PACKET ring frame),
//     or copies the frame once as it does for tags.
//     Superframes are cut in software (a kernel cannot segment PPPoE).
//     Without a session the frame is dropped ("pppoe_down").
//
// The session's own frames (discovery, LCP...) leave by
// Interface.WriteFrame, which sends them as they are; an IPv4 or IPv6
// frame written there (the RA learner's RS, the DHCPv6 client's
// messages: services that build whole frames) is encapsulated like
// netstack's. Nothing here allocates.

// pppoeOverhead is what a session frame carries beyond an Ethernet one:
// the 6-octet PPPoE header and the 2-octet PPP protocol field (the
// EtherType, now 0x8864, stays where it was; RFC 2516 section 4), why the
// MTU is 1492 on a 1500-octet Ethernet.
const pppoeOverhead = pppoe.SessionHeaderLen

// PPP protocol numbers of the network layers (RFC 1332, RFC 5072).
const (
	pppIPv4 = pppoe.ProtoIPv4
	pppIPv6 = pppoe.ProtoIPv6
)

// pppoeSession is the framing of the interface's session while it is up.
type pppoeSession struct {
	link pppoe.Link
}

// pppoeCounters counts one PPPoE interface's data path.
type pppoeCounters struct {
	decapsulated, encapsulated, mssClamped atomic.Uint64
}

// PPPoEStats counts the PPPoE data path of one interface.
type PPPoEStats struct {
	// Decapsulated counts IP packets received in the session.
	Decapsulated uint64
	// Encapsulated counts IP packets sent in it (fast path included).
	Encapsulated uint64
	// MSSClampedIn counts received TCP SYNs whose MSS was lowered to
	// the session's MTU less 40 (IPv4) or 60 (IPv6). SYNs sent are
	// clamped by NAT Postrouting (natengine's MSSClamped).
	MSSClampedIn uint64
}

// SetPPPoESession starts (l non-nil) or ends (nil) the data path of the
// interface's PPPoE session: l gives the AC's MAC and the session id
// (l.Local and l.VLAN are not used: the interface's MAC and tags are).
// It is for an interface made with InterfaceConfig.PPPoE; on another it
// does nothing. Every offloaded flow goes back to the slow path, which
// offloads it again with the new session's framing.
func (i *Interface) SetPPPoESession(l *pppoe.Link) {
	if !i.ep.pppoeMode {
		return
	}
	if l == nil {
		i.ep.pppoe.Store(nil)
	} else {
		i.ep.pppoe.Store(&pppoeSession{link: *l})
	}
	if i.r.nat != nil {
		i.r.nat.InvalidateFastPath()
	}
}

// PPPoE reports whether the interface is a PPPoE one
// (InterfaceConfig.PPPoE).
func (i *Interface) PPPoE() bool { return i.ep.pppoeMode }

// decapPPPoE decapsulates the session's IP frames among frames in place
// and drops plain IP and ARP frames, keeping the others (for the taps).
// It returns frames with the dropped ones removed.
func (e *Endpoint) decapPPPoE(frames []hw.Frame) []hw.Frame {
	s := e.pppoe.Load()
	mtu := int(e.mtu.Load())
	n := 0
	var plain, decap, clamped uint64
	for i := range frames {
		f := frames[i]
		if len(f.Data) >= header.EthernetMinimumSize {
			switch binary.BigEndian.Uint16(f.Data[12:]) {
			case uint16(header.IPv4ProtocolNumber), uint16(header.IPv6ProtocolNumber), uint16(header.ARPProtocolNumber):
				plain++
				continue
			case pppoe.EtherTypeSession:
				if s != nil && f.GSO.Type == hw.GSONone && f.WireLen <= len(f.Data) {
					if c, ok := decapFrame(&f, &s.link, mtu); ok {
						decap++
						if c {
							clamped++
						}
					}
				}
			}
		}
		frames[n] = f
		n++
	}
	if plain > 0 {
		e.stats.drops[dropPPPoENotSession].Add(plain)
	}
	if decap > 0 {
		e.stats.pppoe.decapsulated.Add(decap)
	}
	if clamped > 0 {
		e.stats.pppoe.mssClamped.Add(clamped)
	}
	return frames[:n]
}

// decapFrame turns f, a session frame, into the Ethernet frame of the IP
// packet it carries if it is one of l's, and then clamps a TCP SYN's MSS
// to mtu. ok reports the decapsulation, clamped the clamp.
func decapFrame(f *hw.Frame, l *pppoe.Link, mtu int) (clamped, ok bool) {
	proto, pkt, r := l.Decap(f.Data)
	var et uint16
	switch {
	case r != pppoe.DecapOK:
		return false, false
	case proto == pppIPv4:
		et = uint16(header.IPv4ProtocolNumber)
	case proto == pppIPv6:
		et = uint16(header.IPv6ProtocolNumber)
	default:
		return false, false // LCP and friends: the session's
	}
	d := f.Data
	// pkt is a slice of d: its offset is what their capacities differ by.
	off := cap(d) - cap(pkt)
	start := off - header.EthernetMinimumSize // 8: the header's length
	if start < 0 || off+len(pkt) > len(d) {
		return false, false
	}
	end := off + len(pkt) // Decap cut the padding
	copy(d[start:start+12], d[:12])
	binary.BigEndian.PutUint16(d[start+12:], et)
	f.Data = d[start:end]
	f.WireLen = len(f.Data)
	if g := &f.GSO; g.NeedsCsum && int(g.CsumStart) >= start {
		g.CsumStart -= uint16(start)
	}
	if f.CsumPartial && completePartialInPlace(f.Data) {
		f.CsumPartial, f.CsumValid = false, true
	}
	return clampSYN(f.Data[header.EthernetMinimumSize:], mtu), true
}

// clampSYN clamps the MSS of ip, an IPv4 or IPv6 TCP SYN (IPv6 without
// extension headers), to mtu less the IP and TCP headers; any other
// packet is left alone.
func clampSYN(ip []byte, mtu int) bool {
	if len(ip) < 1 {
		return false
	}
	var tcp []byte
	max := 0
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < header.IPv4MinimumSize || ip[9] != protoTCP {
			return false
		}
		h, l4, ok := ipv4Parts(ip)
		if !ok || h.FragmentOffset() != 0 {
			return false
		}
		tcp, max = l4, mtu-header.IPv4MinimumSize-header.TCPMinimumSize
	case 6:
		if len(ip) < header.IPv6MinimumSize || ip[6] != protoTCP {
			return false
		}
		end := min(len(ip), header.IPv6MinimumSize+int(binary.BigEndian.Uint16(ip[4:])))
		tcp, max = ip[header.IPv6MinimumSize:end], mtu-header.IPv6MinimumSize-header.TCPMinimumSize
	default:
		return false
	}
	if len(tcp) < header.TCPMinimumSize || tcp[13]&byte(header.TCPFlagSyn) == 0 {
		return false
	}
	return natengine.ClampMSS(tcp, max)
}

// pushPPPoE makes the Ethernet frame at x[pppoeOverhead:], with tagLen
// octets of VLAN tags after its MAC addresses, a session frame of s
// starting at x[0], in place, and reports whether it could: only IPv4
// and IPv6 frames go into a session. dst becomes the AC's MAC.
func pushPPPoE(x []byte, tagLen int, s *pppoeSession) bool {
	hl := 12 + tagLen
	if len(x) < pppoeOverhead+hl+2 {
		return false
	}
	var proto uint16
	switch binary.BigEndian.Uint16(x[pppoeOverhead+hl:]) {
	case uint16(header.IPv4ProtocolNumber):
		proto = pppIPv4
	case uint16(header.IPv6ProtocolNumber):
		proto = pppIPv6
	default:
		return false
	}
	copy(x[:hl], x[pppoeOverhead:pppoeOverhead+hl])
	copy(x[:6], s.link.Peer[:])
	p := x[hl:]
	binary.BigEndian.PutUint16(p[0:], pppoe.EtherTypeSession)
	p[2], p[3] = 0x11, 0 // VER 1, TYPE 1, CODE 0 (RFC 2516 section 4)
	binary.BigEndian.PutUint16(p[4:], s.link.SessionID)
	// LENGTH: the PPP payload, protocol field included.
	binary.BigEndian.PutUint16(p[6:], uint16(len(x)-hl-8))
	binary.BigEndian.PutUint16(p[8:], proto)
	return true
}

// isIPEtherType reports whether et is IPv4's or IPv6's: what a PPPoE
// session carries.
func isIPEtherType(et uint16) bool {
	return et == uint16(header.IPv4ProtocolNumber) || et == uint16(header.IPv6ProtocolNumber)
}

// pppoeOut returns the session frames are sent in and the room each
// needs before it: (nil, 0) on an interface that is not a PPPoE one,
// (nil, pppoeOverhead) on one whose session is down.
func (e *Endpoint) pppoeOut() (*pppoeSession, int) {
	if !e.pppoeMode {
		return nil, 0
	}
	return e.pppoe.Load(), pppoeOverhead
}

// encapPPPoE is pushPPPoE with e's tags, counted: a frame it cannot send
// (no session, not IP) is a drop the caller releases.
func (e *Endpoint) encapPPPoE(x []byte, s *pppoeSession) bool {
	switch {
	case s == nil:
		e.stats.drop(dropPPPoEDown)
		return false
	case !pushPPPoE(x, e.vlan.Load().n, s):
		e.stats.drop(dropPPPoENotSession)
		return false
	}
	e.stats.pppoe.encapsulated.Add(1)
	return true
}
