package wireguard

import (
	"net/netip"
	"slices"
)

// allowedTable is the union of the peers' allowed IPs, the destinations
// the device has a peer for. The TUN checks each packet netstack sends
// against it before the device reads the packet: wireguard-go's
// RoutineReadFromTUN drops one that no peer allows without a word (not
// even a debug log), so this is where it is counted (TxNoPeer).
// Immutable once stored; a lookup takes no lock and does not allocate,
// where the device's own (AllowedIPs.Lookup) takes its table's RLock.
type allowedTable struct {
	// set holds every allowed prefix, masked (Config.Validate).
	set map[netip.Prefix]struct{}
	// bits4 and bits6 are the distinct prefix lengths in set of each
	// family, shortest first, so a default route (/0) matches at once.
	bits4, bits6 []int
}

// newAllowedTable builds the table of peers' allowed IPs.
func newAllowedTable(peers []Peer) *allowedTable {
	t := &allowedTable{set: map[netip.Prefix]struct{}{}}
	for _, p := range peers {
		for _, a := range p.AllowedIPs {
			a = a.Masked()
			t.set[a] = struct{}{}
			if a.Addr().Is4() {
				t.bits4 = append(t.bits4, a.Bits())
			} else {
				t.bits6 = append(t.bits6, a.Bits())
			}
		}
	}
	slices.Sort(t.bits4)
	t.bits4 = slices.Compact(t.bits4)
	slices.Sort(t.bits6)
	t.bits6 = slices.Compact(t.bits6)
	return t
}

// allows reports whether some peer's allowed IPs hold the destination
// of the IP packet ip, as the device's lookup decides it: IPv4 packets
// against IPv4 prefixes, IPv6 ones against IPv6 prefixes. A packet too
// short for its header, or of another version, is allowed: the device
// drops (and logs) those itself, and netstack sends none.
func (t *allowedTable) allows(ip []byte) bool {
	var dst netip.Addr
	var bits []int
	switch {
	case len(ip) >= 20 && ip[0]>>4 == 4:
		dst, bits = netip.AddrFrom4([4]byte(ip[16:20])), t.bits4
	case len(ip) >= 40 && ip[0]>>4 == 6:
		dst, bits = netip.AddrFrom16([16]byte(ip[24:40])), t.bits6
	default:
		return true
	}
	for _, b := range bits {
		p, _ := dst.Prefix(b)
		if _, ok := t.set[p]; ok {
			return true
		}
	}
	return false
}

// SetPeers tells the TUN which destinations the device has a peer for
// (the peers' allowed IPs), from the next packet on: packets netstack
// sends to any other address are dropped before the device sees them,
// and counted as TxNoPeer. Call it with the peers of each config the
// device is given; until the first call every packet goes to the device.
func (t *TUN) SetPeers(peers []Peer) { t.allowed.Store(newAllowedTable(peers)) }
