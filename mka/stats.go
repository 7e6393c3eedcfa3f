package mka

import "sync/atomic"

// Stats are the participant's counters. All fields are updated atomically
// and may be read at any time.
type Stats struct {
	// MKPDUsSent counts MKPDUs handed to the Transport.
	MKPDUsSent atomic.Uint64
	// SendErrors counts MKPDUs the Transport failed to send.
	SendErrors atomic.Uint64
	// MKPDUsReceived counts frames handed to Receive.
	MKPDUsReceived atomic.Uint64
	// MKPDUsAccepted counts MKPDUs that passed every check and were
	// processed.
	MKPDUsAccepted atomic.Uint64
	// Malformed counts frames Decode rejected, by Reason; see MalformedBy.
	Malformed [numReasons]atomic.Uint64
	// UnknownCKN counts well-formed MKPDUs of another CA (different CKN).
	UnknownCKN atomic.Uint64
	// BadAlgorithmAgility counts MKPDUs with an algorithm agility other
	// than 0x0080C201.
	BadAlgorithmAgility atomic.Uint64
	// InvalidICV counts MKPDUs whose ICV does not verify with our ICK
	// (wrong CAK, or tampering).
	InvalidICV atomic.Uint64
	// Replayed counts MKPDUs dropped because their MN was not above the
	// last one accepted from that MI.
	Replayed atomic.Uint64
	// Loopback counts our own MKPDUs received back.
	Loopback atomic.Uint64
	// MICollisions counts MKPDUs from another SCI using our MI; we then
	// choose a new MI.
	MICollisions atomic.Uint64
	// PeerTimeouts counts peers removed after the MKA Life Time without
	// an MKPDU (live or potential).
	PeerTimeouts atomic.Uint64
	// SAKsGenerated counts SAKs this participant generated as key server.
	SAKsGenerated atomic.Uint64
	// SAKsReceived counts SAKs accepted from a key server.
	SAKsReceived atomic.Uint64
	// SAKRolls counts switches of transmission to a new SAK.
	SAKRolls atomic.Uint64
	// SAKUnwrapFailed counts Distributed SAKs that did not unwrap.
	SAKUnwrapFailed atomic.Uint64
	// SAKRejected counts Distributed SAKs we cannot use: a cipher suite
	// we do not accept (Config.CipherSuite, Config.CipherSuites), a
	// confidentiality offset we lack, or any SAK while we do not desire
	// MACsec (Config.NotDesired, CapabilityNone).
	SAKRejected atomic.Uint64
	// SuiteSwitches counts changes of the SecY's cipher suite: to accept a
	// Distributed SAK of another accepted suite, or back to ours as key
	// server.
	SuiteSwitches atomic.Uint64
	// SecYErrors counts failed SecY calls.
	SecYErrors atomic.Uint64
}

// MalformedBy returns the count of frames rejected for reason r.
func (s *Stats) MalformedBy(r Reason) uint64 {
	if r >= numReasons {
		return 0
	}
	return s.Malformed[r].Load()
}

// MalformedTotal returns the count of frames Decode rejected.
func (s *Stats) MalformedTotal() uint64 {
	var n uint64
	for i := range s.Malformed {
		n += s.Malformed[i].Load()
	}
	return n
}
