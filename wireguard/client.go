package wireguard

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// ClientConfig is a new peer's side of a tunnel to the router, as
// `gvrouter wg peer NAME` prints it: a wg-quick(8) configuration file
// (and, next stage, its QR code for the mobile apps).
type ClientConfig struct {
	// PrivateKey is the new peer's private key: the file is the only
	// place it is written.
	PrivateKey Key
	// Addresses are the peer's addresses inside the tunnel, e.g.
	// [10.8.0.2/32]; the router's peer entry allows these.
	Addresses []netip.Prefix
	// DNS are the resolvers the peer uses: the router's inside address.
	DNS []netip.Addr
	// ServerPublicKey is the router interface's public key.
	ServerPublicKey Key
	// PresharedKey, if not zero, is shared with the router's peer entry.
	PresharedKey Key
	// Endpoint is where the peer reaches the router, host:port, e.g.
	// "vpn.example.net:51820".
	Endpoint string
	// AllowedIPs is what the peer sends into the tunnel, e.g.
	// [0.0.0.0/0, ::/0] for all its traffic or the LAN's prefixes only.
	AllowedIPs []netip.Prefix
	// PersistentKeepalive, if not zero, keeps the peer's NAT mapping
	// open, e.g. 25s.
	PersistentKeepalive time.Duration
}

// WGQuick returns c as a wg-quick(8) configuration file.
func (c ClientConfig) WGQuick() string {
	var b strings.Builder
	b.WriteString("[Interface]\n")
	fmt.Fprintf(&b, "PrivateKey = %s\n", c.PrivateKey)
	if len(c.Addresses) > 0 {
		fmt.Fprintf(&b, "Address = %s\n", join(c.Addresses))
	}
	if len(c.DNS) > 0 {
		fmt.Fprintf(&b, "DNS = %s\n", join(c.DNS))
	}
	b.WriteString("\n[Peer]\n")
	fmt.Fprintf(&b, "PublicKey = %s\n", c.ServerPublicKey)
	if !c.PresharedKey.IsZero() {
		fmt.Fprintf(&b, "PresharedKey = %s\n", c.PresharedKey)
	}
	fmt.Fprintf(&b, "Endpoint = %s\n", c.Endpoint)
	fmt.Fprintf(&b, "AllowedIPs = %s\n", join(c.AllowedIPs))
	if c.PersistentKeepalive > 0 {
		fmt.Fprintf(&b, "PersistentKeepalive = %d\n", c.PersistentKeepalive/time.Second)
	}
	return b.String()
}

func join[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ", ")
}

// FreeAddress returns the lowest host address of subnet (the
// interface's, e.g. 10.8.0.1/24) that is neither an address of the
// interface's own (own) nor inside a prefix in used (the peers' allowed
// IPs), for a new peer; false if none is left. The subnet's network
// and, for IPv4, broadcast addresses are never given.
func FreeAddress(subnet netip.Prefix, own []netip.Addr, used []netip.Prefix) (netip.Addr, bool) {
	subnet = subnet.Masked()
	last := lastAddr(subnet)
	for a := subnet.Addr().Next(); a.IsValid() && subnet.Contains(a); a = a.Next() {
		if a.Is4() && a == last {
			break
		}
		taken := false
		for _, o := range own {
			taken = taken || o == a
		}
		for _, u := range used {
			taken = taken || u.Contains(a)
		}
		if !taken {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
