package dhcp6client

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// pending reports whether the state waits for an answer.
func (c *Client) pending() bool {
	switch c.state {
	case Soliciting, Requesting, Renewing, Rebinding, Confirming, Releasing:
		return true
	}
	return false
}

// handle takes one received datagram: it checks it (RFC 8415 §16.3,
// §16.10: type, transaction id, Client and Server Identifiers) and counts
// it as a drop or acts on it. A dropped message changes nothing.
func (c *Client) handle(p rawudp.Packet, now time.Time) {
	d := &c.stats.Drops
	b := p.Payload
	if len(b) < 4 {
		d.Malformed.Add(1)
		return
	}
	mt := dhcpv6.MessageType(b[0])
	if mt == dhcpv6.MessageTypeRelayForward || mt == dhcpv6.MessageTypeRelayReply {
		d.Relay.Add(1) // a relay agent unwraps Relay-reply before it reaches a client (RFC 8415 §19.2)
		return
	}
	m, err := dhcpv6.MessageFromBytes(b)
	if err != nil {
		d.Malformed.Add(1)
		return
	}
	switch {
	case p.Src.Port() != ServerPort:
		d.NotServer.Add(1)
		return
	case mt != dhcpv6.MessageTypeAdvertise && mt != dhcpv6.MessageTypeReply:
		d.Type.Add(1) // Reconfigure included: this client does not take it (RFC 8415 §18.2.11 is optional)
		return
	case !c.pending():
		d.Unexpected.Add(1)
		return
	case m.TransactionID != c.xid:
		d.XID.Add(1)
		return
	}
	if cid := rawOption(b, dhcpv6.OptionClientID); !bytes.Equal(cid, c.duid) {
		d.ClientID.Add(1)
		return
	}
	sid := rawOption(b, dhcpv6.OptionServerID)
	if validDUID(sid) != nil {
		d.ServerID.Add(1)
		return
	}
	c.solMaxRTOption(b)
	if mt == dhcpv6.MessageTypeAdvertise {
		if c.state != Soliciting {
			d.Type.Add(1)
			return
		}
		if !c.topLevelSuccess(b) {
			return
		}
		c.advertise(m, p, sid, now)
		return
	}
	switch {
	case c.state == Soliciting:
		d.Type.Add(1) // no Rapid Commit asked for
		return
	case c.state == Requesting && !bytes.Equal(sid, c.chosen.serverID),
		c.state == Renewing && !bytes.Equal(sid, c.lease.ServerID),
		c.state == Releasing && !bytes.Equal(sid, c.saved.ServerID):
		d.ServerID.Add(1) // not the server this exchange is with
		return
	}
	if c.state == Releasing {
		// Whatever its status, the Release is done (RFC 8415 §18.2.10.2).
		c.stats.Replies.Add(1)
		c.setState(Stopped, now)
		c.next = time.Time{}
		return
	}
	if !c.topLevelSuccess(b) {
		return
	}
	c.reply(m, p, sid, now)
}

// solMaxRTOption takes a valid SOL_MAX_RT option (RFC 8415 §21.24: in
// an Advertise or Reply, even one otherwise ignored; 60 to 86400 s).
func (c *Client) solMaxRTOption(b []byte) {
	v := rawOption(b, optSolMaxRT)
	if len(v) != 4 {
		return
	}
	d := time.Duration(binary.BigEndian.Uint32(v)) * time.Second
	if d < minSolMaxRT || d > maxSolMaxRT {
		return
	}
	c.solMaxRT = d
	if c.state == Soliciting {
		c.ex.mrt = d
	}
}

// topLevelSuccess reports whether the message's own Status Code, if any,
// is Success; else it counts the drop (RFC 8415 §18.2.10: UnspecFail and
// UseMulticast leave the exchange to its retransmissions; §18.2.9: an
// Advertise with NoAddrsAvail is ignored).
func (c *Client) topLevelSuccess(b []byte) bool {
	st := rawOption(b, dhcpv6.OptionStatusCode)
	if len(st) < 2 || iana.StatusCode(binary.BigEndian.Uint16(st)) == iana.StatusSuccess {
		return true
	}
	if iana.StatusCode(binary.BigEndian.Uint16(st)) == iana.StatusNoPrefixAvail {
		c.stats.NoPrefixAvail.Add(1)
	}
	c.stats.Drops.Status.Add(1)
	return false
}

// iaPD is our IA_PD of a server's message, as the client reads it.
type iaPD struct {
	found    bool
	status   iana.StatusCode
	t1, t2   time.Duration
	prefixes []Prefix // usable ones with a valid lifetime above 0; times not yet set
	withdraw []netip.Prefix
}

// ourIAPD finds and reads the IA_PD with our IAID. One with T1 above T2
// (both not 0) is discarded as absent (RFC 8415 §21.21); an IAPREFIX
// whose preferred lifetime is above its valid lifetime is discarded
// (§21.22), as is one that is not a usable prefix; one with valid
// lifetime 0 is to be withdrawn (§18.2.10.1).
func (c *Client) ourIAPD(m *dhcpv6.Message) iaPD {
	var out iaPD
	for _, ia := range m.Options.IAPD() {
		if ia.IaId != c.iaid {
			continue
		}
		if ia.T1 > ia.T2 && ia.T2 != 0 {
			return iaPD{}
		}
		out = iaPD{found: true, t1: ia.T1, t2: ia.T2}
		if st := ia.Options.Status(); st != nil {
			out.status = st.StatusCode
		}
		for _, ip := range ia.Options.Prefixes() {
			if ip.Prefix == nil || ip.PreferredLifetime > ip.ValidLifetime {
				continue
			}
			if st := ip.Options.Status(); st != nil && st.StatusCode != iana.StatusSuccess {
				continue
			}
			ones, bitsLen := ip.Prefix.Mask.Size()
			a, ok := netip.AddrFromSlice(ip.Prefix.IP)
			if !ok || bitsLen != 128 {
				continue
			}
			pfx := netip.PrefixFrom(a, ones).Masked()
			if !usablePrefix(pfx) {
				continue
			}
			if ip.ValidLifetime == 0 {
				out.withdraw = append(out.withdraw, pfx)
				continue
			}
			if slices.ContainsFunc(out.prefixes, func(p Prefix) bool { return p.Prefix == pfx }) {
				continue
			}
			out.prefixes = append(out.prefixes, Prefix{Prefix: pfx, PreferredLifetime: ip.PreferredLifetime, ValidLifetime: ip.ValidLifetime})
		}
		return out
	}
	return out
}

// iaNA is our IA_NA of a server's message.
type iaNA struct {
	found    bool
	t1, t2   time.Duration
	addr     *Address // a usable address with a valid lifetime above 0
	withdraw bool     // the address held was given valid lifetime 0
}

// ourIANA finds and reads the IA_NA with our IAID, as ourIAPD does; the
// first usable address counts. held is the address held, if any.
func (c *Client) ourIANA(m *dhcpv6.Message, held netip.Addr) iaNA {
	if !c.cfg.WantAddress {
		return iaNA{}
	}
	for _, ia := range m.Options.IANA() {
		if ia.IaId != c.iaid {
			continue
		}
		if ia.T1 > ia.T2 && ia.T2 != 0 {
			return iaNA{}
		}
		out := iaNA{found: true, t1: ia.T1, t2: ia.T2}
		for _, ad := range ia.Options.Addresses() {
			a, ok := netip.AddrFromSlice(ad.IPv6Addr)
			if !ok || !usableAddr(a) || ad.PreferredLifetime > ad.ValidLifetime {
				continue
			}
			if st := ad.Options.Status(); st != nil && st.StatusCode != iana.StatusSuccess {
				continue
			}
			if ad.ValidLifetime == 0 {
				out.withdraw = out.withdraw || a == held
				continue
			}
			if out.addr == nil {
				out.addr = &Address{Addr: a, PreferredLifetime: ad.PreferredLifetime, ValidLifetime: ad.ValidLifetime}
			}
		}
		return out
	}
	return iaNA{}
}

// advertise takes an Advertise in SOLICIT (RFC 8415 §18.2.9): one
// without a usable prefix in our IA_PD is ignored; one with preference
// 255, or any after the first RT, is requested at once; the others are
// collected until the first RT ends.
func (c *Client) advertise(m *dhcpv6.Message, p rawudp.Packet, sid []byte, now time.Time) {
	pd := c.ourIAPD(m)
	if pd.status == iana.StatusNoPrefixAvail {
		c.stats.NoPrefixAvail.Add(1)
	}
	if len(pd.prefixes) == 0 {
		c.stats.Drops.NoPrefix.Add(1)
		return
	}
	c.stats.Advertises.Add(1)
	a := advert{serverID: bytes.Clone(sid), srcAddr: p.Src.Addr(), srcMAC: bytes.Clone(p.SrcMAC)}
	for _, x := range pd.prefixes {
		a.prefixes = append(a.prefixes, x.Prefix)
	}
	if na := c.ourIANA(m, netip.Addr{}); na.addr != nil {
		a.addr = na.addr.Addr
	}
	if v := rawOption(p.Payload, dhcpv6.OptionPreference); len(v) == 1 {
		a.preference = v[0]
	}
	if a.preference == 255 || c.ex.sent > 1 {
		c.request(&a, now)
		return
	}
	c.adverts = append(c.adverts, a)
}

// best is the collected Advertise with the highest preference, the
// earliest among equals (RFC 8415 §18.2.9).
func (c *Client) best() *advert {
	b := &c.adverts[0]
	for i := range c.adverts {
		if c.adverts[i].preference > b.preference {
			b = &c.adverts[i]
		}
	}
	a := *b
	return &a
}

// reply takes a Reply in REQUEST, RENEW, REBIND or CONFIRMING (RFC 8415
// §18.2.10.1).
func (c *Client) reply(m *dhcpv6.Message, p rawudp.Packet, sid []byte, now time.Time) {
	pd := c.ourIAPD(m)
	if pd.status == iana.StatusNoPrefixAvail {
		c.stats.NoPrefixAvail.Add(1)
	}
	base := c.lease
	if c.state == Confirming {
		base = c.saved
	}
	if c.state == Requesting {
		base = nil
	}
	if c.state != Requesting && pd.status == iana.StatusNoBinding {
		// The server has no binding for the IA_PD: ask it for one (RFC
		// 8415 §18.2.10.1), naming what the client holds.
		c.stats.Replies.Add(1)
		c.stats.NoBinding.Add(1)
		c.log.Info("dhcp6client: server has no binding for the prefixes; requesting", "state", c.state, "prefixes", prefixesOf(base))
		a := &advert{serverID: bytes.Clone(sid), srcAddr: p.Src.Addr(), srcMAC: bytes.Clone(p.SrcMAC)}
		a.prefixes, a.addr = held(base)
		c.saved = nil
		c.request(a, now)
		return
	}
	var heldAddr netip.Addr
	if base != nil && base.Address != nil {
		heldAddr = base.Address.Addr
	}
	na := c.ourIANA(m, heldAddr)
	if len(pd.prefixes) == 0 && (c.state == Requesting || na.addr == nil && !na.withdraw && len(pd.withdraw) == 0) {
		if c.state != Requesting {
			// Nothing renewed: the exchange carries on (RFC 8415
			// §18.2.10.1: an IA missing from the Reply is retried).
			c.stats.Drops.NoPrefix.Add(1)
			return
		}
		// REQUEST refused (NoPrefixAvail, or no prefix at all): solicit
		// again after a back-off (RFC 8415 §18.2.10.1).
		c.stats.Replies.Add(1)
		c.stats.RequestRefused.Add(1)
		c.refused++
		c.chosen = nil
		c.setState(Init, now)
		c.next = now.Add(c.refusedBackoff(c.refused))
		c.limitByExpiry()
		c.log.Warn("dhcp6client: server gave no prefix; soliciting again after a back-off", "status", pd.status, "next", c.next)
		return
	}
	c.stats.Replies.Add(1)
	l := c.merge(base, pd, na, m, p, sid)
	if len(l.Prefixes) == 0 {
		// Every prefix withdrawn by the server.
		c.stats.Losses.Add(1)
		c.saved = nil
		c.lose(now, "withdrawn by the server")
		c.solicit(now)
		return
	}
	c.apply(l, now)
}

// merge is the lease after a Reply: base's prefixes and address with the
// Reply's lifetimes where it gives them, withdrawn where it gives 0, its
// new ones added (RFC 8415 §18.2.10.1); its DNS servers, domains and
// server; times from the transmission it answered.
func (c *Client) merge(base *Lease, pd iaPD, na iaNA, m *dhcpv6.Message, p rawudp.Packet, sid []byte) *Lease {
	at := c.ex.lastSent
	l := &Lease{
		ServerID: bytes.Clone(sid), ServerAddr: p.Src.Addr(), ServerMAC: bytes.Clone(p.SrcMAC),
		DNS: dnsServers(m), Domains: domains(m), Acquired: at,
	}
	if base != nil {
		for _, x := range base.Prefixes {
			if !slices.Contains(pd.withdraw, x.Prefix) && !slices.ContainsFunc(pd.prefixes, func(n Prefix) bool { return n.Prefix == x.Prefix }) {
				l.Prefixes = append(l.Prefixes, x)
			}
		}
		if base.Address != nil && !na.withdraw && na.addr == nil {
			a := *base.Address
			l.Address = &a
		}
	}
	for _, x := range pd.prefixes {
		x.PreferredUntil, x.ValidUntil = at.Add(span(x.PreferredLifetime)), at.Add(span(x.ValidLifetime))
		l.Prefixes = append(l.Prefixes, x)
	}
	if a := na.addr; a != nil {
		a.PreferredUntil, a.ValidUntil = at.Add(span(a.PreferredLifetime)), at.Add(span(a.ValidLifetime))
		l.Address = a
	}
	l.T1, l.T2 = leaseTimes(l, at, pd, na)
	return l
}

// span is how long a lifetime or T1/T2 lasts: Infinite, and anything
// longer than a hundred years, is a hundred years (so that a preferred
// lifetime a little short of Infinite still ends before an infinite valid
// one).
func span(d time.Duration) time.Duration { return min(d, infiniteSpan) }

// leaseTimes returns T1 and T2 of l, acquired at: the smallest of the
// IAs' T1 and T2, each IA's 0 replaced by 0.5 and 0.8 of the shortest
// preferred lifetime left in l (RFC 8415 §21.21, §21.4), or of the
// shortest valid one when every preferred lifetime has ended; T1 is
// never after T2.
func leaseTimes(l *Lease, at time.Time, pd iaPD, na iaNA) (t1, t2 time.Time) {
	shortest := time.Duration(-1)
	shortestValid := time.Duration(-1)
	consider := func(pref, valid time.Time) {
		if d := pref.Sub(at); d > 0 && (shortest < 0 || d < shortest) {
			shortest = d
		}
		if d := valid.Sub(at); d > 0 && (shortestValid < 0 || d < shortestValid) {
			shortestValid = d
		}
	}
	for _, p := range l.Prefixes {
		consider(p.PreferredUntil, p.ValidUntil)
	}
	if a := l.Address; a != nil {
		consider(a.PreferredUntil, a.ValidUntil)
	}
	if shortest < 0 {
		shortest = max(shortestValid, 0)
	}
	var d1, d2 time.Duration = -1, -1
	take := func(t1, t2 time.Duration) {
		if t1 == 0 {
			t1 = shortest / 2
		} else {
			t1 = span(t1)
		}
		if t2 == 0 {
			t2 = shortest / 10 * 8
		} else {
			t2 = span(t2)
		}
		if d1 < 0 || t1 < d1 {
			d1 = t1
		}
		if d2 < 0 || t2 < d2 {
			d2 = t2
		}
	}
	if pd.found {
		take(pd.t1, pd.t2)
	}
	if na.found {
		take(na.t1, na.t2)
	}
	if d1 < 0 {
		take(0, 0) // kept from base only
	}
	d1 = min(d1, d2)
	return at.Add(d1), at.Add(d2)
}

// dnsServers is option 23 (RFC 3646 §3), the usable addresses in order.
func dnsServers(m *dhcpv6.Message) []netip.Addr {
	var out []netip.Addr
	for _, ip := range m.Options.DNS() {
		if a, ok := netip.AddrFromSlice(ip); ok && usableAddr(a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// domains is option 24 (RFC 3646 §4), the names the router can write
// back as search domains.
func domains(m *dhcpv6.Message) []string {
	l := m.Options.DomainSearchList()
	if l == nil {
		return nil
	}
	var out []string
	for _, s := range l.Labels {
		if s = domainName(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// domainName returns s without a trailing dot if it is a DNS name of
// letters, digits, hyphens and underscores (RFC 1035 §2.3.1, with the
// underscore some ISPs use), else "".
func domainName(s string) string {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return ""
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return ""
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return ""
			}
		}
	}
	return s
}
