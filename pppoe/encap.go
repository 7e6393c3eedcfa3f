package pppoe

import "encoding/binary"

// Header sizes.
const (
	ethHeaderLen  = 14
	vlanTagLen    = 4
	etherTypeVLAN = 0x8100
	etherTypeQinQ = 0x88a8
	// SessionHeaderLen is the PPPoE session header (6 bytes, RFC 2516
	// §4) plus the PPP protocol field (2 bytes, RFC 1661 §2): the whole
	// cost of PPPoE per packet, and why the MTU is 1492 on a
	// 1500-byte Ethernet.
	SessionHeaderLen = pppoeHeaderLen + 2
)

// Link is one PPPoE session's framing: who talks to whom on which VLAN
// with which session id. It is a small value, copied to the data path
// when the session comes up; its methods do not allocate.
type Link struct {
	Local, Peer [6]byte // our MAC, the AC's MAC
	// VLAN is the 802.1Q VLAN ID that Encap pushes and Decap expects,
	// for a WAN port that carries the tag in the frame; 0 means an
	// untagged frame (no tag, or one the port strips).
	VLAN      uint16
	SessionID uint16
}

// HeaderLen is the bytes Encap writes in front of a packet: Ethernet,
// the optional VLAN tag, the PPPoE header and the PPP protocol field.
func (l *Link) HeaderLen() int {
	if l.VLAN != 0 {
		return ethHeaderLen + vlanTagLen + SessionHeaderLen
	}
	return ethHeaderLen + SessionHeaderLen
}

// Encap writes the headers for the packet at buf[off:] into the
// HeaderLen() bytes before it and returns the frame buf[off-HeaderLen():].
// It reports false, writing nothing, when the headroom is short or the
// packet does not fit the 16-bit PPPoE length.
func (l *Link) Encap(buf []byte, off int, proto uint16) ([]byte, bool) {
	hl := l.HeaderLen()
	if off < hl || off > len(buf) || len(buf)-off > 0xffff-2 {
		return nil, false
	}
	f := buf[off-hl:]
	copy(f[0:6], l.Peer[:])
	copy(f[6:12], l.Local[:])
	p := 12
	if l.VLAN != 0 {
		binary.BigEndian.PutUint16(f[12:], etherTypeVLAN)
		binary.BigEndian.PutUint16(f[14:], l.VLAN&0x0fff)
		p = 16
	}
	binary.BigEndian.PutUint16(f[p:], EtherTypeSession)
	f[p+2], f[p+3] = verType, CodeSession
	binary.BigEndian.PutUint16(f[p+4:], l.SessionID)
	binary.BigEndian.PutUint16(f[p+6:], uint16(len(buf)-off+2))
	binary.BigEndian.PutUint16(f[p+8:], proto)
	return f, true
}

// DecapResult says what Decap found; every value but DecapOK is a
// counted drop (DecapStats).
type DecapResult uint8

const (
	DecapOK           DecapResult = iota
	DecapNotSession               // not EtherType 0x8864: not for the data path
	DecapShort                    // shorter than the headers
	DecapBadHeader                // VER/TYPE not 1/1 or CODE not 0
	DecapBadLength                // PPPoE LENGTH past the frame or below 2
	DecapWrongSession             // another session id
	DecapWrongSource              // not from the AC's MAC
	DecapWrongVLAN                // a VLAN tag other than Link.VLAN
	numDecapResults
)

var decapNames = [...]string{"ok", "not_session", "short", "bad_header", "bad_length", "wrong_session", "wrong_source", "wrong_vlan"}

func (r DecapResult) String() string { return decapNames[r] }

// ethernet splits an Ethernet frame with at most one VLAN tag (802.1Q or
// 802.1ad). vlan is -1 when untagged.
func ethernet(frame []byte) (src [6]byte, vlan int, etherType uint16, payload []byte, ok bool) {
	if len(frame) < ethHeaderLen {
		return src, -1, 0, nil, false
	}
	copy(src[:], frame[6:12])
	et := binary.BigEndian.Uint16(frame[12:14])
	vlan = -1
	p := ethHeaderLen
	if et == etherTypeVLAN || et == etherTypeQinQ {
		if len(frame) < ethHeaderLen+vlanTagLen {
			return src, -1, 0, nil, false
		}
		vlan = int(binary.BigEndian.Uint16(frame[14:16]) & 0x0fff)
		et = binary.BigEndian.Uint16(frame[16:18])
		p += vlanTagLen
	}
	return src, vlan, et, frame[p:], true
}

// Decap checks an Ethernet frame against the session and returns the PPP
// protocol and the packet, a slice of frame with Ethernet padding cut
// off. It reads only; the packet is decapsulated "in place" by slicing.
func (l *Link) Decap(frame []byte) (proto uint16, packet []byte, r DecapResult) {
	src, vlan, et, p, ok := ethernet(frame)
	if !ok {
		return 0, nil, DecapShort
	}
	if et != EtherTypeSession {
		return 0, nil, DecapNotSession
	}
	if vlan >= 0 && l.VLAN != 0 && uint16(vlan) != l.VLAN {
		return 0, nil, DecapWrongVLAN
	}
	if len(p) < SessionHeaderLen {
		return 0, nil, DecapShort
	}
	if p[0] != verType || p[1] != CodeSession {
		return 0, nil, DecapBadHeader
	}
	n := int(binary.BigEndian.Uint16(p[4:6]))
	if n < 2 || n > len(p)-pppoeHeaderLen {
		return 0, nil, DecapBadLength
	}
	if binary.BigEndian.Uint16(p[2:4]) != l.SessionID {
		return 0, nil, DecapWrongSession
	}
	if src != l.Peer {
		return 0, nil, DecapWrongSource
	}
	if p[6]&1 == 1 {
		// A one-octet (compressed) protocol field. We never negotiate
		// PFC, but RFC 1661 §2 makes it unambiguous (a full field's
		// first octet is even) and some peers (scapy, for one) send it
		// anyway; accepting costs nothing.
		return uint16(p[6]), p[7 : pppoeHeaderLen+n], DecapOK
	}
	return binary.BigEndian.Uint16(p[6:8]), p[8 : pppoeHeaderLen+n], DecapOK
}

// DecapStats counts Decap results, one counter per DecapResult.
// It is safe for concurrent use.
type DecapStats [numDecapResults]counter

// Count adds one to r's counter.
func (s *DecapStats) Count(r DecapResult) { s[r].Add(1) }

// Get returns r's count.
func (s *DecapStats) Get(r DecapResult) uint64 { return s[r].Load() }
