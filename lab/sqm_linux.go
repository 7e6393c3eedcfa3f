package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The bloated modem of the SQM tests and bench: an htb at the modem's
// rate with a FIFO of modemFIFO packets (600 ms of full frames at 20
// Mbit/s, 120 ms at 100), as a cable or DSL modem's buffer.
const (
	modemFIFO = "1000"
	modemIFB  = "ifb0"
)

// addModem puts the bloated modem on the upload path: the WAN host's
// ingress (frames from the router) is redirected to an IFB with htb at
// rate and a pfifo of modemFIFO packets. The router's port bypasses
// qdiscs (PACKET_QDISC_BYPASS), so the buffer must sit past the link, as
// a modem's does.
func addModem(ctx context.Context, l *lab, rate string) error {
	for _, s := range [][]string{
		{"ip", "link", "add", modemIFB, "type", "ifb"},
		{"ip", "link", "set", modemIFB, "up"},
		{"tc", "qdisc", "add", "dev", modemIFB, "root", "handle", "1:", "htb", "default", "1"},
		{"tc", "class", "add", "dev", modemIFB, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "quantum", "1514"},
		{"tc", "qdisc", "add", "dev", modemIFB, "parent", "1:1", "pfifo", "limit", modemFIFO},
		{"tc", "qdisc", "add", "dev", hostIf, "handle", "ffff:", "ingress"},
		{"tc", "filter", "add", "dev", hostIf, "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0", "0",
			"action", "mirred", "egress", "redirect", "dev", modemIFB},
	} {
		if err := nsRun(ctx, l.wanNS, s[0], s[1:]...); err != nil {
			return fmt.Errorf("modem: %w", err)
		}
	}
	return nil
}

// Beyond the WAN host: a server namespace in farNet, so the download
// crosses the WAN host as forwarded traffic. The WAN host's own TCP
// would not fill the modem's FIFO: TCP small queues keep a local
// sender's packets out of its qdisc, while a forwarded packet is no
// socket's.
var (
	farGateway = netip.MustParsePrefix("198.18.77.1/24")
	farServer  = netip.MustParsePrefix("198.18.77.5/24")
)

// addFarServer builds the server namespace behind the WAN host and
// returns its name; teardown removes it with the lab's own.
func addFarServer(ctx context.Context, l *lab) (string, error) {
	far := l.prefix + "-far"
	if err := addNetns(ctx, far); err != nil {
		return "", err
	}
	l.namespaces = append(l.namespaces, far)
	for _, s := range [][]string{
		{l.wanNS, "ip", "link", "add", "far0", "type", "veth", "peer", "name", hostIf, "netns", far},
		{l.wanNS, "ip", "addr", "add", farGateway.String(), "dev", "far0"},
		{l.wanNS, "ip", "link", "set", "far0", "up"},
		{l.wanNS, "ip", "route", "replace", farNet.String(), "dev", "far0"},
		{l.wanNS, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		{far, "ip", "link", "set", "lo", "up"},
		{far, "ip", "addr", "add", farServer.String(), "dev", hostIf},
		{far, "ip", "link", "set", hostIf, "up"},
		{far, "ip", "route", "add", "default", "via", farGateway.Addr().String()},
	} {
		if err := nsRun(ctx, s[0], s[1], s[2:]...); err != nil {
			return "", fmt.Errorf("far server: %w", err)
		}
	}
	for _, e := range []struct{ ns, ifname string }{{l.wanNS, "far0"}, {far, hostIf}} {
		if err := setWireLike(e.ns, e.ifname); err != nil {
			return "", err
		}
	}
	return far, nil
}

// addDownloadModem is addModem's download side: the WAN host's egress
// towards the router gets the same htb and FIFO.
func addDownloadModem(ctx context.Context, l *lab, rate string) error {
	for _, s := range [][]string{
		{"tc", "qdisc", "add", "dev", hostIf, "root", "handle", "1:", "htb", "default", "1"},
		{"tc", "class", "add", "dev", hostIf, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "quantum", "1514"},
		{"tc", "qdisc", "add", "dev", hostIf, "parent", "1:1", "pfifo", "limit", modemFIFO},
	} {
		if err := nsRun(ctx, l.wanNS, s[0], s[1:]...); err != nil {
			return fmt.Errorf("download modem: %w", err)
		}
	}
	return nil
}

// withWANSQM returns the lab config with sqm: added to the wan interface.
func withWANSQM(cfg []byte, sqm string) ([]byte, error) {
	var out strings.Builder
	done := false
	for line := range strings.Lines(string(cfg)) {
		out.WriteString(line)
		if t := strings.TrimSpace(line); t == "role: wan" && !done {
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			out.WriteString(indent + "sqm: " + sqm + "\n")
			done = true
		}
	}
	if !done {
		return nil, fmt.Errorf("lab config has no \"role: wan\" line:\n%s", cfg)
	}
	return []byte(out.String()), nil
}

// reloadRouter writes cfg and sends SIGHUP, then waits for the router's
// "reloaded" log line.
func reloadRouter(l *lab, cfg []byte) error {
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	logPath := filepath.Join(l.dir, "router.log")
	before := strings.Count(tail(logPath, 1<<20), "msg=reloaded")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return err
	}
	if err := l.router.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return err
	}
	for deadline := time.Now().Add(proofTimeout); strings.Count(tail(logPath, 1<<20), "msg=reloaded") <= before; {
		if time.Now().After(deadline) || l.router.exited() {
			return fmt.Errorf("router did not reload:\n%s", tail(logPath, 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// secondLANHost is the fairness test's second LAN host, beside the lab's.
var secondLANHost = netip.MustParsePrefix("10.77.1.3/24")

// addSecondLANHost bridges the LAN host's link so a second host can sit
// on it: the LAN host's address moves to the bridge, which keeps the
// LAN host's MAC (the router's neighbour entry stays right), and a new
// namespace with secondLANHost joins the bridge. It returns the new
// namespace's name.
func addSecondLANHost(ctx context.Context, l *lab) (string, error) {
	mac, err := output(ctx, l.lanNS, "cat", "/sys/class/net/"+hostIf+"/address")
	if err != nil {
		return "", err
	}
	lan2 := l.prefix + "-lan2"
	if err := addNetns(ctx, lan2); err != nil {
		return "", err
	}
	l.namespaces = append(l.namespaces, lan2)
	for _, s := range [][]string{
		{l.lanNS, "ip", "link", "add", "name", "br0", "type", "bridge"},
		{l.lanNS, "ip", "link", "set", "br0", "address", strings.TrimSpace(string(mac))},
		{l.lanNS, "ip", "addr", "flush", "dev", hostIf},
		{l.lanNS, "ip", "link", "set", hostIf, "master", "br0"},
		{l.lanNS, "ip", "addr", "add", lanHost4.String(), "dev", "br0"},
		{l.lanNS, "ip", "link", "set", "br0", "up"},
		{l.lanNS, "ip", "route", "replace", "default", "via", lanRouter4.Addr().String(), "dev", "br0"},
		{l.lanNS, "ip", "link", "add", "lan2p", "type", "veth", "peer", "name", hostIf, "netns", lan2},
		{l.lanNS, "ip", "link", "set", "lan2p", "master", "br0"},
		{l.lanNS, "ip", "link", "set", "lan2p", "up"},
		{lan2, "ip", "link", "set", "lo", "up"},
		{lan2, "ip", "addr", "add", secondLANHost.String(), "dev", hostIf},
		{lan2, "ip", "link", "set", hostIf, "up"},
		{lan2, "ip", "route", "add", "default", "via", lanRouter4.Addr().String()},
	} {
		if err := nsRun(ctx, s[0], s[1], s[2:]...); err != nil {
			return "", fmt.Errorf("second LAN host: %w", err)
		}
	}
	for _, e := range []struct{ ns, ifname string }{{l.lanNS, "lan2p"}, {lan2, hostIf}} {
		if err := setWireLike(e.ns, e.ifname); err != nil {
			return "", err
		}
	}
	return lan2, nil
}
