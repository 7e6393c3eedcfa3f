package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/skip2/go-qrcode"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/wireguard"
)

// defaultClientKeepalive is the new peer's PersistentKeepalive: a phone
// sits behind a carrier NAT whose UDP mappings may last only 30 s;
// wg-quick's documentation suggests 25 s for that.
const defaultClientKeepalive = 25 * time.Second

// cmdWGPeer runs `gvrouter wg peer NAME`: a key pair and a tunnel
// address for a new peer of a wireguard: interface, printed as a
// complete wg-quick(8) file for the peer (the router's public key and
// endpoint, DNS = the router's tunnel address), the same as a QR code
// in the terminal for the phone apps' "scan from QR code", and the
// peers: entry to add to the router's config before `gvrouter reload`.
// The private key is printed here only; the router never stores it.
func cmdWGPeer(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("wg peer", flag.ContinueOnError)
	fs.SetOutput(out)
	path := fs.String("config", "/etc/gvrouter/config.yaml", "the router's config file")
	iface := fs.String("interface", "", "the wireguard: interface (default: the only one)")
	endpoint := fs.String("endpoint", "", "host:port the peer dials, e.g. vpn.example.net:51820 (default: the first wan IPv4 address and the listen port)")
	all := fs.Bool("all", false, "send all the peer's traffic through the tunnel (AllowedIPs 0.0.0.0/0, ::/0) instead of the router's lan and tunnel subnets")
	keepalive := fs.Duration("keepalive", defaultClientKeepalive, "the peer's PersistentKeepalive (0: off)")
	qr := fs.Bool("qr", true, "print the config as a QR code too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: gvrouter wg peer [-config FILE] [-interface wg0] [-endpoint host:port] [-all] NAME")
	}
	name := fs.Arg(0)
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	cc, ic, err := newPeer(cfg, *iface, name, *endpoint, *all)
	if err != nil {
		return err
	}
	cc.PersistentKeepalive = keepalive.Truncate(time.Second)
	text := cc.WGQuick()
	fmt.Fprintf(out, "# wg-quick config of WireGuard peer %q of %s (%s.conf):\n%s", name, ic.Name, name, text)
	if *qr {
		q, err := qrcode.New(text, qrcode.Medium)
		if err != nil {
			return fmt.Errorf("qr code: %w", err)
		}
		fmt.Fprintf(out, "\n# The same as a QR code (WireGuard app: add tunnel, scan from QR code):\n%s", q.ToSmallString(false))
	}
	fmt.Fprintf(out, "\n# Add to interface %q's wireguard: peers: in %s, then run gvrouter reload:\n%s", ic.Name, *path, peerYAML(name, cc))
	clear(cc.PrivateKey[:])
	return nil
}

// newPeer makes the new peer's ClientConfig from the router's config:
// a fresh key, the first free address of each of the interface's
// subnets, the router as DNS and the endpoint.
func newPeer(cfg *config.Config, ifaceName, name, endpoint string, all bool) (wireguard.ClientConfig, *config.Interface, error) {
	var ic *config.Interface
	for i := range cfg.Interfaces {
		c := &cfg.Interfaces[i]
		if c.WireGuard == nil || (ifaceName != "" && c.Name != ifaceName) {
			continue
		}
		if ic != nil {
			return wireguard.ClientConfig{}, nil, fmt.Errorf("interfaces %s and %s are WireGuard interfaces: choose one with -interface", ic.Name, c.Name)
		}
		ic = c
	}
	if ic == nil {
		if ifaceName != "" {
			return wireguard.ClientConfig{}, nil, fmt.Errorf("no WireGuard interface %q in the config", ifaceName)
		}
		return wireguard.ClientConfig{}, nil, errors.New("the config has no WireGuard interface (wireguard:)")
	}
	w := ic.WireGuard
	var used []netip.Prefix
	for _, p := range w.Peers {
		if p.Name == name {
			return wireguard.ClientConfig{}, nil, fmt.Errorf("interface %s already has a peer %q", ic.Name, name)
		}
		used = append(used, p.AllowedIPs...)
	}
	dev := w.Device()
	priv, err := wireguard.GenerateKey()
	if err != nil {
		return wireguard.ClientConfig{}, nil, err
	}
	cc := wireguard.ClientConfig{PrivateKey: priv, ServerPublicKey: dev.PrivateKey.PublicKey(), Endpoint: endpoint}
	var own []netip.Addr
	for _, a := range ic.Addresses {
		own = append(own, a.Addr())
	}
	for _, a := range ic.Addresses {
		free, ok := wireguard.FreeAddress(a, own, used)
		if !ok {
			return wireguard.ClientConfig{}, nil, fmt.Errorf("interface %s: no free address left in %s", ic.Name, a.Masked())
		}
		cc.Addresses = append(cc.Addresses, netip.PrefixFrom(free, free.BitLen()))
		cc.DNS = append(cc.DNS, a.Addr())
	}
	if len(cc.Addresses) == 0 {
		return wireguard.ClientConfig{}, nil, fmt.Errorf("interface %s has no addresses to give the peer one from", ic.Name)
	}
	if all {
		cc.AllowedIPs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	} else {
		for _, c := range cfg.Interfaces {
			if c.Role != config.RoleLAN {
				continue
			}
			for _, a := range c.Addresses {
				if !contains(cc.AllowedIPs, a.Masked()) {
					cc.AllowedIPs = append(cc.AllowedIPs, a.Masked())
				}
			}
		}
	}
	if cc.Endpoint == "" {
		if w.ListenPort == 0 {
			return wireguard.ClientConfig{}, nil, fmt.Errorf("interface %s has listen_port 0 (any): give -endpoint host:port", ic.Name)
		}
		for _, c := range cfg.Interfaces {
			for _, a := range c.Addresses {
				if c.Role == config.RoleWAN && a.Addr().Is4() && cc.Endpoint == "" {
					cc.Endpoint = netip.AddrPortFrom(a.Addr(), uint16(w.ListenPort)).String()
				}
			}
		}
		if cc.Endpoint == "" {
			return wireguard.ClientConfig{}, nil, errors.New("no static wan IPv4 address to put in Endpoint: give -endpoint host:port (a DNS name of the router, say)")
		}
	}
	return cc, ic, nil
}

func contains(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// peerYAML is the router's peers: entry for cc.
func peerYAML(name string, cc wireguard.ClientConfig) string {
	ips := make([]string, len(cc.Addresses))
	for i, a := range cc.Addresses {
		ips[i] = a.String()
	}
	return fmt.Sprintf("        - {name: %s, public_key: %s, allowed_ips: [%s]}\n", name, cc.PrivateKey.PublicKey(), strings.Join(ips, ", "))
}
