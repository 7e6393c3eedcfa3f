// Package leasefile keeps the DHCP clients' lease files (dhcp4client,
// dhcp6client): one versioned JSON document, read strictly and written
// atomically. A field the format does not know, data after the document
// or another version makes the file corrupt, so that a half-written or
// hand-edited lease is reported rather than half used; a crash while
// saving leaves the old lease or the new one, never part of one
// (statedir.WriteFile). Each client owns its file's fields and checks
// the lease they make; this package owns the file.
package leasefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/gvrouter/gvrouter/statedir"
)

// Perm is a lease file's mode: a lease names the router's address and
// the identity it asked with, which only root need read.
const Perm = 0o600

// ErrForeign says a lease file holds a lease saved under another client
// identity (MAC and client identifier, or DUID and IAID): not corrupt,
// just not the client's to ask for. The clients' decoders return it.
var ErrForeign = errors.New("lease is for another client")

// Encode returns v, the JSON form of a lease file, indented and ending in
// a newline. v must marshal: a lease file's form is made of plain fields.
func Encode(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // every field marshals
	}
	return append(b, '\n')
}

// Decode parses data into v, a pointer to the JSON form of a lease file,
// strictly: a field v lacks, data after the document or a "version"
// other than version is an error.
func Decode(data []byte, version int, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if dec.More() {
		return errors.New("parse: data after the lease")
	}
	var h struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	if h.Version != version {
		return fmt.Errorf("version %d, want %d", h.Version, version)
	}
	return nil
}

// Load reads path and decodes its content with decode. A missing file is
// no lease (the zero T) and no error: the client has never bound.
func Load[T any](path string, decode func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return zero, nil
	}
	if err != nil {
		return zero, err
	}
	return decode(data)
}

// Save writes data, a lease file made by Encode, to path atomically
// (statedir.WriteFile) with mode Perm.
func Save(path string, data []byte) error {
	return statedir.WriteFile(path, data, Perm)
}

// Remove deletes the lease file at path, durably (statedir.Remove): a
// lease NAKed, declined, lost or released must not be asked for again
// after a restart. A missing file is not an error.
func Remove(path string) error {
	return statedir.Remove(path)
}
