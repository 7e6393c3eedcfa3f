// Package stack assembles the router's gVisor netstack: one NIC per
// interface, static IPv4/IPv6 addresses and routes, IPv4/IPv6 forwarding,
// ARP/NDP and ICMP errors.
//
// # Data path
//
// A port's receive loop calls its [PortInput], which hands each batch to
// the port's [Trunk] and so to the interfaces' endpoints. The stages, in
// the order a frame meets them, each with its function and file, are
// listed at the top of dispatch.go; the fast path's stack half is in
// fastpath.go, the checks before netstack in classify.go.
//
// # Link endpoint
//
// Each interface has an [Endpoint], our own gVisor link endpoint. Its
// receive side is a [hw.BatchHandler]: it validates every frame (length,
// destination MAC, VLAN tag, IP header), verifies checksums of packets the
// router terminates (the endpoint claims RX checksum offload, so netstack
// checks nothing itself), and copies each accepted frame once into a pooled
// gVisor view before it hands it to the NIC. Bad input is dropped and
// counted by reason ([InterfaceStats.Drops]); the data path never logs.
//
// Its transmit side serialises each packet into a pooled frame buffer and
// writes a whole list with one [hw.FrameWriter.WriteFrames] call. The
// endpoint claims TX checksum offload, so netstack never recomputes the L4
// checksum of forwarded packets; the endpoint fills it in for the packets
// netstack itself originates.
//
// # VLAN sub-interfaces
//
// Several interfaces may share one port: each has its own Endpoint and NIC
// (its own addresses and MTU) and at most one is untagged. A [Trunk] is the
// port's [hw.BatchHandler]: it takes each frame's outer tag from the ring
// header (the kernel always strips it) and any further tag in-band, finds
// the interface of that (outer, inner) VLAN pair in an immutable snapshot
// (no lock on the data path; [Trunk.Set] replaces it), strips the in-band
// tags and hands runs of frames to that Endpoint. Priority-tagged frames
// (VID 0) belong to the untagged interface (IEEE 802.1Q clause 6.9.1);
// frames for a VLAN with no interface are counted as "vlan_unknown" on the
// trunk. On transmit, AddHeader pushes MACs, tags and Ethertype in one
// LinkHeader().Push; the tags carry the interface's PCP. Forwarded frames
// get the egress interface's PCP too: netstack's forward path keeps no
// per-packet metadata (DeepCopyForForwarding copies only protocol numbers
// and the conntrack tuple), so the ingress PCP cannot reach the egress. See
// vlan.go.
//
// # Selective GRO
//
// Each interface has a [GROMode] (InterfaceConfig.GRO). The endpoint runs
// gVisor's stack/gro itself, per receive run, flushed at the run's end:
//
//   - [GROSelective] (the default) coalesces only TCP addressed to one of
//     the router's own addresses (the local-address snapshot); forwarded
//     packets go on one by one with their headers untouched, and are
//     never fully checksummed.
//   - [GROOn] coalesces all TCP, like Linux; a forwarded merge is tagged
//     (pkt.Mark), turned into GSOOptions in the NFTables postrouting hook
//     and split again in software on egress (segment.go), with fresh
//     checksums, as Linux GRO + GSO does. Forwarded segments the port did
//     not validate are checksummed before they may be merged.
//   - [GROOff] never coalesces.
//
// gro.GRO leaves a merge's IPv4 and TCP checksums stale; the endpoint
// recomputes both before netstack sees the packet. The counters are in
// [InterfaceStats.GRO]. See gro.go.
//
// # Superframes
//
// A port with vnet headers delivers a local sender's TSO/GSO frames of
// up to 64 KiB whole, with their segmentation metadata (hw.Frame.GSO).
// The fast path takes such a superframe whole and the egress sends it on
// whole where its writer takes superframes (hw.GSOWriter), else cut into
// wire frames in software; anything else cuts it before netstack, which
// never sees one. Counted in [InterfaceStats.GSO]. See superframe.go.
//
// # Raw-frame taps
//
// The router's own link-level protocols (DHCPv4 client and server, ARP
// probes, the DHCPv6 client and server, the RA advertiser and learner,
// MKA) work below netstack and NAT:
// [Interface.AddTap] registers a [Tap] for a [TapMatch] (an EtherType,
// optionally an IP protocol and a destination port), and the receive run
// offers each matching frame to it, untagged, before the fast path,
// classification and NAT; a frame the tap consumes goes no further
// (counted as [InterfaceStats.Tapped]), one it only watches carries on.
// With no tap the receive path pays one atomic load per run.
// [Interface.WriteFrame] sends a whole untagged frame out of the
// interface with its VLAN tags inserted, in order with netstack's frames,
// bypassing NAT. See frametap.go.
//
// # PPPoE
//
// An interface with InterfaceConfig.PPPoE is a PPPoE client's link: its
// NIC is point to point (no ARP or NDP), and while
// [Interface.SetPPPoESession] has a session its IP frames from the AC
// are decapsulated in place before the taps, the fast path and NAT, and
// what it sends is encapsulated in place after NAT, fast path included;
// received SYNs get their MSS clamped to the MTU. Plain IP and ARP frames
// on it are dropped ("pppoe_not_session"). See pppoe.go.
//
// # Source address filters
//
// An interface with InterfaceConfig.IngressFilter (lan) drops IP packets
// from sources its link cannot have (RFC 3704 ingress filtering), in
// classify before NAT, GRO, netstack and the raw-frame taps: counted as
// "spoofed_source". One with EgressFilter (wan) drops the router's own
// packets with a LAN source ("inside_source_out"). See srcfilter.go.
//
// # IPv4 TTL
//
// gVisor forwards an IPv4 packet that arrives with TTL 1 as TTL 0 and sends
// no ICMP. The endpoint catches these packets before netstack sees them and
// answers with ICMP Time Exceeded from the ingress interface's primary
// address (RFC 792, RFC 1812 section 5.3.1); see ttl.go.
//
// # gVisor bugs worked around
//
//   - IPv4 TTL 1 is forwarded as TTL 0 (above).
//   - IPv4 forwarding reads the TTL from a buffer chunk it has already
//     returned to the pool (a use-after-free that another receive
//     goroutine can overwrite); forwardPins keeps the chunk alive through
//     the stack's NFTablesInterface hook. See pin.go.
//   - stack/gro's own checksum check ignores the packet's data offset
//     (PacketData.ChecksumAtOffset) and its merges keep stale checksums;
//     the endpoint verifies before and recomputes after (gro.go).
//   - The forwarding path panics on any link error other than
//     ErrClosedForSend and ErrNoBufferSpace, so WritePackets returns only
//     those.
//
// # Reload
//
// [Netstack.Apply] moves the running stack to a new [Config]: it adds and
// removes NICs, addresses and routes and leaves everything unchanged alone,
// so connections through unchanged interfaces survive.
package stack
