package hw

import "sync/atomic"

// Drop reasons, the keys of Stats.Drops.
const (
	// DropTruncated counts frames the ring cut short (tp_len > tp_snaplen).
	DropTruncated = "truncated"
	// DropOversize counts frames longer than MTU + MaxL2Overhead, and
	// superframes (vnet headers on) longer than MaxGSOFrameLen. Without
	// vnet headers a local sender's TSO/GSO superframe lands here.
	DropOversize = "oversize"
	// DropMalformed counts ring frames whose header contradicts the block
	// (offsets out of bounds, a lying packet count, a frame shorter than
	// an Ethernet header).
	DropMalformed = "malformed"
	// DropRing counts frames the kernel dropped because the ring was full
	// (tp_drops from PACKET_STATISTICS, sampled).
	DropRing = "ring"
	// DropTxError counts frames sendmmsg or the TX ring refused with an
	// error other than buffer exhaustion (a frame shorter than an
	// Ethernet header or longer than the interface's MTU allows, a link
	// that went down).
	DropTxError = "tx_error"
	// DropTxNoBufs counts frames sendmmsg (or the TX ring's send) refused
	// with ENOBUFS or EAGAIN (the device queue or socket buffer was
	// full).
	DropTxNoBufs = "tx_nobufs"
	// DropTxRingFull counts frames the TX ring had no free slot for: the
	// kernel still held every slot (their frames not yet gone from the
	// device).
	DropTxRingFull = "tx_ring_full"
	// DropTxOversize counts frames longer than a TX ring slot is sized
	// for (MTU + MaxL2Overhead).
	DropTxOversize = "tx_oversize"
	// DropVnetHdr counts frames whose virtio-net header (Config.VnetHdr)
	// no kernel writes: unknown flag bits, a superframe with segment size
	// 0, a checksum field outside the frame.
	DropVnetHdr = "vnet_header"
	// DropGSOUnsupported counts superframes of a kind the router does not
	// segment: UDP fragmentation offload (gso_type 3, which Linux stopped
	// producing in 4.14) or a gso_type it does not know. TCP over IPv4
	// and IPv6 (ECN too) and UDP segmentation (USO) are taken.
	DropGSOUnsupported = "gso_unsupported"
)

type dropReason int

const (
	dropTruncated dropReason = iota
	dropOversize
	dropMalformed
	dropRing
	dropTxError
	dropTxNoBufs
	dropTxRingFull
	dropTxOversize
	dropVnetHdr
	dropGSOUnsupported
	numDropReasons
)

var dropNames = [numDropReasons]string{
	dropTruncated:      DropTruncated,
	dropOversize:       DropOversize,
	dropMalformed:      DropMalformed,
	dropRing:           DropRing,
	dropTxError:        DropTxError,
	dropTxNoBufs:       DropTxNoBufs,
	dropTxRingFull:     DropTxRingFull,
	dropTxOversize:     DropTxOversize,
	dropVnetHdr:        DropVnetHdr,
	dropGSOUnsupported: DropGSOUnsupported,
}

// Stats is a snapshot of a port's counters.
type Stats struct {
	// RxPackets and RxBytes count frames delivered to the handler.
	RxPackets, RxBytes uint64
	// TxPackets and TxBytes count frames the kernel accepted for sending.
	TxPackets, TxBytes uint64
	// TxZeroCopy and TxCopied split TxPackets on ports that can send a
	// frame from the buffer it was received in (AF_XDP on a shared UMEM):
	// frames sent that way, and frames copied into a transmit buffer
	// first. Both 0 on AF_PACKET ports, which copy every frame.
	TxZeroCopy, TxCopied uint64
	// Drops counts dropped frames by reason (DropTruncated, ...). Every
	// reason is present, zero or not.
	Drops map[string]uint64
}

// counters are a port's live statistics. All fields are updated atomically,
// once per batch on the data path.
type counters struct {
	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	drops              [numDropReasons]atomic.Uint64
}

// dropCounts is a per-batch tally of drops, added to counters once.
type dropCounts [numDropReasons]uint64

func (c *counters) addDrops(d *dropCounts) {
	for i, n := range d {
		if n != 0 {
			c.drops[i].Add(n)
		}
	}
}

func (c *counters) snapshot() Stats {
	s := Stats{
		RxPackets: c.rxPackets.Load(),
		RxBytes:   c.rxBytes.Load(),
		TxPackets: c.txPackets.Load(),
		TxBytes:   c.txBytes.Load(),
		Drops:     make(map[string]uint64, numDropReasons),
	}
	for i := range c.drops {
		s.Drops[dropNames[i]] = c.drops[i].Load()
	}
	return s
}
