package router

import (
	"bufio"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

// udpEchoServer is a UDP echo server on port 7; it prints "ready" once
// bound, so that no datagram meets a closed port (an ICMP port
// unreachable the client reports as "refused": seen when the machine was
// loaded enough that python had not bound before the first echo).
const udpEchoServer = `
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 7))
print("ready", flush=True)
while True:
    d, a = s.recvfrom(2048)
    s.sendto(d, a)
`

// udpEchoClient sends argv[2] datagrams to argv[1] port 7, one at a time,
// and prints how many came back; a refused one (ICMP port unreachable)
// prints "refused".
const udpEchoClient = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((sys.argv[1], 7))
s.settimeout(1)
got = 0
for i in range(int(sys.argv[2])):
    s.send(b"zero-copy %d" % i)
    try:
        if s.recv(2048) == b"zero-copy %d" % i:
            got += 1
    except ConnectionRefusedError:
        print("refused")
        sys.exit(0)
    except socket.timeout:
        pass
print(got)
`

// TestZeroCopyRouter runs a router with two af_xdp ports (copy mode on
// veth) between a LAN and a WAN host, each in its own namespace, with
// masquerade on the WAN. The ports share one UMEM, so the UDP echoes the
// fast path and the next-hop cache forward leave each port from the
// buffer they arrived in on the other: the status snapshot shows the
// sharing and zero-copy transmits on both ports. A reload then removes
// the WAN port: the LAN port keeps working on the UMEM, which is no
// longer shared and has every frame back; a reload that adds the port
// again shares it again.
func TestZeroCopyRouter(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool", "python3")
	rtr := netnstest.New(t, "zcr", netnstest.WithoutIPv6())
	lan := netnstest.New(t, "zcl", netnstest.WithoutIPv6())
	wan := netnstest.New(t, "zcw", netnstest.WithoutIPv6())
	for _, h := range []struct {
		port string
		ns   *netnstest.Netns
		addr string
		gw   string
	}{
		{"lan0", lan, "10.61.1.2/24", "10.61.1.1"},
		{"wan0", wan, "10.61.2.2/24", "10.61.2.1"},
	} {
		rtr.IP(t, "link", "add", h.port, "type", "veth", "peer", "name", "eth0", "netns", h.ns.Name())
		rtr.IP(t, "link", "set", h.port, "up")
		h.ns.IP(t, "link", "set", "eth0", "up")
		h.ns.IP(t, "addr", "add", h.addr, "dev", "eth0")
		h.ns.IP(t, "route", "add", "default", "via", h.gw)
		// Complete checksums, as on a wire: AF_XDP cannot flag a
		// partial one (hw/xdpport/doc.go, "Checksums").
		h.ns.Run(t, "ethtool", "-K", "eth0", "tx", "off")
	}
	srv := exec.Command("ip", "netns", "exec", wan.Name(), "python3", "-c", udpEchoServer)
	srvOut, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	if line, err := bufio.NewReader(srvOut).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("UDP echo server: %q, %v; want ready", line, err)
	}
	state := t.TempDir()
	both := fmt.Sprintf(`ports:
  - {name: lan0, driver: af_xdp}
  - {name: wan0, driver: af_xdp}
interfaces:
  - {name: lan, port: lan0, role: lan, addresses: [10.61.1.1/24]}
  - {name: wan, port: wan0, role: wan, addresses: [10.61.2.1/24]}
nat: {masquerade: [wan]}
state_dir: %s
`, state)
	lanOnly := fmt.Sprintf(`ports:
  - {name: lan0, driver: af_xdp}
interfaces:
  - {name: lan, port: lan0, role: lan, addresses: [10.61.1.1/24]}
state_dir: %s
`, state)
	parse := func(name, src string) *config.Config {
		cfg, err := config.Parse(name, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var r *Router
	rtr.Do(t, func() { r, err = New(parse("both.yaml", both), Build{}, slog.New(slog.DiscardHandler)) })
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer r.Close()
	ports := func() map[string]status.Port {
		m := map[string]status.Port{}
		for _, p := range r.Snapshot().Ports {
			m[p.Name] = p
		}
		return m
	}
	echo := func(dst string, n int) string {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", lan.Name(), "python3", "-c", udpEchoClient, dst, fmt.Sprint(n)).CombinedOutput()
		if err != nil {
			t.Fatalf("UDP echo to %s: %v\n%s", dst, err, out)
		}
		return strings.TrimSpace(string(out))
	}

	if got := echo("10.61.2.2", 200); got != "200" {
		t.Errorf("UDP echoes through the router: %s of 200 came back", got)
	}
	p := ports()
	for _, name := range []string{"lan0", "wan0"} {
		u := p[name].UMEM
		if u == nil {
			t.Fatalf("port %s: no UMEM in the snapshot (driver %q)", name, p[name].Driver)
		}
		other := map[string]string{"lan0": "wan0", "wan0": "lan0"}[name]
		t.Logf("%s: %+v", name, *u)
		if !slices.Equal(u.SharedWith, []string{other}) {
			t.Errorf("port %s shares its UMEM with %v, want [%s]", name, u.SharedWith, other)
		}
		// Most of the 200 datagrams and replies go without a copy; the
		// ARP exchanges and the flow's first packets (netstack's) are
		// copied.
		if u.TxZeroCopy < 150 || u.TxZeroCopy+u.TxCopied != p[name].TxPackets {
			t.Errorf("port %s: %d zero-copy + %d copied transmits of %d, want >= 150 zero-copy and the sum", name, u.TxZeroCopy, u.TxCopied, p[name].TxPackets)
		}
	}

	rtr.Do(t, func() { err = r.Reload(parse("lan.yaml", lanOnly)) })
	if err != nil {
		t.Fatalf("Reload without wan0: %v", err)
	}
	// The LAN port still answers: the router refuses UDP to itself.
	if got := echo("10.61.1.1", 1); got != "refused" {
		t.Errorf("UDP to the router's LAN address after the reload: %q, want refused", got)
	}
	var u *status.PortUMEM
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if u = ports()["lan0"].UMEM; u != nil && u.Held+u.Lent+u.TX+u.Completion+u.RX == 0 {
			break
		}
	}
	if u == nil || len(u.SharedWith) != 0 || u.Free+u.Fill != u.Frames || u.Held+u.Lent+u.TX+u.Completion+u.RX != 0 {
		t.Errorf("lan0 after wan0 was removed: UMEM %+v, want it alone with every frame free or on its fill ring", u)
	}

	rtr.Do(t, func() { err = r.Reload(parse("both.yaml", both)) })
	if err != nil {
		t.Fatalf("Reload with wan0 again: %v", err)
	}
	if got := echo("10.61.2.2", 100); got != "100" {
		t.Errorf("UDP echoes after wan0 came back: %s of 100", got)
	}
	p = ports()
	if u := p["wan0"].UMEM; u == nil || !slices.Equal(u.SharedWith, []string{"lan0"}) || u.TxZeroCopy == 0 {
		t.Errorf("wan0 added again: UMEM %+v, want shared with lan0 and zero-copy transmits", u)
	}
	if len(p) != 2 {
		t.Errorf("ports after the second reload: %v, want lan0 and wan0", p)
	}
}
