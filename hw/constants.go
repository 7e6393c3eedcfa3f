package hw

import "time"

// Receive ring geometry (TPACKET_V3). Measured on a 2-vCPU VM bridging two
// veths: 16 blocks of 256 KiB with 2 KiB frames and a 1 ms block retire
// timeout reached about 0.52x the kernel bridge, against 0.27x for
// recvmmsg/sendmmsg batches (notes/gvisor-netstack.md §6).
const (
	// RingBlockSize is the size of one ring block, the unit the kernel hands
	// over and we hand back. 256 KiB holds ~170 full-size frames, so a block
	// is one large batch under load; it must be a multiple of the page size.
	// A frame never spans blocks (TPACKET_V3's max_frame_len is the block
	// less its 48-byte header), so with vnet headers a block also holds
	// three superframes of MaxGSOFrameLen and their ring headers (~64 KiB
	// each: ~45 wire frames of payload apiece): a block the next
	// superframe does not fit is closed early, which wastes at most a
	// quarter of it. A 64 KiB block would hold none (the kernel would
	// truncate them); 1 MiB blocks would waste less but cost 16 MiB per
	// queue, which the small boards cannot spare for frames they never
	// get.
	RingBlockSize = 256 << 10
	// RingBlocks is the number of blocks per receive queue. 16 x 256 KiB =
	// 4 MiB per queue absorbs ~2700 full-size frames of burst while the
	// handler runs, and is small enough for a 512 MiB board with 2 queues.
	RingBlocks = 16
	// RingBacklogBlocks is how many full blocks waiting behind the one
	// being handed over mark its frames Backlogged: a quarter of the
	// ring, about 4 ms of frames at the 1 ms retire timeout, so a short
	// burst does not count but a consumer losing ground is seen well
	// before the ring is full.
	RingBacklogBlocks = RingBlocks / 4
	// BacklogReadBlocks is how many ready ring blocks (or AF_XDP
	// batches) a receive loop with a Backlog reads in a row before it
	// serves one batch of the backlog: reading (a copy) is much cheaper
	// than the data path, so the loop empties the ring first and the
	// Backlog, not the ring, decides what is dropped; the bound only
	// keeps the data path from starving while a flood keeps the ring
	// ready. A quarter of the ring, as RingBacklogBlocks.
	BacklogReadBlocks = RingBlocks / 4
	// RingHeldBlocks is the most V3 blocks a receive loop keeps from
	// the kernel for a RingHolder (frames queued where they lie): a
	// quarter of the ring, as RingBacklogBlocks, so that the kernel
	// keeps three quarters for when the loop is not scheduled. Under
	// bulk load blocks retire on RingRetireTimeout with ~80 full-size
	// frames at 1 Gbit/s, so four hold ~4 ms of frames: CoDel's target
	// of standing queue; past it the oldest block's frames still queued
	// are copied (RingHolder.LetGo). Measured in the lab
	// (TestAQMProbeUnderLoad, docs/performance.md): holding half the
	// ring copied fewer frames but let the kernel drop more and the
	// probe lose more.
	RingHeldBlocks = RingBlocks / 4
	// RingFrameSize is the frame size hint TPACKET_V3 requires (frames are
	// variable-length in V3; this only sizes frame_nr). 2 KiB covers a
	// 1500-byte MTU frame plus its tpacket3_hdr.
	RingFrameSize = 2 << 10
	// RingRetireTimeout is how long the kernel keeps a partly filled block
	// before handing it over. 1 ms measured best: lower raised the syscall
	// and wakeup rate, higher added latency to light traffic.
	RingRetireTimeout = 1 * time.Millisecond
	// PollTimeout bounds how long a receive queue waits in the runtime's
	// poller with no traffic, so ring statistics are sampled even on an
	// idle port. Context cancellation and Close wake the queue at once
	// (a past read deadline).
	PollTimeout = 500 * time.Millisecond
)

// The light ring (lightring_linux.go): the TPACKET_V2 ring a
// single-queue port reads while traffic is light, so that a frame is
// handed over as it lands instead of when its V3 block retires.
const (
	// LightRingBlockSize is the light ring's least block: a slot never
	// spans blocks, and 64 KiB holds 40 MTU-size slots (superframe
	// slots, ~64 KiB, go three to a 256 KiB block).
	LightRingBlockSize = 64 << 10
	// LightRingSlots is the light ring's slot count without vnet headers:
	// 256 x ~1.6 KiB (7 blocks, 448 KiB) holds a burst of 256 frames,
	// four times LightLeaveFrames, while the receiver moves the port to
	// its V3 ring.
	LightRingSlots = 256
	// LightRingGSOSlots is the slot count with vnet headers, whose slots
	// must hold a ~64 KiB superframe: 128 slots, 43 blocks of 256 KiB
	// (~11 MiB), the budget of the "generic" profile's hosts, not of the
	// small boards (which have no vnet headers). With fewer, a burst that
	// starts on an idle port loses frames: hw's TestTxRingInOrder sends
	// 128 at once.
	LightRingGSOSlots = 128
	// LightEnterFrames and LightEnterWindow: a port on its V3 ring moves
	// to the light ring when fewer than LightEnterFrames frames arrived
	// in LightEnterWindow: under 1,000 frames/s, where a V3 block waits
	// for its retire timer and V2's wakeup per frame costs nothing.
	LightEnterFrames = 50
	LightEnterWindow = 50 * time.Millisecond
	// LightLeaveFrames and LightLeaveWindow: a port on the light ring
	// moves to its V3 ring when LightLeaveFrames frames arrive within
	// LightLeaveWindow (6,400 frames/s): six times the entry rate, so a
	// steady rate between the two does not flap.
	LightLeaveFrames = 64
	LightLeaveWindow = 10 * time.Millisecond
	// LightBurstFrames: a port on the light ring also moves to its V3
	// ring when this many frames wait in the light ring at once: they
	// came faster than one wakeup each, the start of a burst that
	// would fill the light ring's slots before LightLeaveFrames.
	LightBurstFrames = 16
	// LightDrainTimeout bounds how long a port moving to its light ring
	// waits for the V3 block the kernel was filling to retire, so that
	// its frames go up before the light ring's: a retire timeout of 1 ms
	// is up to 10 ms at HZ=100.
	LightDrainTimeout = 25 * time.Millisecond
)

// Transmit batching.
const (
	// TxBatchSize is the number of frames handed to one sendmmsg(2). 128
	// matches wireguard-go's conn.IdealBatchSize: large enough that the
	// syscall cost is spread over many frames, small enough that the
	// per-batch mmsghdr/iovec arrays (about 12 KiB on 64-bit) stay in
	// cache.
	TxBatchSize = 128
	// SocketBufferSize is forced on each socket with SO_SNDBUFFORCE and
	// SO_RCVBUFFORCE. 4 MiB keeps sendmmsg from failing with ENOBUFS under a
	// full TX batch of jumbo frames (notes/gvisor-netstack.md §6 recipe).
	SocketBufferSize = 4 << 20
)

// Transmit ring geometry (PACKET_TX_RING, TPACKET_V3; TxRing).
const (
	// TxRingBlockSize is the size of one TX ring block. TX ring slots
	// never span blocks, and the kernel allocates each block as one
	// contiguous run of pages, so a block is kept to the RX ring's
	// 256 KiB (128 slots of 2 KiB); it must be a multiple of the page
	// size.
	TxRingBlockSize = 256 << 10
	// TxRingBlocks is the number of TX ring blocks: 4 x 256 KiB = 1 MiB,
	// 512 slots of 2 KiB, four TxBatchSize batches. A slot stays the
	// kernel's until its frame left the device (on a veth: until the
	// peer received it), so the ring must hold a batch being filled
	// while earlier ones are still in flight; what does not fit is a
	// counted "tx_ring_full" drop, never a wait.
	TxRingBlocks = 4
	// TxRingSlotAlign is what a slot's size is rounded up to: 2 KiB holds
	// the tpacket3_hdr (48 bytes) and a 1500-byte MTU frame with two
	// tags; a jumbo MTU gets fewer, larger slots in the same ring.
	TxRingSlotAlign = 2 << 10
)

// Superframes (Config.VnetHdr).
const (
	// MaxGSOFrameLen is the longest superframe a port takes: an IPv6
	// packet with the largest payload length (65,535 bytes after its
	// 40-byte header; an IPv4 packet is at most 65,535 bytes in all)
	// behind an Ethernet header and two tags. Longer ones, such as BIG
	// TCP's (gso_max_size raised past 64 KiB), are "oversize" drops.
	MaxGSOFrameLen = EthernetHeaderLen + 2*VLANTagLen + 40 + 65535
)

// Frame length allowances on top of the L3 MTU.
const (
	// EthernetHeaderLen is the destination MAC, source MAC and EtherType.
	EthernetHeaderLen = 14
	// VLANTagLen is one IEEE 802.1Q tag (TPID + TCI).
	VLANTagLen = 4
	// MaxL2Overhead is what a received frame may carry beyond the MTU: the
	// Ethernet header and two 802.1Q/802.1ad tags (QinQ). The kernel
	// strips the outer tag into metadata, but tp_len may still count it on
	// some drivers, so both tags are allowed.
	MaxL2Overhead = EthernetHeaderLen + 2*VLANTagLen
)

// Room before a received frame (Port.ExtendFrame).
const (
	// RingHeadroom is the room every receive ring (the TPACKET_V3 ring
	// and the light ring) keeps before each frame's first byte, which
	// the stack may write in front of it while its batch runs: two VLAN
	// tags (8), a PPPoE session header (8) and a MACsec SecTAG (16), the
	// most it pushes. A frame received on an AF_PACKET port and sent out
	// of another with a tag or a PPPoE header thus needs no copy of its
	// own; sendmmsg's copy into the skb is the only one.
	RingHeadroom = 32
	// ringReserve is the PACKET_RESERVE that makes RingHeadroom: the
	// kernel puts tp_mac at least sizeof(tpacket_hdr) + sizeof(sockaddr_ll)
	// + tp_reserve (+ the virtio-net header) into the frame's slot
	// (tpacket_rcv: netoff = TPACKET_ALIGN(tp_hdrlen + max(16, maclen)) +
	// tp_reserve, macoff = netoff - maclen, tp_hdrlen = the header's
	// aligned size + sizeof(sockaddr_ll)). We never read the sockaddr_ll,
	// so its 20 bytes are room too; the reserve adds the rest.
	ringReserve = RingHeadroom - sockaddrLLLen
	// sockaddrLLLen is sizeof(struct sockaddr_ll).
	sockaddrLLLen = 20
)

// LinkPollInterval is how often a port samples its carrier and
// administrative state when it has no netlink link subscription (the
// fallback: events arrive within milliseconds). Once a second is what the
// routing daemon needs to follow cable pulls.
const LinkPollInterval = 1 * time.Second

// qdiscBypass sets PACKET_QDISC_BYPASS on the sockets, so transmitted
// frames skip the interface's qdisc. Off: BenchmarkWriteFrames on veth
// measured 3.1-3.5 us/frame without and 3.4-4.4 us/frame with it (no
// gain), and skipping the qdisc also skips its back-pressure and any
// shaping the operator configured.
const qdiscBypass = false
