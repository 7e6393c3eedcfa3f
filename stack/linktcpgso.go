package stack

import (
	"bytes"
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// TCP superframes of a link's decrypted segments.
//
// wireguard-go decrypts in batches and hands the TUN each batch at once
// (LinkFastPath.ForwardBatch); a bulk TCP flow's batch is mostly its
// segments in order. Each used to leave the LAN port as a frame of its
// own: one sendmmsg message and one skb through the kernel (and, on a
// veth, through the receiver's stack) per segment. Where the egress
// port takes TCP superframes whole (a vnet-header writer, hw.GSOWriter;
// never the boards' profiles, MACsec or a PPPoE egress, which cut them
// again in software) consecutive segments of one flow in the batch,
// already through NAT, become one superframe (VIRTIO_NET_HDR_GSO_TCPV4
// or V6, gso_size the first segment's payload) that appendSuperLocked
// sends as it sends a superframe received whole: the kernel or the NIC
// cuts it again, or a veth hands it on and the receiver's TCP takes it
// as one GRO'd skb.
//
// A segment joins only the run's last frame (so the order holds), only
// when it continues it exactly: the same Ethernet header, IP header but
// for the length, ID and checksum, ports, ACK, window and options, the
// next sequence number, flags ACK (with ECE) and at most PSH, which
// ends the run; SYN, FIN, RST, URG and CWR never join. The first
// segment's payload is the segment size; a shorter one is the last. The
// superframe grows in the first segment's own buffer, into its capacity
// (wireguard-go gives each packet its own MaxMessageSize buffer and its
// Linux TUN's GRO grows packets the same way): where that capacity or
// the writer's longest frame ends, so does the run.

// tcpGSOMaxSegments bounds the segments of one superframe: 64 KiB of
// the tunnel's 1,380-byte segments is 47.
const tcpGSOMaxSegments = 64

// tcpRun is the superframe ForwardBatch is growing in its fastRun's
// last entry.
type tcpRun struct {
	// idx is the fastRun entry being grown, -1 for none.
	idx          int
	ipLen, l4Len int
	// size is the segment size; segs counts the segments; open: the
	// last one was full and without PSH, so another may follow.
	size, segs int
	open       bool
	nextSeq    uint32
	// max is the longest the frame may grow: its capacity and the
	// writer's longest superframe.
	max int
}

// linkTCP returns the IP and TCP header lengths of frame, an untagged
// Ethernet frame the fast path rewrote (its IP header is sane), if it is
// an IPv4 (no options, not a fragment) or IPv6 (no extension headers)
// TCP segment with payload that may start or join a superframe: flags
// ACK, maybe ECE and PSH, nothing else. Else 0, 0.
func linkTCP(frame []byte) (ipLen, l4Len int) {
	ip := frame[header.EthernetMinimumSize:]
	switch {
	case ip[0] == 0x45 && ip[9] == protoTCP && binary.BigEndian.Uint16(ip[6:])&0x3fff == 0:
		ipLen = header.IPv4MinimumSize
	case ip[0]>>4 == 6 && len(ip) >= header.IPv6MinimumSize && ip[6] == protoTCP:
		ipLen = header.IPv6MinimumSize
	default:
		return 0, 0
	}
	if len(ip) < ipLen+header.TCPMinimumSize {
		return 0, 0
	}
	tcp := ip[ipLen:]
	l4Len = int(tcp[12]>>4) * 4
	flags := tcp[13]
	const allowed = uint8(header.TCPFlagAck | header.TCPFlagPsh | header.TCPFlagEce)
	if l4Len < header.TCPMinimumSize || ipLen+l4Len >= len(ip) || flags&^allowed != 0 || flags&uint8(header.TCPFlagAck) == 0 {
		return 0, 0
	}
	return ipLen, l4Len
}

// tcpGSOMax returns how long a TCP superframe e's writer takes whole,
// 0 if it takes none (no vnet headers, MACsec, PPPoE).
func (e *Endpoint) tcpGSOMax() int {
	w := e.writer.Load()
	if w == nil || w.gso == nil || e.pppoeMode {
		return 0
	}
	return w.gsoMax - e.vlan.Load().n
}

// start makes the run's last entry, frame (just added for e), the head
// of a superframe the next segments may join, if it can be one.
func (t *tcpRun) start(r *fastRun, e *Endpoint, frame []byte) {
	t.idx = -1
	ipLen, l4Len := linkTCP(frame)
	if ipLen == 0 || r.n == 0 {
		return
	}
	gsoMax := e.tcpGSOMax()
	if gsoMax == 0 {
		return
	}
	tcp := frame[header.EthernetMinimumSize+ipLen:]
	*t = tcpRun{
		idx: r.n - 1, ipLen: ipLen, l4Len: l4Len,
		size: len(tcp) - l4Len, segs: 1,
		open:    tcp[13]&uint8(header.TCPFlagPsh) == 0,
		nextSeq: binary.BigEndian.Uint32(tcp[4:]) + uint32(len(tcp)-l4Len),
		max:     min(cap(frame), gsoMax, header.EthernetMinimumSize+maxIPLength(ipLen)),
	}
}

// join appends segment frame (bound for e) to the superframe in the
// run's last entry and reports true, or reports false having done
// nothing if it does not continue it (above).
func (t *tcpRun) join(r *fastRun, e *Endpoint, frame []byte) bool {
	if t.idx < 0 || t.idx != r.n-1 || r.eps[t.idx] != e || !t.open || t.segs >= tcpGSOMaxSegments {
		return false
	}
	if ipLen, l4Len := linkTCP(frame); ipLen != t.ipLen || l4Len != t.l4Len {
		return false
	}
	s := r.frames[t.idx]
	if !tcpContinues(s, frame, t.ipLen, t.l4Len, t.nextSeq) {
		return false
	}
	hdr := header.EthernetMinimumSize + t.ipLen + t.l4Len
	payload := len(frame) - hdr
	if payload > t.size || len(s)+payload > t.max || !linkTCPChecksumValid(frame, t.ipLen) ||
		t.segs == 1 && !linkTCPChecksumValid(s, t.ipLen) {
		return false
	}
	n := len(s)
	s = s[:n+payload]
	copy(s[n:], frame[hdr:])
	ip := s[header.EthernetMinimumSize:]
	if t.ipLen == header.IPv4MinimumSize {
		binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^checksum.Checksum(ip[:t.ipLen], 0))
	} else {
		binary.BigEndian.PutUint16(ip[4:], uint16(len(ip)-t.ipLen))
	}
	// The last segment's PSH is the superframe's: the kernel keeps PSH
	// on the last segment it cuts only.
	psh := frame[hdr-t.l4Len+13] & uint8(header.TCPFlagPsh)
	ip[t.ipLen+13] |= psh
	if t.segs == 1 {
		typ := hw.GSOTCPv4
		if t.ipLen == header.IPv6MinimumSize {
			typ = hw.GSOTCPv6
		}
		// A complete checksum (the first segment's, now stale):
		// appendSuperLocked writes the pseudo-header sum in its place.
		r.isSuper[t.idx], r.supers[t.idx] = true, hw.GSO{Type: typ, Size: uint16(t.size)}
	}
	r.frames[t.idx] = s
	t.segs++
	t.nextSeq += uint32(payload)
	t.open = payload == t.size && psh == 0
	return true
}

// linkTCPChecksumValid reports whether the TCP segment in frame (IP
// header ipLen bytes) has a correct checksum. A superframe's is the
// kernel's to compute, over all of it: a segment that arrived with a bad
// one (a peer may send it; the tunnel authenticates the packet, not its
// TCP checksum) must reach the receiver bad, as a frame of its own, so
// neither it nor the segment before it joins (wireguard-go's and the
// kernel's GRO check the same).
func linkTCPChecksumValid(frame []byte, ipLen int) bool {
	ip := frame[header.EthernetMinimumSize:]
	var src, dst []byte
	if ipLen == header.IPv4MinimumSize {
		src, dst = ip[12:16], ip[16:20]
	} else {
		src, dst = ip[8:24], ip[24:40]
	}
	return l4ChecksumValid(ipLen != header.IPv4MinimumSize, src, dst, protoTCP, ip[ipLen:])
}

// tcpContinues reports whether segment f continues superframe s (IP
// header ipLen, TCP header l4Len bytes) at sequence number seq: the same
// Ethernet header, IP header but for length, ID and checksum, ports,
// ACK, flags but PSH, window, urgent pointer and options, and seq as its
// sequence number.
func tcpContinues(s, f []byte, ipLen, l4Len int, seq uint32) bool {
	const l2 = header.EthernetMinimumSize
	if len(f) <= l2+ipLen+l4Len || !bytes.Equal(s[:l2], f[:l2]) {
		return false
	}
	a, b := s[l2:], f[l2:]
	if !sameIPHeader(a, b, ipLen) {
		return false
	}
	ta, tb := a[ipLen:], b[ipLen:]
	const psh = uint8(header.TCPFlagPsh)
	return int(tb[12]>>4)*4 == l4Len && binary.BigEndian.Uint32(tb[4:]) == seq &&
		bytes.Equal(ta[:4], tb[:4]) && // ports
		bytes.Equal(ta[8:13], tb[8:13]) && // ACK, data offset
		ta[13]&^psh == tb[13]&^psh &&
		bytes.Equal(ta[14:16], tb[14:16]) && // window
		bytes.Equal(ta[18:l4Len], tb[18:l4Len]) // urgent pointer, options
}
