package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Scalar values with a syntax of their own: interface addresses, route
// destinations and listen addresses.

// parseAddress parses an interface address with its subnet.
func parseAddress(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err == nil {
		return p, nil
	}
	if a, aerr := netip.ParseAddr(s); aerr == nil {
		return netip.Prefix{}, fmt.Errorf("%q has no prefix length; write it with its subnet, e.g. %s/%d", s, a.WithZone(""), map[bool]int{true: 24, false: 64}[a.Is4()])
	}
	return netip.Prefix{}, fmt.Errorf("bad address %q: want address/prefix-length, e.g. 192.168.1.1/24 or fd00:1::1/64", s)
}

// parseRouteTo parses a route destination: "default", a prefix or a bare
// address (a host route).
func parseRouteTo(s string, via netip.Addr) (netip.Prefix, error) {
	if s == "default" {
		switch {
		case via.Is4():
			return netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
		case via.Is6():
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), nil
		}
		return netip.Prefix{}, errors.New("default needs a valid via to pick IPv4 or IPv6; write 0.0.0.0/0 or ::/0 for an on-link default")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if m := p.Masked(); m != p {
			return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, m)
		}
		return p, nil
	}
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("bad destination %q: want default, a prefix like 10.0.0.0/8 or an address", s)
}

// parseListen parses "IFNAME:PORT", "IP:PORT" or "[IPv6]:PORT".
func parseListen(s string) (Listen, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return Listen{}, fmt.Errorf("%q: port must be 1..65535", s)
		}
		return Listen{Host: ap, Port: ap.Port()}, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Listen{}, fmt.Errorf(`%q: want "interface:port" (e.g. "lan:80") or "address:port" (e.g. "127.0.0.1:8080")`, s)
	}
	host, port := s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") || strings.Contains(host, ":") {
		return Listen{}, fmt.Errorf(`%q: bad address; IPv6 is written "[::1]:8080"`, s)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return Listen{}, fmt.Errorf("%q: bad port", s)
	}
	if err := checkName(host); err != nil {
		return Listen{}, fmt.Errorf("%q: %v", s, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return Listen{}, fmt.Errorf("%q: port must be 1..65535", s)
	}
	return Listen{Interface: host, Port: uint16(p)}, nil
}
