package hw

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
	// Backlogged reports that when this frame's ring block was handed
	// over, at least RingBacklogBlocks more full blocks were waiting
	// behind it: the port's consumer is falling behind, and the ring
	// will soon drop frames of every flow alike unless it sheds work.
	Backlogged bool
}

// BatchHandler receives one batch of frames from one receive queue. Frames
// are valid only until it returns. Handlers for different queues of one
// port run concurrently; calls for one queue never overlap.
type BatchHandler func(queue int, frames []Frame)

// FrameWriter sends whole Ethernet frames (header included, any tags
// inline) in as few syscalls as it can. It returns how many frames were
// accepted. It does not keep the slices after it returns, so callers may
// pass ring memory. Implementations are safe for concurrent use.
type FrameWriter interface {
	WriteFrames(frames [][]byte) (int, error)
}
