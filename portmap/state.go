package portmap

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/statedir"
)

// stateVersion is the state file's format version; a file of another
// version is reported and replaced.
const stateVersion = 1

// State is what survives a restart: the epoch's start and the mappings,
// with wall-clock expiry times.
type State struct {
	Version    int       `json:"version"`
	EpochStart time.Time `json:"epoch_start"`
	Mappings   []Mapping `json:"mappings"`
}

// Encode returns the state file's content for s.
func (s *State) Encode() ([]byte, error) { return json.MarshalIndent(s, "", "\t") }

// DecodeState parses a state file's content, refusing a version it does
// not know and mappings it could not install.
func DecodeState(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("portmap: state: %w", err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("portmap: state: version %d, want %d", s.Version, stateVersion)
	}
	for i, m := range s.Mappings {
		if (m.Proto != natengine.ProtoTCP && m.Proto != natengine.ProtoUDP) || !m.Internal.Addr().Is4() || m.Internal.Port() == 0 || m.External == 0 {
			return nil, fmt.Errorf("portmap: state: mapping %d: %s %v on port %d", i, protoName(m.Proto), m.Internal, m.External)
		}
	}
	return &s, nil
}

// State returns the table's state, as the state file holds it.
func (t *Table) State() *State {
	t.mu.Lock()
	start := t.start
	t.mu.Unlock()
	return &State{Version: stateVersion, EpochStart: start, Mappings: t.Mappings()}
}

func (t *Table) saveLocked() {
	t.dirty = false
	if t.cfg.StateFile == "" {
		return
	}
	s := &State{Version: stateVersion, EpochStart: t.start, Mappings: make([]Mapping, 0, len(t.byExt))}
	for _, m := range t.byExt {
		s.Mappings = append(s.Mappings, *m)
	}
	b, err := s.Encode()
	if err == nil {
		err = statedir.WriteFile(t.cfg.StateFile, b, 0o600)
	}
	if err != nil {
		t.stats.SaveErrors.Add(1)
		t.dirty = true // try again at the next Sweep
		t.cfg.Logf("portmap: save %s: %v", t.cfg.StateFile, err)
	}
}

// Restore reads the state file and reinstalls the mappings that have
// not expired, keeping the epoch when any does (RFC 6887 section 8.5:
// the epoch continues while the mappings survive). A missing file is a
// fresh start; a corrupt one is reported, and replaced at the next save.
// It returns how many mappings it reinstalled.
func (t *Table) Restore() (int, error) {
	if t.cfg.StateFile == "" {
		return 0, nil
	}
	b, err := os.ReadFile(t.cfg.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("portmap: restore: %w", err)
	}
	s, err := DecodeState(b)
	if err != nil {
		return 0, fmt.Errorf("portmap: restore %s (starting empty): %w", t.cfg.StateFile, err)
	}
	return t.restore(s), nil
}

func (t *Table) restore(s *State) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	n := 0
	for i := range s.Mappings {
		m := s.Mappings[i].clone()
		k := extKey{port: m.External, proto: m.Proto}
		if !now.Before(m.Expires) || t.byExt[k] != nil || len(t.byExt) >= t.cfg.Policy.maxTotal() {
			continue
		}
		// The policy may have changed since the file was written.
		if !t.cfg.Policy.Permits(m.Internal.Addr(), m.Internal.Port(), m.External) ||
			t.cfg.Policy.Secure && m.Client.IsValid() && m.Client != m.Internal.Addr() {
			t.cfg.Logf("portmap: restore %s %v on port %d: no longer permitted", protoName(m.Proto), m.Internal, m.External)
			continue
		}
		if m.Expires.Sub(now) > t.cfg.Policy.Clamp(m.Expires.Sub(now)) {
			m.Expires = now.Add(t.cfg.Policy.Clamp(m.Expires.Sub(now)))
		}
		if err := t.install(&m, m.Peers); err != nil {
			t.cfg.Logf("portmap: restore %s %v on port %d: %v", protoName(m.Proto), m.Internal, m.External, err)
			continue
		}
		t.byExt[k] = &m
		t.stats.Restored.Add(1)
		n++
	}
	if n > 0 && !s.EpochStart.IsZero() && !s.EpochStart.After(now) {
		t.start = s.EpochStart
	}
	t.saveLocked()
	return n
}
