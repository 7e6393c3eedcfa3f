package config

import (
	"net"
	"net/netip"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/wireguard"
)

// WireGuard is an interface's wireguard: mapping. Such an interface has
// no port: its packets are the tunnel's, carried over UDP on the WAN.
// The interface's own keys give the rest: addresses (the router's inside
// the tunnel, e.g. [10.8.0.1/24, fd00:8::1/64]), mtu (0 = 1420, as
// wg-quick) and role (lan or wan: the firewall side the tunnel's traffic
// is on; lan for a road-warrior VPN, wan for a tunnel to a provider).
//
//   - name: wg0
//     role: lan
//     addresses: [10.8.0.1/24]
//     wireguard:
//     private_key_file: /etc/gvrouter/wg0.key
//     listen_port: 51820
//     peers:
//   - name: phone
//     public_key: xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=
//     allowed_ips: [10.8.0.2/32]
//     persistent_keepalive: 25s
type WireGuard struct {
	// PrivateKeyFile holds the interface's private key as `wg genkey`
	// writes it, e.g. "/etc/gvrouter/wg0.key"; mode 0600 or stricter.
	PrivateKeyFile string
	// ListenPort is the UDP port on the WAN, e.g. 51820; 0 = any free
	// port (for an interface that only dials out).
	ListenPort int
	// Peers are the interface's peers.
	Peers []WireGuardPeer
	Pos   Pos // where wireguard: is written

	// privateKey is read from PrivateKeyFile; a pointer, so formatting
	// the config prints an address, not the key.
	privateKey *wireguard.Key
	src        src
}

// WireGuardPeer is one entry of wireguard: peers:.
type WireGuardPeer struct {
	// Name names the peer in status, logs and `gvrouter wg peer`, e.g.
	// "phone"; unique within the interface.
	Name string
	// PublicKey is the peer's public key in wg's base64.
	PublicKey wireguard.Key
	// PresharedKeyFile, if set, holds a preshared key (`wg genpsk`),
	// e.g. "/etc/gvrouter/wg0-phone.psk"; mode 0600 or stricter.
	PresharedKeyFile string
	// AllowedIPs are the prefixes the peer may send from and that are
	// routed to it, e.g. [10.8.0.2/32, fd00:8::2/128].
	AllowedIPs []netip.Prefix
	// Endpoint is where to reach the peer, host:port, e.g.
	// "vpn.example.net:51820" or "203.0.113.7:51820"; "" = wait for the
	// peer. A host name is resolved again when the peer stops answering.
	Endpoint string
	// PersistentKeepalive, if set, sends a keepalive this often to keep
	// a NAT mapping open, 1s..65535s in whole seconds, e.g. 25s.
	PersistentKeepalive time.Duration
	Pos                 Pos // where the peer's item is written

	presharedKey *wireguard.Key
	src          src
}

var (
	wireGuardKeys     = []string{"private_key_file", "listen_port", "peers"}
	wireGuardPeerKeys = []string{"name", "public_key", "preshared_key_file", "allowed_ips", "endpoint", "persistent_keepalive"}
)

// wireGuard decodes an interface's wireguard: mapping; the key files are
// read here, and no message quotes their content.
func (d *decoder) wireGuard(ifc *Interface, e entry, what string) {
	what += ": wireguard"
	ifc.src.set("wireguard", posOf(e.key))
	w := &WireGuard{Pos: posOf(e.key)}
	ifc.WireGuard = w
	if isNull(e.val) || !d.object(e.val, what) {
		d.errorf(e.val, "%s: want a mapping with private_key_file and peers", what)
		return
	}
	m := d.mapping(e.val, what, wireGuardKeys, nil)
	if d.strKey(m, "private_key_file", what, &w.src, &w.PrivateKeyFile) {
		k, err := wireguard.ReadKeyFile(w.PrivateKeyFile)
		if err != nil {
			d.errorf(m["private_key_file"].val, "%s: private_key_file: %v", what, err)
		} else {
			w.privateKey = &k
		}
	} else if _, ok := m["private_key_file"]; !ok {
		d.errorf(e.val, "%s: private_key_file is required (a file holding `gvrouter wg genkey`'s output, mode 0600)", what)
	}
	if d.intKey(m, "listen_port", what, &w.src, &w.ListenPort) && (w.ListenPort < 0 || w.ListenPort > 65535) {
		d.errorf(m["listen_port"].val, "%s: listen_port %d out of range 1..65535 (0 = any)", what, w.ListenPort)
	}
	if pe, ok := m["peers"]; ok {
		items, _ := d.list(pe, what)
		for _, it := range items {
			w.Peers = append(w.Peers, d.wireGuardPeer(it, what))
		}
	}
}

func (d *decoder) wireGuardPeer(n *yaml.Node, what string) WireGuardPeer {
	p := WireGuardPeer{Pos: posOf(n)}
	what += ": peer"
	if !d.object(n, what) {
		return p
	}
	mwhat := what
	if name := peekName(n); name != "" {
		mwhat += " " + strconv.Quote(name)
	}
	m := d.mapping(n, mwhat, wireGuardPeerKeys, nil)
	if d.strKey(m, "name", what, &p.src, &p.Name) {
		what += " " + strconv.Quote(p.Name)
	} else if _, ok := m["name"]; !ok {
		d.errorf(n, "%s: name is required", what)
	}
	var pub string
	if d.strKey(m, "public_key", what, &p.src, &pub) {
		k, err := wireguard.ParseKey(pub)
		if err != nil {
			d.errorf(m["public_key"].val, "%s: public_key: %v", what, err)
		} else {
			p.PublicKey = k
		}
	} else if _, ok := m["public_key"]; !ok {
		d.errorf(n, "%s: public_key is required (the peer's `wg pubkey`)", what)
	}
	if d.strKey(m, "preshared_key_file", what, &p.src, &p.PresharedKeyFile) {
		k, err := wireguard.ReadKeyFile(p.PresharedKeyFile)
		if err != nil {
			d.errorf(m["preshared_key_file"].val, "%s: preshared_key_file: %v", what, err)
		} else {
			p.presharedKey = &k
		}
	}
	if e, ok := m["allowed_ips"]; ok {
		items, _ := d.list(e, what)
		for _, it := range items {
			pf, err := netip.ParsePrefix(it.Value)
			switch {
			case it.Kind != yaml.ScalarNode || err != nil:
				d.errorf(it, "%s: allowed_ips: want a prefix like 10.8.0.2/32, got %s", what, kindName(it))
			case pf.Masked() != pf:
				d.errorf(it, "%s: allowed_ips: %s has host bits set; did you mean %s?", what, pf, pf.Masked())
			default:
				p.AllowedIPs = append(p.AllowedIPs, pf)
			}
		}
	}
	if d.strKey(m, "endpoint", what, &p.src, &p.Endpoint) {
		host, port, err := net.SplitHostPort(p.Endpoint)
		n, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || host == "" || perr != nil || n == 0 {
			d.errorf(m["endpoint"].val, "%s: endpoint: want host:port like vpn.example.net:51820 or [2001:db8::7]:51820, got %s", what, echo(p.Endpoint))
		}
	}
	if e, ok := m["persistent_keepalive"]; ok {
		if v, ok := d.duration(e, what); ok {
			if v%time.Second != 0 || v > wireguard.MaxPersistentKeepalive {
				d.errorf(e.val, "%s: persistent_keepalive: want whole seconds from 1s to 65535s, e.g. 25s, got %s", what, fmtDuration(v))
			} else {
				p.PersistentKeepalive = v
			}
		}
	}
	return p
}

// Device returns the wireguard.Config the interface runs with. Peers
// whose endpoint is a host name get no endpoint here: the runtime
// resolves it.
func (w *WireGuard) Device() wireguard.Config {
	c := wireguard.Config{ListenPort: uint16(w.ListenPort)}
	if w.privateKey != nil {
		c.PrivateKey = *w.privateKey
	}
	for _, p := range w.Peers {
		wp := wireguard.Peer{Name: p.Name, PublicKey: p.PublicKey, AllowedIPs: p.AllowedIPs, PersistentKeepalive: p.PersistentKeepalive}
		if p.presharedKey != nil {
			wp.PresharedKey = *p.presharedKey
		}
		if ap, err := netip.ParseAddrPort(p.Endpoint); err == nil {
			wp.Endpoint = ap
		}
		c.Peers = append(c.Peers, wp)
	}
	return c
}

// validateWireGuard checks an interface's wireguard: against the rest of it.
func (c *Config) validateWireGuard(l *errorList, ifc *Interface, what string) {
	w := ifc.WireGuard
	if w == nil {
		return
	}
	if lp := uint16(w.ListenPort); lp != 0 {
		// The router's own socket holds the port on every address: a
		// forward of it would take WireGuard's packets.
		for _, f := range c.NAT.Forwards {
			if f.Proto == ProtoUDP && f.FirstPort <= lp && lp <= f.LastPort {
				l.add(f.Pos, "nat: forward udp %s: port %d is WireGuard interface %q's listen_port%s", f.PortString(), lp, ifc.Name, atLine(w.Pos))
			}
		}
	}
	for _, k := range []string{"port", "vlan", "dhcp", "dhcp_server", "pppoe", "sqm", "gro"} {
		if _, ok := ifc.src.pos[k]; ok {
			l.add(ifc.src.at(k, ifc.Pos), "%s: %s: a WireGuard interface has no %s (its packets go over UDP on the WAN)", what, k, k)
		}
	}
	if ifc.DHCP != nil && !ifc.dhcpOptions {
		l.add(ifc.DHCP.Pos, "%s: addresses: %q on a WireGuard interface: its addresses are static", what, AddressDHCP)
	}
	if ifc.PPPoE != nil && !ifc.pppoeOptions {
		l.add(ifc.PPPoE.Pos, "%s: addresses: %q on a WireGuard interface", what, AddressPPPoE)
	}
	names := map[string]*WireGuardPeer{}
	keys := map[wireguard.Key]*WireGuardPeer{}
	for i := range w.Peers {
		p := &w.Peers[i]
		if p.Name != "" {
			if prev, ok := names[p.Name]; ok {
				l.add(p.src.at("name", p.Pos), "%s: wireguard: peer %q is defined twice%s", what, p.Name, firstAt(prev.Pos))
			}
			names[p.Name] = p
		}
		if !p.PublicKey.IsZero() {
			if prev, ok := keys[p.PublicKey]; ok {
				l.add(p.src.at("public_key", p.Pos), "%s: wireguard: peer %q has peer %q's public key%s", what, p.Name, prev.Name, atLine(prev.Pos))
			}
			keys[p.PublicKey] = p
			if w.privateKey != nil && p.PublicKey == w.privateKey.PublicKey() {
				l.add(p.src.at("public_key", p.Pos), "%s: wireguard: peer %q's public key is this interface's own", what, p.Name)
			}
		}
	}
}

// equal reports whether w and v configure the same interface, keys
// included; positions are ignored.
func (w *WireGuard) equal(v *WireGuard) bool {
	if w == nil || v == nil {
		return w == v
	}
	if w.PrivateKeyFile != v.PrivateKeyFile || w.ListenPort != v.ListenPort || len(w.Peers) != len(v.Peers) ||
		(w.privateKey == nil) != (v.privateKey == nil) || (w.privateKey != nil && *w.privateKey != *v.privateKey) {
		return false
	}
	for i := range w.Peers {
		p, q := &w.Peers[i], &v.Peers[i]
		if p.Name != q.Name || p.PublicKey != q.PublicKey || p.PresharedKeyFile != q.PresharedKeyFile ||
			p.Endpoint != q.Endpoint || p.PersistentKeepalive != q.PersistentKeepalive ||
			(p.presharedKey == nil) != (q.presharedKey == nil) || (p.presharedKey != nil && *p.presharedKey != *q.presharedKey) ||
			len(p.AllowedIPs) != len(q.AllowedIPs) {
			return false
		}
		for j := range p.AllowedIPs {
			if p.AllowedIPs[j] != q.AllowedIPs[j] {
				return false
			}
		}
	}
	return true
}

// WireGuardListenPorts is the fixed listen ports of cfg's WireGuard
// interfaces (listen_port 0, any free port, is left out): the router's
// own UDP ports that the WAN's input policy and the zones admit.
func (c *Config) WireGuardListenPorts() []uint16 {
	var ports []uint16
	for _, ic := range c.Interfaces {
		if ic.WireGuard != nil && ic.WireGuard.ListenPort != 0 {
			ports = append(ports, uint16(ic.WireGuard.ListenPort))
		}
	}
	return ports
}
