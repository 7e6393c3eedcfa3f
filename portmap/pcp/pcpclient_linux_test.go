package pcp

import (
	"context"
	"net"
	"net/netip"
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

// TestPCPClient: an independent PCP client (testdata/pcpclient.py,
// Python from the RFC's figures, in a LAN namespace) maps, is refused a
// renewal with another nonce (NOT_AUTHORIZED), makes a PEER mapping, is
// refused THIRD_PARTY in secure mode, deletes with its nonce; from a WAN
// namespace its MAP is NOT_AUTHORIZED. The server is bound on the gateway's LAN address.
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

	script, err := filepath.Abs("testdata/pcpclient.py")
	if err != nil {
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
