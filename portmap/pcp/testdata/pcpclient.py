# A PCP client written from RFC 6887's figures (no PCP client is packaged
# in Debian), for portmap/pcp's TestPCPClient and the lab's
# TestLabPortMappingLimits. It sends the requests its arguments name over
# a kernel UDP socket bound to MYADDR and prints, per request, the result
# code, assigned external port and lifetime of the answer.
#
# usage: pcpclient.py SERVER MYADDR STEP...
# STEP:  name,op,lifetime,nonce,proto,port[,...]
#        op 1 (MAP):  ...[,ext,PORT][,prefer] or ...,third,ADDR
#        op 2 (PEER): ...,PEERADDR,PEERPORT
import ipaddress, socket, struct, sys
server, me = sys.argv[1], sys.argv[2]
def a16(ip): return ipaddress.IPv6Address('::ffff:' + ip).packed
def header(op, life): return struct.pack('!BBHI', 2, op, 0, life) + a16(me)
def mapp(nonce, proto, port, ext): return nonce * 12 + struct.pack('!B3xHH', proto, port, ext) + bytes(16)
def peer(nonce, proto, port, pip, pport): return mapp(nonce, proto, port, port) + struct.pack('!H2x', pport) + a16(pip)
def option(code, data): return struct.pack('!BxH', code, len(data)) + data + bytes(-len(data) % 4)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((me, 0))
s.settimeout(3)
for step in sys.argv[3:]:
    name, op, life, nonce, proto, port = step.split(',')[:6]
    extra = step.split(',')[6:]
    op, life, proto, port = int(op), int(life), int(proto), int(port)
    nonce = bytes([int(nonce)])
    if op == 1:
        ext = int(extra[1]) if len(extra) > 1 and extra[0] == 'ext' else port
        msg = header(1, life) + mapp(nonce, proto, port, ext)
        if 'prefer' in extra:
            msg += option(2, b'')  # PREFER_FAILURE (section 13.2)
    else:
        msg = header(2, life) + peer(nonce, proto, port, extra[0], int(extra[1]))
    if extra and extra[0] == 'third':
        msg += option(1, a16(extra[1]))  # THIRD_PARTY (section 13.1)
    s.sendto(msg, (server, 5351))
    try:
        r = s.recv(1100)
    except socket.timeout:
        print(name, 'timeout'); continue
    ver, rop, _, res, rlife = struct.unpack('!BBBBI', r[:8])
    ext = struct.unpack('!H', r[42:44])[0] if len(r) >= 60 else 0
    print(name, 'v%d' % ver, 'op%d' % rop, 'result', res, 'port', ext, 'lifetime', rlife)
