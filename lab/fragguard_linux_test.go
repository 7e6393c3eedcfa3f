package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fragAttacker runs on the WAN host: it sends the fragment attacks of RFC
// 1858, RFC 5722 and RFC 7112 (overlaps, tiny first fragments, header
// chains split across fragments) to a port the router forwards
// (forwardPort, IPv4 via the WAN address, IPv6 to the LAN host, admitted by
// allow6) and to a port it does not (9999), plus legitimate fragmented
// datagrams and fragBulk tiny first fragments per family, and prints JSON:
// what it sent, fragment by fragment, with "may" (the packet the fragment
// belongs to would reach the LAN host unfragmented, so this fragment may)
// and "must" (a legitimate datagram's fragment, which has to arrive), and
// what came back from the router: TCP from its port 9999, ICMPv6 Parameter
// Problem code 3.
const fragAttacker = `
import json, sys, time
from scapy.all import (Ether, ICMPv6ParamProblem, IP, IPv6, IPv6ExtHdrDestOpt,
                       IPv6ExtHdrFragment, PadN, Raw, TCP, UDP, AsyncSniffer,
                       conf, fragment, fragment6, sendp)
conf.verb = 0
iface, rmac, w4, r4, w6, h6, fwd, bulkN = sys.argv[1:9]
fwd, bulkN = int(fwd), int(bulkN)
replies = {"tcp_from_9999": 0, "param_problem_3": 0}
def seen(p):
    if IP in p and p[IP].src == r4 and TCP in p and p[TCP].sport == 9999:
        replies["tcp_from_9999"] += 1
    if ICMPv6ParamProblem in p and p[ICMPv6ParamProblem].code == 3:
        replies["param_problem_3"] += 1
sn = AsyncSniffer(iface=iface, store=False, prn=seen, lfilter=lambda p: p.src == rmac)
sn.start()
time.sleep(0.5)

def seg(v6, dst, dport, flags):
    # A 32-byte TCP segment (20-byte header, 12 bytes of data) with the
    # checksum of the whole, as the attacker's host would build it.
    ip = IPv6(src=w6, dst=dst) if v6 else IP(src=w4, dst=dst)
    return bytes((ip / TCP(sport=40000, dport=dport, flags=flags, seq=1000) / (b"A" * 12))[TCP])

def f4(ident, dst, off, mf, data, proto=6):
    return IP(src=w4, dst=dst, id=ident, flags="MF" if mf else 0, frag=off, proto=proto) / Raw(data)

def f6(ident, dst, off, m, nh, data):
    return IPv6(src=w6, dst=dst) / IPv6ExtHdrFragment(nh=nh, offset=off, m=int(m), id=ident) / Raw(data)

attacks = []
def attack(name, v6, ident, pkts, may, must=False, gap=0.02):
    frags = []
    for i, p in enumerate(pkts):
        if v6:
            f = p[IPv6ExtHdrFragment]
            frags.append({"off": f.offset, "mf": bool(f.m), "len": len(bytes(p)) - 48, "head": bytes(p)[48:52].hex(), "may": i in may or must, "must": must})
        else:
            frags.append({"off": p.frag, "mf": bool(p.flags.MF), "len": len(bytes(p)) - 20, "head": bytes(p)[20:24].hex(), "may": i in may or must, "must": must})
        sendp(Ether(dst=rmac) / p, iface=iface)
        time.sleep(gap)
    attacks.append({"name": name, "v": 6 if v6 else 4, "id": ident, "frags": frags})

ident = 100
for dport in (fwd, 9999):
    ok = [0] if dport == fwd else []  # the harmless first fragment alone passes unfragmented
    # RFC 1858 3.2: the second fragment at offset 1 rewrites the flags.
    first, rewrite = seg(False, r4, dport, "S" if dport == fwd else "A"), seg(False, r4, dport, "SF" if dport == fwd else "S")
    attack("ipv4 flags rewritten at offset 8, port %d" % dport, False, ident,
           [f4(ident, r4, 0, True, first[:24]), f4(ident, r4, 1, False, rewrite[8:])], ok if dport == fwd else [])
    ident += 1
    # RFC 1858 3.1: tiny first fragments, 8 bytes (ports only) and 16 (no flags).
    s = seg(False, r4, dport, "S")
    attack("ipv4 tiny first fragment (8 bytes), port %d" % dport, False, ident,
           [f4(ident, r4, 0, True, s[:8]), f4(ident, r4, 1, False, s[8:])], [])
    ident += 1
    attack("ipv4 tiny first fragment (16 bytes), port %d" % dport, False, ident,
           [f4(ident, r4, 0, True, s[:16]), f4(ident, r4, 2, False, s[16:])], [])
    ident += 1
    # Overlaps: a second first fragment rewriting the port, and one
    # rewriting the middle of the segment.
    p22 = seg(False, r4, 22, "S")
    attack("ipv4 overlap rewriting the port to 22, port %d" % dport, False, ident,
           [f4(ident, r4, 0, True, s[:24]), f4(ident, r4, 0, True, p22[:24]), f4(ident, r4, 3, False, p22[24:])], ok)
    ident += 1
    attack("ipv4 overlap at offset 16, port %d" % dport, False, ident,
           [f4(ident, r4, 0, True, s[:24]), f4(ident, r4, 2, False, rewrite[16:])], ok)
    ident += 1

    ok6 = ok
    s6, r6 = seg(True, h6, dport, "S"), seg(True, h6, dport, "SF")
    attack("ipv6 flags rewritten at offset 8, port %d" % dport, True, ident,
           [f6(ident, h6, 0, True, 6, s6[:24]), f6(ident, h6, 1, False, 6, r6[8:])], ok6)
    ident += 1
    attack("ipv6 first fragment with 16 bytes of TCP, port %d" % dport, True, ident,
           [f6(ident, h6, 0, True, 6, s6[:16]), f6(ident, h6, 2, False, 6, s6[16:])], [])
    ident += 1
    # RFC 7112: the TCP header only in the second fragment.
    do = bytes(IPv6ExtHdrDestOpt(nh=6, options=[PadN(optdata=b"\x00" * 4)]))
    attack("ipv6 incomplete header chain, port %d" % dport, True, ident,
           [f6(ident, h6, 0, True, 60, do), f6(ident, h6, 1, False, 60, s6)], [])
    ident += 1
    p22_6 = seg(True, h6, 22, "S")
    attack("ipv6 overlap rewriting the port to 22, port %d" % dport, True, ident,
           [f6(ident, h6, 0, True, 6, s6[:24]), f6(ident, h6, 0, True, 6, p22_6[:24]), f6(ident, h6, 3, False, 6, p22_6[24:])], ok6)
    ident += 1

# Before the fragment guard 2,675 of 3,000 tiny first fragments were
# forwarded: bulkN more per family, one datagram each, through the forward.
sock = conf.L2socket(iface=iface)
for n in range(bulkN):
    ident = 2000 + n
    s = seg(False, r4, fwd, "S")
    s6 = seg(True, h6, fwd, "S")
    for v6, p in ((False, f4(ident, r4, 0, True, s[:8 if n % 2 else 16])), (True, f6(ident, h6, 0, True, 6, s6[:16]))):
        sock.send(Ether(dst=rmac) / p)
        if n % 50 == 49:
            time.sleep(0.05)  # a shared 2-core machine: spare the router's receive ring
        hdr = 48 if v6 else 20
        attacks.append({"name": "bulk tiny first fragment %s %d" % ("ipv6" if v6 else "ipv4", ident), "v": 6 if v6 else 4, "id": ident,
                        "frags": [{"off": 0, "mf": True, "len": len(bytes(p)) - hdr, "head": bytes(p)[hdr:hdr + 4].hex(), "may": False, "must": False}]})
sock.close()

# Legitimate fragmented datagrams: a 3000-byte UDP datagram through the
# forward, and a 2000-byte IPv6 TCP SYN to the admitted port.
ident = 900
attack("ipv4 legitimate 3000-byte UDP datagram", False, ident,
       fragment(IP(src=w4, dst=r4, id=ident) / UDP(sport=40001, dport=fwd) / (b"u" * 2992), fragsize=1480), [], True)
ident += 1
attack("ipv6 legitimate 2000-byte TCP SYN", True, ident,
       fragment6(IPv6(src=w6, dst=h6) / IPv6ExtHdrFragment(id=ident) / TCP(sport=40002, dport=fwd, flags="S") / (b"t" * 2000), 1280), [], True)
time.sleep(1.5)
sn.stop()
print(json.dumps({"attacks": attacks, "replies": replies}))
`

// fragSniffer runs on the LAN host: it prints "ready" once it listens and
// then, when its stdin closes, every IPv4 packet and IPv6 fragment it
// received from src4 or src6, as JSON (the fragment's first 4 bytes as
// "head").
const fragSniffer = `
import json, sys
from scapy.all import AsyncSniffer, IP, IPv6, IPv6ExtHdrFragment, conf
conf.verb = 0
iface, src4, src6 = sys.argv[1:4]
sn = AsyncSniffer(iface=iface, store=True, lfilter=lambda p: (IP in p and p[IP].src == src4) or (IPv6 in p and p[IPv6].src == src6))
sn.start()
import time
time.sleep(0.5)
print("ready", flush=True)
sys.stdin.read()
time.sleep(0.5)
sn.stop()
out = []
for p in sn.results:
    if IP in p:
        ip = p[IP]
        b = bytes(ip)
        out.append({"v": 4, "id": ip.id, "off": ip.frag, "mf": bool(ip.flags.MF), "len": ip.len - ip.ihl * 4, "head": b[ip.ihl * 4:ip.ihl * 4 + 4].hex()})
    elif IPv6ExtHdrFragment in p:
        f = p[IPv6ExtHdrFragment]
        out.append({"v": 6, "id": f.id, "off": f.offset, "mf": bool(f.m), "len": p[IPv6].plen - 8, "head": bytes(p[IPv6])[48:52].hex()})
    else:
        out.append({"v": 6, "id": -1, "off": 0, "mf": False, "len": p[IPv6].plen})
print(json.dumps(out))
`

// fragBulk is how many tiny first fragments of each family the attacker
// sends in bulk (IPv4 alternately 8 and 16 bytes of TCP, IPv6 16 bytes).
const fragBulk = 1500

type fragPkt struct {
	V   int  `json:"v"`
	ID  int  `json:"id"`
	Off int  `json:"off"`
	MF  bool `json:"mf"`
	Len int  `json:"len"`
	// Head is the fragment's first 4 bytes in hex (the ports of a first
	// fragment, which NAT keeps here), which tells apart fragments that
	// differ only in content.
	Head string `json:"head"`
	May  bool   `json:"may"`
	Must bool   `json:"must"`
}

type fragAttack struct {
	Name  string    `json:"name"`
	V     int       `json:"v"`
	ID    int       `json:"id"`
	Frags []fragPkt `json:"frags"`
}

// TestFragmentEvasionScapy: scapy on the WAN host sends the RFC 1858
// overlap and tiny-fragment attacks and their IPv6 equivalents (RFC 5722
// overlaps, RFC 7112 incomplete chains), through the port forward and
// against an unforwarded port, while a sniffer on the LAN host records
// what arrives: no fragment the unfragmented packet would not have
// brought, every fragment of the legitimate datagrams; the router does
// not answer the unforwarded port (a reassembled SYN would get a RST), it
// answers incomplete chains with Parameter Problem code 3, and the wan
// interface's drop counters rose by reason.
func TestFragmentEvasionScapy(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, wan := routerInterfaces(l.opt.Topology)
		before, err := l.ifaceDrops(ctx, wan, time.Time{})
		if err != nil {
			return err
		}
		nv0, err := l.natView(ctx)
		if err != nil {
			return err
		}
		mac, err := output(ctx, l.rtrNS, "cat", "/sys/class/net/"+wanPort+"/address")
		if err != nil {
			return err
		}

		sniff := command(ctx, l.lanNS, scapyPython, "-c", fragSniffer, hostIf, wanHost4.Addr().String(), wanHost6.Addr().String())
		stdin, err := sniff.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := sniff.StdoutPipe()
		if err != nil {
			return err
		}
		var stderr syncBuffer // read while the sniffer may still write
		sniff.Stderr = &stderr
		if err := sniff.Start(); err != nil {
			return err
		}
		defer sniff.Wait()
		defer stdin.Close()
		lines := bufio.NewScanner(stdout)
		lines.Buffer(make([]byte, 1<<20), 16<<20)
		if !lines.Scan() || lines.Text() != "ready" {
			return fmt.Errorf("LAN sniffer did not start: %q %s", lines.Text(), stderr.String())
		}

		out, err := output(ctx, l.wanNS, scapyPython, "-c", fragAttacker, hostIf, strings.TrimSpace(string(mac)),
			wanHost4.Addr().String(), wanRouter4.Addr().String(), wanHost6.Addr().String(), lanHost6.Addr().String(), strconv.Itoa(forwardPort), strconv.Itoa(fragBulk))
		if err != nil {
			return fmt.Errorf("attacker: %w\n%s", err, out)
		}
		var sent struct {
			Attacks []fragAttack   `json:"attacks"`
			Replies map[string]int `json:"replies"`
		}
		if err := json.Unmarshal(out, &sent); err != nil {
			return fmt.Errorf("attacker output %q: %w", out, err)
		}
		stdin.Close()
		if !lines.Scan() {
			return fmt.Errorf("LAN sniffer printed nothing: %s", stderr.String())
		}
		var got []fragPkt
		if err := json.Unmarshal(lines.Bytes(), &got); err != nil {
			return fmt.Errorf("LAN sniffer output %q: %w", lines.Bytes(), err)
		}

		var errs []error
		nSent, nAttack, nGot := 0, 0, 0
		for _, a := range sent.Attacks {
			arrived := make([]bool, len(a.Frags))
			for _, p := range got {
				if p.V != a.V || p.ID != a.ID {
					continue
				}
				nGot++
				i := -1
				for j, f := range a.Frags {
					if f.Off == p.Off && f.MF == p.MF && f.Len == p.Len && f.Head == p.Head && i < 0 {
						i = j
					}
				}
				switch {
				case i < 0:
					errs = append(errs, fmt.Errorf("%s: the LAN host got a fragment it was not sent: %+v", a.Name, p))
				case !a.Frags[i].May:
					errs = append(errs, fmt.Errorf("%s: fragment %d (offset %d, %d bytes) reached the LAN host", a.Name, i, p.Off*8, p.Len))
				default:
					arrived[i] = true
				}
			}
			for i, f := range a.Frags {
				nSent++
				if !f.Must {
					nAttack++
				}
				if f.Must && !arrived[i] {
					errs = append(errs, fmt.Errorf("%s: fragment %d (offset %d) did not reach the LAN host", a.Name, i, f.Off*8))
				}
			}
		}
		t.Logf("sent %d fragments in %d datagrams (%d of them attack fragments); the LAN host received %d of them; replies %v",
			nSent, len(sent.Attacks), nAttack, nGot, sent.Replies)
		if n := sent.Replies["tcp_from_9999"]; n != 0 {
			errs = append(errs, fmt.Errorf("the router answered %d times from port 9999: it reassembled an attack", n))
		}
		if sent.Replies["param_problem_3"] == 0 {
			errs = append(errs, errors.New("no ICMPv6 Parameter Problem code 3 for the incomplete header chains"))
		}

		after, err := l.ifaceDrops(ctx, wan, time.Now())
		if err != nil {
			return err
		}
		nv1, err := l.natView(ctx)
		if err != nil {
			return err
		}
		t.Logf("port drops before %v, after %v; %s drops after %v", nv0.PortDrops, nv1.PortDrops, wan, after)
		// Per port (2): flags at offset 8 (v4 + v6) and the 8-byte tiny
		// fragment's second half; tiny first fragments; the overlaps and
		// the rest of their datagrams; 16-byte TCP and destination
		// options without TCP in IPv6 first fragments.
		// A bulk fragment the port's receive ring lost never met the
		// guard: the ring's drops are no attack that got through.
		ring := nv1.PortDrops["ring"] - nv0.PortDrops["ring"]
		for reason, want := range map[string]uint64{
			"tcp_offset_8":        6,
			"tiny_first_fragment": 4 + fragBulk,
			"overlap":             6,
			"after_overlap":       4,
			"incomplete_chain":    4 + fragBulk,
		} {
			d := after[reason] - before[reason]
			t.Logf("%s drops on %s: +%d", reason, wan, d)
			if want > fragBulk {
				want -= min(ring, fragBulk)
			}
			if d < want {
				errs = append(errs, fmt.Errorf("%s drops rose by %d, want at least %d", reason, d, want))
			}
		}
		return errors.Join(errs...)
	})
}

// ifaceDrops returns interface name's drops by reason from a status
// snapshot taken at or after since.
func (l *lab) ifaceDrops(ctx context.Context, name string, since time.Time) (map[string]uint64, error) {
	s, err := l.statusSince(ctx, since)
	if err != nil {
		return nil, err
	}
	for _, i := range s.Interfaces {
		if i.Name == name {
			return i.Drops, nil
		}
	}
	return nil, fmt.Errorf("lab: status has no interface %s", name)
}
