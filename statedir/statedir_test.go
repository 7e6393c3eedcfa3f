package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rec.json")
	for _, data := range []string{"first\n", "second, longer\n", ""} {
		if err := WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatalf("WriteFile(%q) = %v", data, err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != data {
			t.Fatalf("after WriteFile(%q): ReadFile = %q, %v", data, got, err)
		}
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, %v; want 0600", st.Mode(), err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only rec.json (no temporary files)", len(ents))
	}
	if err := WriteFile(filepath.Join(dir, "no", "such"), nil, 0o600); err == nil {
		t.Error("WriteFile into a missing directory = nil, want an error")
	}
	if err := Remove(p); err != nil {
		t.Errorf("Remove = %v", err)
	}
	if err := Remove(p); err != nil {
		t.Errorf("Remove of a missing file = %v, want nil", err)
	}
}

func TestLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ports", "1.eth0.lock")
	l, err := TryLock(p, "port eth0")
	if err != nil {
		t.Fatalf("TryLock = %v", err)
	}
	// flock conflicts between open file descriptions, in one process too.
	_, err = TryLock(p, "port eth0")
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) || le.PID != os.Getpid() {
		t.Fatalf("second TryLock = %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	if want := fmt.Sprintf("port eth0 is in use by router pid %d", os.Getpid()); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to begin %q", err, want)
	}
	if err := l.Unlock(); err != nil {
		t.Fatalf("Unlock = %v", err)
	}
	l2, err := TryLock(p, "port eth0")
	if err != nil {
		t.Fatalf("TryLock after Unlock = %v", err)
	}
	l2.Unlock()
	var nilLock *Lock
	if err := nilLock.Unlock(); err != nil {
		t.Errorf("nil Unlock = %v", err)
	}
}
