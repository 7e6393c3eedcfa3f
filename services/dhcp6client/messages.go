package dhcp6client

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/gvrouter/gvrouter/services/rawudp"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// message returns the message of the current state (RFC 8415 §18.2.1,
// §18.2.2, §18.2.4, §18.2.5, §18.2.7, and Appendix B for which options
// each carries), for a transmission at now.
func (c *Client) message(now time.Time) *dhcpv6.Message {
	m := &dhcpv6.Message{TransactionID: c.xid}
	var server []byte
	var hints []netip.Prefix
	var addr netip.Addr
	switch c.state {
	case Soliciting:
		m.MessageType = dhcpv6.MessageTypeSolicit
		if c.cfg.PDLength > 0 {
			hints = []netip.Prefix{netip.PrefixFrom(netip.IPv6Unspecified(), c.cfg.PDLength)}
		}
	case Requesting:
		m.MessageType = dhcpv6.MessageTypeRequest
		server, hints, addr = c.chosen.serverID, c.chosen.prefixes, c.chosen.addr
	case Renewing:
		m.MessageType = dhcpv6.MessageTypeRenew
		server = c.lease.ServerID
		hints, addr = held(c.lease)
	case Rebinding:
		m.MessageType = dhcpv6.MessageTypeRebind
		hints, addr = held(c.lease)
	case Confirming:
		m.MessageType = dhcpv6.MessageTypeRebind
		hints, addr = held(c.saved)
	case Releasing:
		m.MessageType = dhcpv6.MessageTypeRelease
		server = c.saved.ServerID
		hints, addr = held(c.saved)
	}
	m.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionClientID, OptionData: c.duid})
	if server != nil {
		m.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionServerID, OptionData: server})
	}
	if m.MessageType != dhcpv6.MessageTypeRelease {
		m.AddOption(dhcpv6.OptRequestedOption(requested...))
	}
	m.AddOption(dhcpv6.OptElapsedTime(c.ex.elapsed(now)))
	if c.cfg.WantAddress && (m.MessageType != dhcpv6.MessageTypeRelease || addr.IsValid()) {
		na := &dhcpv6.OptIANA{IaId: c.iaid}
		if addr.IsValid() {
			// RFC 8415 §21.6: a client sets the lifetimes to 0.
			na.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: addr.AsSlice()})
		}
		m.AddOption(na)
	}
	pd := &dhcpv6.OptIAPD{IaId: c.iaid} // T1 and T2 0: no preference (RFC 8415 §21.21)
	for _, p := range hints {
		// RFC 8415 §21.22: lifetimes 0 in a client's message.
		pd.Options.Add(&dhcpv6.OptIAPrefix{Prefix: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}})
	}
	m.AddOption(pd)
	return m
}

// held returns the prefixes and the address of l, as the hints of a
// Renew, Rebind or Release.
func held(l *Lease) ([]netip.Prefix, netip.Addr) {
	if l == nil {
		return nil, netip.Addr{}
	}
	ps := prefixesOf(l)
	var a netip.Addr
	if l.Address != nil {
		a = l.Address.Addr
	}
	return ps, a
}

// send sends m from the link-local address to ff02::1:2 (RFC 8415
// §13.1: the client multicasts unless it has a Server Unicast option,
// which it does not take).
func (c *Client) send(m *dhcpv6.Message) {
	err := c.cfg.Transport.Send(rawudp.Packet{
		Payload: m.ToBytes(),
		Src:     netip.AddrPortFrom(c.cfg.SrcAddr, ClientPort),
		Dst:     netip.AddrPortFrom(AllAgents, ServerPort),
	})
	if err != nil {
		c.stats.SendErrors.Add(1)
		c.logError("send "+m.MessageType.String(), err)
		return
	}
	switch m.MessageType {
	case dhcpv6.MessageTypeSolicit:
		c.stats.Solicits.Add(1)
	case dhcpv6.MessageTypeRequest:
		c.stats.Requests.Add(1)
	case dhcpv6.MessageTypeRenew:
		c.stats.Renews.Add(1)
	case dhcpv6.MessageTypeRebind:
		c.stats.Rebinds.Add(1)
	case dhcpv6.MessageTypeRelease:
		c.stats.Releases.Add(1)
	}
}

// rawOption returns the data of the first top-level option code in a
// message whose options parsed (so every length is in range), or nil.
func rawOption(msg []byte, code dhcpv6.OptionCode) []byte {
	for b := msg[4:]; len(b) >= 4; {
		n := int(binary.BigEndian.Uint16(b[2:]))
		if n > len(b)-4 {
			return nil
		}
		if dhcpv6.OptionCode(binary.BigEndian.Uint16(b)) == code {
			return b[4 : 4+n]
		}
		b = b[4+n:]
	}
	return nil
}
