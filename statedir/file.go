package statedir

import (
	"fmt"
	"os"
	"path/filepath"
)

// DefaultRunDir is the run directory: pidfile and locks. systemd's
// RuntimeDirectory=gvrouter creates it (a tmpfs, empty after a reboot).
const DefaultRunDir = "/run/gvrouter"

// PidfileName is the pidfile's name in the run directory.
const PidfileName = "gvrouter.pid"

// WriteFile writes data to path atomically: it writes a temporary file in
// the same directory, syncs it, renames it over path and syncs the
// directory, so that after a crash path holds either its old content or
// data. The directory must exist.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return fmt.Errorf("statedir: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("statedir: write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("statedir: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("statedir: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("statedir: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("statedir: write %s: %w", path, err)
	}
	return SyncDir(dir)
}

// Remove removes path and syncs its directory, so that the removal too
// survives a crash. A missing file is not an error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("statedir: %w", err)
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, making the renames and removals in it
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("statedir: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("statedir: sync %s: %w", dir, err)
	}
	return nil
}
