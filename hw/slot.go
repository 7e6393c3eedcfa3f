package hw

// TPACKET_V2 slot layout (linux/if_packet.h struct tpacket2_hdr), for the
// light ring (lightring_linux.go): one frame per fixed-size slot, each
// handed over and back on its own.
const (
	// slotHdrLen is sizeof(struct tpacket2_hdr).
	slotHdrLen = 32
	// Offsets inside struct tpacket2_hdr.
	shStatus   = 0
	shLen      = 4
	shSnaplen  = 8
	shMac      = 12 // uint16
	shSec      = 16
	shNsec     = 20
	shVLANTCI  = 24 // uint16
	shVLANTPID = 26 // uint16
)

// parseSlot appends the frame of one TPACKET_V2 slot the kernel handed
// over to frames, or counts it in drops; it never allocates and never
// reads outside slot. The frame's Data aliases slot. maxLen and vnet are
// as for parseBlock.
func parseSlot(slot []byte, frames []Frame, maxLen int, vnet bool, drops *dropCounts) []Frame {
	if len(slot) < slotHdrLen {
		drops[dropMalformed]++
		return frames
	}
	status := le.Uint32(slot[shStatus:])
	wireLen := le.Uint32(slot[shLen:])
	snaplen := le.Uint32(slot[shSnaplen:])
	mac := int(le.Uint16(slot[shMac:]))
	minMac := slotHdrLen + RingHeadroom // as parseBlock
	if vnet {
		minMac += VnetHdrLen
	}
	if mac < minMac || mac > len(slot) || uint64(snaplen) > uint64(len(slot)-mac) {
		drops[dropMalformed]++
		return frames
	}
	var gso GSO
	vv := vnetOK
	if vnet {
		vv = VnetHdr(slot[mac-VnetHdrLen:mac]).Decode(&gso, int(snaplen))
	}
	if r, drop := frameDrop(snaplen, wireLen, vv, gso, maxLen); drop {
		drops[r]++
		return frames
	}
	if len(frames) == cap(frames) {
		drops[dropMalformed]++ // the caller sized frames wrong; count, never grow
		return frames
	}
	frames = frames[:len(frames)+1]
	end := mac + int(snaplen)
	fillFrame(&frames[len(frames)-1], slot[mac:end:end], wireLen, status,
		le.Uint16(slot[shVLANTCI:]), le.Uint16(slot[shVLANTPID:]), gso,
		int64(le.Uint32(slot[shSec:]))*1e9+int64(le.Uint32(slot[shNsec:])))
	return frames
}
