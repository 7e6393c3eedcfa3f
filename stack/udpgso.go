package stack

import (
	"bytes"
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// UDP superframes of the router's own datagrams.
//
// A WireGuard Bind's send batch (UDPConn.WriteBatchToUDPAddrPort) is many
// datagrams of one flow to one peer, most of one size, and each used to
// leave as a frame of its own: one sendmmsg message and one skb through
// the kernel (and, on a veth, through the peer's receive) per datagram.
// On an egress whose writer takes UDP superframes whole (hw.Port.UDPGSO:
// vnet headers, sendmmsg, Linux 6.2 or later; never the small boards'
// profiles, which have no vnet headers) addOwnUDPLocked joins them in the
// pending batch into one superframe (VIRTIO_NET_HDR_GSO_UDP_L4, gso_size
// the first datagram's payload) with a partial checksum. The kernel or
// the NIC cuts it into the datagrams again (each its own IP and UDP
// lengths and checksums, IPv4 IDs counting up from the first's), or a
// veth hands it on whole and the peer's socket reads it as one with
// UDP_GRO (wireguard-go's StdNetBind turns that on) or as its datagrams
// without.
//
// A datagram joins the last pending frame only, so the order of the
// batch is kept: where that frame is a datagram or superframe of the same
// flow (the same Ethernet header, the same IP header but for its length,
// ID and checksum, the same ports), its last segment is full, this one's
// payload is no longer than the segment size, and the whole stays within
// the writer's longest frame, 64 KiB of IP and udpGSOMaxSegments.

// udpGSOMaxSegments bounds the datagrams of one UDP superframe: a packet
// socket refuses more than the kernel's UDP_MAX_SEGMENTS (128) per frame
// (virtio_net_hdr_to_skb). 64 KiB of WireGuard's 1,452-byte datagrams is
// 45.
const udpGSOMaxSegments = 64

// ownUDP returns the IP header length of frame, an untagged Ethernet
// frame, if it is an IPv4 (no options, not a fragment) or IPv6 (no
// extension headers) UDP datagram with consistent lengths and, over
// IPv4, a checksum; else 0.
func ownUDP(frame []byte) int {
	if len(frame) < header.EthernetMinimumSize {
		return 0
	}
	ip := frame[header.EthernetMinimumSize:]
	var ipLen, total int
	switch binary.BigEndian.Uint16(frame[12:]) {
	case uint16(header.IPv4ProtocolNumber):
		if len(ip) < header.IPv4MinimumSize+header.UDPMinimumSize || ip[0] != 0x45 || ip[9] != protoUDP ||
			binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
			return 0
		}
		ipLen, total = header.IPv4MinimumSize, int(binary.BigEndian.Uint16(ip[2:]))
		if ip[ipLen+udpChecksumOffset] == 0 && ip[ipLen+udpChecksumOffset+1] == 0 {
			return 0 // sent without a checksum: leave it so
		}
	case uint16(header.IPv6ProtocolNumber):
		if len(ip) < header.IPv6MinimumSize+header.UDPMinimumSize || ip[0]>>4 != 6 || ip[6] != protoUDP {
			return 0
		}
		ipLen, total = header.IPv6MinimumSize, header.IPv6MinimumSize+int(binary.BigEndian.Uint16(ip[4:]))
	default:
		return 0
	}
	if total != len(ip) || int(binary.BigEndian.Uint16(ip[ipLen+4:])) != total-ipLen {
		return 0
	}
	return ipLen
}

// sameUDPFlow reports whether datagram f (IP header ipLen bytes) may
// join superframe s: the same Ethernet header, IP header fields other
// than the length, ID and header checksum, and ports.
func sameUDPFlow(s, f []byte, ipLen int) bool {
	const l2 = header.EthernetMinimumSize
	if len(s) < l2+ipLen+header.UDPMinimumSize || !bytes.Equal(s[:l2], f[:l2]) {
		return false
	}
	a, b := s[l2:], f[l2:]
	return sameIPHeader(a, b, ipLen) && bytes.Equal(a[ipLen:ipLen+4], b[ipLen:ipLen+4])
}

// sameIPHeader reports whether IP headers a and b (ipLen bytes: an IPv4
// header without options, or IPv6 without extension headers) agree in
// every field but the length, the ID and the header checksum: what the
// packets of one superframe share, since segmentation writes those.
func sameIPHeader(a, b []byte, ipLen int) bool {
	if ipLen == header.IPv4MinimumSize {
		// Version, IHL, TOS; flags; TTL, protocol; addresses.
		return a[0] == b[0] && a[1] == b[1] && a[6] == b[6] && a[8] == b[8] && a[9] == b[9] && bytes.Equal(a[12:20], b[12:20])
	}
	// Version, class, flow label; next header, hop limit, addresses.
	return bytes.Equal(a[:4], b[:4]) && bytes.Equal(a[6:40], b[6:40])
}

// addOwnUDPLocked adds frame, a datagram the router sends (in buf, which
// it takes), to e's pending batch, as one more segment of the last frame
// where it may join it (above), else as a frame of its own that the next
// datagrams of its flow may join. It reports false, having done nothing,
// when frame is no UDP datagram it could coalesce. e.txMu must be held;
// w takes UDP superframes (w.udpGSO).
func (e *Endpoint) addOwnUDPLocked(w *frameWriter, frame []byte, buf *[]byte) bool {
	ipLen := ownUDP(frame)
	if ipLen == 0 {
		return false
	}
	const l2 = header.EthernetMinimumSize
	hdr := l2 + ipLen + header.UDPMinimumSize
	payload := len(frame) - hdr
	b := &e.pending
	if i := len(b.frames) - 1; b.udp.open && payload > 0 && payload <= b.udp.size && b.udp.segs < udpGSOMaxSegments &&
		len(b.frames[i])+payload <= w.gsoMax && len(b.frames[i])-l2+payload <= maxIPLength(ipLen) &&
		ipLen == b.udp.ipLen && sameUDPFlow(b.frames[i], frame, ipLen) {
		s := b.frames[i]
		if b.udp.segs == 1 {
			// Still a datagram of its own: it becomes a superframe.
			big := e.getBigBuf(len(s))
			copy(*big, s)
			if b.bufs[i] != nil {
				e.putBuf(b.bufs[i])
			}
			b.bufs[i] = big
			s = *big
			b.markGSO()
			b.gso[i] = hw.GSO{
				Type:       hw.GSOUDPL4,
				Size:       uint16(b.udp.size),
				HdrLen:     uint16(hdr),
				NeedsCsum:  true,
				CsumStart:  uint16(l2 + ipLen),
				CsumOffset: udpChecksumOffset,
			}
			e.stats.gsoSent.Add(1)
		}
		n := len(s)
		s = s[:n+payload]
		copy(s[n:], frame[hdr:])
		setUDPSuperLengths(s[l2:], ipLen)
		b.frames[i] = s
		b.udp.segs++
		b.udp.open = payload == b.udp.size
		e.putBuf(buf)
		return true
	}
	b.add(frame, buf)
	b.udp = udpRun{open: payload > 0, segs: 1, size: payload, ipLen: ipLen}
	return true
}

// maxIPLength is the longest IP packet whose length its header can
// say: 65,535 bytes in all for IPv4, of payload for IPv6.
func maxIPLength(ipLen int) int {
	if ipLen == header.IPv4MinimumSize {
		return 0xffff
	}
	return header.IPv6MinimumSize + 0xffff
}

// setUDPSuperLengths writes the lengths of UDP superframe ip (IP header
// ipLen bytes) after its payload grew: the IP length (and the IPv4
// header checksum, which the receiving stack checks on the superframe
// itself), the UDP length, and in the UDP checksum field the pseudo-header
// sum over that length, as a CHECKSUM_PARTIAL sender leaves it; the
// kernel's __udp_gso_segment swaps the length in it for each datagram's.
func setUDPSuperLengths(ip []byte, ipLen int) {
	l4 := len(ip) - ipLen
	var src, dst []byte
	if ipLen == header.IPv4MinimumSize {
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:ipLen], 0))
		src, dst = ip[12:16], ip[16:20]
	} else {
		binary.BigEndian.PutUint16(ip[4:], uint16(l4))
		src, dst = ip[8:24], ip[24:40]
	}
	binary.BigEndian.PutUint16(ip[ipLen+4:], uint16(l4))
	binary.BigEndian.PutUint16(ip[ipLen+udpChecksumOffset:], pseudoHeaderSum(src, dst, protoUDP, l4))
}
