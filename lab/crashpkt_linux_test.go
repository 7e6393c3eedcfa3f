package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashScapy sends, with scapy on a lab host, the packets that gVisor's
// forward path could not handle (header chains too long for its forwarding
// error path), and prints what came back as JSON. Modes:
//
//	lan   LAN host: long header chains to the WAN host (the crashing
//	      packet and its variants), hop limit 1 with a long chain, a
//	      jumbogram, routing type 0, IPv4 options of every length, and a
//	      UDP flow for the WAN side to answer
//	wan   WAN host: a long-chain SYN to the LAN host's allow6 port, a
//	      long-chain reply on the LAN host's UDP flow, ICMPv6 errors
//	      quoting a long-chain packet and with a long chain themselves
//	sniff listen for secs seconds and count frames carrying the marker
//
// Every long-chain packet carries the marker GVLONGCHAIN; none may reach
// the far host.
const crashScapy = `
import json, socket, sys, time
from scapy.all import (AsyncSniffer, Ether, ICMPv6DestUnreach, ICMPv6ParamProblem,
                       ICMPv6TimeExceeded, get_if_hwaddr,
                       ICMP, IP, IPOption_NOP, IPOption_RR, IPOption_LSRR,
                       IPOption_SSRR, IPOption_Timestamp, IPOption_Router_Alert,
                       IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                       IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, Jumbo, PadN, Raw,
                       TCP, UDP, conf, send, sniff)
conf.verb = 0
mode = sys.argv[1]
MARK = b"GVLONGCHAIN"

def pad(n):
    # PadN options totalling n bytes (each at most 257, here 250).
    out = []
    while n > 0:
        k = min(n, 250)
        if n - k == 1:
            k -= 2
        out.append(PadN(optdata=b"\x00" * (k - 2)))
        n -= k
    return out

def destopts(total, **kw):
    return IPv6ExtHdrDestOpt(options=pad(total - 2), **kw)

def rawopts(name, src4, dst4, opts, sport):
    # An IPv4 header whose options are raw bytes, which scapy would
    # parse: sent on a raw socket, where the kernel fills in the header
    # checksum over the whole header.
    b = bytearray(bytes(IP(src=src4, dst=dst4, ihl=5 + len(opts) // 4, proto=17) /
                        Raw(opts + bytes(UDP(sport=sport, dport=9)))))
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.sendto(bytes(b), (dst4, 0))
    s.close()
    sent.append(name)
    time.sleep(0.05)

def hbh(total):
    return IPv6ExtHdrHopByHop(options=pad(total - 2))

if mode == "sniff":
    secs = float(sys.argv[2])
    me = get_if_hwaddr("eth0")
    n = {"marked": 0}
    def prn(p):
        # Marked frames from elsewhere, less the router's errors quoting them.
        if p[Ether].src == me or p.haslayer(ICMPv6ParamProblem) or p.haslayer(ICMPv6TimeExceeded):
            return
        if MARK in bytes(p):
            n["marked"] += 1
    sniff(iface="eth0", timeout=secs, prn=prn, store=False)
    print(json.dumps(n))
    sys.exit(0)

src6, dst6 = sys.argv[2], sys.argv[3]
pps = AsyncSniffer(iface="eth0", store=True,
                   lfilter=lambda p: p.haslayer(ICMPv6ParamProblem) and p[IPv6].dst == src6)
pps.start()
time.sleep(0.5)
sent = []
def go(name, pkt):
    send(pkt, iface="eth0")
    sent.append(name)
    time.sleep(0.05)

udp = UDP(sport=40000, dport=9) / Raw(MARK)
if mode == "lan":
    src4, dst4 = sys.argv[4], sys.argv[5]
    go("crasher: destopts 1264 + udp", IPv6(src=src6, dst=dst6) / destopts(1264) / udp)
    go("hop-by-hop 1248 + udp", IPv6(src=src6, dst=dst6) / hbh(1248) / udp)
    go("hbh + routing type 0 + destopts", IPv6(src=src6, dst=dst6) / hbh(512) /
       IPv6ExtHdrRouting(type=0, segleft=0, addresses=["fd77:9::%x" % i for i in range(1, 25)]) /
       destopts(360) / udp)
    chain = IPv6(src=src6, dst=dst6)
    for i in range(156):
        chain = chain / destopts(8)
    go("156 destination options headers", chain / udp)
    # A first fragment's data must be a multiple of 8 bytes, or the
    # fragment guard refuses it (malformed_fragment) before netstack.
    go("long chain then a first fragment", IPv6(src=src6, dst=dst6) / destopts(1248) /
       IPv6ExtHdrFragment(id=7, m=1, offset=0) / UDP(sport=40000, dport=9) / Raw(MARK + b"\x00" * 5))
    go("long chain then no next header", IPv6(src=src6, dst=dst6) / destopts(1256, nh=59) / Raw(MARK))
    go("long chain with hop limit 1", IPv6(src=src6, dst=dst6, hlim=1) / destopts(1264) / udp)
    go("long chain tcp syn", IPv6(src=src6, dst=dst6) / destopts(1264) / TCP(sport=40001, dport=80, flags="S") / Raw(MARK))
    # Shapes netstack must refuse or forward without harm (no marker: some are forwarded).
    go("jumbogram with payload length 0", IPv6(src=src6, dst=dst6, plen=0) /
       IPv6ExtHdrHopByHop(options=[Jumbo(jumboplen=100000)]) / UDP(sport=40002, dport=9) / Raw(b"j" * 64))
    go("routing type 0 segments left 2", IPv6(src=src6, dst=dst6) /
       IPv6ExtHdrRouting(type=0, segleft=2, addresses=["fd77:2::2", "fd77:2::3"]) / UDP(sport=40003, dport=9))
    go("routing type 2 segments left 1", IPv6(src=src6, dst=dst6) /
       IPv6ExtHdrRouting(type=2, segleft=1, addresses=["fd77:2::2"]) / UDP(sport=40004, dport=9))
    go("routing type 4 (SRH) segments left 1", IPv6(src=src6, dst=dst6) /
       IPv6ExtHdrRouting(type=4, segleft=1, addresses=["fd77:2::2"]) / UDP(sport=40005, dport=9))
    go("unknown hop-by-hop option (action 10)", IPv6(src=src6, dst=dst6) /
       IPv6ExtHdrHopByHop(options=[PadN(otype=0x9e, optdata=b"\x00" * 4)]) / UDP(sport=40006, dport=9))
    for k in range(1, 11):
        go("ipv4 %d NOP words" % k, IP(src=src4, dst=dst4, options=[IPOption_NOP()] * (4 * k)) / UDP(sport=41000 + k, dport=9))
    go("ipv4 record route", IP(src=src4, dst=dst4, options=[IPOption_RR(routers=["0.0.0.0"] * 9)]) / UDP(sport=41100, dport=9))
    go("ipv4 record route full", IP(src=src4, dst=dst4, options=[IPOption_RR(pointer=40, routers=["1.2.3.4"] * 9)]) / UDP(sport=41101, dport=9))
    go("ipv4 timestamp", IP(src=src4, dst=dst4, options=[IPOption_Timestamp(flg=0, timestamp=0)]) / UDP(sport=41102, dport=9))
    rawopts("ipv4 timestamp overflow", src4, dst4, b"\x44\x08\x09\xf0" + b"\x00" * 4, 41103)
    go("ipv4 lsrr", IP(src=src4, dst=dst4, options=[IPOption_LSRR(routers=["10.77.2.2", "10.77.2.3"])]) / UDP(sport=41104, dport=9))
    go("ipv4 ssrr", IP(src=src4, dst=dst4, options=[IPOption_SSRR(routers=["10.77.2.2"])]) / UDP(sport=41105, dport=9))
    go("ipv4 router alert", IP(src=src4, dst=dst4, options=[IPOption_Router_Alert()]) / UDP(sport=41106, dport=9))
    rawopts("ipv4 option length 0", src4, dst4, b"\x07\x00\x00\x00", 41107)
    rawopts("ipv4 option length past header", src4, dst4, b"\x07\x27\x04\x00", 41108)
    # The ping of death: an echo to the router whose fragments end past 65535.
    echo = bytes(ICMP(type=8, id=0x77) / Raw(b"z" * 65512))
    for off in range(0, len(echo), 1480):
        more = off + 1480 < len(echo)
        send(IP(src=src4, dst=sys.argv[6], id=0x7777, flags="MF" if more else 0, frag=off // 8, proto=1) /
             Raw(echo[off:off + 1480]), iface="eth0")
    sent.append("ping of death to the router")
    # The flow the WAN side answers with a long chain.
    go("udp flow to the wan host", IPv6(src=src6, dst=dst6) / UDP(sport=45000, dport=46000) / Raw(b"hello"))
elif mode == "wan":
    go("long chain syn to the allow6 port", IPv6(src=src6, dst=dst6) / destopts(1264) /
       TCP(sport=40010, dport=int(sys.argv[4]), flags="S") / Raw(MARK))
    go("long chain reply on the lan host's flow", IPv6(src=src6, dst=dst6) / destopts(1264) /
       UDP(sport=46000, dport=45000) / Raw(MARK))
    inner = IPv6(src=dst6, dst=src6) / destopts(1264) / UDP(sport=45000, dport=46000) / Raw(b"quoted")
    go("icmpv6 error quoting a long chain", IPv6(src=src6, dst=dst6) / ICMPv6DestUnreach(code=1) / Raw(bytes(inner)[:1180]))
    go("icmpv6 error with a long chain", IPv6(src=src6, dst=dst6) / destopts(1264) /
       ICMPv6DestUnreach(code=1) / IPv6(src=dst6, dst=src6) / UDP(sport=45000, dport=46000) / Raw(MARK))
time.sleep(1.5)
pps.stop()
print(json.dumps({"sent": sent, "param_problems": len(pps.results or [])}))
`

// crashResult is what crashScapy prints in the lan and wan modes.
type crashResult struct {
	Sent          []string `json:"sent"`
	ParamProblems int      `json:"param_problems"`
}

// TestLabOnePacketCrash sends every packet of crashScapy through the
// running lab router from the LAN host, from the WAN host and as replies:
// before the forward guard (stack/fwdguard.go) the first of them killed
// the router. The router must still be up, forward pings both ways, have
// counted ipv6_header_chain drops on both interfaces, and never have let a
// long-chain packet reach the far host.
func TestLabOnePacketCrash(t *testing.T) {
	parallelLab(t)
	requirePrivileged(t)
	requireScapy(t)
	runWithHook(t, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		before, err := l.dropCounters(ctx)
		if err != nil {
			return err
		}
		// Sniffers on both hosts for the whole exchange.
		sniff := func(ns string) (*exec.Cmd, *strings.Builder, error) {
			var out strings.Builder
			cmd := command(ctx, ns, scapyPython, "-c", crashScapy, "sniff", "14")
			cmd.Stdout = &out
			return cmd, &out, cmd.Start()
		}
		lanSniff, lanOut, err := sniff(l.lanNS)
		if err != nil {
			return err
		}
		wanSniff, wanOut, err := sniff(l.wanNS)
		if err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // scapy's import and the sniffers' sockets
		run := func(ns string, args ...string) (crashResult, error) {
			var r crashResult
			out, err := output(ctx, ns, scapyPython, append([]string{"-c", crashScapy}, args...)...)
			if err != nil {
				return r, err
			}
			if err := json.Unmarshal(out, &r); err != nil {
				return r, fmt.Errorf("scapy output %q: %w", out, err)
			}
			return r, nil
		}
		lanRes, err := run(l.lanNS, "lan", lanHost6.Addr().String(), wanHost6.Addr().String(),
			lanHost4.Addr().String(), wanHost4.Addr().String(), lanRouter4.Addr().String())
		if err != nil {
			return err
		}
		if l.router.exited() {
			return fmt.Errorf("the router died on the LAN host's packets (%d sent): %v", len(lanRes.Sent), l.router.err)
		}
		wanRes, err := run(l.wanNS, "wan", wanHost6.Addr().String(), lanHost6.Addr().String(), strconv.Itoa(forwardPort))
		if err != nil {
			return err
		}
		if l.router.exited() {
			return fmt.Errorf("the router died on the WAN host's packets: %v", l.router.err)
		}
		for _, c := range []*exec.Cmd{lanSniff, wanSniff} {
			if err := c.Wait(); err != nil {
				return fmt.Errorf("sniffer: %w", err)
			}
		}
		var errs []string
		for name, out := range map[string]*strings.Builder{"LAN host": lanOut, "WAN host": wanOut} {
			var n struct{ Marked int }
			if err := json.Unmarshal([]byte(out.String()), &n); err != nil {
				errs = append(errs, fmt.Sprintf("%s sniffer output %q: %v", name, out.String(), err))
			} else if n.Marked != 0 {
				errs = append(errs, fmt.Sprintf("%s received %d long-chain packets", name, n.Marked))
			}
		}
		t.Logf("LAN host sent %d packets, got %d Parameter Problems; WAN host sent %d, got %d",
			len(lanRes.Sent), lanRes.ParamProblems, len(wanRes.Sent), wanRes.ParamProblems)
		if lanRes.ParamProblems == 0 || wanRes.ParamProblems == 0 {
			errs = append(errs, "no Parameter Problem came back to one of the senders")
		}
		for _, p := range []struct {
			ns string
			to netip.Addr
		}{{l.lanNS, wanHost4.Addr()}, {l.lanNS, wanHost6.Addr()}, {l.wanNS, lanHost6.Addr()}} {
			if _, err := ping(ctx, p.ns, p.to); err != nil {
				errs = append(errs, fmt.Sprintf("ping %s after the packets: %v", p.to, err))
			}
		}
		after, err := l.dropCounters(ctx)
		if err != nil {
			return err
		}
		// LAN: the eight long chains but the one with hop limit 1, which
		// netstack answers with Time Exceeded before it forwards, and one
		// that its own extension header check refuses first (counted as
		// netstack_ipv6_extension_header_problem). WAN: the SYN, the reply
		// and the long ICMPv6 error.
		// The ping of death's last fragment and the two source routes.
		for _, w := range []struct {
			iface, reason string
			min           uint64
		}{{"lan", "ipv6_header_chain", 6}, {"wan", "ipv6_header_chain", 3}, {"lan", "ipv4_fragment_too_big", 1}, {"lan", "ipv4_source_route", 2}} {
			got := after[w.iface][w.reason] - before[w.iface][w.reason]
			if got < w.min {
				errs = append(errs, fmt.Sprintf("%s: %s rose by %d, want at least %d", w.iface, w.reason, got, w.min))
			}
		}
		t.Logf("drops now: lan %v; wan %v", after["lan"], after["wan"])
		if len(errs) > 0 {
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return nil
	})
}

// dropCounters returns every interface's drop counters from a status
// snapshot taken after the call.
func (l *lab) dropCounters(ctx context.Context) (map[string]map[string]uint64, error) {
	s, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]uint64, len(s.Interfaces))
	for _, i := range s.Interfaces {
		out[i.Name] = i.Drops
	}
	return out, nil
}
