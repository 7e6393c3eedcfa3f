package macsec

import (
	"reflect"
	"sync/atomic"
)

// Snapshot is a point-in-time copy of every counter of a SecY, keyed by
// the 802.1AE MIB names, for status pages, JSON and metrics. It holds no
// keys.
type Snapshot struct {
	// Cipher is the cipher suite, e.g. "gcm-aes-128".
	Cipher string `json:"cipher"`
	// EncodingSA is the transmit SC's encoding SA.
	EncodingSA uint8 `json:"encoding_sa"`
	// SecY holds the SecYStats fields, e.g. "InPktsBadTag": 0.
	SecY map[string]uint64 `json:"secy"`
	// TXSC holds the TXSCStats fields.
	TXSC map[string]uint64 `json:"tx_sc"`
	// TXSA holds the TXSAStats fields per installed AN.
	TXSA map[uint8]map[string]uint64 `json:"tx_sa"`
	// RXSC holds each receive SC by SCI (16 hex digits).
	RXSC map[string]RXSCSnapshot `json:"rx_sc"`
	// WorkerFrames is SecY.WorkerFrames.
	WorkerFrames []uint64 `json:"worker_frames"`
}

// RXSCSnapshot is one receive SC in a Snapshot.
type RXSCSnapshot struct {
	// Counters holds the RXSCStats fields.
	Counters map[string]uint64 `json:"counters"`
	// SA holds the RXSAStats fields per installed AN.
	SA map[uint8]map[string]uint64 `json:"sa"`
}

// Snapshot copies all counters. It allocates; it is for the control path.
func (s *SecY) Snapshot() Snapshot {
	snap := Snapshot{
		Cipher:       s.cfg.Cipher.String(),
		SecY:         counters(&s.stats),
		TXSC:         counters(&s.txStats),
		TXSA:         map[uint8]map[string]uint64{},
		RXSC:         map[string]RXSCSnapshot{},
		WorkerFrames: s.WorkerFrames(),
	}
	s.txMu.Lock()
	snap.EncodingSA = s.encodingSA
	sas := s.txSAs
	s.txMu.Unlock()
	for an, sa := range sas {
		if sa != nil {
			snap.TXSA[uint8(an)] = counters(&sa.stats)
		}
	}
	for sci, sc := range *s.rxSCs.Load() {
		r := RXSCSnapshot{Counters: counters(&sc.stats), SA: map[uint8]map[string]uint64{}}
		for an := range sc.sas {
			if sa := sc.sas[an].Load(); sa != nil {
				r.SA[uint8(an)] = counters(&sa.stats)
			}
		}
		snap.RXSC[sci.String()] = r
	}
	return snap
}

var atomicUint64 = reflect.TypeFor[atomic.Uint64]()

// counters returns the atomic.Uint64 fields of the struct p points to,
// by field name.
func counters(p any) map[string]uint64 {
	v := reflect.ValueOf(p).Elem()
	m := make(map[string]uint64, v.NumField())
	for i := range v.NumField() {
		if f := v.Field(i); f.Type() == atomicUint64 {
			m[v.Type().Field(i).Name] = f.Addr().Interface().(*atomic.Uint64).Load()
		}
	}
	return m
}
