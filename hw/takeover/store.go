package takeover

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/statedir"
)

// ErrCorrupt means a record file could not be read as a record: it is
// truncated (a crash of something other than our atomic writes, a full
// disk, a hand edit) or not ours. Load's errors that wrap it name the file.
var ErrCorrupt = errors.New("takeover: corrupt record")

// VersionError means a record was written in a format this router does
// not know, most likely by a newer router: it is refused, not guessed at.
type VersionError struct {
	Path    string
	Version int
}

// Error implements error.
func (e *VersionError) Error() string {
	return fmt.Sprintf("takeover: %s is a version %d record, this router reads version %d: restore with the router that wrote it (gvrouter restore), or remove the file once the port is as it should be",
		e.Path, e.Version, Version)
}

// Store keeps records in a directory, one file per port. Its methods are
// safe for concurrent use on different ports.
type Store struct {
	dir string
}

// Dir is the directory of records in a state directory.
func Dir(stateDir string) string { return filepath.Join(stateDir, "ports") }

// NewStore returns the store of stateDir, creating its directory (mode
// 0700) if needed.
func NewStore(stateDir string) (*Store, error) {
	dir := Dir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Path is the file of port's record.
func (s *Store) Path(port string) string { return filepath.Join(s.dir, port+".json") }

// Load returns port's record, or nil and no error if there is none. A
// file that is not a record gives an error wrapping ErrCorrupt; a record
// of another version a *VersionError.
func (s *Store) Load(port string) (*Record, error) {
	path := s.Path(port)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	return decode(path, port, b)
}

func decode(path, port string, b []byte) (*Record, error) {
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
	}
	if v.Version == nil {
		return nil, fmt.Errorf("%w %s: no version", ErrCorrupt, path)
	}
	if *v.Version != Version {
		return nil, &VersionError{Path: path, Version: *v.Version}
	}
	r := new(Record)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
	}
	if r.Port != port {
		return nil, fmt.Errorf("%w %s: record of port %q", ErrCorrupt, path, r.Port)
	}
	return r, nil
}

// Save writes r atomically as its port's record.
func (s *Store) Save(r *Record) error {
	if r.Version == 0 {
		r.Version = Version
	}
	b, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		return fmt.Errorf("takeover: %w", err)
	}
	return statedir.WriteFile(s.Path(r.Port), append(b, '\n'), 0o600)
}

// Remove removes port's record.
func (s *Store) Remove(port string) error { return statedir.Remove(s.Path(port)) }

// SetAside renames port's unreadable record to <port>.json.bad-<time>, so
// that a new record can be written while the old one stays for a person
// to read. It returns the new name.
func (s *Store) SetAside(port string) (string, error) {
	to := s.Path(port) + ".bad-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(s.Path(port), to); err != nil {
		return "", fmt.Errorf("takeover: %w", err)
	}
	return to, statedir.SyncDir(s.dir)
}

// Ports returns the names of the ports that have a record, sorted.
func (s *Store) Ports() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("takeover: %w", err)
	}
	var ports []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		ports = append(ports, strings.TrimSuffix(name, ".json"))
	}
	slices.Sort(ports)
	return ports, nil
}

// Equal reports whether two records hold the same content (the test of a
// save that changes nothing).
func Equal(a, b *Record) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
