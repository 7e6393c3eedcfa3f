// Package vswitch emulates a VLAN-aware learning Ethernet switch in
// userspace on hw ports: the BCM53012 of the BCM47094 lab (LAN untagged in
// VLAN 1, WAN untagged in VLAN 2, the CPU port tagged in both), for a
// kernel that has neither 8021q nor bridge VLAN filtering.
//
// # Model
//
// The switch is one C-VLAN component in the sense of IEEE 802.1Q-2018
// clause 8 with a shared configuration and an independent learning table
// per VLAN (IVL):
//
//   - Ingress classification (6.9): a frame whose outer tag is a
//     C-tag (TPID 0x8100) with a non-zero VID gets that VID; an untagged
//     frame, a priority-tagged frame (VID 0) and a frame whose outer tag
//     is not a C-tag (an S-tag, 0x88a8, is payload to a C-VLAN component)
//     get the port's PVID. A port with no PVID drops untagged frames
//     ("untagged_no_pvid").
//   - Ingress filtering (8.6.2): the VID's member set must hold the
//     ingress port ("vlan_not_member"). A port is a member of its PVID and
//     of its Tagged VIDs, so a frame tagged with the PVID is accepted.
//     VID 0xFFF and unreadable tags are "tag_malformed".
//   - Learning (8.7): the source MAC of every accepted frame with an
//     individual source address is learned in its VID; entries age out
//     after AgingTime (8.8.3).
//   - Forwarding (8.6.3, 8.8): a frame to a known individual address goes
//     to the one port it was learned on ("filtered" when that is the
//     ingress port); a frame to an unknown individual address, a group
//     address or the broadcast address is flooded to every other member
//     port of the VID. Frames to the reserved bridge group addresses
//     01-80-C2-00-00-00 to 0F (Table 8-1) are not relayed
//     ("reserved_group"). A frame never leaves by its ingress port.
//   - Egress (6.9, and the untagged set of 8.8): a port whose PVID is the frame's VID sends it
//     untagged; a port that carries the VID tagged sends it with a C-tag
//     (TPID 0x8100) whose PCP and DEI come from the received tag, or are 0
//     for an untagged frame.
//
// # Data path
//
// Each port is an hw.Port with one receive queue. A queue's batch is
// classified, learned and forwarded frame by frame, and sent per egress
// port with WriteFrames at the end of the batch, in arrival order. Frames
// that leave as they came are sent from ring memory; a frame that needs a
// tag inserted or removed is built once per variant (tagged, untagged)
// in a scratch buffer owned by the receive queue, however many ports it
// is flooded to. The data path does not allocate once the learning table
// has grown to its working size, and counts every drop.
//
// The kernel strips the outer tag of every received frame into the ring
// header (hw.Frame.VLANValid); a frame that still carries an in-band C-tag
// with no stripped tag is classified by its in-band tag all the same.
package vswitch
