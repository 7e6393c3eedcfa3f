// Package learned is the router's learned-state model: what the WAN side
// teaches it at run time (DHCPv4 leases, IPv6 router advertisements, the
// DHCPv6 delegation and the LAN subnet ids carved from it) and how that
// is merged into the file's config to give the config in force. It is
// pure: no sockets, no goroutines; the runtime feeds it the clients'
// changes through a Queue and applies the merged config by the reload
// path.
package learned

import (
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/router/config"
)

// State is what the router has learned, by interface. It is not safe for
// concurrent use: the runtime keeps it under the lock it reloads with.
type State struct {
	// Log reports delegations gained and lost and subnet-id trouble.
	Log *slog.Logger
	// Dir returns (and creates) the directory the LAN subnet ids are
	// kept in, state_dir/ipv6; it is called when the first delegation
	// arrives. On error the ids are kept in Fallback.
	Dir      func() (string, error)
	Fallback string

	leases map[string]*Lease
	// lost says, by interface, when its lease was lost, for the status
	// page, until a new one is bound.
	lost map[string]string
	ras  map[string]*RA
	pd   *Delegation
	// lanIDs are the lan interfaces' subnet ids in pd, subnets their
	// store (nil until the first delegation).
	lanIDs  map[string]int
	subnets *SubnetIDs
}

// TakeLease records iface's DHCPv4 lease (nil: lost) and reports whether
// it changed.
func (s *State) TakeLease(iface string, l *Lease) bool {
	if s.leases[iface].Equal(l) {
		return false
	}
	if l == nil {
		delete(s.leases, iface)
		if s.lost == nil {
			s.lost = map[string]string{}
		}
		s.lost[iface] = "lease lost at " + time.Now().UTC().Format(time.TimeOnly) + " UTC; address and routes removed"
	} else {
		if s.leases == nil {
			s.leases = map[string]*Lease{}
		}
		s.leases[iface] = l
		delete(s.lost, iface)
	}
	return true
}

// LeaseLost is the status page's note on iface's lost lease, "" if none.
func (s *State) LeaseLost(iface string) string { return s.lost[iface] }

// TakeRA records what iface's RA learner knows (nil: nothing) and
// reports whether it changed.
func (s *State) TakeRA(iface string, ra *RA) bool {
	if s.ras[iface].Equal(ra) {
		return false
	}
	if ra.empty() {
		delete(s.ras, iface)
	} else {
		if s.ras == nil {
			s.ras = map[string]*RA{}
		}
		s.ras[iface] = ra
	}
	return true
}

// TakeDelegation records the delegating wan's prefix (nil: lost) and
// reports whether it changed; a new prefix (re)assigns the subnet ids of
// cfg's (the file's) lan interfaces, kept in the state directory.
func (s *State) TakeDelegation(iface string, pd *Delegation, cfg *config.Config) bool {
	if s.pd.Equal(pd) {
		return false
	}
	if s.pd != nil && (pd == nil || pd.Prefix != s.pd.Prefix) {
		s.Log.Warn("IPv6 delegation withdrawn: its LAN prefixes are deprecated and removed", "interface", iface, "prefix", s.pd.Prefix)
	}
	if pd != nil && (s.pd == nil || pd.Prefix != s.pd.Prefix) {
		s.Log.Info("IPv6 delegation", "interface", iface, "prefix", pd.Prefix, "valid_until", pd.ValidUntil)
	}
	s.pd = pd
	s.assignSubnets(cfg)
	return true
}

// assignSubnets sets lanIDs for the delegation in force and cfg's lan
// interfaces (none without a delegation).
func (s *State) assignSubnets(cfg *config.Config) {
	if s.pd == nil {
		s.lanIDs = nil
		return
	}
	if s.subnets == nil {
		dir := s.Fallback
		if s.Dir != nil {
			d, err := s.Dir()
			if err != nil {
				s.Log.Error("LAN subnet ids are not kept", "err", err)
			} else {
				dir = d
			}
		}
		st, err := LoadSubnetIDs(filepath.Join(dir, "subnets.json"))
		if err != nil {
			s.Log.Error("LAN subnet ids: the file is replaced", "err", err)
		}
		s.subnets = st
	}
	ids, err := s.subnets.Assign(cfg, s.pd.Prefix.Bits())
	if err != nil {
		s.Log.Error("LAN subnets of the delegation", "prefix", s.pd.Prefix, "err", err)
	}
	s.lanIDs = ids
}

// DropStale forgets what cfg (the file's) no longer asks for: the leases
// of interfaces without a DHCP client, the RAs of interfaces that no
// longer learn them, the delegation without a delegating wan; and
// assigns the subnet ids for cfg's lan interfaces.
func (s *State) DropStale(cfg *config.Config) {
	for name := range s.leases {
		if ic := cfg.Interface(name); ic == nil || (ic.DHCP == nil && ic.PPPoE == nil) {
			delete(s.leases, name)
		}
	}
	for name := range s.ras {
		if ic := cfg.Interface(name); ic == nil || ic.Role != config.RoleWAN || !cfg.IPv6Settings(ic).AcceptRA {
			delete(s.ras, name)
		}
	}
	if s.pd != nil && cfg.DelegatingWAN() == "" {
		s.pd = nil
	}
	s.assignSubnets(cfg)
}

// Effective returns cfg (the file's) with everything learned added: the
// config in force. portMTU caps a lease's MTU at its port's.
func (s *State) Effective(cfg *config.Config, portMTU func(port string) int) *config.Config {
	cfg = WithLeases(cfg, s.leases, portMTU)
	return WithIPv6(cfg, s.ras, s.pd, s.lanIDs)
}

// Delegation is the delegation in force, nil without one.
func (s *State) Delegation() *Delegation { return s.pd }

// LANSubnets is each lan interface's /64 of the delegation in force.
func (s *State) LANSubnets() map[string]netip.Prefix { return LANSubnets(s.pd, s.lanIDs) }

// Unassigned is UnassignedSets of the delegation in force.
func (s *State) Unassigned() (delegated, assigned []netip.Prefix) {
	return UnassignedSets(s.pd, s.lanIDs)
}

// DNS returns the DNS servers the WAN side gave: the DHCP leases' in
// interface order, then the delegation's DHCPv6 DNS servers (option 23),
// then the RAs' RDNSS wan by wan, without repeats.
func (s *State) DNS() []netip.Addr {
	var out []netip.Addr
	add := func(as []netip.Addr) {
		for _, a := range as {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	for _, name := range sortedKeys(s.leases) {
		add(s.leases[name].DNS)
	}
	if s.pd != nil {
		add(s.pd.DNS)
	}
	for _, name := range sortedKeys(s.ras) {
		add(s.ras[name].DNS)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
