package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// TestLabDHCPStarvationLimit floods the router's DHCP server from the LAN
// host with scapy: 2,000 DISCOVER+REQUEST pairs from random MACs in 2 s
// (dhcpAbuseScapy's starve mode). The interface's new-lease budget
// (dhcp_server new_lease_burst, new_leases_per_minute: 64 and 60 by
// default) lets the flood take a part of the range of 100, counted as
// new_lease_limited on the status page, and a client with a MAC of its
// own, asking after the flood, is offered an address. Without the budget
// the flood took all 100 addresses in the 2 s and the new client got no
// OFFER.
func TestLabDHCPStarvationLimit(t *testing.T) {
	requireScapy(t)
	// The hook's own clients ask the server; no proof's lease is needed.
	runWithHookFewProofs(t, 3*time.Minute, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := output(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "starve", "2000", "2",
			lanRouter4.Addr().String(), lanDHCPRange)
		if err != nil {
			return fmt.Errorf("scapy starve: %w", err)
		}
		var flood struct {
			Sent int
			Secs float64
		}
		if err := json.Unmarshal(lastLine(out), &flood); err != nil {
			return fmt.Errorf("scapy starve output %q: %w", out, err)
		}
		var srv status.DHCPServer
		if err := waitFor(ctx, 5*time.Second, func() error {
			srv, err = l.lanServer(ctx)
			if err == nil && srv.Counters["discover"] < uint64(flood.Sent)/2 {
				err = fmt.Errorf("discover counter %d for %d sent", srv.Counters["discover"], flood.Sent)
			}
			return err
		}); err != nil {
			return err
		}
		t.Logf("starvation: %d DISCOVER/REQUEST pairs from random MACs in %.1f s: pool %d/%d used, offer %d, ack %d, pool_exhausted %d, new_lease_limited %d, rate_limited %d",
			flood.Sent, flood.Secs, srv.PoolUsed, srv.PoolSize, srv.Counters["offer"], srv.Counters["ack"],
			srv.Counters["pool_exhausted"], srv.Drops["new_lease_limited"], srv.Drops["rate_limited"])
		if srv.PoolUsed >= srv.PoolSize {
			return fmt.Errorf("the flood took the whole range: %d of %d addresses", srv.PoolUsed, srv.PoolSize)
		}
		if srv.Drops["new_lease_limited"] < uint64(flood.Sent) {
			return fmt.Errorf("new_lease_limited = %d for a flood of %d new clients (a DISCOVER and a REQUEST each)", srv.Drops["new_lease_limited"], flood.Sent)
		}
		// A new client after the flood (scapy retransmits for up to 9 s):
		// the budget refills at one a second and the range has room.
		out, err = output(ctx, l.lanNS, scapyPython, "-c", dhcpAbuseScapy, "discover", "02:77:01:00:00:33")
		if err != nil {
			return fmt.Errorf("scapy discover: %w", err)
		}
		var offer struct{ Yiaddr string }
		if err := json.Unmarshal(lastLine(out), &offer); err != nil {
			return fmt.Errorf("scapy discover output %q: %w", out, err)
		}
		a, err := netip.ParseAddr(offer.Yiaddr)
		if first, last := rangeEnds(); err != nil || a.Less(first) || last.Less(a) {
			return fmt.Errorf("a new client after the flood was offered %q, want an address of %s", offer.Yiaddr, lanDHCPRange)
		}
		t.Logf("a new client after the flood was offered %s", a)
		return nil
	})
}

// rangeEnds returns lanDHCPRange's first and last addresses.
func rangeEnds() (netip.Addr, netip.Addr) {
	a, b, _ := strings.Cut(lanDHCPRange, "-")
	return netip.MustParseAddr(a), netip.MustParseAddr(b)
}

// dhcp6FloodScript floods the router's stateless DHCPv6 server from the
// LAN host: scapy builds one Information-request frame from a made-up MAC
// (FLOOD_MAC), and the loop sends it RATE times a second for SECS seconds,
// each time from a new link-local source with a new DUID (the UDP
// checksum recomputed), as one host spoofing sources would. Meanwhile 25
// clients on the host's own MAC, kernel UDP sockets on the link-local
// addresses given (one each), ask once each, 100 ms apart, and wait up to
// a second for their Reply. Prints {"flood_sent", "flood_secs",
// "asked", "answered"}.
//
// Usage: python3 -c SCRIPT IFACE FLOOD_MAC RATE SECS ADDR...
const dhcp6FloodScript = `
import json, os, select, socket, struct, sys, threading, time
from scapy.all import Ether, IPv6, UDP, get_if_hwaddr
from scapy.layers.dhcp6 import DHCP6_InfoRequest, DHCP6OptClientId, DHCP6OptElapsedTime, DHCP6OptOptReq, DUID_LL

iface, flood_mac, rate, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
addrs = sys.argv[5:]
ifindex = socket.if_nametoindex(iface)
ALL = "ff02::1:2"

def inforeq(xid, lladdr):
    return (DHCP6_InfoRequest(trid=xid) / DHCP6OptClientId(duid=DUID_LL(lladdr=lladdr))
            / DHCP6OptElapsedTime() / DHCP6OptOptReq(reqopts=[23, 24]))

tmpl = bytearray(bytes(Ether(src=flood_mac, dst="33:33:00:01:00:02")
                       / IPv6(src="fe80::1:0:0:0", dst=ALL) / UDP(sport=546, dport=547)
                       / inforeq(0x0bad00, "02:66:00:00:00:00")))
SRC, UDPOFF = 14 + 8, 14 + 40
DUIDMAC = UDPOFF + 8 + 4 + 4 + 4  # header, option header, DUID type and hw type

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s & 0xffff) or 0xffff

def flood_frame(i):
    f = bytearray(tmpl)
    f[SRC + 12:SRC + 16] = struct.pack("!I", i)
    f[DUIDMAC + 2:DUIDMAC + 6] = struct.pack("!I", i)
    f[UDPOFF + 6:UDPOFF + 8] = b"\0\0"
    udp = bytes(f[UDPOFF:])
    pseudo = bytes(f[SRC:SRC + 32]) + struct.pack("!IxxxB", len(udp), 17)
    f[UDPOFF + 6:UDPOFF + 8] = struct.pack("!H", csum(pseudo + udp))
    return bytes(f)

n = int(rate * secs)
frames = [flood_frame(i + 1) for i in range(n)]
raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
raw.bind((iface, 0))
sent = 0

def flooder():
    global sent
    start = time.time()
    for i, f in enumerate(frames):
        raw.send(f)
        sent += 1
        ahead = start + (i + 1) / rate - time.time()
        if ahead > 0:
            time.sleep(ahead)

socks = []
for a in addrs:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((a, 546, 0, ifindex))
    socks.append(s)
mine = get_if_hwaddr(iface)
t0 = time.time()
th = threading.Thread(target=flooder)
th.start()
time.sleep(0.3)
answered = set()
def collect(timeout):
    r, _, _ = select.select([s for s in socks if s.fileno() not in answered], [], [], timeout)
    for s in r:
        data, _ = s.recvfrom(2048)
        if data[:1] == b"\x07" and data[1:4] == struct.pack("!I", 0x900d00 + socks.index(s))[1:]:
            answered.add(s.fileno())
for i, s in enumerate(socks):
    s.sendto(bytes(inforeq(0x900d00 + i, mine)), (ALL, 547, 0, ifindex))
    end = time.time() + 0.1
    while time.time() < end:
        collect(max(0, end - time.time()))
end = time.time() + 1
while time.time() < end and len(answered) < len(socks):
    collect(max(0, end - time.time()))
th.join()
print(json.dumps({"flood_sent": sent, "flood_secs": time.time() - t0, "asked": len(socks), "answered": len(answered)}))
`

// TestLabDHCPv6FloodOneHost floods the router's stateless DHCPv6 server
// from the LAN host with scapy, 2,000 Information-requests a second for
// 3 s, from one made-up MAC and ever-new link-local sources and DUIDs,
// while 25 clients on the host's own MAC ask once each: all 25 get their
// Reply, and the flood is counted as rate_limited. Without the per-host
// budget the flood spent the server's shared 200 Replies a second and the
// clients got a few of their 25.
func TestLabDHCPv6FloodOneHost(t *testing.T) {
	requireScapy(t)
	// The hook's own clients ask the server; no proof's state is needed.
	runWithHookFewProofs(t, 3*time.Minute, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const clients, rate, secs = 25, 2000, 3
		args := []string{"-c", dhcp6FloodScript, hostIf, "02:66:00:00:00:01", strconv.Itoa(rate), strconv.Itoa(secs)}
		for i := range clients {
			a := fmt.Sprintf("fe80::900d:%x", i+1)
			if err := nsRun(ctx, l.lanNS, "ip", "addr", "add", a+"/64", "dev", hostIf, "nodad"); err != nil {
				return err
			}
			args = append(args, a)
		}
		before, err := l.lanDHCPv6Server(ctx)
		if err != nil {
			return err
		}
		out, err := output(ctx, l.lanNS, scapyPython, args...)
		if err != nil {
			return fmt.Errorf("dhcpv6 flood: %w", err)
		}
		var res struct {
			FloodSent int     `json:"flood_sent"`
			FloodSecs float64 `json:"flood_secs"`
			Asked     int     `json:"asked"`
			Answered  int     `json:"answered"`
		}
		if err := json.Unmarshal(lastLine(out), &res); err != nil {
			return fmt.Errorf("dhcpv6 flood output %q: %w", out, err)
		}
		var after status.DHCPv6Server
		if err := waitFor(ctx, 5*time.Second, func() error {
			after, err = l.lanDHCPv6Server(ctx)
			if err == nil && after.Counters["received"]-before.Counters["received"] < uint64(res.FloodSent)/2 {
				err = fmt.Errorf("received %d of a flood of %d", after.Counters["received"]-before.Counters["received"], res.FloodSent)
			}
			return err
		}); err != nil {
			return err
		}
		replied := after.Counters["replied"] - before.Counters["replied"]
		limited := after.Drops["rate_limited"] - before.Drops["rate_limited"]
		t.Logf("DHCPv6 flood of %d Information-requests in %.1f s from one MAC and new sources: the %d clients on another MAC got %d Replies; the server replied %d times, rate_limited %d",
			res.FloodSent, res.FloodSecs, res.Asked, res.Answered, replied, limited)
		if res.Answered < res.Asked-1 {
			return fmt.Errorf("the clients on another MAC got %d of %d Replies during the flood, want at least %d", res.Answered, res.Asked, res.Asked-1)
		}
		if limited < uint64(res.FloodSent)/2 {
			return fmt.Errorf("rate_limited = %d for a flood of %d", limited, res.FloodSent)
		}
		return nil
	})
}

// lanDHCPv6Server returns the LAN's stateless DHCPv6 server's status.
func (l *lab) lanDHCPv6Server(ctx context.Context) (status.DHCPv6Server, error) {
	snap, err := l.statusSince(ctx, time.Now())
	if err != nil {
		return status.DHCPv6Server{}, err
	}
	if snap.IPv6 != nil {
		for _, s := range snap.IPv6.DHCPv6Servers {
			return s, nil
		}
	}
	return status.DHCPv6Server{}, fmt.Errorf("no stateless DHCPv6 server on the status page")
}
