package hw

import (
	"fmt"
	"net"
	"slices"
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
	want := make([]string, 0, len(macs))
	for _, m := range macs {
		if len(m) != 6 || m[0]&1 == 0 {
			return fmt.Errorf("hw: %s: %v is not an Ethernet multicast address", p.name, m)
		}
		if !slices.Contains(want, string(m)) {
			want = append(want, string(m))
		}
	}
	var errs []error
	for _, m := range p.groups {
		if !slices.Contains(want, m) {
			if err := p.membership(false, m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	joined := p.groups[:0:0]
	for _, m := range want {
		if slices.Contains(p.groups, m) {
			joined = append(joined, m)
			continue
		}
		if err := p.membership(true, m); err != nil {
			errs = append(errs, err)
			continue
		}
		joined = append(joined, m)
	}
	p.groups = joined
	if len(errs) > 0 {
		return fmt.Errorf("hw: %s: multicast membership: %v", p.name, errs)
	}
	return nil
}

// Multicast returns the groups SetMulticast joined.
func (p *Port) Multicast() []net.HardwareAddr {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]net.HardwareAddr, len(p.groups))
	for i, m := range p.groups {
		out[i] = net.HardwareAddr(m)
	}
	return out
}

// membership joins (add) or leaves the group mac on queue 0's socket
// (PACKET_MR_MULTICAST, through github.com/mdlayher/packet).
func (p *Port) membership(add bool, mac string) error {
	c := p.queues[0].conn
	var err error
	if add {
		err = c.JoinGroup(net.HardwareAddr(mac))
	} else {
		err = c.LeaveGroup(net.HardwareAddr(mac))
	}
	if err != nil {
		return fmt.Errorf("%v: %w", net.HardwareAddr(mac), err)
	}
	return nil
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
