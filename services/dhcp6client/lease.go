package dhcp6client

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/services/internal/leasefile"
)

// Prefix is one delegated prefix (an IAPREFIX, RFC 8415 §21.22).
type Prefix struct {
	// Prefix is the delegated prefix, e.g. 2001:db8:aa00::/56.
	Prefix netip.Prefix `json:"prefix"`
	// PreferredLifetime and ValidLifetime are the lifetimes the server
	// gave; Infinite stands for 0xffffffff.
	PreferredLifetime time.Duration `json:"-"`
	ValidLifetime     time.Duration `json:"-"`
	// PreferredUntil and ValidUntil are when the lifetimes end, counted
	// from Lease.Acquired of the Reply that gave them. Past ValidUntil
	// the prefix is withdrawn.
	PreferredUntil time.Time `json:"preferred_until"`
	ValidUntil     time.Time `json:"valid_until"`
}

// String is the address, "" for none.
func (a *Address) String() string {
	if a == nil {
		return ""
	}
	return a.Addr.String()
}

// MarshalText is the address alone, as the status page shows it.
func (a *Address) MarshalText() ([]byte, error) { return a.Addr.MarshalText() }

// UnmarshalText reads the address alone (a status page's JSON); the
// lifetimes stay zero.
func (a *Address) UnmarshalText(b []byte) error { return a.Addr.UnmarshalText(b) }

// Address is an address leased in an IA_NA (an IAADDR, RFC 8415 §21.6).
type Address struct {
	// Addr is the address, e.g. 2001:db8:1::17; its prefix length comes
	// from router advertisements, not DHCPv6.
	Addr netip.Addr
	// PreferredLifetime, ValidLifetime, PreferredUntil and ValidUntil
	// are as in Prefix.
	PreferredLifetime, ValidLifetime time.Duration
	PreferredUntil, ValidUntil       time.Time
}

// Infinite is the lifetime 0xffffffff (RFC 8415 §7.7). Its end is taken
// to be a hundred years on.
const Infinite = 0xffffffff * time.Second

// infiniteSpan is how far on an infinite lifetime or T1/T2 ends.
const infiniteSpan = 100 * 365 * 24 * time.Hour

// Lease is what the server's last Reply gave the client, in the form the
// router applies.
type Lease struct {
	// Prefixes are the delegated prefixes not yet expired, in the order
	// the server sent them. A lease always has at least one.
	Prefixes []Prefix `json:"prefixes"`
	// Address is the IA_NA address; nil when none was asked for or given.
	// JSON has only the address itself (null for none).
	Address *Address `json:"address"`
	// DNS are the recursive DNS servers (option 23, RFC 8415 §21 and RFC
	// 3646), in order of preference.
	DNS []netip.Addr `json:"dns"`
	// Domains is the domain search list (option 24, RFC 3646).
	Domains []string `json:"domains"`
	// ServerID is the server's DUID (option 2), the server Renew and
	// Release name; Status.Server shows it.
	ServerID []byte `json:"-"`
	// ServerAddr and ServerMAC are the IPv6 and Ethernet source of the
	// last Reply (a relay's when the server is behind one).
	ServerAddr netip.Addr       `json:"server_addr"`
	ServerMAC  net.HardwareAddr `json:"-"`
	// Acquired is when the client sent the message the last Reply
	// answered: lifetimes, T1 and T2 count from it, so that none outlasts
	// the server's own count.
	Acquired time.Time `json:"acquired,omitzero"`
	// T1 is when the client renews and T2 when it rebinds (RFC 8415
	// §18.2.4, §18.2.5): the IAs' T1 and T2, or 0.5 and 0.8 of the
	// shortest preferred lifetime where the server sent 0 (§21.21).
	T1 time.Time `json:"renew,omitzero"`
	T2 time.Time `json:"rebind,omitzero"`
}

// clone returns a deep copy of l (nil for nil).
func (l *Lease) clone() *Lease {
	if l == nil {
		return nil
	}
	c := *l
	c.Prefixes = slices.Clone(l.Prefixes)
	if l.Address != nil {
		a := *l.Address
		c.Address = &a
	}
	c.DNS = slices.Clone(l.DNS)
	c.Domains = slices.Clone(l.Domains)
	c.ServerID = slices.Clone(l.ServerID)
	c.ServerMAC = slices.Clone(l.ServerMAC)
	return &c
}

// validUntil is when the last of l's prefixes and address expires.
func (l *Lease) validUntil() time.Time {
	var t time.Time
	for _, p := range l.Prefixes {
		if p.ValidUntil.After(t) {
			t = p.ValidUntil
		}
	}
	if l.Address != nil && l.Address.ValidUntil.After(t) {
		t = l.Address.ValidUntil
	}
	return t
}

// nextExpiry is when the first of l's prefixes and address expires.
func (l *Lease) nextExpiry() time.Time {
	var t time.Time
	for _, p := range l.Prefixes {
		if t.IsZero() || p.ValidUntil.Before(t) {
			t = p.ValidUntil
		}
	}
	if a := l.Address; a != nil && (t.IsZero() || a.ValidUntil.Before(t)) {
		t = a.ValidUntil
	}
	return t
}

// expire removes what has expired at now and reports whether anything
// did.
func (l *Lease) expire(now time.Time) bool {
	n := len(l.Prefixes)
	l.Prefixes = slices.DeleteFunc(l.Prefixes, func(p Prefix) bool { return !now.Before(p.ValidUntil) })
	changed := len(l.Prefixes) != n
	if l.Address != nil && !now.Before(l.Address.ValidUntil) {
		l.Address = nil
		changed = true
	}
	return changed
}

// check reports what makes l unusable, if anything.
func (l *Lease) check() error {
	if len(l.Prefixes) == 0 {
		return errors.New("no prefix")
	}
	for _, p := range l.Prefixes {
		if !usablePrefix(p.Prefix) {
			return fmt.Errorf("bad prefix %v", p.Prefix)
		}
		if p.PreferredUntil.After(p.ValidUntil) || p.PreferredLifetime > p.ValidLifetime {
			return fmt.Errorf("prefix %v preferred past its valid lifetime", p.Prefix)
		}
	}
	if a := l.Address; a != nil && (!usableAddr(a.Addr) || a.PreferredUntil.After(a.ValidUntil) || a.PreferredLifetime > a.ValidLifetime) {
		return fmt.Errorf("bad address %v", a.Addr)
	}
	for _, a := range l.DNS {
		if !usableAddr(a) {
			return fmt.Errorf("bad DNS server %v", a)
		}
	}
	switch {
	case len(l.ServerID) < 2 || len(l.ServerID) > maxDUIDLen:
		return fmt.Errorf("bad server DUID of %d octets", len(l.ServerID))
	case l.Acquired.IsZero() || l.T1.Before(l.Acquired) || l.T2.Before(l.T1):
		return fmt.Errorf("times out of order: acquired %v, T1 %v, T2 %v", l.Acquired, l.T1, l.T2)
	}
	return nil
}

// usablePrefix reports whether p can be delegated: a global unicast or
// unique local IPv6 prefix, its host bits zero, not all of the space.
func usablePrefix(p netip.Prefix) bool {
	return p.IsValid() && p.Addr().Is6() && !p.Addr().Is4In6() && p.Bits() > 0 && p.Masked() == p &&
		p.Addr().IsGlobalUnicast() && p.Addr().Zone() == ""
}

// usableAddr reports whether a is a global unicast or unique local IPv6
// address (a link-local DNS server would need a zone the router cannot
// give it).
func usableAddr(a netip.Addr) bool {
	return a.Is6() && !a.Is4In6() && a.IsGlobalUnicast() && a.Zone() == ""
}

// leaseFileVersion is the version of the lease file's format.
const leaseFileVersion = 1

// leaseFile is the JSON form of the lease file: the lease and whose it
// is (DUID and IAID), so that a lease saved under another identity is not
// asked for again.
type leaseFile struct {
	Version    int          `json:"version"`
	DUID       string       `json:"duid"`
	IAID       uint32       `json:"iaid"`
	Prefixes   []filePrefix `json:"prefixes"`
	Address    *fileAddress `json:"address,omitempty"`
	DNS        []netip.Addr `json:"dns,omitempty"`
	Domains    []string     `json:"domains,omitempty"`
	ServerID   string       `json:"server_id"`
	ServerAddr netip.Addr   `json:"server_addr"`
	ServerMAC  string       `json:"server_mac"`
	Acquired   time.Time    `json:"acquired"`
	T1         time.Time    `json:"t1"`
	T2         time.Time    `json:"t2"`
}

type filePrefix struct {
	Prefix         netip.Prefix `json:"prefix"`
	Preferred      uint32       `json:"preferred_lifetime"`
	Valid          uint32       `json:"valid_lifetime"`
	PreferredUntil time.Time    `json:"preferred_until"`
	ValidUntil     time.Time    `json:"valid_until"`
}

type fileAddress struct {
	Addr           netip.Addr `json:"addr"`
	Preferred      uint32     `json:"preferred_lifetime"`
	Valid          uint32     `json:"valid_lifetime"`
	PreferredUntil time.Time  `json:"preferred_until"`
	ValidUntil     time.Time  `json:"valid_until"`
}

func seconds(d time.Duration) uint32 { return uint32(d / time.Second) }

// encodeLease returns the lease file's content for l.
func encodeLease(l *Lease, duid []byte, iaid uint32) []byte {
	f := leaseFile{
		Version: leaseFileVersion, DUID: hex.EncodeToString(duid), IAID: iaid,
		DNS: l.DNS, Domains: l.Domains, ServerID: hex.EncodeToString(l.ServerID),
		ServerAddr: l.ServerAddr, ServerMAC: l.ServerMAC.String(), Acquired: l.Acquired, T1: l.T1, T2: l.T2,
	}
	for _, p := range l.Prefixes {
		f.Prefixes = append(f.Prefixes, filePrefix{p.Prefix, seconds(p.PreferredLifetime), seconds(p.ValidLifetime), p.PreferredUntil, p.ValidUntil})
	}
	if a := l.Address; a != nil {
		f.Address = &fileAddress{a.Addr, seconds(a.PreferredLifetime), seconds(a.ValidLifetime), a.PreferredUntil, a.ValidUntil}
	}
	return leasefile.Encode(f)
}

// decodeLease parses a lease file and checks that the lease is whole and
// for duid and iaid (else leasefile.ErrForeign).
func decodeLease(data []byte, duid []byte, iaid uint32) (*Lease, error) {
	var f leaseFile
	if err := leasefile.Decode(data, leaseFileVersion, &f); err != nil {
		return nil, err
	}
	sid, err := hex.DecodeString(f.ServerID)
	if err != nil {
		return nil, fmt.Errorf("server_id: %w", err)
	}
	var smac net.HardwareAddr
	if f.ServerMAC != "" {
		if smac, err = net.ParseMAC(f.ServerMAC); err != nil {
			return nil, fmt.Errorf("server_mac: %w", err)
		}
	}
	l := &Lease{
		DNS: f.DNS, Domains: f.Domains, ServerID: sid, ServerAddr: f.ServerAddr, ServerMAC: smac,
		Acquired: f.Acquired, T1: f.T1, T2: f.T2,
	}
	for _, p := range f.Prefixes {
		l.Prefixes = append(l.Prefixes, Prefix{p.Prefix, time.Duration(p.Preferred) * time.Second,
			time.Duration(p.Valid) * time.Second, p.PreferredUntil, p.ValidUntil})
	}
	if a := f.Address; a != nil {
		l.Address = &Address{a.Addr, time.Duration(a.Preferred) * time.Second, time.Duration(a.Valid) * time.Second,
			a.PreferredUntil, a.ValidUntil}
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	if f.DUID != hex.EncodeToString(duid) || f.IAID != iaid {
		return nil, leasefile.ErrForeign
	}
	return l, nil
}

// readLeaseFile reads path; a missing file is no lease and no error.
func readLeaseFile(path string, duid []byte, iaid uint32) (*Lease, error) {
	return leasefile.Load(path, func(data []byte) (*Lease, error) { return decodeLease(data, duid, iaid) })
}

// writeLeaseFile saves l to path atomically (leasefile.Save).
func writeLeaseFile(path string, l *Lease, duid []byte, iaid uint32) error {
	return leasefile.Save(path, encodeLease(l, duid, iaid))
}
