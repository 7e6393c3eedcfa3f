package natengine

import "net/netip"

// The router's own flows (Linux's OUTPUT conntrack).
//
// Packets to the router itself are not tracked inbound (the router's
// sockets answer or refuse them), but the flows the router opens are:
// PostroutingLocal opens a flow for a packet netstack originated that
// can open one (a TCP SYN, a UDP datagram, an echo request, a packet of
// another protocol) and refreshes it on later packets, so the replies (a
// DNS upstream's answer, a DHCP server's unicast renewal reply) find the
// flow in Prerouting as CTEstablished. Packets to multicast or broadcast
// addresses open nothing: no reply comes from such an address. Only
// packets leaving a wan interface open flows: the input policy that needs
// them filters only there, and a LAN-side service's answers (a DNS or
// DHCP server's, to LAN queries the router does not track inbound) would
// otherwise each take a table entry, a flood of queries crowding out
// forwarded flows.

// output tracks the packet b (tuple t) that the router originated; r and
// ok are t's table lookup; wan says whether it leaves a wan interface. It
// returns the lookup to continue with, and Drop (counted) when a new flow
// finds the table full or clashes.
func (e *Engine) output(b []byte, p *Parsed, t Tuple, r ref, ok, wan bool) (ref, bool, Verdict) {
	now := e.now()
	if ok && r.dir != dirMid {
		if now < r.c.expires.Load() {
			if r.dir == dirOrig {
				e.preKnown(b, p, r.c, dirOrig, NoIface, now)
			}
			return r, ok, Accept
		}
		if e.kill(r.c) {
			e.stats.Expired.Add(1)
		}
	}
	if !wan || !outputOpens(p, &t) {
		return ref{}, false, Accept
	}
	c := &conn{orig: t, mid: t, created: now, class: classRouter}
	if p.Kind == KindTCP {
		c.tcp.open(p.TCPFlags)
	}
	if !e.insertNew(c, NoIface, now) {
		return ref{}, false, Drop
	}
	c.pkts[dirOrig].Add(1)
	c.bytes[dirOrig].Add(uint64(p.Len))
	return ref{c, dirOrig}, true, Accept
}

// outputOpens reports whether the router's own packet p (tuple t) opens
// a flow.
func outputOpens(p *Parsed, t *Tuple) bool {
	if t.V6 {
		if t.Dst[0] == 0xff {
			return false
		}
	} else if t.Dst[0] >= 224 { // multicast, class E, limited broadcast
		return false
	}
	switch p.Kind {
	case KindTCP:
		return p.TCPFlags&(tcpSYN|tcpACK|tcpRST|tcpFIN) == tcpSYN
	case KindUDP, KindOther:
		return true
	case KindICMPQuery:
		return icmpIsRequest(p.ICMPType, p.V6)
	}
	return false
}

// DHCP ports (RFC 2131, RFC 8415).
const (
	dhcp4ServerPort = 67
	dhcp4ClientPort = 68
	dhcp6ClientPort = 546
	dhcp6ServerPort = 547
)

// limitedBroadcast is 255.255.255.255 in Tuple form.
var limitedBroadcast = [16]byte{255, 255, 255, 255}

// dhcpClient reports whether p (tuple t) is UDP to a DHCP client port: 68
// (IPv4) or 546 (IPv6, not to a multicast address). preNew lets such
// packets from a wan interface to the router's own addresses (link-local
// included) and, for IPv4, to the limited broadcast address pass
// untracked: a DHCP server's offers, advertisements and replies answer
// no tracked flow (a client's requests go to a broadcast or multicast
// address), and fw4's default rules Allow-DHCP-Renew and Allow-DHCPv6
// admit them the same way.
//
// As in fw4, IPv6 answers must come from and go to fc00::/6 (link-local
// or unique local: a DHCPv6 server or relay on the link), and both
// families must come from the server port (67, 547), so the exception
// is not a way in for any UDP from the internet.
func dhcpClient(p *Parsed, t *Tuple) bool {
	if p.Kind != KindUDP {
		return false
	}
	if t.V6 {
		return t.DstPort == dhcp6ClientPort && t.SrcPort == dhcp6ServerPort &&
			!t.DstAddr().IsMulticast() && dhcp6Scope.Contains(t.SrcAddr()) && dhcp6Scope.Contains(t.DstAddr())
	}
	return t.DstPort == dhcp4ClientPort && t.SrcPort == dhcp4ServerPort
}

// dhcp6Scope is fw4's Allow-DHCPv6 address range: link-local and unique
// local addresses.
var dhcp6Scope = netip.MustParsePrefix("fc00::/6")
