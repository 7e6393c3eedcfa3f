package takeover

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Version is the record format this package writes and reads. A change
// that an older reader would misread gets a new version.
const Version = 1

// Record is what a router changed on one port, with the values from
// before its first takeover. It is a plain value, not safe for concurrent
// mutation.
type Record struct {
	// Version is the format version, Version when written by this
	// package.
	Version int `json:"version"`
	// Port is the interface name, e.g. "eth0".
	Port string `json:"port"`

	// Identity of the kernel objects the record is about: a record whose
	// boot, namespace or interface index differs from the port's now is
	// stale (the kernel started afresh or the interface was recreated,
	// and what the record lists is gone with it).
	BootID  string `json:"boot_id"` // /proc/sys/kernel/random/boot_id, e.g. "3f0c...-..."
	Netns   uint64 `json:"netns"`   // inode of the network namespace, e.g. 4026531840
	Ifindex int    `json:"ifindex"` // e.g. 2
	MAC     string `json:"mac,omitempty"`

	// Since is when the first takeover began; PID the router that began
	// it (for people reading the file).
	Since time.Time `json:"since"`
	PID   int       `json:"pid"`

	// MTU is the kernel MTU before the router raised it (for extra VLAN
	// tags), e.g. 1500; 0 if the router did not change it.
	MTU int `json:"mtu,omitempty"`
	// Features maps offload features the router changed, by their netdev
	// feature names ("rx-gro", "rx-lro", and "rx-vlan-hw-parse" and
	// "rx-vlan-stag-hw-parse" for an AF_XDP port), to their values before.
	Features map[string]bool `json:"features,omitempty"`
	// DisableIPv6 is net.ipv6.conf.<port>.disable_ipv6 before the router
	// set it, e.g. "0"; "" if the router did not change it.
	DisableIPv6 string `json:"disable_ipv6,omitempty"`
	// Addresses are the addresses the router removed, in the kernel's
	// order (a primary IPv4 address before its secondaries), and the
	// kernel-generated IPv6 link-local ones that disabling IPv6 removed.
	Addresses []Address `json:"addresses,omitempty"`
	// NFTables are the nftables tables the router created.
	NFTables []NFTable `json:"nftables,omitempty"`
	// TCQdiscs are the tc qdiscs the router created (not those it found).
	TCQdiscs []TCQdisc `json:"tc_qdiscs,omitempty"`
	// TCFilters are the tc filters the router added to qdiscs it found;
	// those on its own qdiscs go with them.
	TCFilters []TCFilter `json:"tc_filters,omitempty"`
}

// Address is one interface address as rtnetlink describes it (struct
// ifaddrmsg and its IFA_* attributes).
type Address struct {
	// Family is "inet" or "inet6".
	Family string `json:"family"`
	// Local is the address and prefix length, e.g. 192.168.1.1/24
	// (IFA_LOCAL for IPv4, IFA_ADDRESS for IPv6).
	Local netip.Prefix `json:"local"`
	// Peer is the other end of a point-to-point address (IFA_ADDRESS when
	// it differs from IFA_LOCAL); invalid if none.
	Peer netip.Addr `json:"peer,omitzero"`
	// Broadcast is the IPv4 broadcast address (IFA_BROADCAST), e.g.
	// 192.168.1.255; invalid if none.
	Broadcast netip.Addr `json:"broadcast,omitzero"`
	// Label is the IPv4 label (IFA_LABEL), e.g. "eth0:1"; "" if none.
	Label string `json:"label,omitempty"`
	// Scope is the scope (ifa_scope): "global", "site", "link", "host",
	// "nowhere" or a number.
	Scope string `json:"scope"`
	// Flags are the IFA_F_* flags by their iproute2 names, e.g.
	// ["permanent", "noprefixroute"].
	Flags []string `json:"flags,omitempty"`
	// ValidUntil and PreferredUntil are the ends of the address's
	// lifetimes (IFA_CACHEINFO) as wall-clock times; zero means forever.
	ValidUntil     time.Time `json:"valid_until,omitzero"`
	PreferredUntil time.Time `json:"preferred_until,omitzero"`
	// Protocol is who added it (IFA_PROTO, e.g. 0 unspecified, 2 kernel
	// "lo", 3 kernel "ll"); 0 if unknown.
	Protocol uint8 `json:"protocol,omitempty"`
	// Generated means the kernel made the address (an IPv6 link-local
	// from addr_gen_mode) rather than someone configuring it: disabling
	// IPv6 removed it, enabling IPv6 makes the kernel generate it again,
	// and a restore adds it only if the kernel did not (addr_gen_mode
	// changed to "none" meanwhile, say).
	Generated bool `json:"generated,omitempty"`
}

// HasFlag reports whether a has the flag named f, e.g. "permanent".
func (a Address) HasFlag(f string) bool { return slices.Contains(a.Flags, f) }

// Key identifies an address on an interface: family, address and prefix
// length, and peer.
func (a Address) Key() string {
	return fmt.Sprintf("%s %s %s", a.Family, a.Local, a.Peer)
}

// String formats the address as iproute2 does, e.g. "192.168.1.1/24".
func (a Address) String() string { return a.Local.String() }

// NFTable is an nftables table.
type NFTable struct {
	Family string `json:"family"` // e.g. "netdev"
	Name   string `json:"name"`   // e.g. "gvrouter_hw_2"
}

// TCQdisc is a tc qdisc.
type TCQdisc struct {
	Kind   string `json:"kind"`   // e.g. "clsact"
	Handle string `json:"handle"` // e.g. "ffff:"
	Parent string `json:"parent"` // e.g. "ffff:fff1" (TC_H_CLSACT)
}

// TCFilter is a tc filter.
type TCFilter struct {
	Parent string `json:"parent"` // e.g. "ingress" (clsact's ffff:fff2)
	Pref   int    `json:"pref"`   // priority, e.g. 49374
	Handle string `json:"handle"` // e.g. "1"
	Kind   string `json:"kind"`   // e.g. "bpf"
}

// AddAddress appends a unless the record has an address with its Key; it
// reports whether it appended. The first record of an address wins: it is
// the value from before the first takeover.
func (r *Record) AddAddress(a Address) bool {
	if slices.ContainsFunc(r.Addresses, func(b Address) bool { return b.Key() == a.Key() }) {
		return false
	}
	r.Addresses = append(r.Addresses, a)
	return true
}

// SetFeature records feature's value from before unless the record has
// one; it reports whether it recorded.
func (r *Record) SetFeature(name string, before bool) bool {
	if _, ok := r.Features[name]; ok {
		return false
	}
	if r.Features == nil {
		r.Features = make(map[string]bool)
	}
	r.Features[name] = before
	return true
}

// Empty reports whether the record lists no change.
func (r *Record) Empty() bool {
	return r.MTU == 0 && len(r.Features) == 0 && r.DisableIPv6 == "" && len(r.Addresses) == 0 &&
		len(r.NFTables) == 0 && len(r.TCQdiscs) == 0 && len(r.TCFilters) == 0
}

// validate checks what a decoder cannot: that the fields a restore needs
// make sense.
func (r *Record) validate() error {
	if r.Port == "" {
		return fmt.Errorf("no port name")
	}
	for _, a := range r.Addresses {
		if a.Family != "inet" && a.Family != "inet6" {
			return fmt.Errorf("address %s: family %q", a.Local, a.Family)
		}
		if !a.Local.IsValid() || (a.Family == "inet") != a.Local.Addr().Is4() {
			return fmt.Errorf("address %q of family %s", a.Local, a.Family)
		}
	}
	for _, t := range r.NFTables {
		if t.Family == "" || t.Name == "" {
			return fmt.Errorf("nftables table %+v", t)
		}
	}
	return nil
}
