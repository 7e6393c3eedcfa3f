package vswitch

import (
	"sync/atomic"

	"github.com/gvrouter/gvrouter/hw"
)

// Drop reasons, the keys of PortStats.Drops and VLANStats.Drops.
const (
	// DropVLANNotMember counts tagged frames whose VID's member set does
	// not hold the ingress port (ingress filtering, IEEE 802.1Q-2018
	// 8.6.2). Per VLAN only for VIDs some port is a member of.
	DropVLANNotMember = "vlan_not_member"
	// DropUntaggedNoPVID counts untagged and priority-tagged frames
	// received on a port without a PVID. Per port only.
	DropUntaggedNoPVID = "untagged_no_pvid"
	// DropTagMalformed counts frames with the reserved VID 0xFFF, an
	// in-band C-tag cut short, or no room for an Ethernet header. Per port
	// only.
	DropTagMalformed = "tag_malformed"
	// DropReservedGroup counts frames to 01-80-C2-00-00-00 to 0F, which a
	// C-VLAN component does not relay (IEEE 802.1Q-2018 Table 8-1).
	DropReservedGroup = "reserved_group"
	// DropFiltered counts frames with nowhere to go: the destination was
	// learned on the ingress port, or the VLAN has no other member port.
	DropFiltered = "filtered"
	// DropTx counts frame copies an egress port did not accept
	// (hw.Port.WriteFrames). Per egress port only.
	DropTx = "tx"
)

type dropReason uint8

const (
	dropNone dropReason = iota
	dropVLANNotMember
	dropUntaggedNoPVID
	dropTagMalformed
	dropReservedGroup
	dropFiltered
	dropTx
	numDropReasons
)

var dropNames = [numDropReasons]string{
	dropVLANNotMember:  DropVLANNotMember,
	dropUntaggedNoPVID: DropUntaggedNoPVID,
	dropTagMalformed:   DropTagMalformed,
	dropReservedGroup:  DropReservedGroup,
	dropFiltered:       DropFiltered,
	dropTx:             DropTx,
}

// Stats is a snapshot of a switch's counters.
type Stats struct {
	// Ports are the ports' counters, in Config.Ports order.
	Ports []PortStats
	// VLANs are the counters of every VLAN some port is a member of, by
	// ascending VID.
	VLANs []VLANStats
	// FDBEntries is the number of learned addresses, aged ones included
	// until the next sweep.
	FDBEntries int
}

// PortStats are one port's counters.
type PortStats struct {
	// Name is the port's interface, e.g. "lan".
	Name string
	// RxFrames counts frames the port received, dropped ones included.
	RxFrames uint64
	// TxFrames counts frames sent on the port (accepted by WriteFrames).
	TxFrames uint64
	// Forwarded counts frames received on the port and sent to the one
	// port their destination was learned on.
	Forwarded uint64
	// Flooded counts frames received on the port and sent to every other
	// member port of their VLAN (unknown unicast, multicast, broadcast).
	Flooded uint64
	// Drops counts dropped frames by reason (DropVLANNotMember, ...): on
	// the ingress port, except DropTx on the egress port. Every reason is
	// present, zero or not.
	Drops map[string]uint64
	// HW is the underlying hw.Port's own counters.
	HW hw.Stats
}

// VLANStats are one VLAN's counters.
type VLANStats struct {
	// VID is the VLAN, e.g. 1.
	VID uint16
	// Forwarded and Flooded count received frames of the VLAN, as in
	// PortStats.
	Forwarded, Flooded uint64
	// Drops counts dropped frames of the VLAN by reason; every reason is
	// present, zero or not.
	Drops map[string]uint64
}

// counters are the live counters of one port or VLAN, updated atomically
// once per batch.
type counters struct {
	rx, tx             atomic.Uint64
	forwarded, flooded atomic.Uint64
	drops              [numDropReasons]atomic.Uint64
}

// tally is a per-batch count added to counters once.
type tally struct {
	rx, tx             uint64
	forwarded, flooded uint64
	drops              [numDropReasons]uint64
}

func (c *counters) add(t *tally) {
	if t.rx != 0 {
		c.rx.Add(t.rx)
	}
	if t.tx != 0 {
		c.tx.Add(t.tx)
	}
	if t.forwarded != 0 {
		c.forwarded.Add(t.forwarded)
	}
	if t.flooded != 0 {
		c.flooded.Add(t.flooded)
	}
	for i, n := range t.drops {
		if n != 0 {
			c.drops[i].Add(n)
		}
	}
	*t = tally{}
}

func (c *counters) dropMap() map[string]uint64 {
	m := make(map[string]uint64, numDropReasons-1)
	for i := dropNone + 1; i < numDropReasons; i++ {
		m[dropNames[i]] = c.drops[i].Load()
	}
	return m
}
