package pcp

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	"github.com/gvrouter/gvrouter/portmap/pmpd"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// pcpClient is a PCP client in Python written from RFC 6887's figures
// (no PCP client is packaged in Debian): it sends the requests its
// arguments name over a kernel UDP socket and prints, per request, the
// result code, assigned external port and lifetime of the answer.
const pcpClient = `
import ipaddress, socket, struct, sys
server, me = sys.argv[1], sys.argv[2]
def a16(ip): return ipaddress.IPv6Address('::ffff:' + ip).packed
def header(op, life): return struct.pack('!BBHI', 2, op, 0, life) + a16(me)
def mapp(nonce, proto, port, ext): return nonce * 12 + struct.pack('!B3xHH', proto, port, ext) + bytes(16)
def peer(nonce, proto, port, pip, pport): return mapp(nonce, proto, port, port) + struct.pack('!H2x', pport) + a16(pip)
def option(code, data): return struct.pack('!BxH', code, len(data)) + data + bytes(-len(data) % 4)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
for step in sys.argv[3:]:
    name, op, life, nonce, proto, port = step.split(',')[:6]
    extra = step.split(',')[6:]
    op, life, proto, port = int(op), int(life), int(proto), int(port)
    nonce = bytes([int(nonce)])
    if op == 1:
        msg = header(1, life) + mapp(nonce, proto, port, port)
    else:
        msg = header(2, life) + peer(nonce, proto, port, extra[0], int(extra[1]))
    if extra and extra[0] == 'third':
        msg += option(1, a16(extra[1]))
    s.sendto(msg, (server, 5351))
    try:
        r = s.recv(1100)
    except socket.timeout:
        print(name, 'timeout'); continue
    ver, rop, _, res, rlife = struct.unpack('!BBBBI', r[:8])
    ext = struct.unpack('!H', r[42:44])[0] if len(r) >= 60 else 0
    print(name, 'v%d' % ver, 'op%d' % rop, 'result', res, 'port', ext, 'lifetime', rlife)
`

// TestPCPClient: an independent PCP client (Python, from the RFC's
// figures, in a LAN namespace) maps, is refused a renewal with another
// nonce (NOT_AUTHORIZED), makes a PEER mapping, is refused THIRD_PARTY
// in secure mode, deletes with its nonce; from a WAN namespace its MAP
// is NOT_AUTHORIZED. The server is bound on the gateway's LAN address.
func TestPCPClient(t *testing.T) {
	netnstest.Privileged(t, "ip", "/usr/bin/python3")
	gw, lan, wan := pt.Namespaces(t, "pc", pt.WANAddr)

	tb, e, _ := pt.Table(t, portmap.Policy{Secure: true})
	h := &Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet}}
	var conn net.PacketConn
	var err error
	gw.Do(t, func() { conn, err = net.ListenPacket("udp4", "192.168.1.1:5351") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); (&pmpd.Server{Conn: conn, PCP: h}).Serve(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	script := filepath.Join(t.TempDir(), "pcpclient.py")
	if err := os.WriteFile(script, []byte(pcpClient), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(ns *netnstest.Netns, me string, steps ...string) map[string]string {
		out := ns.Run(t, "/usr/bin/python3", append([]string{script, "192.168.1.1", me}, steps...)...)
		t.Logf("pcp client in %s:\n%s", ns.Name(), out)
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			name, rest, _ := strings.Cut(l, " ")
			got[name] = rest
		}
		return got
	}
	got := run(lan, "192.168.1.10",
		"map,1,3600,1,17,5000",
		"renew-other-nonce,1,3600,2,17,5000",
		"renew,1,7200,1,17,5000",
		"peer,2,600,3,6,6000,203.0.113.9,7000",
		"third-party,1,600,4,6,6100,third,192.168.1.20",
		"delete,1,0,1,17,5000",
	)
	for name, want := range map[string]string{
		"map":               "v2 op129 result 0 port 5000 lifetime 3600",
		"renew-other-nonce": "v2 op129 result 2 port 5000 lifetime 1800",
		"renew":             "v2 op129 result 0 port 5000 lifetime 7200",
		"peer":              "v2 op130 result 0 port 6000 lifetime 600",
		"third-party":       "v2 op129 result 2 ",
		"delete":            "v2 op129 result 0 port 5000 lifetime 0",
	} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	var peerOK bool
	for _, m := range e.PortMappings() {
		if m.Proto == natengine.ProtoTCP && m.Port == 6000 && len(m.Peers) == 1 && m.Peers[0] == netip.MustParseAddrPort("203.0.113.9:7000") {
			peerOK = true
		}
		if m.Proto == natengine.ProtoUDP && m.Port == 5000 {
			t.Error("deleted MAP still in the NAT engine")
		}
	}
	if !peerOK {
		t.Errorf("PEER mapping not in the NAT engine: %+v", e.PortMappings())
	}
	got = run(wan, "203.0.113.9", "wan-map,1,3600,1,17,5000")
	if !strings.HasPrefix(got["wan-map"], "v2 op129 result 2 ") {
		t.Errorf("MAP from the WAN: %q, want result 2 (NOT_AUTHORIZED)", got["wan-map"])
	}
}
