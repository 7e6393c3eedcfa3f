package hw

import (
	"encoding/binary"
	"net/netip"

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
	b := make([]byte, unix.SizeofIfAddrmsg, 64)
	b[0], b[1], b[2], b[3] = fam, uint8(p.Bits()), uint8(flags), unix.RT_SCOPE_UNIVERSE
	binary.NativeEndian.PutUint32(b[4:], uint32(ifindex))
	a := p.Addr().AsSlice()
	b = appendAttr(b, unix.IFA_LOCAL, a)
	b = appendAttr(b, unix.IFA_ADDRESS, a)
	b = appendAttr(b, unix.IFA_FLAGS, binary.NativeEndian.AppendUint32(nil, flags))
	return netlinkRequest(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, b)
}

// AddRoute adds a static route to dst via gateway out of ifindex in the
// main table of the calling thread's network namespace, as "ip route
// replace" does.
func AddRoute(ifindex int, dst netip.Prefix, via netip.Addr) error {
	fam := uint8(unix.AF_INET)
	if dst.Addr().Is6() {
		fam = unix.AF_INET6
	}
	b := make([]byte, unix.SizeofRtMsg, 64)
	b[0], b[1] = fam, uint8(dst.Bits())
	b[4], b[5], b[6], b[7] = unix.RT_TABLE_MAIN, unix.RTPROT_STATIC, unix.RT_SCOPE_UNIVERSE, unix.RTN_UNICAST
	if dst.Bits() > 0 {
		b = appendAttr(b, unix.RTA_DST, dst.Masked().Addr().AsSlice())
	}
	if via.IsValid() {
		b = appendAttr(b, unix.RTA_GATEWAY, via.AsSlice())
	}
	b = appendAttr(b, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(ifindex)))
	return netlinkRequest(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, b)
}
