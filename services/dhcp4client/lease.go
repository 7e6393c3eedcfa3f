package dhcp4client

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/gvrouter/gvrouter/services/internal/leasefile"
)

// Route is one route a lease asks for.
type Route struct {
	// Dst is the destination; 0.0.0.0/0 is the default route.
	Dst netip.Prefix `json:"dst"`
	// Via is the next hop; 0.0.0.0 means the destination is on the link
	// (RFC 3442: a router address of 0.0.0.0).
	Via netip.Addr `json:"via"`
}

// Lease is an address and the configuration a server's DHCPACK gave with
// it, in the form the router applies.
type Lease struct {
	// Addr is the leased address (yiaddr) with the subnet mask (option
	// 1; the address's class when the server sent none).
	Addr netip.Prefix `json:"address"`
	// Server is the server identifier (option 54), where RENEWING
	// unicasts to (RFC 2131 §4.4.5).
	Server netip.Addr `json:"server"`
	// ServerMAC is the Ethernet source of the last DHCPACK, the next hop
	// of the unicast DHCPREQUEST in RENEWING and of the DHCPRELEASE.
	ServerMAC net.HardwareAddr `json:"-"`
	// Routers is option 3 as sent, in order of preference.
	Routers []netip.Addr `json:"routers"`
	// Routes are the routes to install: option 121 (RFC 3442) when the
	// server sent a valid one, which then overrides option 3 (RFC 3442
	// §3: "the DHCP client MUST ignore the Router option"); else a
	// default route via the first router of option 3; else none.
	Routes []Route `json:"routes"`
	// DNS is option 6, the DNS servers in order of preference.
	DNS []netip.Addr `json:"dns"`
	// Domain is option 15, the domain name.
	Domain string `json:"domain"`
	// MTU is option 26, the interface MTU; 0 when the server sent none or
	// one below Config.MinMTU (then counted in Stats.MTUIgnored).
	MTU int `json:"mtu"`
	// Acquired is when the client sent the DHCPREQUEST this DHCPACK
	// answered: lease times count from it (RFC 2131 §4.4.1).
	Acquired time.Time `json:"acquired,omitzero"`
	// T1 is when the client starts RENEWING: option 58, else half the
	// lease (RFC 2131 §4.4.5).
	T1 time.Time `json:"renew,omitzero"`
	// T2 is when the client starts REBINDING: option 59, else 7/8 of the
	// lease (RFC 2131 §4.4.5).
	T2 time.Time `json:"rebind,omitzero"`
	// Expiry is when the lease ends (option 51). An infinite lease
	// (0xffffffff) ends in 100 years.
	Expiry time.Time `json:"expiry,omitzero"`
}

// clone returns a deep copy of l (nil for nil).
func (l *Lease) clone() *Lease {
	if l == nil {
		return nil
	}
	c := *l
	c.ServerMAC = slices.Clone(l.ServerMAC)
	c.Routers = slices.Clone(l.Routers)
	c.Routes = slices.Clone(l.Routes)
	c.DNS = slices.Clone(l.DNS)
	return &c
}

// sameConfig reports whether l and o configure the interface alike:
// every field except the times and the server's MAC.
func (l *Lease) sameConfig(o *Lease) bool {
	if l == nil || o == nil {
		return l == o
	}
	return l.Addr == o.Addr && l.Server == o.Server && slices.Equal(l.Routers, o.Routers) &&
		slices.Equal(l.Routes, o.Routes) && slices.Equal(l.DNS, o.DNS) && l.Domain == o.Domain && l.MTU == o.MTU
}

// leaseFileVersion is the version of the lease file's format.
const leaseFileVersion = 1

// leaseFile is the JSON form of the lease file: the last lease and whom
// it was for, so that a lease saved for another MAC or client identifier
// is not asked for again.
type leaseFile struct {
	Version   int          `json:"version"`
	HWAddr    string       `json:"hwaddr"`
	ClientID  []byte       `json:"client_id,omitempty"`
	Addr      netip.Prefix `json:"addr"`
	Server    netip.Addr   `json:"server"`
	ServerMAC string       `json:"server_mac"`
	Routers   []netip.Addr `json:"routers,omitempty"`
	Routes    []Route      `json:"routes,omitempty"`
	DNS       []netip.Addr `json:"dns,omitempty"`
	Domain    string       `json:"domain,omitempty"`
	MTU       int          `json:"mtu,omitempty"`
	Acquired  time.Time    `json:"acquired"`
	T1        time.Time    `json:"t1"`
	T2        time.Time    `json:"t2"`
	Expiry    time.Time    `json:"expiry"`
}

// encodeLease returns the lease file's content for l.
func encodeLease(l *Lease, hw net.HardwareAddr, clientID []byte) []byte {
	return leasefile.Encode(leaseFile{
		Version: leaseFileVersion, HWAddr: hw.String(), ClientID: clientID,
		Addr: l.Addr, Server: l.Server, ServerMAC: l.ServerMAC.String(),
		Routers: l.Routers, Routes: l.Routes, DNS: l.DNS, Domain: l.Domain, MTU: l.MTU,
		Acquired: l.Acquired, T1: l.T1, T2: l.T2, Expiry: l.Expiry,
	})
}

// decodeLease parses a lease file and checks that the lease is whole and
// for hw and clientID (else leasefile.ErrForeign).
func decodeLease(data []byte, hw net.HardwareAddr, clientID []byte) (*Lease, error) {
	var f leaseFile
	if err := leasefile.Decode(data, leaseFileVersion, &f); err != nil {
		return nil, err
	}
	smac, err := net.ParseMAC(f.ServerMAC)
	if err != nil {
		return nil, fmt.Errorf("server_mac: %w", err)
	}
	l := &Lease{
		Addr: f.Addr, Server: f.Server, ServerMAC: smac, Routers: f.Routers, Routes: f.Routes,
		DNS: f.DNS, Domain: f.Domain, MTU: f.MTU, Acquired: f.Acquired, T1: f.T1, T2: f.T2, Expiry: f.Expiry,
	}
	if err := l.check(); err != nil {
		return nil, err
	}
	if f.HWAddr != hw.String() || !bytes.Equal(f.ClientID, clientID) {
		return nil, leasefile.ErrForeign
	}
	return l, nil
}

// check reports what makes l unusable, if anything.
func (l *Lease) check() error {
	switch {
	case !l.Addr.IsValid() || !l.Addr.Addr().Is4() || !usable(l.Addr.Addr()) || l.Addr.Bits() < 1:
		return fmt.Errorf("bad address %v", l.Addr)
	case !l.Server.Is4():
		return fmt.Errorf("bad server %v", l.Server)
	case l.Acquired.IsZero() || l.T1.Before(l.Acquired) || l.T2.Before(l.T1) || l.Expiry.Before(l.T2):
		return fmt.Errorf("times out of order: acquired %v, T1 %v, T2 %v, expiry %v", l.Acquired, l.T1, l.T2, l.Expiry)
	case l.MTU < 0 || l.MTU > 65535:
		return fmt.Errorf("bad MTU %d", l.MTU)
	}
	for _, r := range l.Routes {
		if !r.Dst.IsValid() || !r.Dst.Addr().Is4() || !r.Via.Is4() {
			return fmt.Errorf("bad route %v via %v", r.Dst, r.Via)
		}
	}
	for _, a := range append(slices.Clone(l.Routers), l.DNS...) {
		if !a.Is4() {
			return fmt.Errorf("bad address %v", a)
		}
	}
	return nil
}

// usable reports whether a is an address a host may take: IPv4, not
// unspecified, broadcast, multicast, loopback or class E.
func usable(a netip.Addr) bool {
	if !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() {
		return false
	}
	return a.As4()[0] < 240
}

// readLeaseFile reads path; a missing file is no lease and no error.
func readLeaseFile(path string, hw net.HardwareAddr, clientID []byte) (*Lease, error) {
	return leasefile.Load(path, func(data []byte) (*Lease, error) { return decodeLease(data, hw, clientID) })
}

// writeLeaseFile saves l to path atomically (leasefile.Save).
func writeLeaseFile(path string, l *Lease, hw net.HardwareAddr, clientID []byte) error {
	return leasefile.Save(path, encodeLease(l, hw, clientID))
}
