package wireguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Config is one WireGuard interface's keys, port and peers, as the
// device takes them; router/config fills it from the wireguard: block.
type Config struct {
	// PrivateKey is the interface's private key (from private_key_file).
	PrivateKey Key
	// ListenPort is the UDP port on the WAN, e.g. 51820; 0 = any.
	ListenPort uint16
	// Peers are the interface's peers.
	Peers []Peer
}

// Peer is one peer of an interface.
type Peer struct {
	// Name names the peer in status and logs, e.g. "phone".
	Name string
	// PublicKey is the peer's public key.
	PublicKey Key
	// PresharedKey, if not zero, is mixed into the handshake
	// (whitepaper §5.2, post-quantum hedge).
	PresharedKey Key
	// AllowedIPs are the addresses the peer may send from and that are
	// routed to it, e.g. [10.8.0.2/32].
	AllowedIPs []netip.Prefix
	// Endpoint is where to reach the peer, e.g. 203.0.113.7:51820;
	// zero = wait for the peer to reach us.
	Endpoint netip.AddrPort
	// PersistentKeepalive, if not zero, sends a keepalive this often,
	// e.g. 25s, to hold a NAT mapping open.
	PersistentKeepalive time.Duration
}

// MaxPersistentKeepalive is the longest keepalive the UAPI takes (a
// 16-bit number of seconds).
const MaxPersistentKeepalive = 65535 * time.Second

// Validate checks c; every problem is reported, joined.
func (c *Config) Validate() error {
	var errs []error
	if c.PrivateKey.IsZero() {
		errs = append(errs, errors.New("private key is missing"))
	}
	seen := map[Key]string{}
	names := map[string]bool{}
	for i, p := range c.Peers {
		what := fmt.Sprintf("peer %d", i)
		if p.Name != "" {
			what = fmt.Sprintf("peer %q", p.Name)
			if names[p.Name] {
				errs = append(errs, fmt.Errorf("%s: name is used twice", what))
			}
			names[p.Name] = true
		}
		switch {
		case p.PublicKey.IsZero():
			errs = append(errs, fmt.Errorf("%s: public key is missing", what))
		case p.PublicKey == c.PrivateKey.PublicKey():
			errs = append(errs, fmt.Errorf("%s: public key is the interface's own", what))
		case seen[p.PublicKey] != "":
			errs = append(errs, fmt.Errorf("%s: public key is also %s's", what, seen[p.PublicKey]))
		default:
			seen[p.PublicKey] = what
		}
		for _, a := range p.AllowedIPs {
			if !a.IsValid() || a.Masked() != a {
				errs = append(errs, fmt.Errorf("%s: allowed IP %s has host bits set or is invalid", what, a))
			}
		}
		if p.PersistentKeepalive < 0 || p.PersistentKeepalive > MaxPersistentKeepalive || p.PersistentKeepalive%time.Second != 0 {
			errs = append(errs, fmt.Errorf("%s: persistent keepalive %s: want whole seconds up to %s", what, p.PersistentKeepalive, MaxPersistentKeepalive))
		}
	}
	return errors.Join(errs...)
}

// UAPI renders c as wireguard-go's IpcSet text (the cross-platform
// UAPI, wireguard.com/xplatform), replacing all peers. It holds the
// private key: it goes to IpcSet and nowhere else.
func (c *Config) UAPI() string {
	var b strings.Builder
	fmt.Fprintf(&b, "private_key=%s\nlisten_port=%d\nreplace_peers=true\n", c.PrivateKey.hex(), c.ListenPort)
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "public_key=%s\n", p.PublicKey.hex())
		if !p.PresharedKey.IsZero() {
			fmt.Fprintf(&b, "preshared_key=%s\n", p.PresharedKey.hex())
		}
		if p.Endpoint.IsValid() {
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		fmt.Fprintf(&b, "persistent_keepalive_interval=%d\nreplace_allowed_ips=true\n", p.PersistentKeepalive/time.Second)
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", a)
		}
	}
	return b.String()
}

// Format implements fmt.Formatter for every verb: the listen port and
// the peers, without the private key, so logging a Config leaks nothing.
func (c Config) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "{ListenPort:%d PrivateKey:(hidden, public %s) Peers:%v}", c.ListenPort, c.PrivateKey.PublicKey(), c.Peers)
}

// Format implements fmt.Formatter for every verb, without the
// preshared key.
func (p Peer) Format(f fmt.State, _ rune) {
	psk := "none"
	if !p.PresharedKey.IsZero() {
		psk = "(hidden)"
	}
	fmt.Fprintf(f, "{Name:%s PublicKey:%s PresharedKey:%s AllowedIPs:%v Endpoint:%v PersistentKeepalive:%s}",
		p.Name, p.PublicKey, psk, p.AllowedIPs, p.Endpoint, p.PersistentKeepalive)
}

// UpdateUAPI renders the IpcSet text that moves a device configured
// with old to c without touching what stayed, for a reload: peers that
// are gone are removed, new and changed peers are set in place, and
// unchanged peers are not mentioned, so their sessions (and an endpoint
// they roamed to) survive. A changed private key, or no old config,
// replaces everything (UAPI): every session was made with the old key.
func (c *Config) UpdateUAPI(old *Config) string {
	if old == nil || old.PrivateKey != c.PrivateKey {
		return c.UAPI()
	}
	var b strings.Builder
	if old.ListenPort != c.ListenPort {
		fmt.Fprintf(&b, "listen_port=%d\n", c.ListenPort)
	}
	was := make(map[Key]*Peer, len(old.Peers))
	for i := range old.Peers {
		was[old.Peers[i].PublicKey] = &old.Peers[i]
	}
	for _, p := range c.Peers {
		delete(was, p.PublicKey)
	}
	for _, p := range old.Peers {
		if _, gone := was[p.PublicKey]; gone {
			fmt.Fprintf(&b, "public_key=%s\nremove=true\n", p.PublicKey.hex())
		}
	}
	prev := make(map[Key]Peer, len(old.Peers))
	for _, p := range old.Peers {
		prev[p.PublicKey] = p
	}
	for _, p := range c.Peers {
		o, existed := prev[p.PublicKey]
		if existed && p.sameAs(o) {
			continue
		}
		fmt.Fprintf(&b, "public_key=%s\n", p.PublicKey.hex())
		if !existed || p.PresharedKey != o.PresharedKey {
			fmt.Fprintf(&b, "preshared_key=%s\n", p.PresharedKey.hex())
		}
		if p.Endpoint.IsValid() && (!existed || p.Endpoint != o.Endpoint) {
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		fmt.Fprintf(&b, "persistent_keepalive_interval=%d\nreplace_allowed_ips=true\n", p.PersistentKeepalive/time.Second)
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", a)
		}
	}
	return b.String()
}

// sameAs reports whether p and o configure a peer alike (the name aside).
func (p Peer) sameAs(o Peer) bool {
	if p.PublicKey != o.PublicKey || p.PresharedKey != o.PresharedKey || p.Endpoint != o.Endpoint ||
		p.PersistentKeepalive != o.PersistentKeepalive || len(p.AllowedIPs) != len(o.AllowedIPs) {
		return false
	}
	for i := range p.AllowedIPs {
		if p.AllowedIPs[i] != o.AllowedIPs[i] {
			return false
		}
	}
	return true
}
