package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The differential test of the zone firewall against Linux: the lab
// router with zones lan, guest and wan (guestZones) beside a kernel
// router in namespaces of its own with the same policy written as an
// nftables ruleset (diffNFT), the same hosts and addresses behind each.
// Every host runs scapyZoneProbe, which sends its probes, answers the
// probes of established-flow kind and records what arrives; each probe's
// verdict is what became of it: delivered to the destination host,
// refused (a TCP RST or ICMP unreachable came back) or silent (dropped),
// and for a router address replied (an echo reply), refused or silent.

// Addresses of the guest network and the blocked LAN device in both
// setups (the LAN and WAN hosts' are the lab's).
var (
	diffGuestHost4 = netip.MustParsePrefix("10.77.3.2/24")
	diffGuestHost6 = netip.MustParsePrefix("fd77:3::2/64")
	diffGuestRtr6  = netip.MustParsePrefix("fd77:3::1/64")
)

// diffProbe is one probe of the matrix.
type diffProbe struct {
	ID     int    `json:"id"`
	Src    string `json:"src"`    // host role sending it: lan, guest, wan
	SrcIP  string `json:"src_ip"` // its source address
	Dst    string `json:"dst"`    // target name: lan, guest, wan, rtr-lan, rtr-guest, rtr-wan, fwd
	DstIP  string `json:"dst_ip"`
	Proto  string `json:"proto"` // tcp, udp, icmp, gre, esp, p253
	Port   int    `json:"port"`
	Type   int    `json:"type"` // ICMP type
	Kind   string `json:"kind"` // new: one packet; est: the destination answers (established)
	V6     bool   `json:"v6"`
	Sport  int    `json:"sport"`
	Target string `json:"-"` // the host role that sees a delivered probe ("" for the router)
}

func (p diffProbe) String() string {
	from := p.Src
	if p.SrcIP == blockedLAN4.Addr().String() {
		from = "lan(blocked)"
	}
	fam := "v4"
	if p.V6 {
		fam = "v6"
	}
	what := p.Proto
	switch {
	case p.Proto == "tcp" || p.Proto == "udp":
		what = fmt.Sprintf("%s/%d", p.Proto, p.Port)
	case p.Proto == "icmp":
		what = fmt.Sprintf("icmp%s type %d", map[bool]string{true: "v6"}[p.V6], p.Type)
	}
	return fmt.Sprintf("%-12s -> %-9s %s %-18s %s", from, p.Dst, fam, what, p.Kind)
}

// diffProbes builds the matrix: from each host (and the LAN host's
// blocked address) to each other host and each router address; TCP
// SYNs, UDP, ICMP echo (and timestamp, and an unsolicited echo reply),
// GRE, ESP and protocol 253; IPv4 and IPv6; new flows and established
// ones (UDP and echo answered by the destination); the port forward.
func diffProbes() []diffProbe {
	type host struct {
		role       string
		ip4, ip6   string
		blocked    bool
		targetName string
	}
	hosts := []host{
		{role: "lan", ip4: lanHost4.Addr().String(), ip6: lanHost6.Addr().String()},
		{role: "lan", ip4: blockedLAN4.Addr().String(), blocked: true},
		{role: "guest", ip4: diffGuestHost4.Addr().String(), ip6: diffGuestHost6.Addr().String()},
		{role: "wan", ip4: wanHost4.Addr().String(), ip6: wanHost6.Addr().String()},
	}
	routers := []struct{ name, ip4, ip6 string }{
		{"rtr-lan", lanRouter4.Addr().String(), lanRouter6.Addr().String()},
		{"rtr-guest", guestRouter4.Addr().String(), diffGuestRtr6.Addr().String()},
		{"rtr-wan", wanRouter4.Addr().String(), wanRouter6.Addr().String()},
	}
	var out []diffProbe
	add := func(p diffProbe) {
		p.ID = len(out)
		p.Sport = 20000 + p.ID
		out = append(out, p)
	}
	for _, s := range hosts {
		for _, v6 := range []bool{false, true} {
			src := s.ip4
			if v6 {
				src = s.ip6
			}
			if src == "" {
				continue
			}
			echo, echoReply := 8, 0
			if v6 {
				echo, echoReply = 128, 129
			}
			for _, r := range routers {
				dst := r.ip4
				if v6 {
					dst = r.ip6
				}
				base := diffProbe{Src: s.role, SrcIP: src, Dst: r.name, DstIP: dst, V6: v6, Kind: "new"}
				for _, p := range []diffProbe{{Proto: "tcp", Port: 2222}, {Proto: "udp", Port: 5555}, {Proto: "icmp", Type: echo}} {
					q := base
					q.Proto, q.Port, q.Type = p.Proto, p.Port, p.Type
					add(q)
				}
			}
			for _, d := range hosts {
				if d.role == s.role || d.blocked {
					continue
				}
				dst := d.ip4
				if v6 {
					dst = d.ip6
				}
				base := diffProbe{Src: s.role, SrcIP: src, Dst: d.role, DstIP: dst, V6: v6, Target: d.role}
				ps := []diffProbe{
					{Proto: "tcp", Port: 2222, Kind: "new"}, {Proto: "tcp", Port: 8080, Kind: "new"},
					{Proto: "udp", Port: 5555, Kind: "new"}, {Proto: "icmp", Type: echo, Kind: "new"},
					{Proto: "icmp", Type: echoReply, Kind: "new"}, // unsolicited
					{Proto: "gre", Kind: "new"}, {Proto: "esp", Kind: "new"}, {Proto: "p253", Kind: "new"},
					{Proto: "udp", Port: 6000, Kind: "est"}, {Proto: "icmp", Type: echo, Kind: "est"},
				}
				if !v6 {
					ps = append(ps, diffProbe{Proto: "icmp", Type: 13, Kind: "new"})
				}
				for _, p := range ps {
					q := base
					q.Proto, q.Port, q.Type, q.Kind = p.Proto, p.Port, p.Type, p.Kind
					add(q)
				}
			}
		}
	}
	// The port forward (wan 8080 to the LAN host), TCP and UDP.
	for _, proto := range []string{"tcp", "udp"} {
		add(diffProbe{Src: "wan", SrcIP: wanHost4.Addr().String(), Dst: "fwd", DstIP: wanRouter4.Addr().String(), Proto: proto, Port: forwardPort, Kind: "new", Target: "lan"})
	}
	return out
}

// scapyZoneProbe runs on one host: argv iface, probes file. It sniffs,
// prints "ready", waits for a line, sends its probes (each with a marker
// "gvz-new-ID|" or, for established ones, "gvz-out-ID|"), prints "sent",
// waits for a line and prints what it saw as JSON. It answers every UDP
// "gvz-out-" datagram it receives with a "gvz-reply-" one, addresses and
// ports swapped (echo requests its kernel answers itself).
const scapyZoneProbe = `
import json, struct, sys, time
from scapy.utils import checksum
from scapy.layers.inet6 import in6_chksum
from scapy.all import (AsyncSniffer, IP, IPv6, TCP, UDP, ICMP, GRE, Raw, conf, send, get_if_hwaddr,
    ICMPv6EchoRequest, ICMPv6EchoReply, ICMPv6DestUnreach)
conf.verb = 0
iface = sys.argv[1]
probes = json.load(open(sys.argv[2]))
me = get_if_hwaddr(iface)
seen = []

def marker(b):
    i = b.find(b"gvz-")
    if i < 0:
        return None
    j = b.find(b"|", i)
    return b[i:j].decode(errors="replace") if j > i else None

def rec(p):
    if p.src == me:
        return
    ip = p[IPv6] if IPv6 in p else (p[IP] if IP in p else None)
    if ip is None:
        return
    m = marker(bytes(ip))
    if m is None:
        if TCP in p and int(p[TCP].flags) & 0x04:
            seen.append({"sport": int(p[TCP].dport), "what": "rst"})
        return
    parts = m.split("-")
    if len(parts) != 3:
        return
    kind, pid = parts[1], int(parts[2])
    what = "pkt"
    if (ICMP in p and p[ICMP].type in (3, 11, 12)) or ICMPv6DestUnreach in p:
        what = "unreach"
    elif (ICMP in p and p[ICMP].type == 0) or ICMPv6EchoReply in p:
        what = "echoreply"
    seen.append({"id": pid, "kind": kind, "what": what})
    if kind == "out" and what == "pkt" and UDP in p:
        u = p[UDP]
        body = bytes(u.payload).replace(b"gvz-out-", b"gvz-reply-", 1)
        l3 = IPv6(src=ip.dst, dst=ip.src) if IPv6 in p else IP(src=ip.dst, dst=ip.src)
        send(l3 / UDP(sport=u.dport, dport=u.sport) / Raw(body))

def build(p):
    mark = ("gvz-%s-%d|" % ("out" if p["kind"] == "est" else "new", p["id"])).encode() + b"........"
    v6 = p["v6"]
    def l3(proto=None):
        if v6:
            return IPv6(src=p["src_ip"], dst=p["dst_ip"]) if proto is None else IPv6(src=p["src_ip"], dst=p["dst_ip"], nh=proto)
        return IP(src=p["src_ip"], dst=p["dst_ip"]) if proto is None else IP(src=p["src_ip"], dst=p["dst_ip"], proto=proto)
    pr = p["proto"]
    if pr == "tcp":
        return l3() / TCP(sport=p["sport"], dport=p["port"], flags="S", seq=1000) / Raw(mark)
    if pr == "udp":
        return l3() / UDP(sport=p["sport"], dport=p["port"]) / Raw(mark)
    if pr == "icmp":
        if v6:
            cls = ICMPv6EchoRequest if p["type"] == 128 else ICMPv6EchoReply
            return l3() / cls(id=p["sport"], seq=1, data=mark)
        return l3() / ICMP(type=p["type"], id=p["sport"], seq=1) / Raw(mark)
    if pr == "gre":
        return l3(47) / GRE(proto=0x88b5) / Raw(mark)
    if pr == "esp":
        return l3(50) / Raw(b"\x00\x00\x10\x01\x00\x00\x00\x01" + mark)
    # Protocol 253 carries an Internet checksum that Linux's reject
    # accepts, as it verifies one for a protocol it does not know before
    # it answers (nf_reject_verify_csum), so both routers may answer it:
    # over the payload alone for IPv4 (nf_ip_checksum zeroes the start
    # value for any protocol but TCP and UDP), with the pseudo-header
    # for IPv6 (nf_ip6_checksum).
    body = mark + (b"." if len(mark) % 2 else b"") + b"\x00\x00"
    pkt = l3(253) / Raw(body)
    c = in6_chksum(253, pkt[IPv6], body) if v6 else checksum(body)
    return l3(253) / Raw(body[:-2] + struct.pack("!H", c))

sn = AsyncSniffer(iface=iface, store=False, prn=rec)
sn.start()
time.sleep(0.5)
print("ready", flush=True)
sys.stdin.readline()
for p in probes:
    send(build(p))
    time.sleep(0.01)
print("sent", flush=True)
sys.stdin.readline()
sn.stop()
print(json.dumps(seen), flush=True)
`

// diffNFT is the zone policy of guestZones as an nftables ruleset for
// the kernel router (lan0, gst0, wan0), with what the router does
// whatever the zones say: the router's own packets never leave the wan
// with a LAN or guest source (gvrouter's egress filter, stack
// srcfilter.go), established and related flows pass, invalid
// ones (a TCP segment or echo reply that opens nothing) are dropped,
// neighbour discovery and MLD reach the router, redirected (DNAT) flows
// from the wan pass, IPv4 is masqueraded on the wan. A reject to the
// router answers TCP with a reset, the rest and every forwarded reject
// with port unreachable.
const diffNFT = `
flush ruleset
table inet fw {
  chain input {
    type filter hook input priority filter; policy drop;
    ct state established,related accept
    ct state invalid drop
    iif "lo" accept
    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, nd-router-advert, mld-listener-query, mld-listener-report, mld-listener-done, mld2-listener-report } accept
    iifname "lan0" jump input_lan
    iifname "gst0" jump input_guest
    iifname "wan0" jump input_wan
  }
  chain input_lan {
    accept
  }
  chain input_guest {
    udp dport 67 accept
    meta l4proto { tcp, udp } th dport 53 accept
    meta l4proto tcp reject with tcp reset
    reject with icmpx type port-unreachable
  }
  chain input_wan {
    icmp type echo-request accept
    icmpv6 type echo-request accept
    drop
  }
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    ct state invalid drop
    iifname "lan0" jump fwd_lan
    iifname "gst0" jump fwd_guest
    iifname "wan0" jump fwd_wan
  }
  chain fwd_lan {
    oifname "wan0" ip saddr 10.77.1.4 reject with icmpx type port-unreachable
    accept
  }
  chain fwd_guest {
    oifname "wan0" accept
    drop
  }
  chain fwd_wan {
    oifname "lan0" ip6 daddr fd77:1::2 tcp dport 8080 accept
    ct status dnat accept
    drop
  }
}
table inet out {
  chain output {
    type filter hook output priority filter;
    oifname "wan0" ip saddr { 10.77.1.0/24, 10.77.3.0/24 } drop
    oifname "wan0" ip6 saddr { fd77:1::/64, fd77:3::/64 } drop
  }
}
table ip nat {
  chain prerouting {
    type nat hook prerouting priority dstnat;
    iifname "wan0" ip daddr 10.77.2.1 meta l4proto { tcp, udp } th dport 8080 dnat to 10.77.1.2:8080
  }
  chain postrouting {
    type nat hook postrouting priority srcnat;
    oifname "wan0" masquerade
  }
}
`

// hostQuiet keeps a host's kernel from answering probes itself with a
// reset or an unreachable (closed ports), which would race the probes'
// own answers through the routers' connection tracking.
const hostQuiet = `
table inet quiet {
  chain out {
    type filter hook output priority filter;
    tcp flags rst drop
    icmp type destination-unreachable drop
    icmpv6 type destination-unreachable drop
  }
}
`

// diffSetup is one side of the differential test: the namespaces of its
// LAN, guest and WAN hosts and their interface names.
type diffSetup struct {
	name     string
	ns       map[string]string // role -> namespace
	iface    map[string]string // role -> interface
	cleanups []func()
}

func (d *diffSetup) cleanup() {
	for i := len(d.cleanups) - 1; i >= 0; i-- {
		d.cleanups[i]()
	}
}

func runAll(ctx context.Context, cmds [][]string) error {
	for _, c := range cmds {
		if err := nsRun(ctx, c[0], c[1], c[2:]...); err != nil {
			return err
		}
	}
	return nil
}

func nftLoad(ctx context.Context, ns, rules string) error {
	cmd := command(ctx, ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", ns, err, out)
	}
	return nil
}

// kernelRouter builds the kernel side: router namespace with lan0, gst0
// and wan0, a host namespace behind each, the lab's addresses.
func kernelRouter(ctx context.Context, prefix string) (*diffSetup, error) {
	kr, kl, kg, kw := prefix+"-kr", prefix+"-kl", prefix+"-kg", prefix+"-kw"
	d := &diffSetup{name: "linux", ns: map[string]string{"lan": kl, "guest": kg, "wan": kw},
		iface: map[string]string{"lan": "eth0", "guest": "eth0", "wan": "eth0"}}
	for _, n := range []string{kr, kl, kg, kw} {
		if err := nsRun(ctx, "", "ip", "netns", "add", n); err != nil {
			d.cleanup()
			return nil, err
		}
		n := n
		d.cleanups = append(d.cleanups, func() { nsRun(context.Background(), "", "ip", "netns", "del", n) })
	}
	err := runAll(ctx, [][]string{
		{kr, "ip", "link", "add", "lan0", "type", "veth", "peer", "name", "eth0", "netns", kl},
		{kr, "ip", "link", "add", "gst0", "type", "veth", "peer", "name", "eth0", "netns", kg},
		{kr, "ip", "link", "add", "wan0", "type", "veth", "peer", "name", "eth0", "netns", kw},
		{kr, "ip", "addr", "add", lanRouter4.String(), "dev", "lan0"},
		{kr, "ip", "addr", "add", lanRouter6.String(), "dev", "lan0", "nodad"},
		{kr, "ip", "addr", "add", guestRouter4.String(), "dev", "gst0"},
		{kr, "ip", "addr", "add", diffGuestRtr6.String(), "dev", "gst0", "nodad"},
		{kr, "ip", "addr", "add", wanRouter4.String(), "dev", "wan0"},
		{kr, "ip", "addr", "add", wanRouter6.String(), "dev", "wan0", "nodad"},
		{kl, "ip", "addr", "add", lanHost4.String(), "dev", "eth0"},
		{kl, "ip", "addr", "add", blockedLAN4.String(), "dev", "eth0"},
		{kl, "ip", "addr", "add", lanHost6.String(), "dev", "eth0", "nodad"},
		{kg, "ip", "addr", "add", diffGuestHost4.String(), "dev", "eth0"},
		{kg, "ip", "addr", "add", diffGuestHost6.String(), "dev", "eth0", "nodad"},
		{kw, "ip", "addr", "add", wanHost4.String(), "dev", "eth0"},
		{kw, "ip", "addr", "add", wanHost6.String(), "dev", "eth0", "nodad"},
	})
	for _, n := range []string{kr, kl, kg, kw} {
		if err == nil {
			err = runAll(ctx, [][]string{{n, "ip", "link", "set", "lo", "up"}})
		}
	}
	if err == nil {
		err = runAll(ctx, [][]string{
			{kr, "ip", "link", "set", "lan0", "up"}, {kr, "ip", "link", "set", "gst0", "up"}, {kr, "ip", "link", "set", "wan0", "up"},
			{kl, "ip", "link", "set", "eth0", "up"}, {kg, "ip", "link", "set", "eth0", "up"}, {kw, "ip", "link", "set", "eth0", "up"},
			{kr, "sysctl", "-qw", "net.ipv4.ip_forward=1"}, {kr, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
			// Linux limits ICMP errors per destination (1 a second after
			// a burst of 6); gvrouter's reject limit is global (1000 a
			// second, firewall.RejectRate), so a matrix that rejects one
			// host a dozen times would differ by the limit, not the rules.
			{kr, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"}, {kr, "sysctl", "-qw", "net.ipv6.icmp.ratelimit=0"},
			{kl, "ip", "route", "add", "default", "via", lanRouter4.Addr().String()},
			{kl, "ip", "-6", "route", "add", "default", "via", lanRouter6.Addr().String()},
			{kg, "ip", "route", "add", "default", "via", guestRouter4.Addr().String()},
			{kg, "ip", "-6", "route", "add", "default", "via", diffGuestRtr6.Addr().String()},
		})
	}
	if err == nil {
		err = wanHostRoutes(ctx, kw)
	}
	if err == nil {
		err = nftLoad(ctx, kr, diffNFT)
	}
	if err != nil {
		d.cleanup()
		return nil, err
	}
	return d, nil
}

// wanHostRoutes routes the LAN's and the guest network's prefixes from
// the WAN host to the router.
func wanHostRoutes(ctx context.Context, ns string) error {
	return runAll(ctx, [][]string{
		{ns, "ip", "route", "replace", "10.77.1.0/24", "via", wanRouter4.Addr().String()},
		{ns, "ip", "route", "replace", "10.77.3.0/24", "via", wanRouter4.Addr().String()},
		{ns, "ip", "-6", "route", "replace", "fd77:1::/64", "via", wanRouter6.Addr().String()},
		{ns, "ip", "-6", "route", "replace", "fd77:3::/64", "via", wanRouter6.Addr().String()},
	})
}

// ourRouter turns the running lab into our side: a guest host on a port
// of its own, the router reloaded with guestZones.
func ourRouter(ctx context.Context, l *lab) (*diffSetup, error) {
	guestNS := l.prefix + "-dg"
	d := &diffSetup{name: "gvrouter", ns: map[string]string{"lan": l.lanNS, "guest": guestNS, "wan": l.wanNS},
		iface: map[string]string{"lan": hostIf, "guest": guestIf, "wan": hostIf}}
	if err := nsRun(ctx, "", "ip", "netns", "add", guestNS); err != nil {
		return nil, err
	}
	d.cleanups = append(d.cleanups, func() { nsRun(context.Background(), "", "ip", "netns", "del", guestNS) })
	err := runAll(ctx, [][]string{
		{l.rtrNS, "ip", "link", "add", guestPort, "type", "veth", "peer", "name", guestIf, "netns", guestNS},
		{l.rtrNS, "ip", "link", "set", guestPort, "up"},
		{guestNS, "ip", "link", "set", "lo", "up"},
		{guestNS, "ip", "link", "set", guestIf, "up"},
		{guestNS, "ip", "addr", "add", diffGuestHost4.String(), "dev", guestIf},
		{guestNS, "ip", "addr", "add", diffGuestHost6.String(), "dev", guestIf, "nodad"},
		{guestNS, "ip", "route", "add", "default", "via", guestRouter4.Addr().String()},
		{guestNS, "ip", "-6", "route", "add", "default", "via", diffGuestRtr6.Addr().String()},
		{l.lanNS, "ip", "addr", "add", blockedLAN4.String(), "dev", hostIf},
	})
	if err == nil {
		err = wanHostRoutes(ctx, l.wanNS)
	}
	if err != nil {
		d.cleanup()
		return nil, err
	}
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	orig, err := os.ReadFile(cfgPath)
	if err == nil {
		var next []byte
		if next, err = guestZones(orig); err == nil {
			next, err = withGuest6(next)
		}
		if err == nil {
			err = os.WriteFile(cfgPath, next, 0o600)
		}
	}
	if err == nil {
		err = l.router.cmd.Process.Signal(syscall.SIGHUP)
	}
	if err != nil {
		d.cleanup()
		return nil, err
	}
	// The reload is in force when the guest interface answers: a TCP
	// SYN to a closed port of the router's guest address is refused
	// (guest input: reject).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := dialFrom(guestNS, netip.Addr{}, netip.AddrPortFrom(guestRouter4.Addr(), 2222), "x", time.Second)
		if err != nil && strings.Contains(err.Error(), "refused") {
			break
		}
		if time.Now().After(deadline) {
			d.cleanup()
			return nil, fmt.Errorf("guest interface not answering 15 s after the reload: %v; router log:\n%s", err, tail(filepath.Join(l.dir, "router.log"), 2000))
		}
	}
	return d, nil
}

// withGuest6 gives the guest interface an IPv6 address too.
func withGuest6(cfg []byte) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(cfg, &m); err != nil {
		return nil, err
	}
	for _, it := range m["interfaces"].([]any) {
		if ic := it.(map[string]any); ic["name"] == "guest" {
			ic["addresses"] = []any{guestRouter4.String(), diffGuestRtr6.String()}
		}
	}
	return yaml.Marshal(m)
}

type diffSeen struct {
	ID    int    `json:"id"`
	Kind  string `json:"kind"`
	What  string `json:"what"`
	Sport int    `json:"sport"`
}

// probeAll runs the probes of each role on d and returns what each
// role's host saw.
func probeAll(ctx context.Context, dir string, d *diffSetup, probes []diffProbe) (map[string][]diffSeen, error) {
	for _, role := range []string{"lan", "guest", "wan"} {
		if err := nftLoad(ctx, d.ns[role], hostQuiet); err != nil {
			return nil, err
		}
	}
	type run struct {
		role  string
		in    io.WriteCloser
		lines *bufio.Scanner
		cmd   interface{ Wait() error }
		kill  func()
	}
	var runs []*run
	defer func() {
		for _, r := range runs {
			r.kill()
			r.cmd.Wait()
		}
	}()
	for _, role := range []string{"lan", "guest", "wan"} {
		var mine []diffProbe
		for _, p := range probes {
			if p.Src == role {
				mine = append(mine, p)
			}
		}
		b, _ := json.Marshal(mine)
		file := filepath.Join(dir, "probes-"+d.name+"-"+role+".json")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return nil, err
		}
		cmd := command(ctx, d.ns[role], scapyPython, "-c", scapyZoneProbe, d.iface[role], file)
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		r := &run{role: role, in: in, lines: bufio.NewScanner(out), cmd: cmd, kill: func() { cmd.Process.Kill() }}
		r.lines.Buffer(make([]byte, 1<<20), 16<<20)
		runs = append(runs, r)
		if !r.lines.Scan() || r.lines.Text() != "ready" {
			return nil, fmt.Errorf("%s %s probe did not start: %q %s", d.name, role, r.lines.Text(), stderr.String())
		}
	}
	// One host after the other, in the same order on both sides: an
	// earlier probe's flow decides whether a later one in the other
	// direction is established (and address-only NAT lets one host at a
	// time use a protocol to a remote address), so the order must not
	// depend on scheduling.
	for _, r := range runs {
		io.WriteString(r.in, "go\n")
		if !r.lines.Scan() || r.lines.Text() != "sent" {
			return nil, fmt.Errorf("%s %s probe: %q", d.name, r.role, r.lines.Text())
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	seen := map[string][]diffSeen{}
	for _, r := range runs {
		io.WriteString(r.in, "stop\n")
		if !r.lines.Scan() {
			return nil, fmt.Errorf("%s %s probe: no result", d.name, r.role)
		}
		var s []diffSeen
		if err := json.Unmarshal(r.lines.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s %s probe result: %w", d.name, r.role, err)
		}
		seen[r.role] = s
	}
	return seen, nil
}

// verdicts turns what the hosts saw into each probe's verdict.
func verdicts(probes []diffProbe, seen map[string][]diffSeen) []string {
	out := make([]string, len(probes))
	for i, p := range probes {
		has := func(role string, f func(s diffSeen) bool) bool {
			for _, s := range seen[role] {
				if f(s) {
					return true
				}
			}
			return false
		}
		refused := has(p.Src, func(s diffSeen) bool {
			return (s.ID == p.ID && s.Kind != "reply" && s.What == "unreach") || (s.What == "rst" && s.Sport == p.Sport && p.Proto == "tcp")
		})
		switch {
		case p.Target == "":
			switch {
			case has(p.Src, func(s diffSeen) bool { return s.ID == p.ID && s.What == "echoreply" }):
				out[i] = "replied"
			case refused:
				out[i] = "refused"
			default:
				out[i] = "silent"
			}
		default:
			delivered := has(p.Target, func(s diffSeen) bool {
				return s.ID == p.ID && (s.Kind == "new" || s.Kind == "out") && s.What != "unreach"
			})
			back := has(p.Src, func(s diffSeen) bool {
				return s.ID == p.ID && (s.Kind == "reply" || (s.Kind == "out" && s.What == "echoreply"))
			})
			switch {
			case delivered && p.Kind == "est" && back:
				out[i] = "established"
			case delivered && p.Kind == "est":
				out[i] = "delivered, no reply"
			case delivered:
				out[i] = "delivered"
			case refused:
				out[i] = "refused"
			default:
				out[i] = "silent"
			}
		}
	}
	return out
}

// TestLabZonesDifferential runs the probe matrix (diffProbes, over 200
// probes) through the lab router with zones and through a Linux router
// with the same policy in nftables, and wants the same verdict for every
// probe; it prints the matrix and the mismatches.
func TestLabZonesDifferential(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t, "nft")
	probes := diffProbes()
	if len(probes) < 200 {
		t.Fatalf("%d probes, want at least 200", len(probes))
	}
	runWithHookTimeout(t, 4*time.Minute, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		ours, err := ourRouter(ctx, l)
		if err != nil {
			return err
		}
		defer ours.cleanup()
		kern, err := kernelRouter(ctx, l.prefix)
		if err != nil {
			return err
		}
		defer kern.cleanup()
		seenOurs, err := probeAll(ctx, l.dir, ours, probes)
		if err != nil {
			return err
		}
		seenKern, err := probeAll(ctx, l.dir, kern, probes)
		if err != nil {
			return err
		}
		vo, vk := verdicts(probes, seenOurs), verdicts(probes, seenKern)
		var matrix, mismatches strings.Builder
		counts := map[string]int{}
		for i, p := range probes {
			mark := "  "
			if vo[i] != vk[i] {
				mark = "!!"
				fmt.Fprintf(&mismatches, "%s gvrouter %-20s linux %s\n", p, vo[i], vk[i])
			}
			counts[vk[i]]++
			fmt.Fprintf(&matrix, "%s %3d %s  gvrouter %-20s linux %s\n", mark, p.ID, p, vo[i], vk[i])
		}
		var cs []string
		for k, v := range counts {
			cs = append(cs, fmt.Sprintf("%s %d", k, v))
		}
		sort.Strings(cs)
		t.Logf("%d probes (linux verdicts: %s); %d differ (!!):\n%s",
			len(probes), strings.Join(cs, ", "), strings.Count(mismatches.String(), "\n"), matrix.String())
		if mismatches.Len() > 0 {
			return fmt.Errorf("verdicts differ from the kernel's:\n%s", mismatches.String())
		}
		if len(counts) < 3 {
			return errors.New("the kernel's verdicts are all alike: the matrix proves nothing")
		}
		return nil
	})
}
