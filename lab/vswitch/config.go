package vswitch

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// PortConfig describes one switch port.
type PortConfig struct {
	// Name is the kernel interface the port runs on, e.g. "lan".
	Name string
	// PVID is the VLAN the port is an untagged member of: untagged and
	// priority-tagged frames received on the port belong to it, and frames
	// of it leave the port untagged, e.g. 1. 0 means none: the port drops
	// untagged frames.
	PVID uint16
	// Tagged are the VIDs the port carries with a C-tag, e.g. []uint16{1,
	// 2} on a CPU port. Each is 1 to 4094 and differs from PVID.
	Tagged []uint16
}

// Config describes a switch.
type Config struct {
	// Ports are the switch's ports, 1 to MaxPorts of them. Stats lists
	// them in this order.
	Ports []PortConfig
}

// IEEE 802.1Q values and the switch's limits.
const (
	// TPIDCTag is the C-VLAN tag protocol identifier (IEEE 802.1Q-2018
	// 9.5, Table 9-1): the only tag a C-VLAN component reads.
	TPIDCTag = 0x8100
	// MaxVID is the largest usable VID; 0xFFF is reserved (IEEE
	// 802.1Q-2018 9.6, Table 9-2).
	MaxVID = 4094
	// MaxPorts is the most ports a switch has: an egress set is one
	// uint64 bit mask, which keeps flooding free of allocations.
	MaxPorts = 64
	// AgingTime is how long a learned address stays in the table without
	// being seen again: the recommended ageing time of IEEE 802.1Q-2018
	// 8.8.3 (300 s).
	AgingTime = 300 * time.Second
	// FDBSize is the most learned addresses, over all VLANs. It bounds the
	// table's memory; a lab has a handful of hosts, and a full table
	// flooding unknown addresses is still correct.
	FDBSize = 4096
)

const (
	vidMask     = 0x0fff
	vidReserved = 0x0fff
	// prioMask keeps PCP and DEI of a TCI (IEEE 802.1Q-2018 9.6).
	prioMask = 0xf000
)

// validate reports every problem of cfg at once.
func (cfg *Config) validate() error {
	var errs []error
	if len(cfg.Ports) == 0 {
		errs = append(errs, errors.New("no ports"))
	}
	if len(cfg.Ports) > MaxPorts {
		errs = append(errs, fmt.Errorf("%d ports, at most %d", len(cfg.Ports), MaxPorts))
	}
	seen := make(map[string]bool)
	for i, p := range cfg.Ports {
		name := p.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i)
			errs = append(errs, fmt.Errorf("port %s: no interface name", name))
		} else if seen[name] {
			errs = append(errs, fmt.Errorf("port %s: listed twice", name))
		}
		seen[p.Name] = true
		if p.PVID > MaxVID {
			errs = append(errs, fmt.Errorf("port %s: PVID %d, want 0 to %d", name, p.PVID, MaxVID))
		}
		if p.PVID == 0 && len(p.Tagged) == 0 {
			errs = append(errs, fmt.Errorf("port %s: member of no VLAN", name))
		}
		for j, vid := range p.Tagged {
			switch {
			case vid == 0 || vid > MaxVID:
				errs = append(errs, fmt.Errorf("port %s: tagged VID %d, want 1 to %d", name, vid, MaxVID))
			case vid == p.PVID:
				errs = append(errs, fmt.Errorf("port %s: VID %d is both the PVID and tagged", name, vid))
			case slices.Contains(p.Tagged[:j], vid):
				errs = append(errs, fmt.Errorf("port %s: tagged VID %d listed twice", name, vid))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("vswitch: config: %w", err)
	}
	return nil
}
