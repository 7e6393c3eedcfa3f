package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// ingressForeign4 and ingressForeign6 are sources no lab interface has:
// the documentation ranges (RFC 5737, RFC 3849).
const (
	ingressForeign4 = "198.51.100.7"
	ingressForeign6 = "2001:db8:ff::7"
)

// ingressDNSQueries is how many spoofed ANY queries the LAN host sends
// per family (without ingress filtering, 20 x ANY came back as 25 KB out
// of the WAN to the spoofed victim).
const ingressDNSQueries = 5

// scapyIngress is one side of TestIngressSpoofedSources. Every packet it
// sends carries a mark "gvsp-<what>-<family>" in its payload (the DNS
// queries in their name, which an answer or an upstream query repeats).
//
//	role wan: sniffs its interface and prints "ready"; on a line on
//	  stdin it sends ICMP echoes to the router's LAN addresses (an answer
//	  would leave the WAN with an inside source), waits, and prints as
//	  JSON every packet it received that holds one of the marks.
//	role lan: sends, straight to the router's MAC, spoofed packets with
//	  the WAN host's or a foreign address as source (ANY queries to the
//	  router's DNS forwarder, an echo to the router, UDP and a TCP SYN to
//	  be forwarded to the WAN host), then the same UDP from its own
//	  address as the control, and prints "done".
const scapyIngress = `
import json, sys, time
from scapy.all import AsyncSniffer, Ether, IP, IPv6, UDP, TCP, ICMP, ICMPv6EchoRequest, DNS, DNSQR, Raw, conf, get_if_hwaddr, getmacbyip, sendp
conf.verb = 0
role, iface = sys.argv[1], sys.argv[2]
a = json.loads(sys.argv[3])
me = get_if_hwaddr(iface)
marks = [m.encode() for m in a["marks"]]
seen = []

def rec(p):
    if p.src == me:
        return
    b = bytes(p)
    for m in marks:
        if m in b:
            ip = p[IPv6] if IPv6 in p else (p[IP] if IP in p else None)
            seen.append({"mark": m.decode(), "src": ip.src if ip is not None else "", "dst": ip.dst if ip is not None else ""})

def eth():
    return Ether(src=me, dst=getmacbyip(a["rtr4"]))

if role == "wan":
    sn = AsyncSniffer(iface=iface, store=False, prn=rec)
    sn.start()
    time.sleep(0.5)
    print("ready", flush=True)
    sys.stdin.readline()
    e = eth()
    sendp(e / IP(src=a["me4"], dst=a["in4"]) / ICMP(id=0x5353) / Raw(b"gvsp-inside-v4|pad"), iface=iface)
    sendp(e / IPv6(src=a["me6"], dst=a["in6"]) / ICMPv6EchoRequest(id=0x5353) / Raw(b"gvsp-inside-v6|pad"), iface=iface)
    time.sleep(4)
    sn.stop()
    print(json.dumps(seen), flush=True)
else:
    e = eth()
    for fam, L3, rtr, wan, foreign, own in (
            ("v4", IP, a["rtr4"], a["wan4"], a["foreign4"], a["me4"]),
            ("v6", IPv6, a["rtr6"], a["wan6"], a["foreign6"], a["me6"])):
        for i in range(a["queries"]):
            q = DNS(id=0x4700 + i, rd=1, qd=DNSQR(qname="gvsp-dns-%s.example." % fam, qtype="ANY"))
            sendp(e / L3(src=wan, dst=rtr) / UDP(sport=40000 + i, dport=53) / q, iface=iface)
        echo = ICMP(id=0x5354) if fam == "v4" else ICMPv6EchoRequest(id=0x5354)
        sendp(e / L3(src=wan, dst=rtr) / echo / Raw(b"gvsp-echo-%s|pad" % fam.encode()), iface=iface)
        sendp(e / L3(src=foreign, dst=wan) / UDP(sport=40100, dport=9) / Raw(b"gvsp-udp-%s|pad" % fam.encode()), iface=iface)
        sendp(e / L3(src=foreign, dst=wan) / TCP(sport=40101, dport=80, flags="S", seq=1000) / Raw(b"gvsp-syn-%s|pad" % fam.encode()), iface=iface)
        sendp(e / L3(src=own, dst=wan) / UDP(sport=40102, dport=9) / Raw(b"gvsp-legit-%s|pad" % fam.encode()), iface=iface)
    print("done", flush=True)
`

// ingressMarks are the marks of scapyIngress's packets: spoofed ones,
// which must never reach the WAN host, and the controls, which must.
var (
	ingressSpoofedMarks = []string{
		"gvsp-dns-v4", "gvsp-echo-v4", "gvsp-udp-v4", "gvsp-syn-v4",
		"gvsp-dns-v6", "gvsp-echo-v6", "gvsp-udp-v6", "gvsp-syn-v6",
		"gvsp-inside-v4", "gvsp-inside-v6",
	}
	ingressControlMarks = []string{"gvsp-legit-v4", "gvsp-legit-v6"}
)

// ingressSeen is a packet holding a mark that the WAN host received.
type ingressSeen struct {
	Mark string `json:"mark"`
	Src  string `json:"src"`
	Dst  string `json:"dst"`
}

// ingressDrops returns the lan interface's spoofed_source drops and the
// wan interface's inside_source_out drops from the router's status page.
func ingressDrops(ctx context.Context, l *lab) (spoofed, inside uint64, err error) {
	body, err := routerStatus(ctx, l.rtrNS, "/api/status")
	if err != nil {
		return 0, 0, err
	}
	var s status.Snapshot
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, 0, err
	}
	lan, wan := routerInterfaces(l.opt.Topology)
	for _, i := range s.Interfaces {
		switch i.Name {
		case lan:
			spoofed = i.Drops["spoofed_source"]
		case wan:
			inside = i.Drops["inside_source_out"]
		}
	}
	return spoofed, inside, nil
}

// TestIngressSpoofedSources proves ingress filtering: the LAN host (scapy)
// sends DNS ANY queries to the router's forwarder with the WAN host's
// address as source, an echo to the router likewise, and UDP and a TCP
// SYN to the WAN host from a foreign source, IPv4 and IPv6. The router
// drops them all at the lan interface (RFC 3704 ingress filtering) and
// counts them ("spoofed_source"): the WAN host's sniffer sees no
// reflected answer, no upstream query for the spoofed names and no
// forwarded spoofed packet, while the same UDP from the LAN host's own
// address arrives. The WAN host's echoes to the router's LAN addresses
// get no answer either: it would leave the WAN with an inside source
// ("inside_source_out" on the wan interface).
func TestIngressSpoofedSources(t *testing.T) {
	parallelLab(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sp0, in0, err := ingressDrops(ctx, l)
		if err != nil {
			return err
		}
		args := map[string]any{
			"marks":    append(slices.Clone(ingressSpoofedMarks), ingressControlMarks...),
			"queries":  ingressDNSQueries,
			"foreign4": ingressForeign4, "foreign6": ingressForeign6,
			"wan4": wanHost4.Addr().String(), "wan6": wanHost6.Addr().String(),
		}
		wanArgs, lanArgs := maps.Clone(args), maps.Clone(args)
		wanArgs["rtr4"], wanArgs["me4"], wanArgs["me6"] = wanRouter4.Addr().String(), wanHost4.Addr().String(), wanHost6.Addr().String()
		wanArgs["in4"], wanArgs["in6"] = lanRouter4.Addr().String(), lanRouter6.Addr().String()
		lanArgs["rtr4"], lanArgs["rtr6"] = lanRouter4.Addr().String(), lanRouter6.Addr().String()
		lanArgs["me4"], lanArgs["me6"] = lanHost4.Addr().String(), lanHost6.Addr().String()
		wj, err := json.Marshal(wanArgs)
		if err != nil {
			return err
		}
		lj, err := json.Marshal(lanArgs)
		if err != nil {
			return err
		}
		wan, err := startScapyScript(ctx, l.wanNS, scapyIngress, "wan", hostIf, string(wj))
		if err != nil {
			return err
		}
		if err := wan.start(); err != nil {
			return err
		}
		out, err := output(ctx, l.lanNS, scapyPython, "-c", scapyIngress, "lan", hostIf, string(lj))
		if err != nil || strings.TrimSpace(string(out)) != "done" {
			wan.cmd.Process.Kill()
			wan.cmd.Wait()
			return fmt.Errorf("scapy lan side: %q, %v", out, err)
		}
		line, rerr := wan.out.ReadString('\n')
		werr := wan.cmd.Wait()
		if rerr != nil || werr != nil {
			return fmt.Errorf("scapy wan side: %v, %v: %s", rerr, werr, wan.errb.String())
		}
		var seen []ingressSeen
		if err := json.Unmarshal([]byte(line), &seen); err != nil {
			return fmt.Errorf("scapy wan output %q: %v", line, err)
		}

		var errs []string
		for _, s := range seen {
			t.Logf("WAN host received %s (%s -> %s)", s.Mark, s.Src, s.Dst)
			if slices.Contains(ingressSpoofedMarks, s.Mark) {
				errs = append(errs, fmt.Sprintf("WAN host received %s from %s to %s: the router reflected or forwarded a spoofed packet", s.Mark, s.Src, s.Dst))
			}
		}
		for _, m := range ingressControlMarks {
			if !slices.ContainsFunc(seen, func(s ingressSeen) bool { return s.Mark == m }) {
				errs = append(errs, fmt.Sprintf("WAN host did not receive the control %s from the LAN host's own address", m))
			}
		}
		// Counted: per family the queries, the echo, UDP and SYN at the
		// lan interface; the two echo answers at the wan interface (the
		// status page samples every second).
		wantSp, wantIn := uint64(2*(ingressDNSQueries+3)), uint64(2)
		deadline := time.Now().Add(5 * time.Second)
		for {
			sp, in, err := ingressDrops(ctx, l)
			if err != nil {
				return err
			}
			if sp-sp0 >= wantSp && in-in0 >= wantIn {
				t.Logf("router counted spoofed_source +%d (lan), inside_source_out +%d (wan)", sp-sp0, in-in0)
				break
			}
			if time.Now().After(deadline) {
				errs = append(errs, fmt.Sprintf("router counted spoofed_source +%d on the lan interface, inside_source_out +%d on the wan interface; want at least +%d and +%d", sp-sp0, in-in0, wantSp, wantIn))
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
