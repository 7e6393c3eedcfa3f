#!/usr/bin/python3
"""An access concentrator built from scapy's PPPoE/PPP layers, the independent
peer of pppoe/scapy_test.go. It reads the Go client's frames as hex, one per
line, and answers each with zero or more "OUT <hex>" lines, then "END".
Every check of a client frame that fails prints "ERR <why>". "DATA <hex>"
parses a data frame; "PADT" ends the session from the AC's side (a PADT,
then the AC answers a new PADI as the first); "DONE" prints "SUMMARY <json>" and exits.
Usage: scapy_ac.py <auth: chap|pap> <max-payload or 0>"""
import hashlib
import json
import sys

from scapy.layers.l2 import Ether
from scapy.layers.inet import IP, ICMP
from scapy.layers.ppp import (PPPoED, PPPoED_Tags, PPPoETag, PPPoE, PPP, PPP_LCP_Configure,
                              PPP_LCP_MRU_Option, PPP_LCP_Auth_Protocol_Option, PPP_LCP_Magic_Number_Option,
                              PPP_LCP_Echo, PPP_CHAP_ChallengeResponse, PPP_CHAP, PPP_PAP_Request,
                              PPP_PAP_Response, PPP_IPCP, PPP_IPCP_Option_IPAddress, PPP_IPCP_Option_DNS1,
                              PPP_IPCP_Option_DNS2)

AUTH = sys.argv[1]
MAX_PAYLOAD = int(sys.argv[2])
AC = "02:00:00:00:00:5c"
SID = 0x4242
COOKIE = b"scapy-cookie-\x00\xff"
CHALLENGE = bytes(range(100, 116))
USER, SECRET = b"bob", b"pw-0f-bob"
CLIENT_IP, AC_IP, DNS1, DNS2 = "100.64.7.9", "100.64.7.1", "192.0.2.53", "192.0.2.54"

state = {"checks": 0, "client": None, "lcp_acked": False, "lcp_got_ack": False, "auth_started": False,
         "authed": False, "ipcp_up": False, "client_mru": None, "client_magic": None, "echo_replies": 0,
         "data_ok": 0, "ac_magic": 0x5ca9e001}


def err(msg):
    print("ERR " + msg)


def check(cond, msg):
    state["checks"] += 1
    if not cond:
        err(msg)


def tags(pkt):
    out = []
    if PPPoED_Tags in pkt:
        for t in pkt[PPPoED_Tags].tag_list:
            out.append((t.tag_type, bytes(t.tag_value)))
    return out


def tag(ts, typ):
    vals = [v for t, v in ts if t == typ]
    return vals[0] if vals else None


def disc(code, sid, tag_list):
    return Ether(src=AC, dst=state["client"]) / PPPoED(code=code, sessionid=sid) / PPPoED_Tags(
        tag_list=[PPPoETag(tag_type=t, tag_value=v) for t, v in tag_list])


def sess(proto, payload):
    return Ether(src=AC, dst=state["client"]) / PPPoE(sessionid=SID) / PPP(proto=proto) / payload


def lcp_request():
    opts = [PPP_LCP_Magic_Number_Option(magic_number=state["ac_magic"])]
    if AUTH == "chap":
        opts.insert(0, PPP_LCP_Auth_Protocol_Option(auth_protocol=0xc223, algorithm=5))
    else:
        opts.insert(0, PPP_LCP_Auth_Protocol_Option(auth_protocol=0xc023))
    if MAX_PAYLOAD > 1492:
        opts.insert(0, PPP_LCP_MRU_Option(max_recv_unit=MAX_PAYLOAD))
    return PPP_LCP_Configure(code=1, id=0x31, options=opts)


def handle(frame):
    pkt = Ether(frame)
    out = []
    if state["client"] is None:
        state["client"] = pkt.src
    if PPPoED in pkt:
        d = pkt[PPPoED]
        check(d.version == 1 and d.type == 1, "discovery version/type not 1/1")
        ts = tags(pkt)
        if d.code == 0x09:  # PADI
            state["padis"] = state.get("padis", 0) + 1
            check(pkt.dst == "ff:ff:ff:ff:ff:ff", "PADI not broadcast")
            check(d.sessionid == 0, "PADI session id not 0")
            check(len([t for t, _ in ts if t == 0x0101]) == 1, "PADI needs exactly one Service-Name (RFC 2516 5.1)")
            check(tag(ts, 0x0103) is not None, "PADI without Host-Uniq")
            if MAX_PAYLOAD:
                mp = tag(ts, 0x0120)
                check(mp is not None and int.from_bytes(mp, "big") == MAX_PAYLOAD, "PADI PPP-Max-Payload %r" % mp)
            state["host_uniq"] = tag(ts, 0x0103)
            reply = [(0x0101, b"internet"), (0x0102, b"scapy-ac"), (0x0103, state["host_uniq"]), (0x0104, COOKIE)]
            if MAX_PAYLOAD:
                reply.append((0x0120, MAX_PAYLOAD.to_bytes(2, "big")))
            out.append(disc(0x07, 0, reply))
        elif d.code == 0x19:  # PADR
            check(pkt.dst == AC, "PADR not unicast to the AC")
            check(tag(ts, 0x0104) == COOKIE, "PADR does not echo the AC-Cookie: %r" % tag(ts, 0x0104))
            check(tag(ts, 0x0103) == state["host_uniq"], "PADR Host-Uniq differs")
            check(tag(ts, 0x0101) == b"internet", "PADR Service-Name %r" % tag(ts, 0x0101))
            reply = [(0x0101, b"internet"), (0x0102, b"scapy-ac"), (0x0103, state["host_uniq"])]
            if MAX_PAYLOAD:
                reply.append((0x0120, MAX_PAYLOAD.to_bytes(2, "big")))
            out.append(disc(0x65, SID, reply))
        elif d.code == 0xa7:
            state["padt"] = True
        return out
    if PPPoE not in pkt:
        err("neither discovery nor session: %s" % pkt.summary())
        return out
    s = pkt[PPPoE]
    check(s.version == 1 and s.type == 1 and s.code == 0, "session header not 1/1/0")
    check(s.sessionid == SID, "session id %#x" % s.sessionid)
    check(s.len == len(bytes(s.payload)), "PPPoE length %d, payload %d" % (s.len, len(bytes(s.payload))))
    proto = pkt[PPP].proto
    if proto == 0xc021:
        code = bytes(pkt[PPP].payload)[0]
        if code == 1:
            c = pkt[PPP_LCP_Configure]
            types = [o.type for o in c.options]
            check(2 not in types and 8 not in types, "client asked for ACCM/ACFC, barred by RFC 2516 7")
            for o in c.options:
                if o.type == 1:
                    state["client_mru"] = o.max_recv_unit
                if o.type == 5:
                    state["client_magic"] = o.magic_number
            check(state["client_magic"], "no magic number")
            ack = PPP_LCP_Configure(bytes(c))
            ack.code = 2
            out.append(sess(0xc021, ack))
            state["lcp_acked"] = True
            if not state.get("sent_lcp"):
                state["sent_lcp"] = True
                out.append(sess(0xc021, lcp_request()))
        elif code == 2:
            c = pkt[PPP_LCP_Configure]
            check(c.id == 0x31, "Configure-Ack id %#x" % c.id)
            state["lcp_got_ack"] = True
        elif code == 9:
            e = pkt[PPP_LCP_Echo]
            check(e.magic_number == state["client_magic"], "echo magic %#x" % e.magic_number)
            out.append(sess(0xc021, PPP_LCP_Echo(code=10, id=e.id, magic_number=state["ac_magic"])))
        elif code == 10:
            e = pkt[PPP_LCP_Echo]
            check(e.id == 0x77 and e.magic_number == state["client_magic"], "echo reply id/magic")
            check(bytes(e.data) == b"ping-data", "echo reply data %r" % bytes(e.data))
            state["echo_replies"] += 1
        if state["lcp_acked"] and state["lcp_got_ack"] and not state["auth_started"]:
            state["auth_started"] = True
            if AUTH == "chap":
                out.append(sess(0xc223, PPP_CHAP_ChallengeResponse(code=1, id=0x21, value=CHALLENGE,
                                                                   optional_name=b"scapy-ac")))
    elif proto == 0xc223:
        r = pkt[PPP_CHAP_ChallengeResponse]
        want = hashlib.md5(bytes([0x21]) + SECRET + CHALLENGE).digest()
        check(r.code == 2 and r.id == 0x21, "CHAP response code/id")
        check(bytes(r.value) == want, "CHAP response %s, want MD5(id||secret||challenge) %s (RFC 1994)" % (
            bytes(r.value).hex(), want.hex()))
        check(bytes(r.optional_name) == USER, "CHAP name %r" % r.optional_name)
        out.append(sess(0xc223, PPP_CHAP(code=3, id=0x21, data=b"hi")))
        out += start_ncp()
    elif proto == 0xc023:
        r = pkt[PPP_PAP_Request]
        check(bytes(r.username) == USER and bytes(r.password) == SECRET, "PAP user/password")
        out.append(sess(0xc023, PPP_PAP_Response(code=2, id=r.id, message=b"ok")))
        out += start_ncp()
    elif proto == 0x8021:
        c = pkt[PPP_IPCP]
        if c.code == 1:
            opts = {o.type: o.data for o in c.options}
            if opts.get(3) == CLIENT_IP and opts.get(129) == DNS1 and opts.get(131) == DNS2:
                a = PPP_IPCP(bytes(c))
                a.code = 2
                out.append(sess(0x8021, a))
                state["ipcp_acked_client"] = True
            else:
                check(set(opts) == {3, 129, 131}, "IPCP request options %r" % sorted(opts))
                out.append(sess(0x8021, PPP_IPCP(code=3, id=c.id, options=[
                    PPP_IPCP_Option_IPAddress(data=CLIENT_IP), PPP_IPCP_Option_DNS1(data=DNS1),
                    PPP_IPCP_Option_DNS2(data=DNS2)])))
        elif c.code == 2:
            check(c.id == 0x41, "IPCP Configure-Ack id %#x" % c.id)
            state["ipcp_got_ack"] = True
        if state.get("ipcp_acked_client") and state.get("ipcp_got_ack") and not state["ipcp_up"]:
            state["ipcp_up"] = True  # RFC 1661: both sides acked, IPCP Opened
            # First packet over the link: scapy's ICMP echo to the client.
            out.append(sess(0x0021, IP(src=AC_IP, dst=CLIENT_IP) / ICMP(id=7, seq=1) / b"from-scapy"))
            # An LCP echo request the client must answer.
            out.append(sess(0xc021, PPP_LCP_Echo(code=9, id=0x77, magic_number=state["ac_magic"],
                                                 data=b"ping-data")))
    elif proto == 0x0021:  # the client's answer to the ICMP echo, in a session frame
        data(frame)
    elif proto == 0x8057:
        err("IPv6CP although not enabled")
    return out


def data(frame):
    pkt = Ether(frame)
    check(PPPoE in pkt and pkt[PPPoE].sessionid == SID, "data frame session")
    check(pkt[PPPoE].len == len(bytes(pkt[PPPoE].payload)), "data frame PPPoE length")
    check(pkt[PPP].proto == 0x0021 and IP in pkt, "data frame not IPv4 in PPP")
    check(pkt[IP].src == CLIENT_IP and pkt[IP].dst == AC_IP, "data IP %s > %s" % (pkt[IP].src, pkt[IP].dst))
    check(ICMP in pkt and pkt[ICMP].type == 0 and bytes(pkt[ICMP].payload) == b"from-scapy", "not the echo reply")
    state["data_ok"] += 1


def start_ncp():
    state["authed"] = True
    return [sess(0x8021, PPP_IPCP(code=1, id=0x41, options=[PPP_IPCP_Option_IPAddress(data=AC_IP)]))]


def padt():
    """The AC ends the session (RFC 2516 5.5) and forgets it, so the next
    PADI starts a new one."""
    out = [disc(0xa7, SID, [(0x0203, b"scapy-ac restarting")])]
    for k in ("lcp_acked", "lcp_got_ack", "auth_started", "authed", "ipcp_up"):
        state[k] = False
    for k in ("sent_lcp", "ipcp_acked_client", "ipcp_got_ack", "client_magic"):
        state.pop(k, None)
    state["padts_sent"] = state.get("padts_sent", 0) + 1
    return out


for line in sys.stdin:
    line = line.strip()
    if line == "DONE":
        keep = ("checks", "authed", "ipcp_up", "client_mru", "echo_replies", "data_ok")
        print("SUMMARY " + json.dumps({k: state[k] for k in keep} | {"padt": state.get("padt", False),
                                      "padis": state.get("padis", 0), "padts_sent": state.get("padts_sent", 0)}))
        sys.stdout.flush()
        break
    try:
        if line.startswith("DATA "):
            data(bytes.fromhex(line[5:]))
        elif line == "PADT":
            for p in padt():
                print("OUT " + bytes(p).hex())
        else:
            for p in handle(bytes.fromhex(line)):
                print("OUT " + bytes(p).hex())
    except Exception as e:  # a frame scapy cannot take apart is a finding, not a crash
        err("exception %r on %s" % (e, line[:80]))
    print("END")
    sys.stdout.flush()
