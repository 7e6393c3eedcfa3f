package macsec

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// PNStoreID names the persistent PN state of one transmit SA: the same
// SCI, AN and key identifier mean the same SAK, under which no PN may ever
// repeat, across restarts.
type PNStoreID struct {
	// SCI is the transmitting SecY's SCI, e.g. 0x12153524c0895e81.
	SCI SCI
	// AN is the association number, 0..3.
	AN uint8
	// KeyID is the key identifier as hex (as `ip macsec ... key 01 ...`),
	// e.g. "01".
	KeyID string
}

// PNStore keeps a high-water mark per transmit SA. A mark M means that PNs
// below M may have been used. Before a SecY hands out PNs in [a, b) it
// makes sure a mark >= b is durable, so after a crash it starts at or above
// the stored mark and never reuses a PN. Implementations must be safe for
// concurrent use.
type PNStore interface {
	// Load returns the stored mark for id, or 0 and a nil error if none was
	// ever stored. Any other failure is an error: the SA then refuses to
	// start.
	Load(id PNStoreID) (uint64, error)
	// Reserve durably stores mark for id and returns only once it is
	// durable (written and synced).
	Reserve(id PNStoreID, mark uint64) error
}

// FileStore is a PNStore that keeps one small file per SA in a directory:
// an 8-octet big-endian mark and its CRC-32. Reserve writes a temporary
// file, fsyncs it, renames it over the old one and fsyncs the directory.
// FileStore is safe for concurrent use.
type FileStore struct {
	dir string
	mu  sync.Mutex // serialises writes to the same file
}

var _ PNStore = (*FileStore)(nil)

// NewFileStore returns a FileStore in dir, creating dir (mode 0700) if
// needed.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("macsec: pn store: %w", err)
	}
	return &FileStore{dir: dir}, nil
}

func (s *FileStore) path(id PNStoreID) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s-an%d-%s.pn", id.SCI, id.AN, hex.EncodeToString([]byte(id.KeyID))))
}

// ErrCorruptPNStore means a stored high-water mark failed its checksum or
// has the wrong size; the SA must not start from it.
var ErrCorruptPNStore = errors.New("macsec: pn store: corrupt high-water mark")

// Load implements PNStore.
func (s *FileStore) Load(id PNStoreID) (uint64, error) {
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("macsec: pn store: %w", err)
	}
	if len(b) != 12 || crc32.ChecksumIEEE(b[:8]) != binary.BigEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("%w: %s", ErrCorruptPNStore, s.path(id))
	}
	return binary.BigEndian.Uint64(b[:8]), nil
}

// Reserve implements PNStore.
func (s *FileStore) Reserve(id PNStoreID, mark uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], mark)
	binary.BigEndian.PutUint32(b[8:], crc32.ChecksumIEEE(b[:8]))
	p := s.path(id)
	tmp := p + ".tmp"
	if err := writeSync(tmp, b[:]); err != nil {
		return fmt.Errorf("macsec: pn store: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("macsec: pn store: %w", err)
	}
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("macsec: pn store: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("macsec: pn store: sync %s: %w", s.dir, err)
	}
	return nil
}

func writeSync(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
