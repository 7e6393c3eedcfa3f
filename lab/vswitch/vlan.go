package vswitch

import (
	"encoding/binary"

	"github.com/gvrouter/gvrouter/hw"
)

// vlan is one configured VLAN: its member set and which members send it
// untagged.
type vlan struct {
	vid      uint16
	members  uint64 // bit i: port i is a member (PVID or tagged)
	untagged uint64 // bit i: the VID is port i's PVID
}

// table is a switch's VLAN configuration, immutable after newTable.
type table struct {
	pvid  []uint16 // by port; 0 = none
	vlans []vlan   // configured VLANs, by ascending VID
	// index maps a VID to 1 + its index in vlans, 0 for a VID no port is
	// a member of.
	index [vidMask + 1]uint16
}

func newTable(cfg *Config) *table {
	t := &table{pvid: make([]uint16, len(cfg.Ports))}
	var members, untagged [vidMask + 1]uint64
	for i, p := range cfg.Ports {
		t.pvid[i] = p.PVID
		if p.PVID != 0 {
			members[p.PVID] |= 1 << i
			untagged[p.PVID] |= 1 << i
		}
		for _, vid := range p.Tagged {
			members[vid] |= 1 << i
		}
	}
	for vid, m := range members {
		if m != 0 {
			t.vlans = append(t.vlans, vlan{vid: uint16(vid), members: m, untagged: untagged[vid]})
			t.index[vid] = uint16(len(t.vlans))
		}
	}
	return t
}

// ingress is what classification learned about a received frame: its VLAN
// and where its bytes continue after the MAC addresses.
type ingress struct {
	// vid is the frame's VLAN; for a vlan_not_member drop, the VID of its
	// tag.
	vid uint16
	// vlan is vid's index in table.vlans, -1 when no port is a member.
	vlan int
	// prio is the PCP and DEI bits of the received C-tag (TCI & 0xf000),
	// 0 for an untagged frame.
	prio uint16
	// restOff is where the frame continues after the MACs in Data: 12, or
	// 16 after an in-band C-tag.
	restOff int
	// outer is a non-C outer tag the kernel stripped (TPID<<16 | TCI),
	// which a C-VLAN component forwards as payload; valid iff hasOuter.
	outer    uint32
	hasOuter bool
}

// classify assigns a frame received on port to a VLAN (IEEE 802.1Q-2018
// 6.9) and applies ingress filtering (8.6.2). It returns
// dropNone or why the frame is dropped.
func (t *table) classify(port int, f *hw.Frame) (ingress, dropReason) {
	in := ingress{vlan: -1, restOff: 12}
	d := f.Data
	if len(d) < hw.EthernetHeaderLen {
		return in, dropTagMalformed
	}
	var tci uint16
	tagged := false
	switch {
	case f.VLANValid && f.VLANTPID == TPIDCTag:
		tci, tagged = f.VLANTCI, true
	case f.VLANValid:
		// An S-tag (or any other TPID) is not a C-tag: the frame is
		// untagged to this component and keeps its tag as payload.
		in.outer, in.hasOuter = uint32(f.VLANTPID)<<16|uint32(f.VLANTCI), true
	case binary.BigEndian.Uint16(d[12:]) == TPIDCTag:
		// The kernel normally strips this; read it in-band.
		if len(d) < hw.EthernetHeaderLen+hw.VLANTagLen {
			return in, dropTagMalformed
		}
		tci, tagged = binary.BigEndian.Uint16(d[14:]), true
		in.restOff = 16
	}
	vid := t.pvid[port]
	if tagged {
		in.prio = tci & prioMask
		switch v := tci & vidMask; v {
		case 0:
			// Priority-tagged: classified like an untagged frame.
		case vidReserved:
			return in, dropTagMalformed
		default:
			in.vid = v
			in.vlan = int(t.index[v]) - 1
			if in.vlan < 0 || t.vlans[in.vlan].members&(1<<port) == 0 {
				return in, dropVLANNotMember
			}
			return in, dropNone
		}
	}
	if vid == 0 {
		return in, dropUntaggedNoPVID
	}
	in.vid = vid
	in.vlan = int(t.index[vid]) - 1
	return in, dropNone
}

// isReservedGroup reports a destination in 01-80-C2-00-00-00 to 0F, the
// addresses a C-VLAN component never relays (IEEE 802.1Q-2018 8.6.3,
// Table 8-1): STP, LACP, 802.1X/MKA, LLDP and the like.
func isReservedGroup(dst []byte) bool {
	return dst[0] == 0x01 && dst[1] == 0x80 && dst[2] == 0xc2 && dst[3] == 0 && dst[4] == 0 && dst[5]&0xf0 == 0
}
