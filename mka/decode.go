package mka

import (
	"fmt"

	"github.com/gvrouter/gvrouter/macsec"
)

// Reason says why Decode rejected a frame. Stats count malformed frames by
// Reason.
type Reason uint8

// Decode failure reasons (802.1X-2020 11.11.2 validation, plus framing).
const (
	// ReasonShortFrame: shorter than the Ethernet and EAPOL headers.
	ReasonShortFrame Reason = iota
	// ReasonEtherType: not EtherType 0x888E.
	ReasonEtherType
	// ReasonNotMKA: an EAPOL packet, but not of type EAPOL-MKA.
	ReasonNotMKA
	// ReasonEAPOLLength: the EAPOL body length exceeds the frame, or the
	// body cannot hold a Basic Parameter Set and an ICV.
	ReasonEAPOLLength
	// ReasonBasicParams: the Basic Parameter Set is malformed (version 0,
	// body shorter than 29 octets).
	ReasonBasicParams
	// ReasonCKNLength: the CAK name is longer than 32 octets.
	ReasonCKNLength
	// ReasonTruncated: a parameter set runs past the body (or into the ICV).
	ReasonTruncated
	// ReasonPeerList: a peer list body is not a multiple of 16 octets.
	ReasonPeerList
	// ReasonSAKUse: a SAK Use body is neither 0 nor 40 octets.
	ReasonSAKUse
	// ReasonDistSAK: a Distributed SAK body has an impossible length, or
	// its cipher suite does not match its wrapped key length.
	ReasonDistSAK
	// ReasonXPN: an XPN parameter set body is neither 0 nor 8 octets.
	ReasonXPN
	// ReasonICV: no room for the ICV, or an ICV Indicator that is not 16
	// octets at the very end.
	ReasonICV
	// ReasonDuplicate: a parameter set type occurs twice.
	ReasonDuplicate
	// ReasonEAPOLVersion: an EAPOL protocol version below 3. EAPOL-MKA
	// exists from version 3 (802.1X-2010) on, so no MKA speaker sends a
	// lower one (wpa_supplicant drops them too); higher versions are
	// accepted, for forward compatibility.
	ReasonEAPOLVersion
	numReasons
)

var reasonNames = [numReasons]string{
	"short frame", "ethertype", "not eapol-mka", "eapol length", "basic parameter set",
	"ckn length", "truncated parameter set", "peer list length", "sak use length",
	"distributed sak", "xpn parameter set", "icv", "duplicate parameter set",
	"eapol version",
}

// String returns a short lowercase name, e.g. "peer list length".
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// DecodeError is the error Decode returns; Reason says what was wrong. Use
// errors.As to get it.
type DecodeError struct {
	Reason Reason
}

// Error implements error.
func (e *DecodeError) Error() string { return "mka: malformed mkpdu: " + e.Reason.String() }

// decodeErrs holds one preallocated error per reason, so that rejecting a
// frame does not allocate.
var decodeErrs = func() (e [numReasons]*DecodeError) {
	for i := range e {
		e[i] = &DecodeError{Reason: Reason(i)}
	}
	return e
}()

func bad(r Reason) error { return decodeErrs[r] }

// Decode parses frame, an Ethernet frame from the destination address on
// (VLAN tags removed, no FCS), into m. Octets after the EAPOL body (Ethernet
// padding) are ignored. Decode checks every length but not the ICV (see
// [ICVKey.Verify]) nor whether the CKN or algorithm agility are ours. m's
// slices point into frame. Decode does not allocate; on error m holds
// partial results.
func Decode(frame []byte, m *MKPDU) error {
	*m = MKPDU{}
	if len(frame) < ethHeaderLen+eapolHeaderLen {
		return bad(ReasonShortFrame)
	}
	copy(m.DA[:], frame[0:6])
	copy(m.SA[:], frame[6:12])
	if frame[12] != EtherType>>8 || frame[13] != EtherType&0xff {
		return bad(ReasonEtherType)
	}
	m.EAPOLVersion = frame[14]
	if frame[15] != EAPOLTypeMKA {
		return bad(ReasonNotMKA)
	}
	if m.EAPOLVersion < EAPOLVersion {
		return bad(ReasonEAPOLVersion)
	}
	bodyLen := int(frame[16])<<8 | int(frame[17])
	start := ethHeaderLen + eapolHeaderLen
	if bodyLen > len(frame)-start || bodyLen < paramHeaderLen+basicFixedLen+1+ICVLen {
		return bad(ReasonEAPOLLength)
	}
	end := start + bodyLen // the ICV sits at end-16 unless indicated
	off := start

	// Basic Parameter Set, always first.
	h := frame[off:]
	n := int(h[2]&0x0f)<<8 | int(h[3])
	if h[0] == 0 || n < basicFixedLen+1 {
		return bad(ReasonBasicParams)
	}
	if n > basicFixedLen+MaxCKNLen {
		return bad(ReasonCKNLength)
	}
	padded := (n + 3) &^ 3
	if off+paramHeaderLen+padded > end-ICVLen {
		return bad(ReasonTruncated)
	}
	b := &m.Basic
	b.Version = h[0]
	b.KeyServerPriority = h[1]
	b.KeyServer = h[2]&0x80 != 0
	b.MACsecDesired = h[2]&0x40 != 0
	b.Capability = Capability(h[2] >> 4 & 3)
	body := h[paramHeaderLen : paramHeaderLen+n]
	b.SCI = macsec.SCI(be64(body))
	copy(b.MI[:], body[8:20])
	b.MN = be32(body[20:])
	b.AlgorithmAgility = be32(body[24:])
	b.CKN = body[basicFixedLen:n:n]
	off += paramHeaderLen + padded

	var seen uint16 // bit per known parameter set type
	for off < end-ICVLen {
		if end-ICVLen-off < paramHeaderLen {
			return bad(ReasonTruncated)
		}
		h := frame[off:end]
		typ := h[0]
		n := int(h[2]&0x0f)<<8 | int(h[3])
		padded := (n + 3) &^ 3
		if typ == paramICVIndicator {
			// The ICV Indicator carries the ICV as its body and ends the
			// MKPDU.
			if n != ICVLen || off+paramHeaderLen+ICVLen != end {
				return bad(ReasonICV)
			}
			m.ICVIndicator = true
			off += paramHeaderLen
			break
		}
		if off+paramHeaderLen+padded > end-ICVLen {
			return bad(ReasonTruncated)
		}
		if typ <= paramXPN {
			if seen&(1<<typ) != 0 {
				return bad(ReasonDuplicate)
			}
			seen |= 1 << typ
		}
		body := h[paramHeaderLen : paramHeaderLen+n : paramHeaderLen+n]
		switch typ {
		case paramLivePeerList, paramPotentialPeerList:
			if n%peerEntryLen != 0 {
				return bad(ReasonPeerList)
			}
			if typ == paramLivePeerList {
				m.Live = PeerList(body)
			} else {
				m.Potential = PeerList(body)
			}
		case paramSAKUse:
			if n != 0 && n != sakUseBodyLen {
				return bad(ReasonSAKUse)
			}
			decodeSAKUse(&m.SAKUse, h[1], h[2], body)
			m.HasSAKUse = true
		case paramDistributedSAK:
			if err := decodeDistSAK(&m.DistSAK, h[1], body); err != nil {
				return err
			}
			m.HasDistSAK = true
		case paramXPN:
			if n != 0 && n != xpnBodyLen {
				return bad(ReasonXPN)
			}
			m.XPN.SuspensionTime = h[1]
			if n == xpnBodyLen {
				m.XPN.LatestLowestPNHigh = be32(body)
				m.XPN.OldLowestPNHigh = be32(body[4:])
			}
			m.HasXPN = true
		case paramAnnouncement:
			m.Announcement = body
		default:
			// Distributed CAK, KMD and types we do not know are skipped:
			// receivers ignore parameter sets they do not use (11.11.3).
		}
		off += paramHeaderLen + padded
	}
	if off != end-ICVLen {
		return bad(ReasonICV)
	}
	m.icvAt = off
	copy(m.ICV[:], frame[off:end])
	return nil
}

func decodeSAKUse(u *SAKUse, o1, o2 byte, body []byte) {
	u.LatestAN = o1 >> 6
	u.LatestTX = o1&0x20 != 0
	u.LatestRX = o1&0x10 != 0
	u.OldAN = o1 >> 2 & 3
	u.OldTX = o1&0x02 != 0
	u.OldRX = o1&0x01 != 0
	u.PlainTX = o2&0x80 != 0
	u.PlainRX = o2&0x40 != 0
	u.DelayProtect = o2&0x10 != 0
	if len(body) == 0 {
		u.Empty = true
		return
	}
	copy(u.Latest.MI[:], body[0:12])
	u.Latest.KN = be32(body[12:])
	u.LatestLowestPN = be32(body[16:])
	copy(u.Old.MI[:], body[20:32])
	u.Old.KN = be32(body[32:])
	u.OldLowestPN = be32(body[36:])
}

// Distributed SAK body lengths: KN + wrapped 128-bit key (default suite),
// KN + suite + wrapped 128-bit key, KN + suite + wrapped 256-bit key.
const (
	distSAKDefaultLen = 4 + 24
	distSAK128Len     = 4 + 8 + 24
	distSAK256Len     = 4 + 8 + 40
)

func decodeDistSAK(d *DistributedSAK, o1 byte, body []byte) error {
	d.AN = o1 >> 6
	d.Offset = ConfidentialityOffset(o1 >> 4 & 3)
	switch len(body) {
	case 0:
		d.Empty = true
		return nil
	case distSAKDefaultLen:
		d.KN = be32(body)
		d.CipherSuite = macsec.GCMAES128
		d.WrappedKey = body[4:]
		return nil
	case distSAK128Len, distSAK256Len:
		d.KN = be32(body)
		d.CipherSuite = macsec.CipherSuite(be64(body[4:]))
		d.WrappedKey = body[12:]
		if k := d.CipherSuite.KeyLen(); k != 0 && k+8 != len(d.WrappedKey) {
			return bad(ReasonDistSAK)
		}
		return nil
	}
	return bad(ReasonDistSAK)
}
