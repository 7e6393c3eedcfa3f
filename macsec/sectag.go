package macsec

import (
	"encoding/binary"
	"fmt"
)

// Wire constants of the MAC Security TAG (SecTAG), IEEE Std 802.1AE-2018
// clause 9. Clause numbers in this file are from memory of the standard
// (its text was not available when this was written); the bit values match
// Linux drivers/net/macsec.c and Wireshark packet-macsec.c.
const (
	// EtherType is the MACsec EtherType 88-E5 (802.1AE 9.3).
	EtherType = 0x88e5

	// TCIVersion is the V bit of the TCI (802.1AE 9.4); it must be 0.
	TCIVersion = 0x80
	// TCIEndStation is the ES bit: the SCI is not sent and is the source
	// MAC address followed by port 0x0001.
	TCIEndStation = 0x40
	// TCISCIPresent is the SC bit: the SecTAG carries an explicit SCI.
	TCISCIPresent = 0x20
	// TCISCB is the SCB bit (EPON single copy broadcast).
	TCISCB = 0x10
	// TCIEncrypted is the E bit: the Secure Data is encrypted.
	TCIEncrypted = 0x08
	// TCIChanged is the C bit: the Secure Data differs from the User Data.
	// The GCM suites set E and C together.
	TCIChanged = 0x04
	// ANMask selects the association number (802.1AE 9.6) in the TCI/AN
	// octet.
	ANMask = 0x03

	// SecTAGLen is the length of a SecTAG without SCI: EtherType (2),
	// TCI/AN (1), SL (1), PN (4).
	SecTAGLen = 8
	// SecTAGSCILen is the length of a SecTAG with an explicit SCI (8).
	SecTAGSCILen = 16
	// ICVLen is the integrity check value length of all four GCM cipher
	// suites (802.1AE 14.5-14.7).
	ICVLen = 16
	// ShortLenLimit is the bound on the Short Length field (802.1AE 9.7):
	// SL holds the Secure Data length if it is below 48 octets, else 0.
	ShortLenLimit = 48
	// slMask selects the SL bits; the top two bits of the octet are
	// reserved and must be 0.
	slMask = 0x3f

	// addrsLen is the length of the destination and source MAC addresses
	// that precede the SecTAG.
	addrsLen = 12
	// PortES is the port number of an end station's implicit SCI
	// (802.1AE 9.9; Linux MACSEC_PORT_ES).
	PortES = 0x0001
	// Overhead is the most a protected frame grows by: a SecTAG with SCI
	// inserted after the MAC addresses plus the ICV (the user EtherType
	// stays, as the first octets of the Secure Data).
	Overhead = SecTAGSCILen + ICVLen
)

// SCI is a Secure Channel Identifier (802.1AE 9.9): a 48-bit MAC address
// (System Identifier) followed by a 16-bit port number, as one big-endian
// 64-bit value, like `ip macsec ... sci 0x1234`. Example: 0x12153524c0895e81.
type SCI uint64

// MakeSCI returns the SCI made of the MAC address mac and port.
func MakeSCI(mac [6]byte, port uint16) SCI {
	var b [8]byte
	copy(b[:6], mac[:])
	binary.BigEndian.PutUint16(b[6:], port)
	return SCI(binary.BigEndian.Uint64(b[:]))
}

// MAC returns the System Identifier part of s.
func (s SCI) MAC() [6]byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(s))
	return [6]byte(b[:6])
}

// Port returns the Port Identifier part of s.
func (s SCI) Port() uint16 { return uint16(s) }

// String returns s as 16 hex digits, e.g. "12153524c0895e81".
func (s SCI) String() string { return fmt.Sprintf("%016x", uint64(s)) }

// SecTAG is a view of a SecTAG: the bytes of a frame starting at its MACsec
// EtherType (offset 12). Accessors assume the view holds at least Len()
// bytes; check with [ParseFrame] first.
type SecTAG []byte

// TCI returns the TCI bits of the TCI/AN octet (AN masked out).
func (t SecTAG) TCI() uint8 { return t[2] &^ ANMask }

// AN returns the association number.
func (t SecTAG) AN() uint8 { return t[2] & ANMask }

// SL returns the Short Length field (reserved bits masked out).
func (t SecTAG) SL() uint8 { return t[3] & slMask }

// PN returns the 32-bit packet number field (the low half of an XPN PN).
func (t SecTAG) PN() uint32 { return binary.BigEndian.Uint32(t[4:8]) }

// HasSCI reports whether the SC bit is set, i.e. an SCI follows the PN.
func (t SecTAG) HasSCI() bool { return t[2]&TCISCIPresent != 0 }

// SCI returns the explicit SCI; valid iff HasSCI.
func (t SecTAG) SCI() SCI { return SCI(binary.BigEndian.Uint64(t[8:16])) }

// Len returns the SecTAG length, 8 or 16, from the SC bit.
func (t SecTAG) Len() int {
	if t.HasSCI() {
		return SecTAGSCILen
	}
	return SecTAGLen
}

// SecTAGFields holds the values of a SecTAG, for [SecTAG.Encode].
type SecTAGFields struct {
	// TCI holds the TCI bits without AN, e.g. TCISCIPresent|TCIEncrypted|TCIChanged.
	TCI uint8
	// AN is the association number, 0..3.
	AN uint8
	// SL is the Short Length, 0..47.
	SL uint8
	// PN is the packet number (low 32 bits for XPN suites), e.g. 1.
	PN uint32
	// SCI is written iff TCI has TCISCIPresent.
	SCI SCI
}

// Encode writes f into t (EtherType included) and returns the SecTAG
// length. t must hold at least 16 bytes if f.TCI has TCISCIPresent, else 8.
func (t SecTAG) Encode(f *SecTAGFields) int {
	binary.BigEndian.PutUint16(t[0:2], EtherType)
	t[2] = f.TCI&^ANMask | f.AN&ANMask
	t[3] = f.SL & slMask
	binary.BigEndian.PutUint32(t[4:8], f.PN)
	if f.TCI&TCISCIPresent == 0 {
		return SecTAGLen
	}
	binary.BigEndian.PutUint64(t[8:16], uint64(f.SCI))
	return SecTAGSCILen
}

// Parsed locates the parts of a received MACsec frame. It is valid iff
// [ParseFrame] returned true.
type Parsed struct {
	// Tag is the SecTAG view (frame[12:12+TagLen]).
	Tag SecTAG
	// TagLen is 8 or 16.
	TagLen int
	// SCI is the frame's SCI: the explicit one, or for frames without one
	// the source MAC address followed by port 0x0001 (as Linux does, also
	// for frames with neither ES nor SCB set).
	SCI SCI
	// DataOff is the offset of the Secure Data (12+TagLen).
	DataOff int
	// DataLen is the Secure Data length: SL if SL != 0, else what lies
	// between the SecTAG and the ICV.
	DataLen int
	// End is the offset just past the ICV; anything after it is padding.
	End int
}

// ParseFrame checks that frame (starting at the destination MAC address,
// no FCS) is a valid MACsec frame per 802.1AE 9.12 and locates its parts.
// xpn tells whether PN 0 is allowed (XPN cipher suites). It returns false
// for frames that are not MACsec (EtherType) in isMACsec, and ok false for
// MACsec frames with an invalid SecTAG, which a receiver counts as
// InPktsBadTag. Unlike Linux, a frame with SL != 0 may carry padding after
// the ICV: SL locates the ICV and the padding is ignored.
func ParseFrame(frame []byte, xpn bool) (p Parsed, isMACsec, ok bool) {
	isMACsec, ok = parseFrame(frame, xpn, &p)
	return p, isMACsec, ok
}

// parseFrame is ParseFrame writing into *p, which the receive loop reuses:
// returning the 72-octet Parsed by value costs a store-forwarding stall
// per frame when the caller copies it. On success it sets every field of
// *p; otherwise *p may hold partial results.
func parseFrame(frame []byte, xpn bool, p *Parsed) (isMACsec, ok bool) {
	if len(frame) < addrsLen+2 || binary.BigEndian.Uint16(frame[addrsLen:]) != EtherType {
		return false, false
	}
	if len(frame) < addrsLen+SecTAGLen {
		return true, false
	}
	t := SecTAG(frame[addrsLen:])
	tci := t[2]
	if tci&TCIVersion != 0 {
		return true, false
	}
	if tci&(TCIEndStation|TCISCB) != 0 && tci&TCISCIPresent != 0 {
		return true, false
	}
	// E without C is reserved for the KaY (802.1AE 9.5); such frames are
	// never delivered to the Controlled Port.
	if tci&(TCIEncrypted|TCIChanged) == TCIEncrypted {
		return true, false
	}
	if t[3]&^slMask != 0 {
		return true, false
	}
	if !xpn && t.PN() == 0 {
		return true, false
	}
	tl := t.Len()
	p.TagLen = tl
	p.DataOff = addrsLen + tl
	if len(frame) < p.DataOff+ICVLen {
		return true, false
	}
	p.Tag = t[:tl]
	if tl == SecTAGSCILen {
		p.SCI = t.SCI()
	} else {
		p.SCI = MakeSCI([6]byte(frame[6:12]), PortES)
	}
	if sl := int(t.SL()); sl != 0 {
		if len(frame) < p.DataOff+sl+ICVLen {
			return true, false
		}
		p.DataLen = sl
	} else {
		p.DataLen = len(frame) - p.DataOff - ICVLen
		if p.DataLen < ShortLenLimit {
			return true, false
		}
	}
	p.End = p.DataOff + p.DataLen + ICVLen
	return true, true
}
