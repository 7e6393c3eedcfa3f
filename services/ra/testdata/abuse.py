#!/usr/bin/python3
# Bad Router Advertisements and Router Solicitations, then a flood of valid
# RSs, from a peer on the link, for services/ra's TestInteropScapy.
#
# usage: abuse.py IFACE OUR_MAC FLOOD
#
# It sends, in order: one valid RA (router lifetime 1800, SLLA, MTU 1500,
# prefix 2001:db8:5::/64); six bad RAs that would remove the router if
# taken (router lifetime 0): hop limit 64, an option of length 0, cut to
# 10 octets, a wrong checksum, a global source, code 1; six bad RSs: hop
# limit 64, an option of length 0, cut to 6 octets, a wrong checksum, from
# :: with an SLLA option, code 1; then FLOOD valid RSs as fast as it can,
# counting the RAs from OUR_MAC it sees meanwhile and for 4 s after; then
# one RS, waiting up to 4 s for an RA. It prints one JSON object.
import json
import sys
import time

from scapy.all import (AsyncSniffer, Ether, ICMPv6ND_RA, ICMPv6ND_RS, ICMPv6NDOptMTU, ICMPv6NDOptPrefixInfo,
                       ICMPv6NDOptSrcLLAddr, IPv6, Raw, conf, get_if_hwaddr, sendp)

conf.verb = 0
iface, our_mac, flood = sys.argv[1], sys.argv[2].lower(), int(sys.argv[3])
mac = get_if_hwaddr(iface)
ll = "fe80::bad"
to_nodes = Ether(src=mac, dst="33:33:00:00:00:01")
to_routers = Ether(src=mac, dst="33:33:00:00:00:02")


def ra(hlim=255, src=ll, code=0, lifetime=0, opts=None, cksum=None):
    m = ICMPv6ND_RA(code=code, routerlifetime=lifetime, chlim=64)
    if cksum is not None:
        m.cksum = cksum
    p = to_nodes / IPv6(src=src, dst="ff02::1", hlim=hlim) / m
    return p / opts if opts is not None else p


def rs(hlim=255, src=ll, code=0, opts=None, cksum=None):
    m = ICMPv6ND_RS(code=code)
    if cksum is not None:
        m.cksum = cksum
    p = to_routers / IPv6(src=src, dst="ff02::2", hlim=hlim) / m
    return p / opts if opts is not None else p


def truncated(p, n):
    """p with its ICMPv6 message cut to n octets (the Payload Length follows)."""
    icmp = bytes(p[IPv6].payload)[:n]
    ip = p[IPv6]
    return Ether(src=p[Ether].src, dst=p[Ether].dst) / IPv6(src=ip.src, dst=ip.dst, hlim=255, nh=58) / Raw(icmp)


def is_our_ra(p):
    return p.haslayer(ICMPv6ND_RA) and p[Ether].src.lower() == our_mac


valid_ra = ra(lifetime=1800, opts=ICMPv6NDOptSrcLLAddr(lladdr=mac) / ICMPv6NDOptMTU(mtu=1500) /
              ICMPv6NDOptPrefixInfo(prefix="2001:db8:5::", prefixlen=64, L=1, A=1,
                                    validlifetime=3600, preferredlifetime=1800))
bad_ras = [
    ra(hlim=64),
    ra(opts=Raw(b"\x03\x00" + b"\x00" * 30)),
    truncated(ra(), 10),
    ra(cksum=0x1234),
    ra(src="2001:db8::bad"),
    ra(code=1),
]
slla = ICMPv6NDOptSrcLLAddr(lladdr=mac)
bad_rss = [
    rs(hlim=64, opts=slla),
    rs(opts=Raw(b"\x01\x00" + b"\x00" * 6)),
    truncated(rs(), 6),
    rs(opts=slla, cksum=0x1234),
    rs(src="::", opts=slla),
    rs(code=1, opts=slla),
]
sendp([valid_ra] + bad_ras + bad_rss, iface=iface)
time.sleep(0.5)

sniffer = AsyncSniffer(iface=iface, lfilter=is_our_ra, store=True)
sniffer.start()
time.sleep(0.3)
burst = [rs(src="fe80::f1", opts=slla)] * flood
t0 = time.time()
sendp(burst, iface=iface)
flood_seconds = time.time() - t0
time.sleep(4)
sniffer.stop()
seen = [round(float(p.time) - t0, 3) for p in sniffer.results]

t1 = time.time()
answer = AsyncSniffer(iface=iface, lfilter=is_our_ra, count=1, timeout=4)
answer.start()
time.sleep(0.2)
sendp(rs(src="fe80::f2", opts=slla), iface=iface)
answer.join()
answered = len(answer.results) > 0

print(json.dumps({
    "bad_ras": len(bad_ras), "bad_rss": len(bad_rss),
    "flood_sent": flood, "flood_seconds": round(flood_seconds, 3),
    "ras_seen": seen, "answered": answered,
}))
