package leasefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testFile is a lease file's JSON form as a client writes one.
type testFile struct {
	Version int    `json:"version"`
	Owner   string `json:"owner"`
	Addr    string `json:"addr"`
}

const testVersion = 1

// decodeFor is a client's decoder: Decode, then ErrForeign for a lease
// saved by another owner.
func decodeFor(owner string) func([]byte) (*testFile, error) {
	return func(data []byte) (*testFile, error) {
		var f testFile
		if err := Decode(data, testVersion, &f); err != nil {
			return nil, err
		}
		if f.Owner != owner {
			return nil, ErrForeign
		}
		return &f, nil
	}
}

// TestLoad checks what Load makes of each kind of file on disk: the
// lease when it is whole and ours, nothing for a missing file, and an
// error naming the fault for the rest, never a half-read lease.
func TestLoad(t *testing.T) {
	good := Encode(testFile{Version: testVersion, Owner: "me", Addr: "192.0.2.7"})
	tests := []struct {
		name    string
		data    []byte // nil: no file
		want    *testFile
		wantErr string // substring; "" for no error
		foreign bool
	}{
		{name: "good", data: good, want: &testFile{Version: testVersion, Owner: "me", Addr: "192.0.2.7"}},
		{name: "missing"},
		{name: "truncated", data: good[:len(good)/2], wantErr: "parse: unexpected EOF"},
		{name: "empty", data: []byte{}, wantErr: "parse: EOF"},
		{name: "corrupt", data: []byte("\x00\x17garbage"), wantErr: "parse: invalid character"},
		{name: "unknown field", data: []byte(`{"version":1,"owner":"me","addr":"x","extra":1}`), wantErr: `parse: json: unknown field "extra"`},
		{name: "data after", data: append(append([]byte{}, good...), good...), wantErr: "parse: data after the lease"},
		{name: "stray bracket after", data: append(append([]byte{}, good...), ']'), wantErr: "parse: invalid character ']'"},
		{name: "other version", data: []byte(`{"version":2,"owner":"me","addr":"x"}`), wantErr: "version 2, want 1"},
		{name: "no version", data: []byte(`{"owner":"me","addr":"x"}`), wantErr: "version 0, want 1"},
		{name: "foreign", data: Encode(testFile{Version: testVersion, Owner: "you"}), wantErr: ErrForeign.Error(), foreign: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lease.json")
			if tc.data != nil {
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load(path, decodeFor("me"))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Load() error = %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Load() error = %v, want one containing %q", err, tc.wantErr)
			case errors.Is(err, ErrForeign) != tc.foreign:
				t.Fatalf("Load() error = %v: errors.Is(ErrForeign) = %v, want %v", err, !tc.foreign, tc.foreign)
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("Load() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestLoadUnreadable checks that a file that cannot be read is an error,
// not "no lease".
func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir() // a directory is not a readable file
	if got, err := Load(dir, decodeFor("me")); err == nil || got != nil {
		t.Errorf("Load(a directory) = %v, %v; want nil and an error", got, err)
	}
}

// TestSaveReplaces checks that Save writes the file with mode Perm,
// replaces a corrupt one whole (a later Load finds the new lease), and
// that Remove deletes it, a second Remove being no error.
func TestSaveReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	if err := os.WriteFile(path, []byte(strings.Repeat("corrupt ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	want := testFile{Version: testVersion, Owner: "me", Addr: "2001:db8::7"}
	if err := Save(path, Encode(want)); err != nil {
		t.Fatalf("Save() = %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, Encode(want)) {
		t.Errorf("file after Save = %q, want %q", data, Encode(want))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != Perm {
		t.Errorf("mode after Save = %v (%v), want %v", fi.Mode().Perm(), err, os.FileMode(Perm))
	}
	if got, err := Load(path, decodeFor("me")); err != nil || got == nil || *got != want {
		t.Errorf("Load() after Save = %+v, %v; want %+v", got, err, want)
	}
	if err := Remove(path); err != nil {
		t.Fatalf("Remove() = %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file after Remove: Stat() = %v, want not exist", err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("second Remove() = %v, want nil", err)
	}
}
