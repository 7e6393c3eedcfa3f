// Package xdpport is a router port on AF_XDP: the second backend beside
// hw.Port's TPACKET_V3 ring, with the same contract (hw.FrameWriter,
// batches of hw.Frame to a hw.BatchHandler, link state, hw.Stats). It
// builds on hw/xsk and adds what a port needs around the sockets: the
// interface's queues, the receive loops, transmit (from the shared UMEM
// without a copy, else by copy), link state and counters.
//
// # Layout
//
// The port's frames live in a UMEM: one of a Pool (Config.Pool), shared
// with the router's other af_xdp ports, or, without a Pool, one of its
// own. Each receive queue the interface reports (ethtool -l) gets one
// socket on it, with its own fill and completion rings (a socket sharing
// a UMEM on another interface or queue must have them, XDP_SHARED_UMEM
// since Linux 5.10), and the port's XDP program redirects each queue's
// frames to that queue's socket. Run starts one goroutine per queue;
// WriteFrames spreads writers over the sockets' TX rings.
//
// # Zero-copy forwarding
//
// A received frame is handed to the handler as a view of its UMEM frame.
// The stack's fast path and next-hop cache rewrite it in place and,
// while the batch runs, hand that view to the egress port's WriteFrames.
// If the egress port is on the same UMEM, WriteFrames puts the frame's
// own descriptor on its TX ring (xsk.Socket.Send lends it): the frame
// leaves from the buffer it arrived in, on another interface, with no
// copy. The receive loop then leaves the frame to that TX ring instead
// of the free list, and the ring's completion frees it; if the kernel
// completes it first, the batch's end frees it. Everything else
// WriteFrames is given (netstack's frames, frames from an AF_PACKET port
// or from a port on another UMEM, a frame another writer took already)
// is copied into a free UMEM frame. Stats counts both (hw.Stats
// TxZeroCopy and TxCopied), and UmemInfo says which ports share the
// port's UMEM; the status page shows both per port.
//
// A frame is lent to one TX ring at most, so a frame written twice
// leaves once without a copy and is copied otherwise. A full TX ring
// drops the frames it has no room for (tx_nobufs) without claiming
// them: they go back with their batch. Closing a port hands the frames
// on its rings back to the UMEM, those of other ports' batches included
// (they go back to their batch), so the ports that stay lose nothing; the
// last port of a UMEM unmaps it.
//
// Tags and SecTAGs are pushed in place too: ExtendFrame lends the bytes
// before a frame, which are the UMEM headroom and the kernel's
// XDP_PACKET_HEADROOM (256 bytes that neither the kernel nor the
// program writes). The UMEM headroom is 0 on purpose: 256 bytes cover
// the most the stack pushes (a SecTAG and two VLAN tags, 24 bytes), and
// any headroom of ours would come off the packet room that a 2 KiB frame
// needs for a full-size frame with tags and a MACsec ICV behind it.
//
// The kernel binds a socket that shares a UMEM in the UMEM's copy mode,
// so one UMEM is either zero-copy or copy mode. A port asked for either
// (xsk.BindAuto) joins a zero-copy UMEM if its driver binds one, and a
// copy-mode one only if a zero-copy probe (a socket on a two-frame UMEM)
// says the driver cannot do better; otherwise it starts a UMEM of its
// own in the Pool. A Pool's UMEM is sized for PoolConfig.Sockets sockets
// (each a fill ring and a TX ring full plus a batch, framesPerSocket);
// a port that finds no room starts another. Ports on different UMEMs
// forward to each other by copy, as ports of different backends do.
//
// Nothing on the receive or transmit path allocates, and every move of a
// frame is checked (xsk.Umem.Counts: free, fill, RX, held, lent, TX,
// completion add up to the UMEM's frames; TestZeroCopyAccounting checks
// it after 10^6 forwards).
//
// # Fallback
//
// Open's errors wrap xsk.ErrPermission (CAP_BPF, CAP_NET_ADMIN or
// CAP_NET_RAW missing) or xsk.ErrUnsupported (no AF_XDP or XDP in the
// kernel or driver, or zero-copy refused with BindZeroCopy): the caller
// opens the interface with AF_PACKET instead and logs why.
//
// # Checksums
//
// AF_XDP carries no checksum status: Frame.CsumValid and CsumPartial are
// always false, as on a NIC without RX checksum offload (the bcm47094
// profile's bgmac). The stack's endpoint therefore checks the L4
// checksum in software of every packet the router terminates and drops a
// bad one as l4_checksum; forwarded packets keep theirs, and GRO checks
// before it merges (stack/classify.go classify, stack/gro.go). Nothing
// here duplicates that: the port only leaves both flags false
// (TestStackChecksum).
//
// A local peer that offloads its TX checksum (veth, tap, virtio by
// default) hands over TCP and UDP with only the pseudo-header sum in the
// checksum field, which hw.Port flags as CsumPartial and this port
// cannot (TestPartialChecksum): such a packet is indistinguishable from
// a corrupt one, so the stack drops it when it is for the router and
// forwards it unrepaired otherwise. On such links the peer's TX
// checksumming must be off (ethtool -K PEER tx off), as the lab has it
// on every veth end (lab hostOffloads).
//
// # Kernel settings
//
// A driver that strips the outer 802.1Q or 802.1ad tag on receive puts
// it in the packet's metadata, which AF_XDP does not pass on; the tag
// would be lost. Open therefore turns RX VLAN stripping off
// (rx-vlan-hw-parse through ETH_FLAG_RXVLAN, rx-vlan-stag-hw-parse by
// its feature name through ETHTOOL_SFEATURES, which the legacy flags
// have no bit for) while the port is the router's, and raises the kernel
// MTU for the extra tags of QinQ and 802.1ad interfaces (ExtraTags, as
// hw.Config.ExtraTags), each recorded first (TestTakeoverCrash,
// TestExtraTagsMTU). A device that cannot turn a stripping off is left
// as it is and logged.
//
// Open also silences the kernel on the interface as hw.Port does, where
// it still matters. XDP covers the receive side whole: every frame is
// redirected to a socket or dropped before the kernel's stack, so the
// kernel neither answers ARP or neighbour solicitations for addresses
// it holds nor runs its protocols on what arrives, and hw.Port's
// ingress drop (an nftables or tc hook the frames would never reach)
// and its GRO/LRO step (GRO runs after XDP) are not needed. XDP does
// not cover what the kernel sends: with an address on the port it
// still resolves and announces it (ARP requests, neighbour
// solicitations for a local process's traffic to the port's subnets),
// and with IPv6 on it runs DAD, sends router solicitations and MLD
// reports whenever the carrier comes back. So the port's addresses are
// removed and IPv6 turned off (hw.TakeoverConfig.Silence), which stops
// all of these (TestKernelSilence makes the kernel want to speak, and
// watches the peer, on both backends).
//
// Each change goes through hw.TakeOver: the value from before is
// written to the port's takeover record in Config.StateDir before it
// changes, Close puts it back, and after a crash the next Open adopts
// the record and hw.Restore (`gvrouter restore`) undoes it
// (TestTakeoverCrash). The XDP program needs no record: it hangs on a
// BPF link that dies with the process.
//
// # Multicast
//
// IPv6 off takes the kernel's own memberships with it, and a real NIC's
// address filter runs before XDP, so the groups the router needs (IPv6
// all-nodes, all-routers, all-DHCP-agents and solicited-node groups,
// MKA's PAE group) must be joined for the router: SetMulticast, as on
// hw.Port. AF_XDP has no membership option; the groups (and
// SetPromiscuous, for hw.Bridge) are held by a packet socket bound to
// no protocol, which receives nothing (hw.Memberships), and leave the
// interface with it, at Close or when the process dies. A veth filters
// nothing, so the tests show the groups on the interface's list (ip
// maddr) and gone after Close or SIGKILL, not a frame the filter would
// have dropped.
//
// # Faults
//
// A stalled receiver lets the fill ring run dry: the kernel drops and
// counts (xdp_fill_empty; ring for a full RX ring) and the port goes on
// once the handler returns (TestRxRingFull). With the link down the
// kernel stops taking the TX ring (copy mode sends at most one frame
// per wakeup with no carrier, none with the device down), so its
// completions lag and the ring fills: WriteFrames counts what finds no
// room as tx_nobufs and never blocks, and the frames the kernel held go
// out when the link is back (TestLinkDownUnderLoad). Frames offered
// equal frames sent plus tx_nobufs plus xdp_umem_empty; after every
// fault, and after 10^6 frames each way (TestFillRingFull,
// TestFrameAccounting) or a reload that removes the port under a flood
// (router's TestReloadRemovesAFXDPPortUnderLoad), every Umem frame is
// free, on the fill ring or waiting on an RX ring, and no descriptor was
// refused.
package xdpport
