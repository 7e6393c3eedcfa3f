package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/natengine"
)

// The guest network of TestLabGuestNetwork: a port of its own on the
// router (a veth to the guest host's namespace; the kernel has no 8021q
// module here, so no VLAN on the LAN port), as a guest access point on
// its own switch port would be.
const (
	guestPort    = "gst0" // router namespace: veth towards the guest host
	guestIf      = "gst"  // guest host: its veth
	guestDHCP    = "10.77.3.100-10.77.3.150"
	guestEchoWAN = 7301
	guestEchoLAN = 7302
)

var (
	guestRouter4 = netip.MustParsePrefix("10.77.3.1/24")
	blockedLAN4  = netip.MustParsePrefix("10.77.1.4/24") // a second LAN "device", blocked from the WAN
)

// guestUdhcpcScript configures the lease and its default route in the
// guest namespace and records the events.
const guestUdhcpcScript = `#!/bin/sh
echo "$1 ip=$ip mask=$mask router=$router dns=$dns" >> %s
case "$1" in
bound|renew)
  ip addr replace "$ip/$mask" dev "$interface"
  [ -n "$router" ] && ip route replace default via "$router" dev "$interface" ;;
esac
exit 0
`

// guestZones turns the lab config into a zoned one: the LAN, a guest
// network on port guestPort with its DHCP server, and the WAN;
// the guest zone gets DHCP, DNS and the WAN only; the LAN host's second
// address blockedLAN4 is refused the WAN by a rule. The lab's allow6 and
// port forward carry over (a rule and the forward).
func guestZones(cfg []byte) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(cfg, &m); err != nil {
		return nil, err
	}
	ports, _ := m["ports"].([]any)
	m["ports"] = append(ports, map[string]any{"name": guestPort})
	ifaces, _ := m["interfaces"].([]any)
	ifaces = append(ifaces, map[string]any{
		"name": "guest", "port": guestPort, "role": "lan",
		"addresses":   []string{guestRouter4.String()},
		"dhcp_server": map[string]any{"range": guestDHCP, "lease_time": "1h"},
	})
	m["interfaces"] = ifaces
	m["firewall"] = map[string]any{
		"zones": []any{
			map[string]any{"name": "lan", "interfaces": []string{"lan"}, "input": "accept", "forward": "accept"},
			map[string]any{"name": "guest", "interfaces": []string{"guest"}, "input": "reject", "forward": "drop"},
			map[string]any{"name": "wan", "interfaces": []string{"wan"}, "input": "drop", "forward": "drop"},
		},
		"rules": []any{
			map[string]any{"name": "guest-dhcp", "src": "guest", "proto": "udp", "dest_port": 67, "target": "accept"},
			map[string]any{"name": "guest-dns", "src": "guest", "dest_port": 53, "target": "accept"},
			map[string]any{"name": "guest-wan", "src": "guest", "dest": "wan", "proto": "all", "target": "accept"},
			map[string]any{"name": "block-device", "src": "lan", "dest": "wan", "src_ip": blockedLAN4.Addr().String(), "proto": "all", "target": "reject", "log": "on"},
			map[string]any{"name": "ping", "src": "wan", "icmp_type": "echo-request", "target": "accept"},
			map[string]any{"name": "lab-allow6", "src": "wan", "dest": "lan", "proto": "tcp", "dest_ip": lanHost6.Addr().String(), "dest_port": forwardPort, "target": "accept"},
		},
	}
	return yaml.Marshal(m)
}

// dialFrom connects from namespace ns, from local address from (any if
// invalid), to addr, sends msg and wants it back.
func dialFrom(ns string, from netip.Addr, addr netip.AddrPort, msg string, timeout time.Duration) error {
	var c net.Conn
	if err := inNetns(ns, func() error {
		d := net.Dialer{Timeout: timeout}
		if from.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
		}
		var err error
		c, err = d.Dial("tcp4", addr.String())
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("%s echoed %q, want %q", addr, got, msg)
	}
	return nil
}

// TestLabGuestNetwork reloads the lab router with zones and a guest
// network on a port of its own, puts a guest host (its own namespace,
// a veth to that port) on it and
// checks with the hosts' own kernels and busybox udhcpc and dig: the
// guest gets a lease (with the router as gateway and DNS), a DNS answer
// from the router's forwarder and a TCP connection to the WAN host; it
// reaches neither the LAN host nor the router's status page (on the LAN
// address: refused at once, a reject) nor anything on the router's guest
// address but DHCP and DNS; the LAN host still reaches the WAN and the
// page; its second address, which a rule blocks, does not reach the WAN
// (refused); the router's firewall drop counter rose.
func TestLabGuestNetwork(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "udhcpc", "dig")
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		guestNS := l.prefix + "-gst"
		if err := nsRun(ctx, "", "ip", "netns", "add", guestNS); err != nil {
			return err
		}
		defer nsRun(context.Background(), "", "ip", "netns", "del", guestNS)
		if err := nsRun(ctx, l.rtrNS, "ip", "link", "add", guestPort, "type", "veth", "peer", "name", guestIf, "netns", guestNS); err != nil {
			return err
		}
		if err := nsRun(ctx, l.rtrNS, "ip", "link", "set", guestPort, "up"); err != nil {
			return err
		}
		if err := nsRun(ctx, l.lanNS, "ip", "addr", "add", blockedLAN4.String(), "dev", hostIf); err != nil {
			return err
		}
		for _, c := range [][]string{{"ip", "link", "set", "lo", "up"}, {"ip", "link", "set", guestIf, "up"}} {
			if err := nsRun(ctx, guestNS, c[0], c[1:]...); err != nil {
				return err
			}
		}
		drops0, _, err := firewallDrops(ctx, l)
		if err != nil {
			return err
		}

		cfgPath := filepath.Join(l.dir, "lab.yaml")
		orig, err := os.ReadFile(cfgPath)
		if err != nil {
			return err
		}
		next, err := guestZones(orig)
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfgPath, next, 0o600); err != nil {
			return err
		}
		if err := l.router.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			return err
		}

		// DHCP on the guest VLAN (retrying until the reload has the
		// interface up).
		events := filepath.Join(l.dir, "guest-udhcpc.events")
		script := filepath.Join(l.dir, "guest-udhcpc.sh")
		if err := os.WriteFile(script, []byte(fmt.Sprintf(guestUdhcpcScript, events)), 0o700); err != nil {
			return err
		}
		u := command(ctx, guestNS, "udhcpc", "-f", "-i", guestIf, "-s", script, "-t", "20", "-T", "1")
		if err := u.Start(); err != nil {
			return err
		}
		defer u.Wait()
		defer u.Process.Signal(syscall.SIGKILL)
		var bound string
		for deadline := time.Now().Add(30 * time.Second); bound == ""; time.Sleep(200 * time.Millisecond) {
			b, _ := os.ReadFile(events)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "bound ") {
					bound = line
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("guest: no DHCP lease in 30 s; events %q; router log:\n%s", b, tail(filepath.Join(l.dir, "router.log"), 3000))
			}
		}
		t.Logf("guest udhcpc: %s", bound)
		var errs []error
		if !strings.Contains(bound, "router="+guestRouter4.Addr().String()) || !strings.Contains(bound, "dns="+guestRouter4.Addr().String()) ||
			!strings.Contains(bound, "ip=10.77.3.1") {
			errs = append(errs, fmt.Errorf("guest lease %q: want an address of %s with router and DNS %s", bound, guestDHCP, guestRouter4.Addr()))
		}

		// DNS from the router's forwarder on the guest address.
		out, err := dig(ctx, guestNS, guestRouter4.Addr(), ispWebName, "A")
		if err != nil || digStatus(out) != "NOERROR" || !strings.Contains(out, ispWebAddr.String()) {
			errs = append(errs, fmt.Errorf("guest DNS for %s: %v\n%s", ispWebName, err, out))
		}

		wanEcho, err := listenEcho(l.wanNS, netip.AddrPortFrom(wanHost4.Addr(), guestEchoWAN).String())
		if err != nil {
			return err
		}
		defer wanEcho.close()
		lanEcho, err := listenEcho(l.lanNS, netip.AddrPortFrom(lanHost4.Addr(), guestEchoLAN).String())
		if err != nil {
			return err
		}
		defer lanEcho.close()
		wanAt := netip.AddrPortFrom(wanHost4.Addr(), guestEchoWAN)
		if err := dialFrom(guestNS, netip.Addr{}, wanAt, "guest to wan", 5*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("guest to the WAN host: %w", err))
		}
		if err := dialFrom(guestNS, netip.Addr{}, netip.AddrPortFrom(lanHost4.Addr(), guestEchoLAN), "guest to lan", 2*time.Second); err == nil {
			errs = append(errs, errors.New("guest reached the LAN host"))
		}
		if n := len(lanEcho.peerList()); n != 0 {
			errs = append(errs, fmt.Errorf("the LAN host's server saw %d connections from the guest", n))
		}
		// The status page listens on the LAN address: the guest zone's
		// input policy rejects it (an RST: refused, not a timeout).
		start := time.Now()
		_, err = httpGet(ctx, guestNS, "http://"+lanRouter4.Addr().String()+"/")
		if err == nil || !strings.Contains(err.Error(), "refused") {
			errs = append(errs, fmt.Errorf("guest to the status page: %v after %v, want connection refused", err, time.Since(start)))
		}
		if _, err := httpGet(ctx, l.lanNS, "http://"+lanRouter4.Addr().String()+"/"); err != nil {
			errs = append(errs, fmt.Errorf("LAN host to the status page: %w", err))
		}
		// The LAN host still reaches the WAN; its blocked address does
		// not (refused by the rule's ICMP port unreachable).
		if err := dialFrom(l.lanNS, lanHost4.Addr(), wanAt, "lan to wan", 5*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("LAN host to the WAN host: %w", err))
		}
		seen := len(wanEcho.peerList())
		if err := dialFrom(l.lanNS, blockedLAN4.Addr(), wanAt, "blocked to wan", 3*time.Second); err == nil {
			errs = append(errs, errors.New("the blocked LAN address reached the WAN host"))
		} else if !strings.Contains(err.Error(), "refused") {
			errs = append(errs, fmt.Errorf("blocked LAN address to the WAN: %v, want connection refused (reject)", err))
		}
		if n := len(wanEcho.peerList()); n != seen {
			errs = append(errs, fmt.Errorf("the WAN host saw %d more connections after the blocked one, want none", n-seen))
		}
		drops1, fw, err := firewallDrops(ctx, l)
		if err != nil {
			return err
		}
		t.Logf("firewall drops %d -> %d; counters %v", drops0, drops1, fw)
		if fw["rule block-device hits"] == 0 || fw["rule guest-wan hits"] == 0 || fw["zone guest input"] == 0 || fw["zone guest forward"] == 0 {
			errs = append(errs, fmt.Errorf("status firewall counters %v: want hits of block-device and guest-wan and of the guest zone's input and forward policies", fw))
		}
		if drops1 < drops0+3 {
			errs = append(errs, fmt.Errorf("conntrack drops %q rose from %d to %d, want at least 3 more (guest to lan, guest to the page, the blocked address)", natengine.DropFirewall, drops0, drops1))
		}
		return errors.Join(errs...)
	})
}

// firewallDrops reads the engine's firewall drop counter and the zone
// firewall's counters from a status snapshot taken after now.
func firewallDrops(ctx context.Context, l *lab) (uint64, map[string]uint64, error) {
	s, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return 0, nil, err
	}
	if s.Conntrack == nil {
		return 0, nil, errors.New("status JSON has no conntrack section")
	}
	return s.Conntrack.Drops[natengine.DropFirewall.String()], s.Conntrack.Firewall, nil
}
