package mka

import (
	"time"

	"github.com/gvrouter/gvrouter/macsec"
)

// SecY is the part of a MACsec SecY the participant controls (802.1X
// 9.16, the KaY's view of the SecY). *macsec.SecY implements it. The
// participant calls it with its own lock held, from Receive, Tick or
// Rekey; implementations must not call back into the Participant.
// RemoveRXSC of *macsec.SecY waits for Protect and Verify calls in
// flight, so Receive must not be called from a SecY handler.
type SecY interface {
	// AddRXSC adds a receive SC for a live peer's SCI.
	AddRXSC(sci macsec.SCI) error
	// RemoveRXSC removes a departed peer's receive SC and its SAs.
	RemoveRXSC(sci macsec.SCI) error
	// InstallRXSA installs receive SA c.AN of SC sci; c.PN is the lowest
	// acceptable PN, c.KeyID the 16-octet KI, c.SSCI and c.Salt are set
	// for the XPN suites.
	InstallRXSA(sci macsec.SCI, c macsec.SAConfig) error
	// RemoveRXSA removes receive SA an of SC sci.
	RemoveRXSA(sci macsec.SCI, an uint8)
	// InstallTXSA installs transmit SA c.AN.
	InstallTXSA(c macsec.SAConfig) error
	// SetEncodingSA switches transmission to SA an (enableTransmit).
	SetEncodingSA(an uint8) error
	// RemoveTXSA removes transmit SA an.
	RemoveTXSA(an uint8)
	// TXSAStats returns transmit SA an's counters (NextPN is read for PN
	// exhaustion and the SAK Use lowest PN), or nil.
	TXSAStats(an uint8) *macsec.TXSAStats
}

var _ SecY = (*macsec.SecY)(nil)

// ProtectionSetter is an optional interface of a SecY whose transmit
// protection can follow the key server's choice of confidentiality
// offset. The participant calls it just before it installs a transmit SA.
// A SecY without it keeps its configured mode (macsec.Config.Encrypt);
// receivers accept both modes from any SA, so a mismatch costs privacy,
// not connectivity.
type ProtectionSetter interface {
	SetConfidentiality(offset ConfidentialityOffset) error
}

// SuiteSwitcher is an optional interface of a SecY that can change its
// cipher suite (802.1X 9.16: the KaY sets the SecY's current cipher
// suite). The participant calls it with its lock held when it accepts a
// Distributed SAK of a suite in Config.CipherSuites other than the one
// the SecY runs, before it installs any SA of that SAK; and, as key
// server, to return to Config.CipherSuite. On success the SecY operates
// on suite and holds no SA and no receive SC (the old suite's SAs cannot
// serve the new one); the participant then adds the receive SCs again.
// On error the SecY must be unchanged; the SAK is not used.
type SuiteSwitcher interface {
	SwitchCipherSuite(suite macsec.CipherSuite) error
}

// Transport sends MKPDUs on the port.
type Transport interface {
	// Send transmits frame, a complete Ethernet frame from the destination
	// address on (no FCS). The frame is the Transport's to keep. Send is
	// called without the participant's lock held, one call at a time, and
	// must not call back into the Participant.
	Send(frame []byte) error
}

// Clock tells the participant the time; tests inject a fake one.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
