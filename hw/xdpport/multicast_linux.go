package xdpport

import "net"

// SetMulticast makes the interface's filter accept exactly the Ethernet
// multicast groups in macs (besides broadcast), as hw.Port.SetMulticast
// does: the port silences IPv6 on its interface, which takes the
// kernel's own memberships with it, and a NIC's filter runs before XDP,
// so without these a real NIC would drop the neighbour solicitations,
// router solicitations, DHCPv6 and MKPDUs the router must hear. AF_XDP
// has no membership option, so they are held by a packet socket that
// receives nothing (hw.Memberships); they end with it, at Close or when
// the process dies. It returns hw.ErrClosed after Close.
func (p *Port) SetMulticast(macs []net.HardwareAddr) error {
	return p.groups.SetMulticast(macs)
}

// Multicast returns the groups SetMulticast joined.
func (p *Port) Multicast() []net.HardwareAddr { return p.groups.Multicast() }

// SetPromiscuous turns the interface's promiscuous mode on or off for as
// long as the port is open: hw.Bridge forwards frames that are not for
// the interface's MAC.
func (p *Port) SetPromiscuous(on bool) error { return p.groups.SetPromiscuous(on) }

var _ interface {
	SetMulticast([]net.HardwareAddr) error
	Multicast() []net.HardwareAddr
} = (*Port)(nil)
