# The ISP's side of TestInteropScapy: scapy, as an independent DHCPv6
# encoder, answers the client's Solicit and Request, first with messages
# a client must drop, then, when the test says "go" on stdin, with good
# ones. Usage: malformed.py IFACE SERVER_MAC CLIENT_MAC SERVER_LL CLIENT_LL
import sys

from scapy.all import AsyncSniffer, Ether, IPv6, Raw, UDP, conf, sendp
from scapy.layers.dhcp6 import (DUID_LL, DHCP6_Advertise, DHCP6_RelayReply, DHCP6_Reply,
                                DHCP6_Request, DHCP6_Solicit, DHCP6OptClientId, DHCP6OptDNSServers,
                                DHCP6OptIA_PD, DHCP6OptIAPrefix, DHCP6OptPref, DHCP6OptRelayMsg,
                                DHCP6OptServerId)

conf.verb = 0
iface, smac, cmac, sll, cll = sys.argv[1:6]
PREFIX = "2001:db8:cc00::"


def say(*words):
    print(*words, flush=True)


def sniff_one(kind):
    s = AsyncSniffer(iface=iface, filter="udp and dst port 547", count=1,
                     lfilter=lambda p: p.haslayer(kind))
    s.start()
    return s


def wait(s, kind):
    s.join(timeout=15)
    if not s.results:
        say("timeout")
        sys.exit(1)
    return s.results[0][kind]


def send(dhcp):
    sendp(Ether(src=smac, dst=cmac) / IPv6(src=sll, dst=cll) / UDP(sport=547, dport=546) / dhcp, iface=iface)


def message(kind, trid, cid, iaid, sid=None, pd=True, pref=None):
    m = kind(trid=trid) / cid / DHCP6OptServerId(duid=DUID_LL(lladdr=sid or smac))
    if pd:
        m /= DHCP6OptIA_PD(iaid=iaid, T1=1800, T2=2880, iapdopt=[
            DHCP6OptIAPrefix(preflft=3600, validlft=7200, plen=56, prefix=PREFIX)])
    m /= DHCP6OptDNSServers(dnsservers=["2001:db8::53"])
    if pref is not None:
        m /= DHCP6OptPref(prefval=pref)
    return m


def junk(kind, trid, cid, iaid):
    """The messages a client must drop in any state, by name."""
    good = message(kind, trid, cid, iaid)
    return [
        ("wrong-xid", message(kind, trid ^ 1, cid, iaid)),
        ("truncated-options", Raw(bytes(good)[:-3])),  # the last option's length runs past the end
        ("relay-reply", DHCP6_RelayReply(hopcount=0, linkaddr="::", peeraddr=cll) / DHCP6OptRelayMsg(message=good)),
        ("wrong-client-duid", message(kind, trid, DHCP6OptClientId(duid=DUID_LL(lladdr="02:00:00:00:99:99")), iaid)),
    ]


s = sniff_one(DHCP6_Solicit)
say("ready")
sol = wait(s, DHCP6_Solicit)
cid = sol[DHCP6OptClientId].copy()
cid.remove_payload()  # the option alone, not the ones after it
iaid = sol[DHCP6OptIA_PD].iaid
for name, m in junk(DHCP6_Advertise, sol.trid, cid, iaid) + [("no-ia-pd", message(DHCP6_Advertise, sol.trid, cid, iaid, pd=False))]:
    send(m)
    say("sent", name)
say("advertise-junk-done")
sys.stdin.readline()
r = sniff_one(DHCP6_Request)
send(message(DHCP6_Advertise, sol.trid, cid, iaid, pref=255))
say("advertise-sent")
req = wait(r, DHCP6_Request)
for name, m in junk(DHCP6_Reply, req.trid, cid, iaid):
    send(m)
    say("sent", name)
send(message(DHCP6_Reply, req.trid, cid, iaid, sid="02:00:00:00:77:77"))  # another server's
say("sent wrong-server-duid")
say("reply-junk-done")
sys.stdin.readline()
send(message(DHCP6_Reply, req.trid, cid, iaid))
say("reply-sent")
