package config

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/gvrouter/gvrouter/wireguard"
)

// NewWireGuardPeer makes a new peer's side of interface ifaceName's
// tunnel (`gvrouter wg peer NAME`): a fresh key, the first free address
// of each of the interface's subnets, the router's tunnel addresses as
// DNS, the router's public key and endpoint (endpoint, else the first
// static wan IPv4 address and the listen port) and AllowedIPs (the lan
// and tunnel subnets, or everything with all). ifaceName "" picks the
// only WireGuard interface. It returns the interface too.
func (cfg *Config) NewWireGuardPeer(ifaceName, name, endpoint string, all bool) (wireguard.ClientConfig, *Interface, error) {
	var ic *Interface
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
			if c.Role != RoleLAN {
				continue
			}
			for _, a := range c.Addresses {
				if !containsPrefix(cc.AllowedIPs, a.Masked()) {
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
				if c.Role == RoleWAN && a.Addr().Is4() && cc.Endpoint == "" {
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

func containsPrefix(ps []netip.Prefix, p netip.Prefix) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
