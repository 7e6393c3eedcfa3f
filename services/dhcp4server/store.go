package dhcp4server

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/statedir"
)

// fileVersion is the lease file's format version.
const fileVersion = 1

// leaseFile is the lease file's JSON.
type leaseFile struct {
	Version  int            `json:"version"`
	Leases   []fileLease    `json:"leases"`
	Declined []fileDeclined `json:"declined,omitempty"`
}

type fileLease struct {
	MAC      string     `json:"mac"`
	ClientID string     `json:"client_id,omitempty"` // hex
	Addr     netip.Addr `json:"addr"`
	Hostname string     `json:"hostname,omitempty"`
	Expiry   time.Time  `json:"expiry"`
	Released bool       `json:"released,omitempty"`
	Static   bool       `json:"static,omitempty"`
}

type fileDeclined struct {
	Addr  netip.Addr `json:"addr"`
	Until time.Time  `json:"until"`
}

// marshalLocked encodes the bindings the file keeps: every lease ever
// acknowledged (bound, expired or released: the previous-address records
// of RFC 2131 §4.3.1) and the quarantines. Offers are not kept.
func (s *Server) marshalLocked() []byte {
	f := leaseFile{Version: fileVersion, Leases: []fileLease{}}
	for _, b := range s.byAddr {
		switch {
		case b.key == "" && !b.quarantine.IsZero():
			f.Declined = append(f.Declined, fileDeclined{Addr: b.addr, Until: b.quarantine.UTC()})
		case !b.expiry.IsZero():
			l := fileLease{MAC: b.mac.String(), Addr: b.addr, Hostname: b.hostname, Expiry: b.expiry.UTC(),
				Released: b.released, Static: b.static != nil}
			if b.clientID != nil {
				l.ClientID = hex.EncodeToString(b.clientID)
			}
			f.Leases = append(f.Leases, l)
		}
	}
	slices.SortFunc(f.Leases, func(a, b fileLease) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(f.Declined, func(a, b fileDeclined) int { return a.Addr.Compare(b.Addr) })
	data, err := json.MarshalIndent(f, "", "\t")
	if err != nil {
		panic(err) // only plain types: cannot fail
	}
	return append(data, '\n')
}

// load reads the lease file into the table (from New). A missing file is
// an empty table. An unreadable one is reported. A corrupt one (not JSON,
// another version, entries that break the table's rules) is reported,
// kept beside as .corrupt and replaced by what could be read of it.
// Entries that the config no longer allows (outside the range, a MAC now
// static) are dropped without calling the file corrupt.
func (s *Server) load() {
	path := s.cfg.LeaseFile
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// A crash mid-write leaves statedir's temporary file behind.
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+base+".tmp*")); len(stale) > 0 {
		for _, f := range stale {
			os.Remove(f)
		}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		s.problem = fmt.Sprintf("lease file %s unreadable: %v", path, err)
		s.log.Error("dhcp4server: " + s.problem)
		return
	}
	var f leaseFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&f)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON document")
	}
	if err == nil && f.Version != fileVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, fileVersion)
	}
	if err != nil {
		s.corrupt(fmt.Sprintf("lease file %s is corrupt (%v); replaced by an empty table", path, err), data)
		return
	}
	now := s.cfg.Clock.Now()
	bad, dropped := 0, 0
	for _, l := range f.Leases {
		mac, err := net.ParseMAC(l.MAC)
		cid, cerr := hex.DecodeString(l.ClientID)
		if err != nil || len(mac) != 6 || cerr != nil || !l.Addr.Is4() || l.Expiry.IsZero() || len(l.ClientID) > 2*255 {
			bad++
			continue
		}
		if len(cid) == 0 {
			cid = nil
		}
		host := sanitizeHostname(l.Hostname)
		if st := s.statics[string(mac)]; st != nil || l.Static {
			if st == nil || st.addr != l.Addr || !l.Static {
				dropped++ // the static lease changed, or a dynamic lease's MAC became static
				continue
			}
			st.expiry, st.released, st.hostname, st.clientID = l.Expiry, l.Released, host, cid
			continue
		}
		key := clientKey(mac, cid, false)
		if !s.inPool(l.Addr) {
			dropped++
			continue
		}
		if s.byAddr[l.Addr] != nil || s.byClient[key] != nil {
			bad++ // two leases for one address or one client
			continue
		}
		b := &binding{key: key, mac: mac, clientID: cid, addr: l.Addr, hostname: host,
			expiry: l.Expiry, released: l.Released, expiredSeen: !l.Expiry.After(now)}
		s.byAddr[l.Addr] = b
		s.byClient[key] = b
		s.inRange++
		s.touch(b)
	}
	for _, d := range f.Declined {
		if !d.Addr.Is4() || !s.inPool(d.Addr) || s.byAddr[d.Addr] != nil {
			bad++
			continue
		}
		if !d.Until.After(now) {
			continue
		}
		q := &binding{addr: d.Addr, quarantine: d.Until}
		s.byAddr[d.Addr] = q
		s.inRange++
		s.touch(q)
	}
	switch {
	case bad > 0:
		s.corrupt(fmt.Sprintf("lease file %s is corrupt: %d inconsistent entries dropped, the rest kept", path, bad), data)
	case dropped > 0:
		s.log.Info("dhcp4server: leases the config no longer allows were dropped", "file", path, "dropped", dropped)
		s.gen++
		s.commitNow()
	}
}

// corrupt reports a bad lease file, keeps it as .corrupt for a post
// mortem and writes the table in its place.
func (s *Server) corrupt(msg string, data []byte) {
	s.stats.LeaseFileCorrupt.Add(1)
	s.problem = msg
	s.log.Error("dhcp4server: " + msg)
	if err := statedir.WriteFile(s.cfg.LeaseFile+".corrupt", data, 0o600); err != nil {
		s.log.Warn("dhcp4server: keeping the corrupt lease file", "err", err)
	}
	s.gen++
	s.commitNow()
}

// commitNow writes the table if it changed since the last write. It
// returns the generation the file now holds, or the write's error.
func (s *Server) commitNow() (uint64, error) {
	s.mu.Lock()
	gen := s.gen
	if gen == s.durable {
		s.mu.Unlock()
		return gen, nil
	}
	data := s.marshalLocked()
	s.mu.Unlock()

	s.stats.LeaseWrites.Add(1)
	err := statedir.WriteFile(s.cfg.LeaseFile, data, 0o600)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.stats.LeaseWriteErrors.Add(1)
		if s.fileErr == "" {
			s.log.Error("dhcp4server: lease file write failed; ACKs wait", "err", err)
		}
		s.fileErr = err.Error()
		return s.durable, err
	}
	if gen > s.durable {
		s.durable = gen
	}
	if s.fileErr != "" {
		s.log.Info("dhcp4server: lease file written again", "file", s.cfg.LeaseFile)
		s.fileErr = ""
	}
	return s.durable, nil
}

// enqueue hands r to the committer, which sends it once the lease file
// holds r.gen.
func (s *Server) enqueue(r result) {
	s.cmu.Lock()
	if len(s.pending) >= maxPending {
		s.cmu.Unlock()
		s.stats.drop(DropBacklog)
		return
	}
	s.pending = append(s.pending, r)
	s.cmu.Unlock()
	s.poke()
}

func (s *Server) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// committer writes the lease file whenever the table changed and sends
// the replies that waited for it: everything enqueued while one write
// runs goes out after the next, one fsync for the lot (group commit).
// When stop is closed it writes once more and sends what that covered.
func (s *Server) committer(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			s.flush()
			return
		case <-s.kick:
			s.flush()
		}
	}
}

// flush writes the table and sends the replies the write covers; replies
// whose lease could not be written are dropped (the client retransmits).
func (s *Server) flush() {
	s.cmu.Lock()
	batch := s.pending
	s.pending = nil
	s.cmu.Unlock()
	durable, err := s.commitNow()
	changed := false
	for _, r := range batch {
		if r.gen > durable {
			s.stats.drop(DropStoreError)
			continue
		}
		changed = changed || r.changed
		if r.send {
			s.send(r)
		}
	}
	if changed && err == nil {
		s.onChange()
	}
}
