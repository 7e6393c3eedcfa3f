package hw

import (
	"fmt"
	"net"
	"slices"
	"sync"

	"github.com/mdlayher/packet"
)

// Memberships holds an interface's multicast memberships and its
// promiscuous mode for a port that has no packet socket of its own to
// hang them on (the AF_XDP one, hw/xdpport). It is a packet socket
// opened for them alone: bound with protocol 0, the kernel registers no
// receive hook for it, so it is handed no frame and costs nothing per
// frame, yet PACKET_ADD_MEMBERSHIP on it works as on Port's receive
// sockets (packet(7)). The kernel drops every membership with the
// socket, also when the process dies, so a crash leaves nothing on the
// NIC's filter and nothing needs recording. Its methods are safe for
// concurrent use.
type Memberships struct {
	name string
	// mu protects conn, groups and promisc.
	mu      sync.Mutex
	conn    *packet.Conn // nil once closed
	groups  []string     // joined MACs as strings of 6 bytes
	promisc bool
}

// OpenMemberships opens the membership socket of interface ifname in the
// calling thread's network namespace (lock the thread there first).
func OpenMemberships(ifname string) (*Memberships, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("hw: %s: membership socket: %w: %w", ifname, ErrNotFound, err)
	}
	c, err := packet.Listen(ifi, packet.Raw, 0, nil)
	if err != nil {
		return nil, fmt.Errorf("hw: %s: membership socket: %w", ifname, err)
	}
	return &Memberships{name: ifname, conn: c}, nil
}

// SetMulticast makes the interface accept exactly the Ethernet multicast
// groups in macs (besides broadcast), as Port.SetMulticast does.
func (m *Memberships) SetMulticast(macs []net.HardwareAddr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return ErrClosed
	}
	var err error
	m.groups, err = syncGroups(m.name, m.groups, macs, func(add bool, mac string) error {
		return joinLeave(m.conn, add, mac)
	})
	return err
}

// Multicast returns the groups SetMulticast joined.
func (m *Memberships) Multicast() []net.HardwareAddr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return groupMACs(m.groups)
}

// SetPromiscuous turns the interface's promiscuous mode on or off
// (PACKET_MR_PROMISC): a bridge forwards frames for MACs that are not
// the interface's, which a real NIC's unicast filter would drop.
func (m *Memberships) SetPromiscuous(on bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return ErrClosed
	}
	if on == m.promisc {
		return nil
	}
	if err := m.conn.SetPromiscuous(on); err != nil {
		return fmt.Errorf("hw: promiscuous mode on %s: %w", m.name, err)
	}
	m.promisc = on
	return nil
}

// Close closes the socket, which leaves every group and promiscuous
// mode. It is safe to call twice.
func (m *Memberships) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return nil
	}
	err := m.conn.Close()
	m.conn, m.groups, m.promisc = nil, nil, false
	if err != nil {
		return fmt.Errorf("hw: %s: close membership socket: %w", m.name, err)
	}
	return nil
}

// syncGroups moves the memberships of interface name from have (MACs as
// strings of 6 bytes) to macs through join, which adds (add) or drops
// one, and returns the groups held afterwards: every one it could join,
// and every one it failed to leave. A MAC that is not multicast fails
// the whole call before anything changes.
func syncGroups(name string, have []string, macs []net.HardwareAddr, join func(add bool, mac string) error) ([]string, error) {
	want := make([]string, 0, len(macs))
	for _, m := range macs {
		if len(m) != 6 || m[0]&1 == 0 {
			return have, fmt.Errorf("hw: %s: %v is not an Ethernet multicast address", name, m)
		}
		if !slices.Contains(want, string(m)) {
			want = append(want, string(m))
		}
	}
	var errs []error
	joined := have[:0:0]
	for _, m := range have {
		if slices.Contains(want, m) {
			continue
		}
		if err := join(false, m); err != nil {
			errs = append(errs, err)
			joined = append(joined, m) // still a member
		}
	}
	for _, m := range want {
		if slices.Contains(have, m) {
			joined = append(joined, m)
			continue
		}
		if err := join(true, m); err != nil {
			errs = append(errs, err)
			continue
		}
		joined = append(joined, m)
	}
	if len(errs) > 0 {
		return joined, fmt.Errorf("hw: %s: multicast membership: %v", name, errs)
	}
	return joined, nil
}

// joinLeave joins (add) or leaves the group mac on c (PACKET_MR_MULTICAST,
// through github.com/mdlayher/packet).
func joinLeave(c *packet.Conn, add bool, mac string) error {
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

// groupMACs converts groups held as strings back to MACs.
func groupMACs(groups []string) []net.HardwareAddr {
	out := make([]net.HardwareAddr, len(groups))
	for i, m := range groups {
		out[i] = net.HardwareAddr(m)
	}
	return out
}
