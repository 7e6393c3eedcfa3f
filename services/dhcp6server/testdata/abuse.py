#!/usr/bin/python3
"""Bad DHCPv6 input for TestAbuse, from a LAN host's namespace.

Usage: abuse.py IFACE FLOOD_SRC GOOD_SRC FLOOD_SECONDS

Sends, each once, from the interface's link-local address: an
Information-request with an option cut short, one with an option header
cut short, a Relay-forward, an Information-request with IA_NA, one with
another server's identifier, a Solicit; one Information-request from a
global source and one to ff02::1. Then floods Information-requests from
FLOOD_SRC (spoofed, about 5000 a second) for FLOOD_SECONDS while a client
on GOOD_SRC (a kernel UDP socket on port 546) asks, retransmitting; then
that client asks once more. Prints one JSON object: what was sent and the
Replies the client got, parsed by scapy.
"""

import json
import socket
import sys
import threading
import time

from scapy.all import Ether, IPv6, UDP, Raw, get_if_hwaddr
from scapy.layers.dhcp6 import (
    DHCP6_InfoRequest, DHCP6_RelayForward, DHCP6_Reply, DHCP6_Solicit,
    DHCP6OptClientId, DHCP6OptDNSDomains, DHCP6OptDNSServers,
    DHCP6OptElapsedTime, DHCP6OptIA_NA, DHCP6OptInfoRefreshTime,
    DHCP6OptOptReq, DHCP6OptRelayMsg, DHCP6OptServerId, DUID_LL, DUID_LLT)

iface, flood_src, good_src, flood_seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
mac = get_if_hwaddr(iface)
ifindex = socket.if_nametoindex(iface)
ALL = "ff02::1:2"

own = None
with open("/proc/net/if_inet6") as f:
    for line in f:
        fields = line.split()
        if fields[5] == iface and fields[0].startswith("fe80"):
            own = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(fields[0]))
assert own, "no link-local address on " + iface


def ir(xid, *extra):
    p = (DHCP6_InfoRequest(trid=xid)
         / DHCP6OptClientId(duid=DUID_LLT(lladdr=mac, timeval=12345))
         / DHCP6OptElapsedTime()
         / DHCP6OptOptReq(reqopts=[23, 24, 32]))
    for e in extra:
        p = p / e
    return p


def frame(payload, src=None, dst=ALL, dmac="33:33:00:01:00:02"):
    return bytes(Ether(src=mac, dst=dmac) / IPv6(src=src or own, dst=dst)
                 / UDP(sport=546, dport=547) / payload)


raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
raw.bind((iface, 0))

bad = [
    frame(Raw(bytes(ir(1)) + b"\x00\x17\x00\x10\xfd\x00")),           # malformed
    frame(Raw(bytes(ir(2)) + b"\x00\x17")),                           # malformed
    frame(DHCP6_RelayForward(linkaddr="::", peeraddr=own)
          / DHCP6OptRelayMsg(message=ir(3))),                         # relay
    frame(ir(4, DHCP6OptIA_NA(iaid=1))),                              # ia_option
    frame(ir(5, DHCP6OptServerId(duid=DUID_LL(lladdr="02:00:00:00:99:99")))),  # wrong_server_id
    frame(DHCP6_Solicit(trid=6)
          / DHCP6OptClientId(duid=DUID_LLT(lladdr=mac, timeval=12345))
          / DHCP6OptElapsedTime() / DHCP6OptIA_NA(iaid=1)
          / DHCP6OptOptReq(reqopts=[23, 24])),                        # stateful_ignored
    frame(ir(7), src="2001:db8::5"),                                  # bad_source
    frame(ir(8), dst="ff02::1", dmac="33:33:00:00:00:01"),            # wrong_destination
]
for f in bad:
    raw.send(f)
    time.sleep(0.02)


def ask(xid, timeout):
    """An Information-request from good_src, retransmitted every 0.25 s
    until a Reply with its transaction ID comes or timeout passes."""
    sk = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    sk.bind((good_src, 546, 0, ifindex))
    sk.settimeout(0.25)
    req = bytes(ir(xid))
    sent, end = 0, time.time() + timeout
    try:
        while time.time() < end:
            sk.sendto(req, (ALL, 547, 0, ifindex))
            sent += 1
            try:
                while True:
                    data, addr = sk.recvfrom(2048)
                    if data[:1] != b"\x07" or int.from_bytes(data[1:4], "big") != xid:
                        continue
                    r = DHCP6_Reply(data)
                    return {
                        "sent": sent,
                        "from": addr[0].split("%")[0],
                        "server_id": bytes(r[DHCP6OptServerId].duid).hex(),
                        "dns": r[DHCP6OptDNSServers].dnsservers if DHCP6OptDNSServers in r else [],
                        "domains": r[DHCP6OptDNSDomains].dnsdomains if DHCP6OptDNSDomains in r else [],
                        "refresh": r[DHCP6OptInfoRefreshTime].reftime if DHCP6OptInfoRefreshTime in r else None,
                    }
            except socket.timeout:
                pass
    finally:
        sk.close()
    return {"sent": sent}


flood = frame(ir(0x0bad), src=flood_src)
flood_sent = 0
stop = threading.Event()


def flooder():
    global flood_sent
    while not stop.is_set():
        for _ in range(50):
            raw.send(flood)
        flood_sent += 50
        time.sleep(0.01)


t0 = time.time()
th = threading.Thread(target=flooder)
th.start()
time.sleep(0.2)
during = ask(0x900d01, flood_seconds)
while time.time() - t0 < flood_seconds:
    time.sleep(0.05)
stop.set()
th.join()
flood_time = time.time() - t0
after = ask(0x900d02, 5)
print(json.dumps({"bad_sent": len(bad), "flood_sent": flood_sent, "flood_seconds": flood_time,
                  "during": during, "after": after}))
