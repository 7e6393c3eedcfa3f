package learned

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/statedir"
)

// SubnetIDs gives each lan interface a /64 of the delegated prefix that
// stays its own across restarts, renewals and reloads: an id pinned by
// ipv6: {subnet: N} is used as written; any other lan interface keeps the
// id it had (state_dir/ipv6/subnets.json), or gets the lowest id free. A
// LAN host's SLAAC address and every allow6 rule naming it survive a reboot
// of the router only if the subnet does.
type SubnetIDs struct {
	path string
	ids  map[string]int // interface → id
}

// subnetsFile is the on-disk form.
type subnetsFile struct {
	Subnets map[string]int `json:"subnets"`
}

// LoadSubnetIDs reads path; a missing file is an empty set, a corrupt
// one is an error (the caller reports it and starts empty: ids are
// assigned again, which only renumbers).
func LoadSubnetIDs(path string) (*SubnetIDs, error) {
	s := &SubnetIDs{path: path, ids: map[string]int{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("subnet ids: %w", err)
	}
	var f subnetsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return s, fmt.Errorf("subnet ids: %s: %w", path, err)
	}
	for name, id := range f.Subnets {
		if id >= 0 {
			s.ids[name] = id
		}
	}
	return s, nil
}

// Assign returns the subnet id of every lan interface of cfg that takes a
// delegated /64 (ipv6.ra or dhcpv6 need not be on: the address is the
// point), for a delegation of pdBits, and saves the set if it changed.
// Interfaces that do not fit (more lan interfaces than /64s) are left
// out and named in the error.
func (s *SubnetIDs) Assign(cfg *config.Config, pdBits int) (map[string]int, error) {
	n := 1 << (config.LANPrefixLength - pdBits)
	out := map[string]int{}
	used := map[int]bool{}
	var lans []string
	for _, ic := range cfg.Interfaces {
		if ic.Role != config.RoleLAN || cfg.CarriesMACsec(ic.Name) {
			continue // a SecY's lower interface gets no /64 (IPv6Settings)
		}
		if v := ic.IPv6; v != nil && v.Subnet != config.SubnetAuto {
			if v.Subnet < n {
				out[ic.Name], used[v.Subnet] = v.Subnet, true
			}
			continue
		}
		lans = append(lans, ic.Name)
	}
	var pending []string
	for _, name := range lans {
		if id, ok := s.ids[name]; ok && id < n && !used[id] {
			out[name], used[id] = id, true
			continue
		}
		pending = append(pending, name)
	}
	var errs []error
	next := 0
	for _, name := range pending {
		for next < n && used[next] {
			next++
		}
		if next >= n {
			errs = append(errs, fmt.Errorf("interface %s: no /64 left in a /%d delegation", name, pdBits))
			continue
		}
		out[name], used[next] = next, true
	}
	// Keep the ids of interfaces not in this config (a reload may bring
	// them back) unless their id went to another.
	save := map[string]int{}
	for name, id := range s.ids {
		if _, now := out[name]; !now && !slices.Contains(mapValues(out), id) {
			save[name] = id
		}
	}
	for name, id := range out {
		save[name] = id
	}
	if !mapsEqual(save, s.ids) {
		s.ids = save
		b, err := json.MarshalIndent(subnetsFile{Subnets: save}, "", "  ")
		if err == nil {
			err = statedir.WriteFile(s.path, append(b, '\n'), 0o600)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("subnet ids: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

func mapValues(m map[string]int) []int {
	out := make([]int, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
