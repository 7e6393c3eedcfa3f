package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// udhcpcProofScript records what busybox udhcpc was given and configures
// nothing: the LAN host keeps its static address, which the other proofs
// use.
const udhcpcProofScript = `#!/bin/sh
echo "$1 ip=$ip mask=$mask router=$router dns=$dns domain=$domain lease=$lease" >> %s
exit 0
`

// serviceProofs are the proofs of the router's own services in the NAT
// lab: the WAN address from the ISP's DHCP server, a LAN host's address
// from the router's DHCP server, DNS, DHCPv6, SLAAC, the delegated prefix
// and the learned default route. Both udhcpc proofs run on the LAN host's
// one interface with one client identity, and the AAAA proof wants only
// LAN /64 addresses in the router's neighbour cache, before the delegation
// proof pings from the delegated prefix: those three are one chain.
func (l *lab) serviceProofs() []step {
	return []step{
		{"WAN address by DHCP from the ISP (dnsmasq)", "wan lease", l.wanLeaseProof},
		{"LAN host address by DHCP from the router (busybox udhcpc)", "lan host", l.lanLeaseProof},
		{"LAN host resolves " + ispWebName + " through the router's DNS", "dns", l.dnsProof},
		{"LAN host DNS by stateless DHCPv6 from the router (ISC dhclient -6 -S)", "dhcpv6", l.dhcp6InfoProof},
		{"LAN host's lease name resolves to its IPv6 address (AAAA, over IPv6)", "lan host", l.aaaaProof},
		{"LAN host autoconfigures by SLAAC from the router's RAs (its kernel)", "slaac", l.slaacProof},
		{"IPv6 prefix delegated by the ISP (kea-dhcp6) numbers the LAN", "lan host", l.delegationProof},
		{"IPv6 default route learned from the ISP's RAs (radvd)", "ra learn", l.raLearnProof},
	}
}

// raLearnProof waits until the router's WAN RA learner knows the WAN
// host's radvd as default router and the router's table has the IPv6
// default route via its link-local address on the WAN.
func (l *lab) raLearnProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	_, wan := routerInterfaces(l.opt.Topology)
	for {
		snap, err := l.statusSince(ctx, time.Time{})
		if err == nil && snap.IPv6 != nil {
			for _, w := range snap.IPv6.WANRA {
				if w.Interface != wan || len(w.Routers) == 0 || !w.Routers[0].Addr.IsLinkLocalUnicast() {
					continue
				}
				via := w.Routers[0].Addr.String()
				if hasRoute(snap, "::/0", via, wan) {
					return fmt.Sprintf("::/0 via %s dev %s (router lifetime until %s), %d RAs", via, wan,
						w.Routers[0].Expires.Format(time.TimeOnly), w.Counters["ra"]), nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no IPv6 default route learned from radvd on %s (%v); radvd log:\n%s", wan, err, tail(filepath.Join(l.dir, "radvd.log"), 1500))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// delegationProof waits for the router's DHCPv6 client to hold a /56 of
// the ISP's pool, checks that the LAN got its /64 of it (the router's ::1
// there, on the status page), lets the LAN host's kernel form a SLAAC
// address in it from the router's RAs, routes the delegation to the
// router on the WAN host as the ISP's edge does, and pings the WAN host
// from that address.
func (l *lab) delegationProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*proofTimeout)
	defer cancel()
	var pd, lan netip.Prefix
	for {
		snap, err := l.statusSince(ctx, time.Time{})
		if err == nil && snap.IPv6 != nil && snap.IPv6.Delegation != nil && snap.IPv6.Delegation.State == "bound" &&
			len(snap.IPv6.Delegation.Prefixes) > 0 {
			pd = snap.IPv6.Delegation.Prefixes[0].Prefix
			lanName, _ := routerInterfaces(l.opt.Topology)
			lan = snap.IPv6.LANPrefixes[lanName]
			if lan.IsValid() {
				break
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no delegation bound with a LAN /64 on the status page (last error %v); kea log:\n%s", err, tail(filepath.Join(l.dir, "kea.log"), 1500))
		case <-time.After(250 * time.Millisecond):
		}
	}
	if pd.Bits() != ispPDLength || !ispPDPool.Contains(pd.Addr()) || !pd.Contains(lan.Addr()) || lan.Bits() != 64 {
		return "", fmt.Errorf("delegation %s with LAN %s, want a /%d of %s holding the LAN's /64", pd, lan, ispPDLength, ispPDPool)
	}
	if err := l.routeDelegation(ctx, pd, wanRouter6.Addr()); err != nil {
		return "", err
	}
	var slaac netip.Addr
	for !slaac.IsValid() {
		out, err := output(ctx, l.lanNS, "ip", "-6", "-j", "addr", "show", "dev", hostIf)
		if err != nil {
			return "", err
		}
		if slaac = dynamicAddrIn(out, lan); slaac.IsValid() {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the LAN host formed no SLAAC address in the delegated %s", lan)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := pingFrom(ctx, l.lanNS, slaac, wanHost6.Addr()); err != nil {
		return "", fmt.Errorf("ping from the delegated address %s: %w", slaac, err)
	}
	return fmt.Sprintf("%s delegated, LAN %s, host %s pings %s", pd, lan, slaac, wanHost6.Addr()), nil
}

// slaacProof waits until the LAN host's own kernel has formed an address
// in the router's LAN /64 from the router's RAs (accept_ra and autoconf
// are on in the host's namespace, as on any host) and a default route
// via the router's link-local address, then pings the WAN host from that
// address through the router and its IPv6 firewall.
func (l *lab) slaacProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	lanNet := lanRouter6.Masked()
	var slaac netip.Addr
	var via string
	for {
		out, err := output(ctx, l.lanNS, "ip", "-6", "-j", "addr", "show", "dev", hostIf)
		if err != nil {
			return "", err
		}
		slaac = dynamicAddrIn(out, lanNet)
		rt, _ := output(ctx, l.lanNS, "ip", "-6", "route", "show", "default", "dev", hostIf)
		for _, line := range strings.Split(string(rt), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "default" && f[1] == "via" && strings.HasPrefix(f[2], "fe80:") &&
				strings.Contains(line, "proto ra") {
				via = f[2]
			}
		}
		if slaac.IsValid() && via != "" {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("after %v: SLAAC address in %s %v, default route via %q; want both from the router's RAs", proofTimeout, lanNet, slaac, via)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if _, err := pingFrom(ctx, l.lanNS, slaac, wanHost6.Addr()); err != nil {
		return "", fmt.Errorf("ping from the SLAAC address %s: %w", slaac, err)
	}
	return fmt.Sprintf("%s (dynamic), default via %s; ping %s from it", slaac, via, wanHost6.Addr()), nil
}

// dynamicAddrIn returns the first address in p that `ip -j addr` output
// lists as dynamic (from SLAAC) and no longer tentative, or the zero
// Addr. A tentative address (duplicate address detection, about a
// second) cannot be bound yet: a ping from it fails with "cannot assign
// requested address".
func dynamicAddrIn(ipJSON []byte, p netip.Prefix) netip.Addr {
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			Dynamic   bool   `json:"dynamic"`
			Tentative bool   `json:"tentative"`
		} `json:"addr_info"`
	}
	if json.Unmarshal(ipJSON, &links) != nil {
		return netip.Addr{}
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if ad, err := netip.ParseAddr(a.Local); err == nil && a.Dynamic && !a.Tentative && p.Contains(ad) {
				return ad
			}
		}
	}
	return netip.Addr{}
}

// aaaaHost is the host name the AAAA proof's DHCP lease carries.
const aaaaHost = "lab-v6host"

// aaaaProof leases an address with a host name to the LAN host (busybox
// udhcpc, the lease kept), lets the router see the host's IPv6 address in
// NDP (a ping), and resolves the name's AAAA from the LAN host through
// the forwarder's IPv6 address with Go's stub resolver; then releases
// the lease.
func (l *lab) aaaaProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	script := filepath.Join(l.dir, "udhcpc-aaaa.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(udhcpcProofScript, filepath.Join(l.dir, "udhcpc-aaaa.events"))), 0o700); err != nil {
		return "", err
	}
	udhcpc := func(release bool) error {
		args := []string{"-q", "-n", "-i", hostIf, "-s", script, "-x", "hostname:" + aaaaHost, "-t", "5", "-T", "1"}
		if release {
			args = append(args, "-R")
		}
		out, err := output(ctx, l.lanNS, "udhcpc", args...)
		if err != nil {
			return fmt.Errorf("udhcpc: %w: %s", err, out)
		}
		return nil
	}
	if err := udhcpc(false); err != nil {
		return "", err
	}
	defer udhcpc(true)
	if _, err := ping(ctx, l.lanNS, lanRouter6.Addr()); err != nil {
		return "", err
	}
	server := netip.AddrPortFrom(lanRouter6.Addr(), 53).String()
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(l.lanNS, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, server)
			return err
		})
		return c, err
	}}
	name := aaaaHost + "." + labDomain
	var addrs []netip.Addr
	var err error
	// The router reads its neighbour caches every 5 s.
	for start := time.Now(); ; time.Sleep(250 * time.Millisecond) {
		addrs, err = res.LookupNetIP(ctx, "ip6", name)
		// The host's SLAAC address (from the router's RAs) may be
		// listed beside its static one: both are its own.
		if err == nil && slices.Contains(addrs, lanHost6.Addr()) &&
			!slices.ContainsFunc(addrs, func(a netip.Addr) bool { return !lanRouter6.Masked().Contains(a) }) {
			return fmt.Sprintf("%s AAAA %v via %s after %v", name, addrs, server, time.Since(start).Round(time.Millisecond)), nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s AAAA = %v (%v), want %s (the LAN host's address)", name, addrs, err, lanHost6.Addr())
		}
	}
}

// labDomain is the LAN's domain: the lab config sets none, so the
// router's default (config.DefaultDomain, OpenWrt's "lan").
const labDomain = "lan"

// dhclient6ProofScript records what ISC dhclient was given and
// configures nothing.
const dhclient6ProofScript = `#!/bin/sh
ns=$(echo $new_dhcp6_name_servers | tr ' ' ,)
dom=$(echo $new_dhcp6_domain_search | tr ' ' ,)
echo "$reason dns=$ns domain=$dom refresh=$new_dhcp6_info_refresh_time" >> %s
exit 0
`

// dhcp6InfoProof runs ISC dhclient in information-only mode (-S) on the
// LAN host against the router's stateless DHCPv6 server: it must hand out
// the router's LAN address as DNS server and the lab's domain.
func (l *lab) dhcp6InfoProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	events := filepath.Join(l.dir, "dhclient6-proof.events")
	script := filepath.Join(l.dir, "dhclient6-proof.sh")
	conf := filepath.Join(l.dir, "dhclient6-proof.conf")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(dhclient6ProofScript, events)), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(conf, []byte("request dhcp6.name-servers, dhcp6.domain-search, dhcp6.info-refresh-time;\n"), 0o600); err != nil {
		return "", err
	}
	// dhclient binds to the link-local address, which DAD holds tentative
	// for a second after the link came up ("Can't bind to dhcp address:
	// Cannot assign requested address" when the router's lease comes
	// sooner than that).
	if err := waitLinkLocal(ctx, l.lanNS, hostIf, proofTimeout); err != nil {
		return "", err
	}
	c, err := startChild(l.log, "lan-dhclient6", l.lanNS, filepath.Join(l.dir, "dhclient6-proof.log"),
		"dhclient", "-6", "-S", "-d", "-v", "-cf", conf, "-lf", filepath.Join(l.dir, "dhclient6.leases"),
		"-pf", filepath.Join(l.dir, "dhclient6.pid"), "-sf", script, hostIf)
	if err != nil {
		return "", err
	}
	defer c.stop()
	// dhclient -S reports the Reply as RENEW6.
	ev, err := waitEvent(ctx, events, "RENEW6", proofTimeout)
	if err != nil {
		return "", fmt.Errorf("no Reply to dhclient's Information-request: %w; dhclient log:\n%s", err, tail(c.logPath, 1500))
	}
	// The router's address in the delegated /64 may be listed too.
	if !slices.Contains(strings.Split(ev["dns"], ","), lanRouter6.Addr().String()) || strings.TrimSuffix(ev["domain"], ".") != labDomain {
		return "", fmt.Errorf("dhclient got DNS %q domain %q, want %s and %s", ev["dns"], ev["domain"], lanRouter6.Addr(), labDomain)
	}
	return fmt.Sprintf("DNS %s, domain %s, refresh %s s", ev["dns"], strings.TrimSuffix(ev["domain"], "."), ev["refresh"]), nil
}

// dnsProof resolves an ISP name from the LAN host through the router's
// forwarder with Go's own stub resolver (not ours), over UDP.
func (l *lab) dnsProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	server := netip.AddrPortFrom(lanRouter4.Addr(), 53).String()
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(l.lanNS, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, server)
			return err
		})
		return c, err
	}}
	start := time.Now()
	addrs, err := res.LookupNetIP(ctx, "ip4", ispWebName)
	if err != nil {
		return "", err
	}
	if len(addrs) != 1 || addrs[0].Unmap() != ispWebAddr {
		return "", fmt.Errorf("%s resolved to %v, want %s (the ISP's record)", ispWebName, addrs, ispWebAddr)
	}
	return fmt.Sprintf("%s → %s via %s in %v", ispWebName, addrs[0].Unmap(), server, time.Since(start).Round(time.Microsecond)), nil
}

// wanLeaseProof checks the router's WAN lease on its status page against
// what the ISP's dnsmasq logged.
func (l *lab) wanLeaseProof(ctx context.Context) (string, error) {
	c, snap, err := l.wanClient(ctx)
	if err != nil {
		return "", err
	}
	lease := c.Held()
	if c.State != "bound" || lease.Addr != wanRouter4 {
		return "", fmt.Errorf("WAN client %s with %v, want bound to %s", c.State, lease.Addr, wanRouter4)
	}
	if !hasRoute(snap, farNet.String(), wanHost4.Addr().String(), c.Interface) {
		return "", fmt.Errorf("the option 121 route to %s is not in the router's table %v", farNet, snap.Routes)
	}
	if !strings.Contains(l.ispLog(), "DHCPACK("+hostIf+") "+wanRouter4.Addr().String()) {
		return "", fmt.Errorf("the ISP's log has no DHCPACK of %s", wanRouter4.Addr())
	}
	return fmt.Sprintf("%s from %s, %d routes (option 121), renew at %s", lease.Addr, lease.Server, len(lease.Routes),
		lease.T1.Format(time.TimeOnly)), nil
}

// lanLeaseProof runs busybox udhcpc once on the LAN host against the
// router's DHCP server and releases the lease again.
func (l *lab) lanLeaseProof(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, proofTimeout)
	defer cancel()
	events := filepath.Join(l.dir, "udhcpc-proof.events")
	script := filepath.Join(l.dir, "udhcpc-proof.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(udhcpcProofScript, events)), 0o700); err != nil {
		return "", err
	}
	// -q: quit once bound; -R: release at quit; -n: fail if no lease.
	out, err := output(ctx, l.lanNS, "udhcpc", "-q", "-R", "-n", "-i", hostIf, "-s", script,
		"-x", "hostname:lab-proof", "-t", "5", "-T", "1")
	if err != nil {
		return "", fmt.Errorf("udhcpc: %w: %s", err, out)
	}
	ev, err := waitEvent(ctx, events, "bound", time.Second)
	if err != nil {
		return "", err
	}
	ip, err := netip.ParseAddr(ev["ip"])
	if err != nil {
		return "", fmt.Errorf("udhcpc bound without an address: %v", ev)
	}
	first, last := netip.MustParseAddr("10.77.1.100"), netip.MustParseAddr("10.77.1.199")
	if ip.Less(first) || last.Less(ip) || ev["router"] != lanRouter4.Addr().String() || ev["mask"] != "24" {
		return "", fmt.Errorf("udhcpc bound %v, want an address in %s, router %s, mask 24", ev, lanDHCPRange, lanRouter4.Addr())
	}
	return fmt.Sprintf("%s/%s, router %s, DNS %s, lease %s s", ip, ev["mask"], ev["router"], ev["dns"], ev["lease"]), nil
}

// waitEvent waits until the udhcpc event log has a line for event and
// returns its key=value fields.
func waitEvent(ctx context.Context, path, event string, d time.Duration) (map[string]string, error) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				fields := strings.Fields(sc.Text())
				if len(fields) == 0 || fields[0] != event {
					continue
				}
				kv := map[string]string{}
				for _, f := range fields[1:] {
					if k, v, ok := strings.Cut(f, "="); ok {
						kv[k] = v
					}
				}
				f.Close()
				return kv, nil
			}
			f.Close()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(path)
	return nil, fmt.Errorf("no %q event from udhcpc in %s; events so far:\n%s", event, d, b)
}
