package svc

import (
	"encoding/binary"
	"net/netip"

	"github.com/gvrouter/gvrouter/services/rawudp"
)

// dstTap is a rawudp.Conn, IPv4 or IPv6, that takes only datagrams to
// the addresses accept allows: a DHCP server must not steal a LAN host's
// forwarded traffic to some other server's port, and the DHCPv6 client
// takes only what is sent to its link-local address. The tap's match
// fixes the frames' EtherType, so each Deliver sees one family.
type dstTap struct {
	conn   *rawudp.Conn
	accept func(dst netip.Addr) bool
}

// Deliver implements stack.Tap.
func (t dstTap) Deliver(frame []byte) bool {
	var dst netip.Addr
	switch {
	case len(frame) < 14:
		return false
	case binary.BigEndian.Uint16(frame[12:]) == 0x86dd:
		if len(frame) < 14+40 {
			return false
		}
		dst = netip.AddrFrom16([16]byte(frame[14+24 : 14+40]))
	default:
		if len(frame) < 14+20 {
			return false
		}
		dst = netip.AddrFrom4([4]byte(frame[14+16 : 14+20]))
	}
	if !t.accept(dst) {
		return false
	}
	return t.conn.Deliver(frame)
}
