package wireguard

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// Tunables.
const (
	// indexMemory is how long a receiver index the device handed out is
	// remembered: three times wireguard-go's RejectAfterTime (180 s),
	// after which no keypair made with it is accepted any more, so a
	// live session's index is never forgotten.
	indexMemory = 3 * 180 * time.Second
	// maxIndices bounds the set: a handshake message per 5 s (the
	// retry interval) for 600 peers over indexMemory. Past it the oldest
	// indices go first, and a packet for one is counted as unknown
	// though the device may still take it.
	maxIndices = 64 * 1024
)

// indexSet remembers the sender indices of the handshake messages the
// device sent (its receiver indices), so the Bind can count packets
// addressed to an index the device never handed out. The device's own
// index table is private to it, and it drops such packets silently.
type indexSet struct {
	// mu protects sent.
	mu   sync.RWMutex
	sent map[uint32]time.Time
	n    atomic.Int64 // len(sent), to skip the lock when empty
}

// noteIndex records the sender index of p if p is a handshake
// initiation or response: one per handshake, not per packet.
func (b *Bind) noteIndex(p []byte) {
	if len(p) < 8 {
		return
	}
	switch {
	case len(p) == sizeInitiation && binary.LittleEndian.Uint32(p) == msgInitiation,
		len(p) == sizeResponse && binary.LittleEndian.Uint32(p) == msgResponse:
	default:
		return
	}
	s := &b.indices
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = make(map[uint32]time.Time)
	}
	s.sent[binary.LittleEndian.Uint32(p[4:])] = now
	if len(s.sent) > maxIndices {
		s.pruneLocked(now)
	}
	s.n.Store(int64(len(s.sent)))
}

// pruneLocked drops indices older than indexMemory and, if the set is
// still full, the oldest eighth.
func (s *indexSet) pruneLocked(now time.Time) {
	for i, t := range s.sent {
		if now.Sub(t) > indexMemory {
			delete(s.sent, i)
		}
	}
	if len(s.sent) <= maxIndices {
		return
	}
	cut := now.Add(-indexMemory / 8)
	for len(s.sent) > maxIndices-maxIndices/8 {
		for i, t := range s.sent {
			if t.Before(cut) {
				delete(s.sent, i)
			}
		}
		cut = cut.Add(indexMemory / 8)
	}
}

// checkIndex counts idx if the device did not hand it out lately.
func (b *Bind) checkIndex(idx uint32) {
	s := &b.indices
	if s.n.Load() == 0 {
		b.Stats.RxUnknownIndex.Add(1)
		return
	}
	s.mu.RLock()
	t, ok := s.sent[idx]
	s.mu.RUnlock()
	if !ok || time.Since(t) > indexMemory {
		b.Stats.RxUnknownIndex.Add(1)
	}
}
