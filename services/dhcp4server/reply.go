package dhcp4server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// encodedOptions are the configured options' bytes, encoded once.
type encodedOptions struct {
	serverID []byte
	lease    []byte // 51
	t1, t2   []byte // 58, 59
	// config are the parameters of OFFER and ACK beyond the lease times,
	// by code: 1, 3, 6, 15, 26, 28, 42, 121.
	config []codeBytes
}

type codeBytes struct {
	code uint8
	val  []byte
}

var msgTypeBytes = [9][]byte{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}}

func encodeOptions(c *Config) encodedOptions {
	addrs := func(as []netip.Addr) []byte {
		var b []byte
		for _, a := range as {
			v := a.As4()
			b = append(b, v[:]...)
		}
		return b
	}
	secs := func(d time.Duration) []byte { return binary.BigEndian.AppendUint32(nil, uint32(d/time.Second)) }
	o := encodedOptions{
		serverID: addrs([]netip.Addr{c.ServerAddr}),
		// RFC 2131 §4.4.5: T1 defaults to 0.5 and T2 to 0.875 of the lease.
		lease: secs(c.LeaseTime),
		t1:    secs(c.LeaseTime / 2),
		t2:    secs(c.LeaseTime * 7 / 8),
	}
	mask := net.CIDRMask(c.Subnet.Bits(), 32)
	o.config = append(o.config, codeBytes{1, []byte(mask)})
	if len(c.Router) > 0 {
		o.config = append(o.config, codeBytes{3, addrs(c.Router)})
	}
	if len(c.DNS) > 0 {
		o.config = append(o.config, codeBytes{6, addrs(c.DNS)})
	}
	if c.Domain != "" {
		o.config = append(o.config, codeBytes{15, []byte(c.Domain)})
	}
	if c.MTU != 0 {
		o.config = append(o.config, codeBytes{26, binary.BigEndian.AppendUint16(nil, uint16(c.MTU))})
	}
	o.config = append(o.config, codeBytes{28, addrs([]netip.Addr{lastAddr(c.Subnet)})})
	if len(c.NTP) > 0 {
		o.config = append(o.config, codeBytes{42, addrs(c.NTP)})
	}
	if len(c.Routes) > 0 {
		o.config = append(o.config, codeBytes{121, encodeRoutes(c.Routes, c.Router)})
	}
	return o
}

// encodeRoutes encodes option 121 (RFC 3442 §2) with the library's
// encoder, the default route via the first router added when none of
// routes is a /0.
func encodeRoutes(routes []Route, routers []netip.Addr) []byte {
	var rs dhcpv4.Routes
	hasDefault := false
	for _, r := range routes {
		hasDefault = hasDefault || r.To.Bits() == 0
		rs = append(rs, &dhcpv4.Route{
			Dest:   &net.IPNet{IP: net.IP(r.To.Addr().AsSlice()), Mask: net.CIDRMask(r.To.Bits(), 32)},
			Router: net.IP(r.Via.AsSlice()),
		})
	}
	if !hasDefault && len(routers) > 0 {
		rs = append(rs, &dhcpv4.Route{
			Dest:   &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
			Router: net.IP(routers[0].AsSlice()),
		})
	}
	return rs.ToBytes()
}

// alwaysSent are the options kept when a reply must shrink to the
// client's maximum message size: the ones RFC 2131 table 3 requires.
var alwaysSent = [...]uint8{optMsgType, optServerID, 51, 58, 59, optClientID, optRelay, 1}

// reply builds a reply of type typ to m (RFC 2131 table 3) and addresses
// it (RFC 2131 §4.1). yiaddr is the address offered or leased (invalid
// for NAK and INFORM); ciaddr is copied into an ACK.
func (s *Server) reply(m *dhcpv4.DHCPv4, p rawudp.Packet, typ byte, yiaddr, ciaddr netip.Addr) result {
	r := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        m.HWType,
		TransactionID: m.TransactionID,
		Flags:         m.Flags,
		GatewayIPAddr: m.GatewayIPAddr,
		ClientHWAddr:  m.ClientHWAddr,
		Options:       make(dhcpv4.Options, 16),
	}
	if yiaddr.IsValid() {
		r.YourIPAddr = net.IP(yiaddr.AsSlice())
	}
	if typ == msgAck && ciaddr.IsValid() {
		r.ClientIPAddr = net.IP(ciaddr.AsSlice())
	}
	o := r.Options
	o[optMsgType] = msgTypeBytes[typ]
	o[optServerID] = s.opts.serverID
	// RFC 6842: the client identifier is echoed; RFC 3046 §2.2: so is the
	// relay agent information.
	for _, code := range []uint8{optClientID, optRelay} {
		if v, ok := m.Options[code]; ok {
			o[code] = v
		}
	}
	if typ == msgNak {
		o[optMessage] = []byte("address not available")
	} else {
		if yiaddr.IsValid() {
			o[51], o[58], o[59] = s.opts.lease, s.opts.t1, s.opts.t2
		}
		for _, cb := range s.opts.config {
			o[cb.code] = cb.val
		}
	}

	// Addressing, RFC 2131 §4.1 and §4.3.2.
	out := rawudp.Packet{Src: netip.AddrPortFrom(s.cfg.ServerAddr, ServerPort)}
	gi := ip4(m.GatewayIPAddr)
	ci := ip4(m.ClientIPAddr)
	switch {
	case gi.IsValid() && !gi.IsUnspecified():
		// To the relay agent, which hands it on; a NAK with the broadcast
		// bit so that it is broadcast to the client.
		out.Dst = netip.AddrPortFrom(gi, ServerPort)
		out.DstMAC = slices.Clone(p.SrcMAC)
		if typ == msgNak {
			r.SetBroadcast()
		}
	case typ == msgNak:
		out.Dst = netip.AddrPortFrom(broadcast4, ClientPort)
	case ciaddr.IsValid() && typ == msgAck && !yiaddr.IsValid():
		// DHCPINFORM: to the address the client has (ciaddr, or the
		// datagram's source when a client left ciaddr zero).
		out.Dst = netip.AddrPortFrom(ciaddr, ClientPort)
		out.DstMAC = slices.Clone(m.ClientHWAddr)
	case ci.IsValid() && !ci.IsUnspecified():
		out.Dst = netip.AddrPortFrom(ci, ClientPort)
		out.DstMAC = slices.Clone(m.ClientHWAddr)
	case m.IsBroadcast():
		out.Dst = netip.AddrPortFrom(broadcast4, ClientPort)
	default:
		// Unicast to an address the client does not answer ARP for yet:
		// straight to its hardware address.
		out.Dst = netip.AddrPortFrom(yiaddr, ClientPort)
		out.DstMAC = slices.Clone(m.ClientHWAddr)
	}
	out.Payload = r.ToBytes()
	if max := s.maxPayload(m); len(out.Payload) > max {
		prl := m.Options.Get(dhcpv4.OptionParameterRequestList)
		for code := range o {
			if !slices.Contains(alwaysSent[:], code) && !slices.Contains(prl, code) {
				delete(o, code)
			}
		}
		out.Payload = r.ToBytes()
	}
	return result{reply: out, typ: typ, send: true}
}

// maxPayload is the largest DHCP message m's client takes: its option 57
// (RFC 2132 §9.10, the whole IP datagram) or 576 (RFC 2131 §2), less the
// IP and UDP headers.
func (s *Server) maxPayload(m *dhcpv4.DHCPv4) int {
	size := 576
	if v := m.Options[optMaxSize]; len(v) == 2 {
		if n := int(binary.BigEndian.Uint16(v)); n > size {
			size = min(n, rawudp.MTU)
		}
	}
	return size - 28
}
