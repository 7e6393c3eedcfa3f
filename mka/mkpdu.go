package mka

import (
	"encoding/hex"
	"fmt"

	"github.com/gvrouter/gvrouter/macsec"
)

// Frame and EAPOL constants (802.1X-2020 11.1-11.3, 11.11).
const (
	// EtherType is the PAE EtherType of EAPOL frames.
	EtherType = 0x888E
	// EAPOLVersion is the EAPOL protocol version MKA needs (802.1X-2010
	// and later; wpa_supplicant's eapol_version=3).
	EAPOLVersion = 3
	// EAPOLTypeMKA is the EAPOL packet type of an MKPDU (Table 11-3).
	EAPOLTypeMKA = 5
	// AlgorithmAgility is the MKA algorithm agility value of 802.1X-2010
	// and later (Table 9-1): AES-CMAC ICVs, the AES-CMAC KDF, AES Key Wrap.
	AlgorithmAgility = 0x0080C201
	// ICVLen is the length of the MKPDU ICV with AlgorithmAgility.
	ICVLen = 16
	// DefaultVersion is the MKA version we send (802.1X-2020).
	DefaultVersion = 3

	ethHeaderLen   = 14
	eapolHeaderLen = 4
	paramHeaderLen = 4
	basicFixedLen  = 28 // SCI, MI, MN, algorithm agility
	peerEntryLen   = 16 // MI, MN
	sakUseBodyLen  = 40
	xpnBodyLen     = 8
	maxBodyLen     = 0x0fff // 12-bit parameter set body length
)

// Parameter set types (Table 11-7). The Basic Parameter Set has no type: it
// is always first and its first octet is the MKA version.
const (
	paramLivePeerList      = 1
	paramPotentialPeerList = 2
	paramSAKUse            = 3
	paramDistributedSAK    = 4
	paramDistributedCAK    = 5
	paramKMD               = 6
	paramAnnouncement      = 7
	paramXPN               = 8
	paramICVIndicator      = 255
)

// PAEGroupAddress is the destination of MKPDUs on a point-to-point link:
// the Nearest non-TPMR Bridge group address, wpa_supplicant's default
// (802.1X-2020 Table 11-1).
var PAEGroupAddress = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x03}

// MI is a 96-bit Member Identifier (802.1X 9.4.2), chosen at random by
// each participant instance.
type MI [12]byte

// String returns the MI in hex.
func (m MI) String() string { return hex.EncodeToString(m[:]) }

// KI is a Key Identifier: the key server's MI and the Key Number it gave
// the SAK (802.1X 9.8).
type KI struct {
	MI MI
	KN uint32
}

// String returns MI/KN.
func (k KI) String() string { return fmt.Sprintf("%v/%d", k.MI, k.KN) }

// Capability is the MACsec Capability of a participant (802.1X 11.11.2,
// Basic Parameter Set).
type Capability uint8

// MACsec capabilities.
const (
	// CapabilityNone: MACsec not implemented.
	CapabilityNone Capability = 0
	// CapabilityIntegrity: integrity without confidentiality.
	CapabilityIntegrity Capability = 1
	// CapabilityConfidentiality: integrity, and confidentiality with
	// offset 0 (what macsec.SecY and Linux offer).
	CapabilityConfidentiality Capability = 2
	// CapabilityConfidentialityOffsets: confidentiality with offsets 0,
	// 30 and 50.
	CapabilityConfidentialityOffsets Capability = 3
)

// ConfidentialityOffset is the field of the Distributed SAK parameter set
// that tells how the SAK is to be used (802.1X 11.11.3).
type ConfidentialityOffset uint8

// Confidentiality offsets.
const (
	// IntegrityOnly: confidentiality not used.
	IntegrityOnly ConfidentialityOffset = 0
	// Offset0: confidentiality with offset 0.
	Offset0 ConfidentialityOffset = 1
	// Offset30: the first 30 octets of user data stay in the clear.
	Offset30 ConfidentialityOffset = 2
	// Offset50: the first 50 octets of user data stay in the clear.
	Offset50 ConfidentialityOffset = 3
)

// String returns "integrity-only", "offset-0", "offset-30" or "offset-50".
func (c ConfidentialityOffset) String() string {
	switch c {
	case IntegrityOnly:
		return "integrity-only"
	case Offset0:
		return "offset-0"
	case Offset30:
		return "offset-30"
	case Offset50:
		return "offset-50"
	}
	return fmt.Sprintf("offset(%d)", uint8(c))
}

// BasicParams is the Basic Parameter Set (802.1X 11.11.2, Figure 11-8).
type BasicParams struct {
	// Version is the MKA version, 1..3 for 802.1X-2010..2020; later
	// versions are parsed as version 3.
	Version uint8
	// KeyServerPriority: lower is preferred; 0xff means never key server.
	KeyServerPriority uint8
	// KeyServer is set by the elected key server.
	KeyServer bool
	// MACsecDesired is set when the participant wants MACsec used.
	MACsecDesired bool
	// Capability is the participant's MACsec capability.
	Capability Capability
	// SCI is the SCI of the participant's SecY, e.g. 0x5254001301560001.
	SCI macsec.SCI
	// MI and MN are the actor's Member Identifier and Message Number.
	MI MI
	MN uint32
	// AlgorithmAgility is AlgorithmAgility for every known peer.
	AlgorithmAgility uint32
	// CKN is the CAK name, 1..32 octets (a view into the decoded frame).
	CKN []byte
}

// PeerList is the body of a Live or Potential Peer List parameter set
// (802.1X 11.11.2, Figure 11-9): MI and MN pairs, 16 octets each. A
// decoded PeerList is a view into the frame; nil means the set is absent.
type PeerList []byte

// Len returns the number of peers in l.
func (l PeerList) Len() int { return len(l) / peerEntryLen }

// At returns the i-th peer's MI and MN.
func (l PeerList) At(i int) (MI, uint32) {
	e := l[i*peerEntryLen : (i+1)*peerEntryLen]
	var mi MI
	copy(mi[:], e)
	return mi, be32(e[12:])
}

// Find returns the MN listed for mi.
func (l PeerList) Find(mi MI) (uint32, bool) {
	for i := 0; i+peerEntryLen <= len(l); i += peerEntryLen {
		if MI(l[i:i+12]) == mi {
			return be32(l[i+12:]), true
		}
	}
	return 0, false
}

// AppendPeer returns l with the pair mi, mn appended.
func AppendPeer(l PeerList, mi MI, mn uint32) PeerList {
	if l == nil {
		l = PeerList{}
	}
	l = append(l, mi[:]...)
	return PeerList(put32(l, mn))
}

// SAKUse is the MACsec SAK Use parameter set (802.1X 11.11.3, Figure
// 11-10): which keys the sender receives and transmits with.
type SAKUse struct {
	// LatestAN, LatestTX and LatestRX describe the latest key: its AN,
	// and whether the sender transmits and receives with it.
	LatestAN           uint8
	LatestTX, LatestRX bool
	// OldAN, OldTX and OldRX describe the old key the same way.
	OldAN        uint8
	OldTX, OldRX bool
	// PlainTX and PlainRX: the sender transmits / accepts unprotected
	// frames.
	PlainTX, PlainRX bool
	// DelayProtect: the sender reports lowest PNs for delay protection.
	DelayProtect bool
	// Empty: the body is absent (no key in use); the fields below are
	// then zero.
	Empty bool
	// Latest and Old identify the keys; the lowest PNs are those used for
	// transmission in the last MKA Hello Time (low 32 bits with XPN).
	Latest         KI
	LatestLowestPN uint32
	Old            KI
	OldLowestPN    uint32
}

// DistributedSAK is the Distributed SAK parameter set (802.1X 11.11.3,
// Figure 11-11).
type DistributedSAK struct {
	// AN is the association number the key server chose.
	AN uint8
	// Offset says whether and how confidentiality is used.
	Offset ConfidentialityOffset
	// Empty: no body, "do not use MACsec"; the fields below are then zero.
	Empty bool
	// KN is the key number.
	KN uint32
	// CipherSuite is the SAK's suite. GCM-AES-128, the default, is not
	// sent on the wire (body length 28, as wpa_supplicant does).
	CipherSuite macsec.CipherSuite
	// WrappedKey is the SAK wrapped with the KEK: 24 octets for a 16-octet
	// SAK, 40 for a 32-octet one (a view into the decoded frame).
	WrappedKey []byte
}

// XPNParams is the XPN parameter set (802.1X-2020 11.11.3, Figure 11-13):
// the high halves of the lowest PNs in SAK Use.
type XPNParams struct {
	SuspensionTime     uint8
	LatestLowestPNHigh uint32
	OldLowestPNHigh    uint32
}

// MKPDU is a decoded or to-be-encoded MKPDU with its Ethernet addresses.
// Slices point into the decoded frame and are valid as long as it is.
type MKPDU struct {
	DA, SA       [6]byte
	EAPOLVersion uint8
	Basic        BasicParams
	// Live and Potential are the peer lists; nil when absent.
	Live, Potential PeerList
	HasSAKUse       bool
	SAKUse          SAKUse
	HasDistSAK      bool
	DistSAK         DistributedSAK
	HasXPN          bool
	XPN             XPNParams
	// Announcement is the body of an Announcement parameter set, which we
	// do not interpret; nil when absent.
	Announcement []byte
	// ICVIndicator: the ICV is (to be) carried in an ICV Indicator
	// parameter set rather than bare at the end (both are valid; 11.11.3).
	ICVIndicator bool
	// ICV is the received ICV (decode only; the encoder computes it).
	ICV [ICVLen]byte

	icvAt int // offset of the ICV in the decoded frame
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func be64(b []byte) uint64 { return uint64(be32(b))<<32 | uint64(be32(b[4:])) }

func put32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func put64(b []byte, v uint64) []byte { return put32(put32(b, uint32(v>>32)), uint32(v)) }

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}
