// Package hw owns the router's physical ports: an AF_PACKET socket per
// receive queue with a TPACKET_V3 ring, batched transmit with sendmmsg, the
// BPF filter that hides the kernel's own outgoing frames, the kernel
// features and silence the router needs on a port (GRO/LRO off, no
// addresses, IPv6 off, an ingress drop), and the hardware profiles.
//
// # Batches
//
// A port delivers frames in batches, one ring block at a time. A Frame's
// Data points into ring memory and stays valid only until the handler
// returns; a consumer that keeps a frame must copy it. Frames may be sent
// straight from ring memory with WriteFrames while the handler runs, and
// every ring keeps RingHeadroom bytes before each frame (PACKET_RESERVE)
// that Port.ExtendFrame lends, so a VLAN tag or a PPPoE header can be
// pushed in front of a frame where it lies instead of copying it
// (lend_linux.go).
//
// # Receive
//
// Each queue is an AF_PACKET socket bound with ETH_P_ALL, with a
// TPACKET_V3 ring of RingBlocks blocks of RingBlockSize bytes. Several
// queues join one PACKET_FANOUT group (hash, no defragmentation), so a
// flow stays on one queue. A classic BPF filter drops PACKET_OUTGOING
// frames: the router never sees what it or the kernel sends. The kernel
// always moves the outer 802.1Q/802.1ad tag into the ring header; Frame
// carries it, and Bridge puts it back in-band. Ring blocks are walked by a
// pure parser (ring.go) that turns every inconsistent frame into a counted
// drop; the receive path does not allocate.
//
// # Superframes (vnet headers)
//
// With Config.VnetHdr (on in the generic profile: veth, tap, virtio)
// every socket has PACKET_VNET_HDR: the ring carries each frame's struct
// virtio_net_hdr just before its MAC header (vnet.go), so a local
// sender's TSO/GSO superframe of up to MaxGSOFrameLen bytes arrives whole
// with its segmentation metadata in Frame.GSO instead of being an
// "oversize" drop; bad headers and UFO are counted drops ("vnet_header",
// "gso_unsupported"). A superframe the kernel cannot describe in a
// virtio-net header at all (tunnel GSO, say of a VXLAN device on the
// peer) is dropped by tpacket_rcv itself, which counts it as "ring".
// The BPF filter reads only the packet type, which
// the header does not move, and returns the whole frame, so neither
// needs a change; a ring block (RingBlockSize) holds three superframes.
// Sending takes a header too: WriteFramesGSO (GSOWriter) puts each
// frame's in a second iovec of its sendmmsg message, so a superframe goes
// out whole and the kernel, the NIC or the veth's peer cuts it; plain
// frames share one all-zero header. The TX ring writes a zero header in
// every slot and takes no superframes (GSOMaxSize 0).
//
// # Transmit
//
// WriteFrames sends a batch with sendmmsg on queue 0's socket (the
// default), or with Config.Tx = TxRing copies it into a PACKET_TX_RING
// on that socket and hands it over with one send(2) (TxRingBypass adds
// PACKET_QDISC_BYPASS). Either way nothing waits: a frame the kernel
// does not take is a counted drop (tx_nobufs, tx_error, and on the ring
// tx_ring_full and tx_oversize). txring_linux.go explains how the ring's
// head and the kernel's stay in step.
//
// # Kernel settings
//
// Unless Config.KeepKernel, Open makes the kernel leave the interface to
// the router and Close undoes it: GRO and LRO off (SIOCETHTOOL; AF_PACKET
// sees frames after GRO merged them), IPv4 addresses and permanent IPv6
// addresses removed (rtnetlink) and IPv6 disabled
// (/proc/sys/net/ipv6/conf/IF/disable_ipv6), and an ingress drop so the
// kernel's stack spends nothing on the router's frames: an nftables netdev
// chain (table gvrouter_hw_IFINDEX), installed through netlink
// (github.com/google/nftables, no nft binary needed), or, where the kernel
// refuses that table, a tc clsact qdisc with a one-instruction cls_bpf
// direct-action filter (preference 49374) that returns TC_ACT_SHOT (the
// tc binary). AF_PACKET taps run
// before the ingress hook, so the rings still see everything (tested).
// Close restores these settings in the namespace Open ran in, whichever
// thread calls it.
//
// # Surviving a crash
//
// With Config.StateDir, each of these changes (and the MTU raise for
// extra VLAN tags) is first written to the port's record
// (hw/takeover: <state_dir>/ports/IF.json, atomically) with the value the
// kernel had, so a killed router cannot take them with it. Open finds the
// record a crashed run left, checks that it is about this boot, namespace
// and interface index, and adopts it: its values stand as the ones from
// before, the leftover nftables table is replaced in one transaction and
// the tc filter in place, so the drop never lapses. Close, or Restore
// without opening the port, puts back what the record lists and removes
// it. LockPort is the per-namespace, per-interface lock a caller takes
// before Open, so that two routers never own one port.
//
// TakeOver is the same record for a port another backend opens (the
// AF_XDP one, hw/xdpport): it turns RX VLAN stripping off
// (rx-vlan-hw-parse, rx-vlan-stag-hw-parse), with Silence removes the
// addresses and turns IPv6 off, and with ExtraTags raises the kernel MTU
// as Open does, each recorded first, and its Restore, the next
// Open or TakeOver, and Restore after a crash put them back. Such a port
// has no packet socket to hold its multicast memberships on:
// Memberships is one opened for them alone (and for promiscuous mode),
// bound to no protocol so that it receives nothing.
//
// # Link state
//
// A port follows its interface flags (IFF_UP and IFF_RUNNING, i.e. carrier
// and operstate) through an rtnetlink RTNLGRP_LINK subscription in its
// namespace and calls the SetLinkHandler callback on each change, so a
// carrier loss reaches the stack, the fast path and the status page within
// milliseconds. If the subscription cannot be made the port logs why and
// samples the flags every LinkPollInterval instead.
package hw
