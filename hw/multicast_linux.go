package hw

import (
	"net"
)

// SetMulticast makes the port's NIC accept exactly the Ethernet multicast
// groups in macs (besides broadcast), e.g. 33:33:00:00:00:02 for IPv6
// all-routers (RFC 2464 §7). The router's kernel interface has IPv6
// disabled, so the kernel's own memberships are gone and a real NIC's
// filter would drop the multicast the router's services need (veths
// accept everything and hide this). The memberships belong to the port's
// socket (PACKET_ADD_MEMBERSHIP) and end with it, also when the process
// dies; `ip maddr show dev IF` lists them. Groups not in macs that an
// earlier call joined are left.
func (p *Port) SetMulticast(macs []net.HardwareAddr) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.queues) == 0 {
		return ErrClosed
	}
	var err error
	p.groups, err = syncGroups(p.name, p.groups, macs, func(add bool, mac string) error {
		return joinLeave(p.queues[0].conn, add, mac)
	})
	return err
}

// Multicast returns the groups SetMulticast joined.
func (p *Port) Multicast() []net.HardwareAddr {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return groupMACs(p.groups)
}

// IPv6MulticastMAC returns the Ethernet group of IPv6 multicast address
// a (RFC 2464 §7: 33:33 and its last four bytes), e.g. 33:33:00:00:00:02
// for ff02::2.
func IPv6MulticastMAC(a [16]byte) net.HardwareAddr {
	return net.HardwareAddr{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// SolicitedNodeMAC returns the Ethernet group of a's solicited-node
// multicast address ff02::1:ffXX:XXXX (RFC 4291 §2.7.1), which neighbour
// solicitations for a are sent to.
func SolicitedNodeMAC(a [16]byte) net.HardwareAddr {
	return net.HardwareAddr{0x33, 0x33, 0xff, a[13], a[14], a[15]}
}
