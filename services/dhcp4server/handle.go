package dhcp4server

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/internal/dhcpopts"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// Message types (RFC 2132 §9.6).
const (
	msgDiscover = 1
	msgOffer    = 2
	msgRequest  = 3
	msgDecline  = 4
	msgAck      = 5
	msgNak      = 6
	msgRelease  = 7
	msgInform   = 8
)

// Option codes used directly (RFC 2132).
const (
	optRequested = 50
	optMsgType   = 53
	optServerID  = 54
	optMessage   = 56
	optMaxSize   = 57
	optClientID  = 61
	optRelay     = 82
)

// bootpLen is the fixed BOOTP header (RFC 951), before the magic cookie.
const bootpLen = 236

var magicCookie = [4]byte{99, 130, 83, 99}

var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// handle decides what one datagram does: it checks the message, changes
// the lease table and builds the reply. It never blocks on I/O.
func (s *Server) handle(p rawudp.Packet) result {
	s.stats.Received.Add(1)
	b := p.Payload
	switch {
	case len(b) < bootpLen+4:
		s.stats.drop(DropMalformed)
		return result{}
	case [4]byte(b[bootpLen:]) != magicCookie:
		s.stats.drop(DropWrongMagicCookie)
		return result{}
	case b[0] != byte(dhcpv4.OpcodeBootRequest):
		s.stats.drop(DropWrongOp)
		return result{}
	case b[1] != 1 || b[2] != 6 || b[28]&1 != 0 || [6]byte(b[28:34]) == [6]byte{}:
		// Ethernet only (RFC 1700 htype 1, hlen 6), and a unicast MAC: a
		// reply goes to chaddr.
		s.stats.drop(DropBadHardware)
		return result{}
	}
	if d := p.Dst.Addr(); d != s.cfg.ServerAddr && d != broadcast4 && d != lastAddr(s.cfg.Subnet) {
		s.stats.drop(DropNotOurs)
		return result{}
	}
	if dhcpopts.WellFormed(b) != nil {
		s.stats.drop(DropMalformed) // options cut short or overflowing their field
		return result{}
	}
	m, err := dhcpv4.FromBytes(b)
	if err != nil {
		s.stats.drop(DropMalformed)
		return result{}
	}
	mt := m.Options.Get(dhcpv4.OptionDHCPMessageType)
	if len(mt) != 1 {
		s.stats.drop(DropMalformed) // BOOTP (RFC 951) is not served
		return result{}
	}
	cid := m.Options.Get(dhcpv4.OptionClientIdentifier)
	if m.Options.Has(dhcpv4.OptionClientIdentifier) && (len(cid) < 2 || len(cid) > 255) {
		s.stats.drop(DropBadClientID)
		return result{}
	}
	if gi := ip4(m.GatewayIPAddr); gi.IsValid() && !gi.IsUnspecified() && !s.cfg.Subnet.Contains(gi) {
		s.stats.drop(DropNotOurs) // relayed from a network this server does not serve (RFC 2131 §4.3.1)
		return result{}
	}
	c := &client{mac: m.ClientHWAddr, clientID: cid}
	if st := s.statics[string(c.mac)]; st != nil {
		c.static = st.static
	}
	c.key = clientKey(c.mac, c.clientID, c.static != nil)
	now := s.cfg.Clock.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	counter := s.typeCounter(mt[0])
	if counter == nil {
		s.stats.drop(DropWrongType)
		return result{}
	}
	counter.Add(1)
	if !s.clientAllowLocked(sender(p, m), now) {
		s.stats.drop(DropRateLimited)
		return result{}
	}
	switch mt[0] {
	case msgDiscover:
		return s.discover(m, c, p, now)
	case msgRequest:
		return s.request(m, c, p, now)
	case msgDecline:
		return s.decline(m, c, now)
	case msgRelease:
		return s.release(m, c, now)
	default: // msgInform
		return s.inform(m, p)
	}
}

// typeCounter is the Stats counter of a message type a server receives,
// or nil for the others.
func (s *Server) typeCounter(t byte) *atomic.Uint64 {
	switch t {
	case msgDiscover:
		return &s.stats.Discover
	case msgRequest:
		return &s.stats.Request
	case msgDecline:
		return &s.stats.Decline
	case msgRelease:
		return &s.stats.Release
	case msgInform:
		return &s.stats.Inform
	}
	return nil
}

// discover answers a DHCPDISCOVER with an OFFER of the address choose
// picks (RFC 2131 §4.3.1), held for OfferHold.
func (s *Server) discover(m *dhcpv4.DHCPv4, c *client, p rawudp.Packet, now time.Time) result {
	if !s.admitLocked(c, now) {
		return result{}
	}
	fresh := s.holdsNone(c, now)
	b := s.choose(c, optAddr(m, optRequested), now)
	if b == nil {
		s.stats.PoolExhausted.Add(1)
		if now.Sub(s.lastFull) >= time.Minute {
			s.lastFull = now
			s.log.Warn("dhcp4server: no free address in the range", "range", s.cfg.RangeStart.String()+"-"+s.cfg.RangeEnd.String(), "mac", c.mac.String())
		}
		return result{}
	}
	if b.static == nil {
		b.offerUntil = now.Add(s.cfg.OfferHold)
		s.touch(b)
	}
	if fresh {
		s.newLeases.Take()
	}
	return s.reply(m, p, msgOffer, b.addr, netip.Addr{})
}

// request answers a DHCPREQUEST in each client state of RFC 2131
// §4.3.2, told apart as its table 4 does: SELECTING (server identifier
// set), INIT-REBOOT (requested address, no ciaddr), RENEWING and
// REBINDING (ciaddr, no requested address).
func (s *Server) request(m *dhcpv4.DHCPv4, c *client, p rawudp.Packet, now time.Time) result {
	sid := optAddr(m, optServerID)
	req := optAddr(m, optRequested)
	ciaddr := ip4(m.ClientIPAddr)
	hasCI := ciaddr.IsValid() && !ciaddr.IsUnspecified()
	switch {
	case sid.IsValid():
		// SELECTING: the client chose a server.
		if sid != s.cfg.ServerAddr {
			s.releaseOffer(c, now)
			s.stats.OtherServer.Add(1)
			return result{}
		}
		if !req.IsValid() || hasCI {
			s.stats.drop(DropBadRequest)
			return result{}
		}
		if !s.admitLocked(c, now) {
			return result{}
		}
		if b := s.own(c); b != nil && b.addr == req {
			return s.ack(m, c, p, b, now)
		}
		if c.static == nil && s.available(req, c, now) {
			return s.ack(m, c, p, s.assign(c, req), now)
		}
		return s.nak(m, p, "requested address not available")
	case req.IsValid():
		// INIT-REBOOT: the client verifies a remembered address.
		if hasCI {
			s.stats.drop(DropBadRequest)
			return result{}
		}
		if !s.cfg.Subnet.Contains(req) {
			return s.nak(m, p, "requested address is not on this network")
		}
		if s.heldByOther(req, c, now) {
			return s.nak(m, p, "requested address is in use")
		}
		b := s.own(c)
		if b == nil {
			s.stats.NoRecord.Add(1) // "MUST remain silent"
			return result{}
		}
		if b.addr != req {
			return s.nak(m, p, "requested address is not this client's")
		}
		if !s.admitLocked(c, now) {
			return result{}
		}
		return s.ack(m, c, p, b, now)
	case hasCI:
		// RENEWING (unicast) or REBINDING (broadcast): "the DHCP server
		// trusts the value in ciaddr" but checks it is this network's and
		// not another client's.
		if !s.cfg.Subnet.Contains(ciaddr) {
			return s.nak(m, p, "address is not on this network")
		}
		if s.heldByOther(ciaddr, c, now) {
			return s.nak(m, p, "address is in use")
		}
		if !s.admitLocked(c, now) {
			return result{}
		}
		if b := s.own(c); b != nil && b.addr == ciaddr {
			return s.ack(m, c, p, b, now)
		}
		if c.static == nil && s.available(ciaddr, c, now) {
			// A lease the server lost (a lease file from before it was
			// granted): take the client's word, as dnsmasq does.
			return s.ack(m, c, p, s.assign(c, ciaddr), now)
		}
		return s.nak(m, p, "address is not this client's")
	default:
		s.stats.drop(DropBadRequest)
		return result{}
	}
}

// releaseOffer forgets c's pending offer when it chose another server
// (RFC 2131 §4.3.2); a lease it holds stays.
func (s *Server) releaseOffer(c *client, now time.Time) {
	b := s.own(c)
	if b == nil || b.static != nil || !b.offerUntil.After(now) {
		return
	}
	b.offerUntil = time.Time{}
	if b.expiry.IsZero() {
		s.remove(b)
	}
	if now.Before(s.reuseAt) {
		s.reuseAt = now
	}
}

// ack binds b to c for LeaseTime and answers DHCPACK once the lease file
// holds it.
func (s *Server) ack(m *dhcpv4.DHCPv4, c *client, p rawudp.Packet, b *binding, now time.Time) result {
	wasBound := b.bound(now)
	if !b.busy(now) && s.newLeases.Ready() {
		// A new lease: admitLocked found the token, unless the client
		// moves from an offer it holds to another address.
		s.newLeases.Take()
	}
	b.expiry = now.Add(s.cfg.LeaseTime)
	b.released = false
	b.offerUntil = time.Time{}
	b.expiredSeen = false
	if b.static != nil {
		b.clientID = append(b.clientID[:0], c.clientID...)
	}
	if h := m.Options.Get(dhcpv4.OptionHostName); h != nil {
		b.hostname = sanitizeHostname(string(h))
	}
	s.touch(b)
	s.gen++
	if !wasBound {
		s.log.Info("dhcp4server: lease", "mac", c.mac.String(), "addr", b.addr, "hostname", b.hostname, "static", b.static != nil)
	}
	r := s.reply(m, p, msgAck, b.addr, ip4(m.ClientIPAddr))
	r.durable, r.changed, r.gen = true, true, s.gen
	return r
}

// nak answers DHCPNAK (RFC 2131 §4.3.2).
func (s *Server) nak(m *dhcpv4.DHCPv4, p rawudp.Packet, why string) result {
	s.log.Debug("dhcp4server: nak", "mac", m.ClientHWAddr.String(), "why", why)
	return s.reply(m, p, msgNak, netip.Addr{}, netip.Addr{})
}

// decline quarantines the address c declined for DeclineQuarantine (RFC
// 2131 §4.3.3: "the server MUST mark the network address as not
// available"); a static lease's address cannot be taken from it and is
// only logged.
func (s *Server) decline(m *dhcpv4.DHCPv4, c *client, now time.Time) result {
	sid := optAddr(m, optServerID)
	a := optAddr(m, optRequested)
	if !sid.IsValid() || !a.IsValid() {
		s.stats.drop(DropBadRequest)
		return result{}
	}
	b := s.own(c)
	if sid != s.cfg.ServerAddr || b == nil || b.addr != a {
		s.stats.drop(DropNotOurs)
		return result{}
	}
	s.log.Warn("dhcp4server: client declined its address: another host uses it", "mac", c.mac.String(), "addr", a, "static", b.static != nil)
	if b.static != nil {
		return result{}
	}
	s.remove(b)
	q := &binding{addr: a, quarantine: now.Add(s.cfg.DeclineQuarantine)}
	s.byAddr[a] = q
	s.inRange++
	s.touch(q)
	s.gen++
	return result{durable: true, changed: true, gen: s.gen}
}

// release ends c's lease (RFC 2131 §4.3.4) and keeps the record, so the
// client gets the same address back if it is still free.
func (s *Server) release(m *dhcpv4.DHCPv4, c *client, now time.Time) result {
	ciaddr := ip4(m.ClientIPAddr)
	if !ciaddr.IsValid() || ciaddr.IsUnspecified() {
		s.stats.drop(DropBadRequest)
		return result{}
	}
	b := s.own(c)
	if sid := optAddr(m, optServerID); sid.IsValid() && sid != s.cfg.ServerAddr || b == nil || b.addr != ciaddr || b.expiry.IsZero() {
		s.stats.drop(DropNotOurs)
		return result{}
	}
	if !b.released {
		s.log.Info("dhcp4server: released", "mac", c.mac.String(), "addr", b.addr)
	}
	b.released = true
	b.offerUntil = time.Time{}
	if now.Before(s.reuseAt) {
		s.reuseAt = now
	}
	s.gen++
	return result{durable: true, changed: true, gen: s.gen}
}

// inform answers a DHCPINFORM with the options only (RFC 2131 §4.3.5).
func (s *Server) inform(m *dhcpv4.DHCPv4, p rawudp.Packet) result {
	ci := ip4(m.ClientIPAddr)
	if !ci.IsValid() || ci.IsUnspecified() {
		ci = p.Src.Addr().Unmap()
	}
	if !ci.Is4() || ci.IsUnspecified() {
		s.stats.drop(DropBadRequest) // no address to answer to
		return result{}
	}
	if gi := ip4(m.GatewayIPAddr); (!gi.IsValid() || gi.IsUnspecified()) && !s.cfg.Subnet.Contains(ci) {
		s.stats.drop(DropNotOurs)
		return result{}
	}
	return s.reply(m, p, msgAck, netip.Addr{}, ci)
}

// ip4 converts a header address; an absent one is invalid.
func ip4(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok {
		return netip.Addr{}
	}
	return a
}

// optAddr returns a 4-byte address option, or the invalid Addr.
func optAddr(m *dhcpv4.DHCPv4, code uint8) netip.Addr {
	v := m.Options[code]
	if len(v) != 4 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(v))
}
