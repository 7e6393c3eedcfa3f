package dhcp6server

import (
	"bytes"
	"encoding/binary"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv6"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// UDP ports (RFC 8415 §7.2).
const (
	ServerPort = 547
	ClientPort = 546
)

// AllRelayAgentsAndServers is All_DHCP_Relay_Agents_and_Servers, the
// link-scoped group clients send to (RFC 8415 §7.1).
var AllRelayAgentsAndServers = netip.MustParseAddr("ff02::1:2")

// Message types (RFC 8415 §7.3), as the first byte of a message.
const (
	msgSolicit     = 1
	msgAdvertise   = 2
	msgRequest     = 3
	msgConfirm     = 4
	msgRenew       = 5
	msgRebind      = 6
	msgReply       = 7
	msgRelease     = 8
	msgDecline     = 9
	msgReconfigure = 10
	msgInfoRequest = 11
	msgRelayForw   = 12
	msgRelayRepl   = 13
)

// Option codes the handler looks at before the wire library does.
const (
	optClientID = 1   // RFC 8415 §21.2
	optServerID = 2   // §21.3
	optIANA     = 3   // §21.4
	optIATA     = 4   // §21.5 (obsolete, still an IA)
	optORO      = 6   // §21.7
	optIAPD     = 25  // §21.21
	optIALL     = 138 // RFC 8947 §10.1
)

// Client Identifier sizes: a DUID is a 2-byte type and 1 to 128 bytes
// (RFC 8415 §11.1).
const (
	minClientID = 3
	maxClientID = 2 + 128
)

// headerLen is msg-type and transaction-id (RFC 8415 §8).
const headerLen = 4

// scan is what the handler needs from an Information-request's options.
type scan struct {
	clientID []byte // the Client Identifier's body; nil = none
	serverID []byte // the Server Identifier's body; nil = none
	ia       bool   // an IA option is present
}

// scanOptions walks the options area (RFC 8415 §21.1) and reports whether
// it is well formed: every option header and body inside the message,
// nothing left over, at most one Client and one Server Identifier, the
// Client Identifier 3 to 130 bytes, Option Request bodies of whole
// option codes.
func scanOptions(b []byte) (scan, bool) {
	var sc scan
	for len(b) > 0 {
		if len(b) < 4 {
			return sc, false
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if len(b)-4 < n {
			return sc, false
		}
		body := b[4 : 4+n : 4+n]
		switch code {
		case optClientID:
			if sc.clientID != nil || n < minClientID || n > maxClientID {
				return sc, false
			}
			sc.clientID = body
		case optServerID:
			if sc.serverID != nil {
				return sc, false
			}
			sc.serverID = body
		case optIANA, optIATA, optIAPD, optIALL:
			sc.ia = true
		case optORO:
			if n%2 != 0 {
				return sc, false
			}
		}
		b = b[4+n:]
	}
	return sc, true
}

// parseOption has the wire library decode the options the server reads,
// the Client and Server Identifiers and the Option Request option, and
// keeps every other as it came: an option the server does not read
// cannot make it refuse a client, whatever its body (RFC 8415 §16 lets a
// server ignore what it has no use for).
func parseOption(code dhcpv6.OptionCode, data []byte) (dhcpv6.Option, error) {
	switch code {
	case dhcpv6.OptionClientID, dhcpv6.OptionServerID, dhcpv6.OptionORO:
		return dhcpv6.ParseOption(code, data)
	}
	return &dhcpv6.OptionGeneric{OptionCode: code, OptionData: data}, nil
}

// handle decides what one datagram gets: a Reply to send (true), or a
// drop, counted. It keeps nothing of p.
func (s *Server) handle(p rawudp.Packet) (rawudp.Packet, bool) {
	s.stats.Received.Add(1)
	if r, ok := s.check(p); !ok {
		s.stats.drop(r)
		s.logDrop(r, p)
		return rawudp.Packet{}, false
	}
	b := p.Payload
	m := &dhcpv6.Message{MessageType: dhcpv6.MessageType(b[0]), TransactionID: dhcpv6.TransactionID(b[1:headerLen])}
	if err := m.Options.FromBytesWithParser(b[headerLen:], parseOption); err != nil {
		s.stats.drop(DropMalformed) // a DUID or ORO the library refuses
		s.logDrop(DropMalformed, p)
		return rawudp.Packet{}, false
	}
	src := p.Src.Addr().WithZone("")
	if !s.limit.allow(src, p.SrcMAC, s.cfg.Clock.Now()) {
		s.stats.drop(DropRateLimited)
		s.logDrop(DropRateLimited, p)
		return rawudp.Packet{}, false
	}
	sc, _ := scanOptions(b[headerLen:]) // check passed: well formed
	return rawudp.Packet{
		Payload: s.reply(m, sc.clientID),
		Src:     netip.AddrPortFrom(s.cfg.Addr, ServerPort),
		Dst:     netip.AddrPortFrom(src, ClientPort),
		DstMAC:  p.SrcMAC,
	}, true
}

// check runs the cheap tests on a datagram, in the order of the drop
// reasons' precedence: addresses, message type, options.
func (s *Server) check(p rawudp.Packet) (DropReason, bool) {
	if dst := p.Dst.Addr().WithZone(""); p.Dst.Port() != ServerPort ||
		dst != AllRelayAgentsAndServers && dst != s.cfg.Addr {
		return DropWrongDestination, false
	}
	src := p.Src.Addr().WithZone("")
	if !src.Is6() || src.Is4In6() || !src.IsLinkLocalUnicast() || src == s.cfg.Addr {
		return DropBadSource, false
	}
	// A transport that cannot know the MAC (a kernel socket) leaves it
	// nil; one that does must give a unicast one, where the Reply goes.
	if mac := p.SrcMAC; mac != nil && (len(mac) != 6 || mac[0]&1 != 0 || [6]byte(mac) == [6]byte{}) {
		return DropBadSource, false
	}
	b := p.Payload
	if len(b) < headerLen {
		return DropMalformed, false
	}
	switch b[0] {
	case msgInfoRequest:
	case msgSolicit, msgRequest, msgConfirm, msgRenew, msgRebind, msgRelease, msgDecline:
		return DropStatefulIgnored, false
	case msgRelayForw:
		return DropRelay, false
	case msgAdvertise, msgReply, msgReconfigure, msgRelayRepl:
		return DropNotClientMessage, false
	default:
		return DropUnsupportedType, false
	}
	sc, ok := scanOptions(b[headerLen:])
	switch {
	case !ok:
		return DropMalformed, false
	case sc.ia:
		return DropIAOption, false
	case sc.serverID != nil && !bytes.Equal(sc.serverID, s.duid):
		return DropWrongServerID, false
	}
	return 0, true
}

// logDrop logs a drop at debug level, at most once per logEvery.
func (s *Server) logDrop(r DropReason, p rawudp.Packet) {
	now := s.cfg.Clock.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(logEvery) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Debug("dhcp6server: dropped", "reason", r.String(), "from", p.Src, "to", p.Dst, "bytes", len(p.Payload))
}
