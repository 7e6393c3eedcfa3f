package hw

import (
	"net"
	"net/netip"

	"github.com/jsimonetti/rtnetlink/v2"
	"golang.org/x/sys/unix"
)

// AddAddress adds p to interface ifindex in the calling thread's network
// namespace, as "ip address add" does (replacing an equal one). An IPv6
// address skips duplicate address detection: it is on a link the router
// made, and tentative it could not be used for seconds.
func AddAddress(ifindex int, p netip.Prefix) error {
	fam, flags := uint8(unix.AF_INET), uint32(ifaPermanent)
	if p.Addr().Is6() {
		fam, flags = unix.AF_INET6, flags|unix.IFA_F_NODAD
	}
	a := net.IP(p.Addr().AsSlice())
	b, err := (&rtnetlink.AddressMessage{
		Family: fam, PrefixLength: uint8(p.Bits()), Flags: uint8(flags), Scope: unix.RT_SCOPE_UNIVERSE, Index: uint32(ifindex),
		Attributes: &rtnetlink.AddressAttributes{Local: a, Address: a, Flags: flags},
	}).MarshalBinary()
	if err != nil {
		return err
	}
	return addrRequest(b)
}

// AddRoute adds a static route to dst via gateway out of ifindex in the
// main table of the calling thread's network namespace, as "ip route
// replace" does.
func AddRoute(ifindex int, dst netip.Prefix, via netip.Addr) error {
	fam := uint8(unix.AF_INET)
	if dst.Addr().Is6() {
		fam = unix.AF_INET6
	}
	m := &rtnetlink.RouteMessage{
		Family: fam, DstLength: uint8(dst.Bits()),
		Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_STATIC, Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST,
		Attributes: rtnetlink.RouteAttributes{OutIface: uint32(ifindex)},
	}
	if dst.Bits() > 0 {
		m.Attributes.Dst = dst.Masked().Addr().AsSlice()
	}
	if via.IsValid() {
		m.Attributes.Gateway = via.AsSlice()
	}
	c, err := rtnetlink.Dial(nil)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Route.Replace(m)
}
