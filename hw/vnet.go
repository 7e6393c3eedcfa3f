package hw

// The virtio-net header (include/uapi/linux/virtio_net.h, struct
// virtio_net_hdr; Virtio 1.2 section 5.1.6), which a packet socket with
// PACKET_VNET_HDR puts in front of every frame it hands over and expects
// in front of every frame it is given. It carries what an sk_buff knows
// and a wire frame cannot say: that a frame is a superframe (a local
// sender's TSO/GSO frame of up to 64 KiB, to be cut into segments of
// GSOSize payload bytes), and where its partial checksum is. Packet
// sockets use the legacy little-endian layout (vio_le() in
// net/packet/af_packet.c; every target we build for is little-endian).

// VnetHdrLen is sizeof(struct virtio_net_hdr).
const VnetHdrLen = 10

// Offsets inside struct virtio_net_hdr.
const (
	vnFlags      = 0 // u8
	vnGSOType    = 1 // u8
	vnHdrLen     = 2 // le16
	vnGSOSize    = 4 // le16
	vnCsumStart  = 6 // le16
	vnCsumOffset = 8 // le16
)

// Flags of struct virtio_net_hdr.
const (
	// VnetNeedsCsum (VIRTIO_NET_HDR_F_NEEDS_CSUM): the checksum at
	// CsumStart+CsumOffset holds only the pseudo-header sum; the sum of
	// everything from CsumStart to the end is still to be added
	// (CHECKSUM_PARTIAL).
	VnetNeedsCsum = 1
	// VnetDataValid (VIRTIO_NET_HDR_F_DATA_VALID): the checksum was
	// verified (CHECKSUM_UNNECESSARY). Receive only.
	VnetDataValid = 2
	// VnetRSCInfo (VIRTIO_NET_HDR_F_RSC_INFO) is never set by a packet
	// socket; a header that has it is refused.
	VnetRSCInfo = 4
)

// GSOType is a superframe's kind, the gso_type of struct virtio_net_hdr
// without its ECN bit.
type GSOType uint8

// GSO types (VIRTIO_NET_HDR_GSO_*).
const (
	// GSONone is a frame of wire size.
	GSONone GSOType = 0
	// GSOTCPv4 is IPv4 TCP cut at GSOSize payload bytes (TSO).
	GSOTCPv4 GSOType = 1
	// GSOUDP is UDP fragmentation offload (UFO), which Linux no longer
	// produces (removed in 4.14); a port counts it as gso_unsupported.
	GSOUDP GSOType = 3
	// GSOTCPv6 is IPv6 TCP cut at GSOSize payload bytes.
	GSOTCPv6 GSOType = 4
	// GSOUDPL4 is UDP cut into datagrams of GSOSize payload bytes each
	// (UDP_SEGMENT, USO; Linux 6.2 and later pass it to packet sockets).
	GSOUDPL4 GSOType = 5

	// gsoECN is VIRTIO_NET_HDR_GSO_ECN: the TCP superframe has CWR set,
	// which only its first segment keeps.
	gsoECN = 0x80
)

func (t GSOType) String() string {
	switch t {
	case GSONone:
		return "none"
	case GSOTCPv4:
		return "tcpv4"
	case GSOUDP:
		return "udp"
	case GSOTCPv6:
		return "tcpv6"
	case GSOUDPL4:
		return "udp_l4"
	}
	return "unknown"
}

// GSO is a frame's offload metadata, the fields of its virtio-net header:
// whether it is a superframe and how it is to be cut, and where its
// partial checksum is. The zero value is a plain frame with a complete
// checksum.
type GSO struct {
	// Type is the superframe's kind; GSONone for a frame of wire size.
	Type GSOType
	// ECN reports VIRTIO_NET_HDR_GSO_ECN (a TCP superframe with CWR set).
	ECN bool
	// Size is the payload of each segment (gso_size: the TCP MSS, or a
	// UDP datagram's payload), e.g. 1448; valid iff Type != GSONone.
	Size uint16
	// HdrLen is the length of the headers before the payload (hdr_len),
	// a hint: the kernel copies that much into the skb's linear part.
	HdrLen uint16
	// NeedsCsum reports VnetNeedsCsum: the checksum field at
	// CsumStart+CsumOffset (offsets from the frame's first byte) holds
	// the pseudo-header sum only. Every superframe from a Linux sender
	// has it.
	NeedsCsum bool
	// DataValid reports VnetDataValid on receive.
	DataValid             bool
	CsumStart, CsumOffset uint16
}

// VnetHdr is a view of a struct virtio_net_hdr: VnetHdrLen bytes.
type VnetHdr []byte

// Flags returns the flags byte.
func (h VnetHdr) Flags() uint8 { return h[vnFlags] }

// GSOTypeByte returns gso_type with its ECN bit.
func (h VnetHdr) GSOTypeByte() uint8 { return h[vnGSOType] }

// HdrLen returns hdr_len.
func (h VnetHdr) HdrLen() uint16 { return le.Uint16(h[vnHdrLen:]) }

// GSOSize returns gso_size.
func (h VnetHdr) GSOSize() uint16 { return le.Uint16(h[vnGSOSize:]) }

// CsumStart returns csum_start.
func (h VnetHdr) CsumStart() uint16 { return le.Uint16(h[vnCsumStart:]) }

// CsumOffset returns csum_offset.
func (h VnetHdr) CsumOffset() uint16 { return le.Uint16(h[vnCsumOffset:]) }

// Encode writes g into h; a plain frame (the zero GSO) encodes as ten
// zero bytes but for HdrLen.
func (h VnetHdr) Encode(g *GSO) {
	var flags uint8
	if g.NeedsCsum {
		flags |= VnetNeedsCsum
	}
	if g.DataValid {
		flags |= VnetDataValid
	}
	h[vnFlags] = flags
	t := uint8(g.Type)
	if g.ECN && g.Type != GSONone {
		t |= gsoECN
	}
	h[vnGSOType] = t
	le.PutUint16(h[vnHdrLen:], g.HdrLen)
	le.PutUint16(h[vnGSOSize:], g.sizeOrZero())
	le.PutUint16(h[vnCsumStart:], g.CsumStart)
	le.PutUint16(h[vnCsumOffset:], g.CsumOffset)
}

// sizeOrZero is Size for a superframe and 0 for a plain frame, as the
// kernel writes it.
func (g *GSO) sizeOrZero() uint16 {
	if g.Type == GSONone {
		return 0
	}
	return g.Size
}

// vnetVerdict is what decoding a received header found.
type vnetVerdict uint8

const (
	vnetOK vnetVerdict = iota
	// vnetBad: a header no kernel writes (unknown flag bits, a
	// superframe with gso_size 0, a checksum field outside the frame).
	vnetBad
	// vnetUnsupported: a superframe kind the router does not segment
	// (UFO, or a gso_type it does not know).
	vnetUnsupported
)

// Decode reads h into g for a frame of frameLen bytes and says whether
// the router can take the frame. It never panics on garbage.
func (h VnetHdr) Decode(g *GSO, frameLen int) vnetVerdict {
	flags := h.Flags()
	*g = GSO{}
	if flags&^(VnetNeedsCsum|VnetDataValid) != 0 {
		return vnetBad
	}
	g.NeedsCsum = flags&VnetNeedsCsum != 0
	g.DataValid = flags&VnetDataValid != 0
	g.HdrLen = h.HdrLen()
	g.CsumStart, g.CsumOffset = h.CsumStart(), h.CsumOffset()
	if g.NeedsCsum && int(g.CsumStart)+int(g.CsumOffset)+2 > frameLen {
		return vnetBad
	}
	t := h.GSOTypeByte()
	g.ECN = t&gsoECN != 0
	g.Type = GSOType(t &^ gsoECN)
	switch g.Type {
	case GSONone:
		if g.ECN {
			return vnetBad
		}
		return vnetOK
	case GSOTCPv4, GSOTCPv6, GSOUDPL4:
	default:
		return vnetUnsupported
	}
	if g.ECN && g.Type == GSOUDPL4 {
		return vnetBad
	}
	g.Size = h.GSOSize()
	if g.Size == 0 {
		return vnetBad
	}
	return vnetOK
}
