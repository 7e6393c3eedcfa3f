package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// firewallProtos are IP protocols without ports, which the IPv6 firewall
// once let through unchecked: IPv6 in IPv4, GRE, ESP, SCTP, experimental,
// No Next Header.
var firewallProtos = []int{41, 47, 50, 132, 253, 59}

// scapyFirewall is one side of TestFirewallEveryProtocol: it sniffs its
// host's interface, prints "ready", waits for a line on stdin, then sends
// and answers, and prints what it saw as JSON. Every test packet carries
// a marker "gvfw-<kind>-<proto>-<family>-<target>|" in its payload.
//
//	role wan: sends each protocol unsolicited to the LAN host and to the
//	  router (IPv4 and IPv6) and answers every "out" packet it receives
//	  with a "reply" packet of the same protocol, addresses swapped.
//	role lan: sends each protocol out to the WAN host (IPv4 and IPv6).
//
// Both report the markers of the packets they received (not their own).
const scapyFirewall = `
import json, sys, time
from scapy.all import AsyncSniffer, IP, IPv6, Raw, conf, get_if_hwaddr, send
conf.verb = 0
role, iface = sys.argv[1], sys.argv[2]
protos = [int(x) for x in sys.argv[3].split(",")]
targets = json.loads(sys.argv[4])
me = get_if_hwaddr(iface)
seen = []

def l3(p):
    if IPv6 in p:
        ip = p[IPv6]
        return ip, bytes(ip)[40:], ip.nh
    if IP in p:
        ip = p[IP]
        return ip, bytes(ip)[ip.ihl * 4:], ip.proto
    return None, b"", 0

def rec(p):
    if p.src == me:
        return
    ip, payload, proto = l3(p)
    b = bytes(p)
    i = b.find(b"gvfw-")
    if i < 0:
        return
    mark = b[i:b.find(b"|", i)].decode(errors="replace")
    seen.append({"mark": mark, "src": ip.src if ip is not None else "", "proto": proto})
    if role == "wan" and ip is not None and payload.startswith(b"gvfw-out-"):
        body = payload.replace(b"gvfw-out-", b"gvfw-reply-", 1)
        if isinstance(ip, IPv6):
            send(IPv6(src=ip.dst, dst=ip.src, nh=proto) / Raw(body))
        else:
            send(IP(src=ip.dst, dst=ip.src, proto=proto) / Raw(body))

sn = AsyncSniffer(iface=iface, store=False, prn=rec)
sn.start()
time.sleep(0.5)
print("ready", flush=True)
sys.stdin.readline()
for name, (dst4, dst6) in targets.items():
    for proto in protos:
        kind = "unsol" if role == "wan" else "out"
        send(IP(dst=dst4, proto=proto) / Raw(b"gvfw-%s-%d-v4-%s|padding" % (kind.encode(), proto, name.encode())))
        send(IPv6(dst=dst6, nh=proto) / Raw(b"gvfw-%s-%d-v6-%s|padding" % (kind.encode(), proto, name.encode())))
time.sleep(4)
sn.stop()
print(json.dumps(seen), flush=True)
`

// firewallSeen is one packet a scapyFirewall side received.
type firewallSeen struct {
	Mark  string `json:"mark"`
	Src   string `json:"src"`
	Proto int    `json:"proto"`
}

// scapySide is a running scapyFirewall.
type scapySide struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	errb  strings.Builder
}

func startScapySide(ctx context.Context, ns, role string, targets map[string][2]string) (*scapySide, error) {
	tj, err := json.Marshal(targets)
	if err != nil {
		return nil, err
	}
	protos := make([]string, len(firewallProtos))
	for i, p := range firewallProtos {
		protos[i] = strconv.Itoa(p)
	}
	return startScapyScript(ctx, ns, scapyFirewall, role, hostIf, strings.Join(protos, ","), string(tj))
}

// startScapyScript starts script (Python, with args) in ns and waits for
// its "ready" line.
func startScapyScript(ctx context.Context, ns, script string, args ...string) (*scapySide, error) {
	s := &scapySide{cmd: command(ctx, ns, scapyPython, append([]string{"-c", script}, args...)...)}
	s.cmd.Stderr = &s.errb
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.out = bufio.NewReader(stdout)
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := s.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		return nil, fmt.Errorf("scapy %s: %q, %v: %s", args[0], line, err, s.errb.String())
	}
	return s, nil
}

func (s *scapySide) start() error {
	_, err := io.WriteString(s.stdin, "go\n")
	return err
}

func (s *scapySide) result() ([]firewallSeen, error) {
	line, rerr := s.out.ReadString('\n')
	werr := s.cmd.Wait()
	if rerr != nil || werr != nil {
		return nil, fmt.Errorf("scapy: %v, %v: %s", rerr, werr, s.errb.String())
	}
	var seen []firewallSeen
	if err := json.Unmarshal([]byte(line), &seen); err != nil {
		return nil, fmt.Errorf("scapy output %q: %v", line, err)
	}
	return seen, nil
}

// fwCounters are the router's counters of refused packets that
// TestFirewallEveryProtocol checks.
type fwCounters struct {
	// input: the wan interface's firewall_input drops (the zones' input
	// chain, or the stack's input policy behind them).
	input uint64
	// unsolicited and firewall: the engine's drops of those names (IPv4
	// to an inside address without a mapping; any zone refusal).
	unsolicited, firewall uint64
}

// routerCounters reads fwCounters from the router's status page.
func routerCounters(ctx context.Context, l *lab) (fwCounters, error) {
	var c fwCounters
	body, err := routerStatus(ctx, l.rtrNS, "/api/status")
	if err != nil {
		return c, err
	}
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return c, err
	}
	_, wan := routerInterfaces(l.opt.Topology)
	for _, i := range s.Interfaces {
		if i.Name == wan {
			c.input = i.Drops["firewall_input"]
		}
	}
	if s.Conntrack == nil {
		return c, fmt.Errorf("status has no conntrack section")
	}
	c.unsolicited, c.firewall = s.Conntrack.Drops["unsolicited"], s.Conntrack.Drops["firewall"]
	return c, nil
}

// TestFirewallEveryProtocol runs the real router in the lab and has scapy
// send IPv6 and IPv4 packets of protocols 41, 47, 50, 132, 253 and 59:
// unsolicited from the WAN host to the LAN host and to the router, which
// are dropped (the LAN host's sniffer sees none, the WAN host gets no
// answer from the router's netstack) and counted (the engine's
// "unsolicited", the wan interface's "firewall_input"); and out from the
// LAN host to the WAN host, whose scapy answers each with the same
// protocol: the answers reach the LAN host (IPv4 through masquerade's
// address-only NAT: the WAN host sees the router's WAN address).
func TestFirewallEveryProtocol(t *testing.T) {
	parallelLab(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c0, err := routerCounters(ctx, l)
		if err != nil {
			return err
		}
		wan, err := startScapySide(ctx, l.wanNS, "wan", map[string][2]string{
			"lan": {lanHost4.Addr().String(), lanHost6.Addr().String()},
			"rtr": {wanRouter4.Addr().String(), wanRouter6.Addr().String()},
		})
		if err != nil {
			return err
		}
		lan, err := startScapySide(ctx, l.lanNS, "lan", map[string][2]string{
			"wan": {wanHost4.Addr().String(), wanHost6.Addr().String()},
		})
		if err != nil {
			wan.cmd.Process.Kill()
			wan.cmd.Wait()
			return err
		}
		if err := wan.start(); err != nil {
			return err
		}
		time.Sleep(time.Second) // the unsolicited packets first
		if err := lan.start(); err != nil {
			return err
		}
		atWAN, werr := wan.result()
		atLAN, lerr := lan.result()
		if werr != nil || lerr != nil {
			return fmt.Errorf("wan side: %v; lan side: %v", werr, lerr)
		}
		for _, s := range atLAN {
			t.Logf("LAN host received %s (proto %d from %s)", s.Mark, s.Proto, s.Src)
		}
		for _, s := range atWAN {
			t.Logf("WAN host received %s (proto %d from %s)", s.Mark, s.Proto, s.Src)
		}

		var errs []string
		for _, s := range atLAN {
			if strings.HasPrefix(s.Mark, "gvfw-unsol-") {
				errs = append(errs, fmt.Sprintf("LAN host received unsolicited %s (proto %d)", s.Mark, s.Proto))
			}
		}
		for _, s := range atWAN {
			if strings.HasPrefix(s.Mark, "gvfw-unsol-") {
				errs = append(errs, fmt.Sprintf("WAN host got an answer quoting its unsolicited %s (proto %d from %s): it reached the router's netstack", s.Mark, s.Proto, s.Src))
			}
		}
		for _, proto := range firewallProtos {
			for _, fam := range []string{"v4", "v6"} {
				out := fmt.Sprintf("gvfw-out-%d-%s-wan", proto, fam)
				i := slices.IndexFunc(atWAN, func(s firewallSeen) bool { return s.Mark == out && s.Proto == proto })
				switch {
				case i < 0:
					errs = append(errs, fmt.Sprintf("WAN host did not receive %s", out))
				case fam == "v4" && atWAN[i].Src != wanRouter4.Addr().String():
					errs = append(errs, fmt.Sprintf("WAN host received %s from %s, want the router's WAN address %s", out, atWAN[i].Src, wanRouter4.Addr()))
				}
				reply := fmt.Sprintf("gvfw-reply-%d-%s-wan", proto, fam)
				if !slices.ContainsFunc(atLAN, func(s firewallSeen) bool { return s.Mark == reply && s.Proto == proto }) {
					errs = append(errs, fmt.Sprintf("LAN host did not receive the WAN host's answer %s", reply))
				}
			}
		}

		// Counted (the status page samples every second): the 12 to
		// the router by the wan zone's input chain, firewall_input on the
		// wan interface; the 6 IPv4 ones to the LAN host as the engine's
		// unsolicited (no mapping), the 6 IPv6 ones by the wan zone's
		// forward policy as the engine's firewall, which counts the 12
		// input refusals too.
		n := uint64(len(firewallProtos))
		want := fwCounters{input: 2 * n, unsolicited: n, firewall: 3 * n}
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := routerCounters(ctx, l)
			if err != nil {
				return err
			}
			got := fwCounters{input: c.input - c0.input, unsolicited: c.unsolicited - c0.unsolicited, firewall: c.firewall - c0.firewall}
			if got.input >= want.input && got.unsolicited >= want.unsolicited && got.firewall >= want.firewall {
				t.Logf("router counted firewall_input +%d, unsolicited +%d, firewall +%d", got.input, got.unsolicited, got.firewall)
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Sprintf("router counted firewall_input +%d, unsolicited +%d, firewall +%d; want at least +%d, +%d, +%d",
					got.input, got.unsolicited, got.firewall, want.input, want.unsolicited, want.firewall))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "\n"))
		}
		return nil
	})
}
