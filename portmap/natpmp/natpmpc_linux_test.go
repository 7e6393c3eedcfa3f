package natpmp

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/portmap"
	"github.com/gvrouter/gvrouter/portmap/pcp"
	"github.com/gvrouter/gvrouter/portmap/pmpd"
	pt "github.com/gvrouter/gvrouter/portmap/portmaptest"
)

// TestNatpmpc runs Debian's natpmpc (libnatpmp) in a LAN namespace
// against the server in a gateway namespace, bound on the gateway's LAN
// address only: natpmpc finds the server as its default gateway, reads
// the external address, maps a UDP and a TCP port (each a DNAT entry
// in the NAT engine that takes a WAN packet to the LAN host), deletes
// one, and sees the other expire. The same request from a WAN
// namespace is refused (not authorized), and the gateway's WAN address
// has no listener. The restart announcement reaches 224.0.0.1:5350 on
// the LAN.
func TestNatpmpc(t *testing.T) {
	netnstest.Privileged(t, "ip", "natpmpc")
	gw, lan, wan := pt.Namespaces(t, "pm", pt.WANAddr)
	gw.IP(t, "route", "add", "224.0.0.0/4", "dev", "gl")

	tb, e, clk := pt.Table(t, portmap.Policy{Secure: true})
	h := &Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet}}
	var conn, annConn, listen net.PacketConn
	var err error
	gw.Do(t, func() {
		if conn, err = net.ListenPacket("udp4", "192.168.1.1:5351"); err != nil {
			return
		}
		annConn, err = net.ListenPacket("udp4", "192.168.1.1:0")
	})
	if err != nil {
		t.Fatalf("listen in the gateway: %v", err)
	}
	lan.Do(t, func() { listen, err = net.ListenPacket("udp4", "0.0.0.0:5350") })
	if err != nil {
		t.Fatalf("listen for announcements: %v", err)
	}
	defer annConn.Close()
	defer listen.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ph := &pcp.Handler{Table: tb, Inside: []netip.Prefix{pt.LANNet}}
	srv := &pmpd.Server{Conn: conn, NATPMP: h, PCP: ph}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	// The announcements, as after a restart: NAT-PMP's, then PCP's.
	go srv.Announce(ctx, annConn, pmpd.AnnounceGroup)
	listen.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _, err := listen.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no announcement on the LAN: %v", err)
	}
	if r, err := ParseResponse(buf[:n]); err != nil || r.Op != 128 || r.External != pt.WANAddr {
		t.Errorf("announcement % x = %+v, %v", buf[:n], r, err)
	}
	n, _, err = listen.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no PCP announcement on the LAN: %v", err)
	}
	if r, ok := pcp.ParseResponse(buf[:n]); !ok || r.Op != pcp.OpAnnounce || r.Result != pcp.Success {
		t.Errorf("PCP announcement % x = %+v", buf[:n], r)
	}

	natpmpc := func(ns *netnstest.Netns, args ...string) string {
		out := ns.Run(t, "natpmpc", args...)
		t.Logf("natpmpc %s:\n%s", strings.Join(args, " "), out)
		return out
	}
	expect := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("natpmpc output lacks %q", w)
			}
		}
	}
	expect(natpmpc(lan), "Public IP address : 203.0.113.2")
	expect(natpmpc(lan, "-a", "5000", "5000", "udp", "3600"), "Mapped public port 5000 protocol UDP to local port 5000 liftime 3600")
	expect(natpmpc(lan, "-a", "6000", "6000", "tcp", "60"), "Mapped public port 6000 protocol TCP to local port 6000 liftime 120")
	hostUDP := netip.AddrPortFrom(pt.HostA, 5000)
	if !pt.Installed(e, natengine.ProtoUDP, 5000, hostUDP) || !pt.Installed(e, natengine.ProtoTCP, 6000, netip.AddrPortFrom(pt.HostA, 6000)) {
		t.Fatalf("NAT engine mappings %+v, want udp 5000 and tcp 6000 to %v", e.PortMappings(), pt.HostA)
	}
	// A WAN host's packet to the mapped port goes to the LAN host.
	pkt := pt.UDPPacket(pt.Remote, 4444, pt.WANAddr, 5000)
	if v := e.Prerouting(pkt, pt.WANIf); v != natengine.Accept || netip.AddrFrom4([4]byte(pkt[16:20])) != pt.HostA {
		t.Errorf("WAN packet to udp 5000: %v, to %v; want accept, to %v", v, netip.AddrFrom4([4]byte(pkt[16:20])), pt.HostA)
	}

	expect(natpmpc(lan, "-a", "5000", "5000", "udp", "0"), "Mapped public port 0 protocol UDP to local port 5000 liftime 0")
	if pt.Installed(e, natengine.ProtoUDP, 5000, hostUDP) {
		t.Error("deleted mapping still in the NAT engine")
	}
	clk.Add(121 * time.Second)
	if n := tb.Sweep(); n != 1 || len(e.PortMappings()) != 0 {
		t.Errorf("after 121 s: %d expired, %d left; want 1, 0", n, len(e.PortMappings()))
	}

	// From the WAN side: refused, and nothing listens on the WAN address.
	out, _ := runMayFail(wan, "natpmpc", "-g", "192.168.1.1", "-a", "7000", "7000", "tcp", "3600")
	if !strings.Contains(out, "failed : not authorized") || strings.Contains(out, "Mapped public port") {
		t.Errorf("natpmpc from the WAN:\n%s\nwant a refusal (not authorized)", out)
	}
	out, _ = runMayFail(wan, "natpmpc", "-g", "203.0.113.2", "-a", "7000", "7000", "tcp", "3600")
	if strings.Contains(out, "Mapped public port") {
		t.Errorf("natpmpc to the WAN address mapped a port:\n%s", out)
	}
	if got := h.Stats().Outside.Load(); got != 1 {
		t.Errorf("outside requests counted %d, want 1", got)
	}
}

// runMayFail runs a command in ns, at most 20 s, and returns its output
// whether or not it fails.
func runMayFail(ns *netnstest.Netns, name string, args ...string) (string, error) {
	args = append([]string{"netns", "exec", ns.Name(), "timeout", "20", name}, args...)
	out, err := exec.Command("ip", args...).CombinedOutput()
	return string(out), err
}
