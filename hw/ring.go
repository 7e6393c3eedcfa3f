package hw

import "encoding/binary"

// TPACKET_V3 ring layout (linux/if_packet.h). The ring is written by the
// kernel in host byte order; every Linux target we build for (amd64, arm,
// arm64) is little-endian. Fields are read with encoding/binary, so no
// field needs to be aligned, which keeps the parser safe on 32-bit ARM and
// on garbage input.
const (
	// blockDescLen is sizeof(struct tpacket_block_desc): version,
	// offset_to_priv and the tpacket_hdr_v1 union (48 bytes).
	blockDescLen = 48
	// Offsets inside struct tpacket_block_desc.
	bdBlockStatus      = 8  // hdr.bh1.block_status
	bdNumPkts          = 12 // hdr.bh1.num_pkts
	bdOffsetToFirstPkt = 16 // hdr.bh1.offset_to_first_pkt
	bdBlkLen           = 20 // hdr.bh1.blk_len

	// frameHdrLen is sizeof(struct tpacket3_hdr).
	frameHdrLen = 48
	// Offsets inside struct tpacket3_hdr.
	fhNextOffset = 0
	fhSec        = 4
	fhNsec       = 8
	fhSnaplen    = 12
	fhLen        = 16
	fhStatus     = 20
	fhMac        = 24 // uint16
	fhVLANTCI    = 32 // hv1.tp_vlan_tci, uint32
	fhVLANTPID   = 36 // hv1.tp_vlan_tpid, uint16

	// tp_status bits (linux/if_packet.h).
	tpStatusUser          = 0x1
	tpStatusCsumNotReady  = 0x8
	tpStatusVLANValid     = 0x10
	tpStatusVLANTPIDValid = 0x40
	tpStatusCsumValid     = 0x80

	// etherTypeVLAN is the IEEE 802.1Q C-tag TPID, assumed when the kernel
	// reports a tag but no TPID.
	etherTypeVLAN = 0x8100
)

// minFrameStride is the least space one frame can take in a block: its
// header, the room before the frame (RingHeadroom) and an Ethernet header. A block of n bytes thus holds at most
// n/minFrameStride+1 frames; the receive path sizes its Frame slices so.
const minFrameStride = frameHdrLen + RingHeadroom + EthernetHeaderLen

var le = binary.LittleEndian

// maxFramesPerBlock is the capacity a Frame slice needs so that parseBlock
// never stops early on a well-formed block of blockSize bytes.
func maxFramesPerBlock(blockSize int) int {
	return blockSize/minFrameStride + 1
}

// parseBlock walks one TPACKET_V3 ring block and appends its frames to
// frames[:0], up to cap(frames); it never allocates. maxLen is the largest
// acceptable tp_len (MTU + MaxL2Overhead). Each frame that is not
// delivered is counted once in drops; when the block itself is
// inconsistent (offsets out of bounds, num_pkts lying) the walk stops and
// the rest of the block counts as one malformed drop. So delivered +
// dropped never exceeds the block's num_pkts, and equals it on a
// well-formed block.
//
// The returned frames' Data alias block. parseBlock makes no syscalls and
// keeps no state, so it can be tested on synthetic blocks.
//
// With vnet (the socket has PACKET_VNET_HDR), each frame's virtio-net
// header sits in the VnetHdrLen bytes before tp_mac (tpacket_rcv writes
// it at h.raw + macoff - sizeof(struct virtio_net_hdr)) and goes into
// Frame.GSO. A superframe (a GSO type) may be up to MaxGSOFrameLen
// bytes; every other frame up to maxLen.
func parseBlock(block []byte, frames []Frame, maxLen int, vnet bool, drops *dropCounts) []Frame {
	frames = frames[:0]
	if len(block) < blockDescLen {
		drops[dropMalformed]++
		return frames
	}
	numPkts := le.Uint32(block[bdNumPkts:])
	if numPkts == 0 {
		return frames
	}
	end := len(block)
	if blkLen := le.Uint32(block[bdBlkLen:]); blkLen >= blockDescLen && uint64(blkLen) < uint64(end) {
		end = int(blkLen)
	}
	first := le.Uint32(block[bdOffsetToFirstPkt:])
	if first < blockDescLen || uint64(first) > uint64(end) {
		drops[dropMalformed]++
		return frames
	}
	off := int(first)
	for i := uint32(0); i < numPkts; i++ {
		if end-off < frameHdrLen {
			drops[dropMalformed]++
			return frames
		}
		h := block[off : off+frameHdrLen]
		next := le.Uint32(h[fhNextOffset:])
		snaplen := le.Uint32(h[fhSnaplen:])
		wireLen := le.Uint32(h[fhLen:])
		status := le.Uint32(h[fhStatus:])
		mac := int(le.Uint16(h[fhMac:]))

		// The frame's bytes must lie after its header and the room
		// Port.ExtendFrame lends (RingHeadroom), and inside the used
		// part of the block.
		minMac := frameHdrLen + RingHeadroom
		if vnet {
			minMac += VnetHdrLen
		}
		if mac < minMac || mac > end-off || uint64(snaplen) > uint64(end-off-mac) {
			drops[dropMalformed]++
			return frames
		}
		var gso GSO
		vv := vnetOK
		if vnet {
			vv = VnetHdr(block[off+mac-VnetHdrLen:off+mac]).Decode(&gso, int(snaplen))
		}
		if r, drop := frameDrop(snaplen, wireLen, vv, gso, maxLen); drop {
			drops[r]++
		} else if len(frames) == cap(frames) {
			// More frames than a block can hold: the header lies.
			drops[dropMalformed]++
			return frames
		} else {
			start := off + mac
			frames = frames[:len(frames)+1]
			fillFrame(&frames[len(frames)-1], block[start:start+int(snaplen):start+int(snaplen)], wireLen, status,
				uint16(le.Uint32(h[fhVLANTCI:])), le.Uint16(h[fhVLANTPID:]), gso,
				int64(le.Uint32(h[fhSec:]))*1e9+int64(le.Uint32(h[fhNsec:])))
		}
		if i == numPkts-1 {
			break
		}
		// A frame that is not the last must be followed by another
		// header that starts after its data and inside the block.
		if uint64(next) < uint64(mac)+uint64(snaplen) || uint64(next) > uint64(end-off) {
			drops[dropMalformed]++
			return frames
		}
		off += int(next)
	}
	return frames
}

// frameDrop says whether a frame the ring header describes is dropped,
// and why: the checks parseBlock and parseSlot share, in order.
func frameDrop(snaplen, wireLen uint32, vv vnetVerdict, gso GSO, maxLen int) (dropReason, bool) {
	limit := int64(maxLen)
	if gso.Type != GSONone {
		limit = MaxGSOFrameLen
	}
	switch {
	case snaplen < EthernetHeaderLen || wireLen < snaplen:
		return dropMalformed, true
	case wireLen > snaplen:
		return dropTruncated, true
	case vv == vnetBad:
		return dropVnetHdr, true
	case vv == vnetUnsupported:
		return dropGSOUnsupported, true
	case int64(wireLen) > limit:
		return dropOversize, true
	}
	return 0, false
}

// fillFrame sets every field of f for a delivered frame: data in the
// ring, its tp_len, the tp_status bits and the tag the kernel stripped.
func fillFrame(f *Frame, data []byte, wireLen, status uint32, tci, tpid uint16, gso GSO, rxTime int64) {
	f.Data = data
	f.WireLen = int(wireLen)
	f.Backlogged = false // routineReceive sets it
	f.VLANValid = status&tpStatusVLANValid != 0
	f.VLANTCI, f.VLANTPID = 0, 0
	if f.VLANValid {
		f.VLANTCI = tci
		f.VLANTPID = etherTypeVLAN
		if status&tpStatusVLANTPIDValid != 0 {
			f.VLANTPID = tpid
		}
	}
	f.CsumValid = status&tpStatusCsumValid != 0
	f.CsumPartial = status&tpStatusCsumNotReady != 0
	f.GSO = gso
	f.RxTime = rxTime
}
