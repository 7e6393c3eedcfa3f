package natengine

// Generic flows: every protocol but TCP, UDP and ICMP (Linux
// nf_conntrack_proto_generic).
//
// A packet of any other protocol (IPv6-in-IPv4 41, GRE 47, ESP 50,
// SCTP 132, the experimental 253, IPv6 No Next Header 59, ...) is tracked
// by its addresses and protocol alone: the tuple's ports are zero. Its
// flow lives for the "other" timeout (Linux's generic timeout, 600 s) and
// is assured once it has seen both directions. From a wan interface a new
// generic flow needs an allow6 rule for its protocol (IPv6) and is never
// admitted to a LAN host over IPv4; replies to flows that LAN hosts or the
// router opened come back in by the tracked entry.
//
// Behind masquerade or an SNAT pool an IPv4 generic flow gets address-only
// NAT, as Linux does: only the source address is rewritten, so the reply
// tuple (remote -> external address, protocol) must be unique, and one
// LAN host at a time can use a protocol to a given remote address through
// one external address. A second host's flow to the same remote address
// and protocol tries the pool's other addresses and is then dropped
// (DropNATAddrTaken). Nothing at L4 is rewritten: protocols whose checksum
// covers the IP addresses (DCCP 33, UDP-Lite 136) are not patched.

// ProtoIGMP is IGMP (RFC 3376), which stays untracked like ICMP.
const ProtoIGMP = 2

// untrackedProto reports whether a packet of a protocol other than TCP,
// UDP and ICMP, with tuple t, is passed without a flow: IPv4 IGMP to a
// multicast group or to one of the router's own addresses, a link-local
// control protocol that the router answers itself and that never opens a
// flow (fw4 accepts it from wan, "Allow-IGMP"). Protocol 2 to any other
// address (a LAN host, a remote host) and IPv6 next header 2, which is not
// IGMP, are generic flows like every other protocol: otherwise a WAN host
// could send anything to a LAN host as "IGMP".
func (s *snapshot) untrackedProto(t *Tuple) bool {
	return t.Proto == ProtoIGMP && !t.V6 && (t.DstAddr().IsMulticast() || s.isLocal(&t.Dst, false))
}

// genericReply picks the reply tuple of the generic flow c leaving
// through a NAT interface with the external addresses pool: the first
// address, from c's source's paired-pooling choice (RFC 4787 REQ-2),
// whose reply tuple is free, inserted as c's reply key. c.mu is held.
func (e *Engine) confirmGeneric(c *conn, pool [][16]byte) (DropReason, bool) {
	reply := c.mid.Invert()
	first := (&Tuple{Src: c.orig.Src}).hash(0) % uint32(len(pool))
	for i := 0; i < len(pool); i++ {
		reply.Dst = pool[(first+uint32(i))%uint32(len(pool))]
		c.reply, c.snat = reply, true
		if e.tab.insertReply(c, nil) {
			return 0, true
		}
		if c.dead.Load() {
			return DropClash, false
		}
	}
	c.snat = false
	return DropNATAddrTaken, false
}
