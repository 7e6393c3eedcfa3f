package macsec

import "sync/atomic"

// SecYStats are the SecY-wide counters of the 802.1AE MIB (802.1AE 10.7,
// secyStatsTable), plus a few this implementation adds (marked
// "not in the MIB"). Octet counters count Secure Data octets (the user
// EtherType and payload), not whole frames as Linux does. All fields are
// updated atomically and may be read at any time.
type SecYStats struct {
	// InPktsUntagged counts frames without a SecTAG delivered because
	// validateFrames is not Strict.
	InPktsUntagged atomic.Uint64
	// InPktsNoTag counts frames without a SecTAG dropped because
	// validateFrames is Strict.
	InPktsNoTag atomic.Uint64
	// InPktsBadTag counts frames with an invalid SecTAG (9.12), including
	// truncated ones.
	InPktsBadTag atomic.Uint64
	// InPktsNoSA counts frames for an unknown SCI delivered unverified
	// (not Strict, C=0); Linux: InPktsUnknownSCI.
	InPktsNoSA atomic.Uint64
	// InPktsNoSAError counts frames for an unknown SCI dropped (Strict or
	// C=1); Linux: InPktsNoSCI.
	InPktsNoSAError atomic.Uint64
	// InPktsOverrun counts frames dropped because crypto could not keep up;
	// always 0 here (the pipeline applies back-pressure instead).
	InPktsOverrun atomic.Uint64
	// InOctetsValidated counts Secure Data octets of integrity-only frames
	// that went through ICV verification.
	InOctetsValidated atomic.Uint64
	// InOctetsDecrypted counts Secure Data octets of encrypted frames that
	// went through decryption.
	InOctetsDecrypted atomic.Uint64
	// OutPktsUntagged counts frames sent without protection (Protect off).
	OutPktsUntagged atomic.Uint64
	// OutPktsTooLong counts frames dropped because the protected frame
	// would exceed the lower MTU.
	OutPktsTooLong atomic.Uint64
	// OutOctetsProtected counts Secure Data octets of integrity-only frames
	// sent.
	OutOctetsProtected atomic.Uint64
	// OutOctetsEncrypted counts Secure Data octets of encrypted frames sent.
	OutOctetsEncrypted atomic.Uint64
	// OutPktsNoActiveSA counts frames dropped because the encoding SA is
	// missing, exhausted or its PN reservation failed (not in the MIB).
	OutPktsNoActiveSA atomic.Uint64
	// OutPktsRunt counts frames handed to Protect that are shorter than an
	// Ethernet header (not in the MIB).
	OutPktsRunt atomic.Uint64
}

// TXSCStats are the counters of the transmit secure channel (802.1AE
// 10.7, secyTxSCStatsTable).
type TXSCStats struct {
	// OutPktsProtected counts integrity-only frames sent.
	OutPktsProtected atomic.Uint64
	// OutPktsEncrypted counts encrypted frames sent.
	OutPktsEncrypted atomic.Uint64
	// OutOctetsProtected counts Secure Data octets of integrity-only frames.
	OutOctetsProtected atomic.Uint64
	// OutOctetsEncrypted counts Secure Data octets of encrypted frames.
	OutOctetsEncrypted atomic.Uint64
}

// TXSAStats are the counters of one transmit SA (802.1AE 10.7,
// secyTxSAStatsTable).
type TXSAStats struct {
	// OutPktsProtected counts integrity-only frames sent with this SA.
	OutPktsProtected atomic.Uint64
	// OutPktsEncrypted counts encrypted frames sent with this SA.
	OutPktsEncrypted atomic.Uint64
	// OutPktsPNExhausted counts frames dropped because the SA had used its
	// last PN (not in the MIB).
	OutPktsPNExhausted atomic.Uint64
	// NextPN is the next PN the SA will use (a gauge, not a counter).
	NextPN atomic.Uint64
}

// RXSCStats are the counters of one receive secure channel (802.1AE 10.7,
// secyRxSCStatsTable).
type RXSCStats struct {
	// InPktsOK counts frames that passed verification and the replay check.
	InPktsOK atomic.Uint64
	// InPktsUnchecked counts frames delivered without verification
	// (validateFrames Disabled) or that failed it there.
	InPktsUnchecked atomic.Uint64
	// InPktsDelayed counts frames delivered with a PN below lowestPN
	// (replay protection off).
	InPktsDelayed atomic.Uint64
	// InPktsLate counts frames dropped by the replay check.
	InPktsLate atomic.Uint64
	// InPktsInvalid counts integrity-only frames that failed verification
	// and were delivered anyway (validateFrames Check).
	InPktsInvalid atomic.Uint64
	// InPktsNotValid counts frames that failed verification and were
	// dropped (Strict, or encrypted frames in any mode).
	InPktsNotValid atomic.Uint64
	// InPktsNoSA counts frames for an AN not in use delivered unverified
	// (not Strict, C=0); Linux: InPktsUnusedSA.
	InPktsNoSA atomic.Uint64
	// InPktsNoSAError counts frames for an AN not in use dropped (Strict or
	// C=1); Linux: InPktsNotUsingSA.
	InPktsNoSAError atomic.Uint64
	// InOctetsValidated counts Secure Data octets of integrity-only frames
	// verified on this SC.
	InOctetsValidated atomic.Uint64
	// InOctetsDecrypted counts Secure Data octets of encrypted frames
	// decrypted on this SC.
	InOctetsDecrypted atomic.Uint64
}

// RXSAStats are the counters of one receive SA (802.1AE 10.7,
// secyRxSAStatsTable).
type RXSAStats struct {
	// InPktsOK counts frames that passed verification and the replay check.
	InPktsOK atomic.Uint64
	// InPktsInvalid counts frames that failed verification and were
	// delivered (validateFrames Check, integrity-only).
	InPktsInvalid atomic.Uint64
	// InPktsNotValid counts frames that failed verification and were
	// dropped.
	InPktsNotValid atomic.Uint64
	// InPktsNotUsingSA counts frames for this SA, switched off, dropped
	// (Strict or C=1).
	InPktsNotUsingSA atomic.Uint64
	// InPktsUnusedSA counts frames for this SA, switched off, delivered
	// unverified.
	InPktsUnusedSA atomic.Uint64
	// NextPN is the lowest PN not yet seen valid (a gauge).
	NextPN atomic.Uint64
}

type adder interface{ Add(uint64) uint64 }

// addNZ adds v to a counter unless v is 0 (saves an atomic op).
func addNZ(c adder, v uint64) {
	if v != 0 {
		c.Add(v)
	}
}
