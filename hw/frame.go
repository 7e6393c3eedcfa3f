package hw

import "context"

// Frame is one received frame and what its TPACKET_V3 ring header said.
//
// Data starts at the destination MAC. The kernel always moves the outer
// 802.1Q/802.1ad tag into the ring header, so Data holds no outer tag; an
// inner tag (QinQ) stays in-band.
type Frame struct {
	// Data is the captured bytes, valid until the batch handler returns.
	Data []byte
	// WireLen is the frame's length as received (tp_len); WireLen >
	// len(Data) means the ring truncated it (tp_snaplen).
	WireLen int
	// VLANValid reports that the kernel stripped an outer tag whose TCI and
	// TPID are in VLANTCI and VLANTPID (TP_STATUS_VLAN_VALID,
	// TP_STATUS_VLAN_TPID_VALID; TPID 0x8100 when the kernel gave none).
	VLANValid bool
	VLANTCI   uint16
	VLANTPID  uint16
	// CsumValid reports TP_STATUS_CSUM_VALID: the NIC or kernel verified the
	// L4 checksum.
	CsumValid bool
	// CsumPartial reports TP_STATUS_CSUMNOTREADY: the L4 checksum field holds
	// only the pseudo-header sum (a local sender with TX offload, e.g. a veth
	// peer); the payload itself is intact.
	CsumPartial bool
	// GSO is the frame's virtio-net header on a port with vnet headers
	// (Config.VnetHdr): a superframe from a local sender with TSO/GSO
	// (GSO.Type != GSONone, Data up to MaxGSOFrameLen bytes), and where a
	// partial checksum is (GSO.NeedsCsum, which then equals
	// CsumPartial). The zero value on other ports.
	GSO GSO
	// Backlogged reports that when this frame's ring block was handed
	// over, at least RingBacklogBlocks more full blocks were waiting
	// behind it: the port's consumer is falling behind, and the ring
	// will soon drop frames of every flow alike unless it sheds work.
	Backlogged bool
	// RxTime is when the kernel received the frame, in nanoseconds since
	// the Unix epoch (CLOCK_REALTIME: tp_sec and tp_nsec of the ring
	// header), so that a queue after the ring can tell how long the
	// frame has waited in all. 0 when the port has no timestamp (AF_XDP,
	// TAP).
	RxTime int64
}

// BatchHandler receives one batch of frames from one receive queue. Frames
// are valid only until it returns. Handlers for different queues of one
// port run concurrently; calls for one queue never overlap.
type BatchHandler func(queue int, frames []Frame)

// GSOWriter is a FrameWriter that can also send superframes whole, each
// with its virtio-net header: the kernel, or the NIC, cuts them into
// segments (a veth hands them to its peer as they are). Implementations
// are safe for concurrent use.
type GSOWriter interface {
	FrameWriter
	// GSOMaxSize returns the longest superframe WriteFramesGSO takes, or
	// 0 when the writer takes none (no vnet headers on the port, or a
	// transmit path with slots of the MTU's size).
	GSOMaxSize() int
	// WriteFramesGSO is WriteFrames with each frame's offload metadata,
	// gso[i] for frames[i]: a superframe (Type != GSONone, Size,
	// HdrLen), and a partial checksum (NeedsCsum, CsumStart,
	// CsumOffset). len(gso) must equal len(frames). A writer with
	// GSOMaxSize 0 counts every superframe as a tx_error drop.
	WriteFramesGSO(frames [][]byte, gso []GSO) (int, error)
}

// FrameWriter sends whole Ethernet frames (header included, any tags
// inline) in as few syscalls as it can. It returns how many frames were
// accepted. It does not keep the slices after it returns, so callers may
// pass ring memory. Implementations are safe for concurrent use.
type FrameWriter interface {
	WriteFrames(frames [][]byte) (int, error)
}

// Backlog is a receive stage that holds frames back when they come faster
// than the data path runs them (stack.RxQueue), served by the port's own
// receive loop rather than a goroutine of its own: no hand-off between
// goroutines, and no second reader racing the data path for a core.
//
// A port's loop for queue q calls HandleRing for each batch it reads
// and, when its ring has nothing ready (or after BacklogReadBlocks
// blocks read in a row), ServeBacklog; the calls for one queue never
// overlap, and calls for different queues run concurrently.
type Backlog interface {
	// HandleRing takes a batch as a BatchHandler does (frames are valid
	// only until it returns). more reports that the ring has further
	// frames ready behind these, so the stage should hold this batch
	// (copy it) rather than run it ahead of them.
	HandleRing(queue int, frames []Frame, more bool)
	// ServeBacklog hands one batch of the frames held for queue to the
	// data path and reports whether it handed any: false means the
	// loop may wait for the ring.
	ServeBacklog(queue int) bool
}

// RingHolder is a Backlog that keeps the frames it holds where they lie
// in the port's TPACKET_V3 receive ring instead of copying them: the
// ring is then the queue's storage, and the Backlog decides their order
// and which are dropped. The kernel takes a ring block back as a whole,
// so the loop hands a block back when the Backlog holds none of its
// frames, oldest block first, and keeps at most RingHeldBlocks: past
// that it calls LetGo on the oldest, whose frames the Backlog then
// copies. A port's loop with a RingHolder calls HoldRing instead of
// HandleRing for the V3 ring's blocks (other batches, e.g. the light
// ring's, still go to HandleRing); the calls for one queue never
// overlap, as Backlog's.
type RingHolder interface {
	Backlog
	// HoldRing is HandleRing for the frames of ring block blk (0 <=
	// blk < RingBlocks): their Data stays valid, and the Backlog's to
	// read and write, until the loop calls LetGo(queue, blk) or
	// Holding(queue, blk) reports 0 (then the loop hands the block
	// back). The Frame values themselves are valid only until HoldRing
	// returns.
	HoldRing(queue int, frames []Frame, more bool, blk int)
	// Holding reports how many frames of block blk the Backlog holds
	// for queue.
	Holding(queue, blk int) int
	// LetGo makes the Backlog copy the frames of block blk it holds for
	// queue into memory of its own: the loop hands the block back when
	// LetGo returns.
	LetGo(queue, blk int)
}

// BacklogRunner is a port whose receive loops serve a Backlog:
// RunBacklog is Run with b.HandleRing as the handler.
type BacklogRunner interface {
	RunBacklog(ctx context.Context, b Backlog) error
}
