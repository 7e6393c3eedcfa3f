package dhcp4server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// interopClient is one real DHCP client in its own namespace.
type interopClient struct {
	name string
	mac  string
	host string // the host name it sends (option 12)
	ns   *netnstest.Netns
	dir  string
	cmd  *exec.Cmd
	// start and release are the commands that run it and make it send
	// DHCPRELEASE.
	start   func(c *interopClient) *exec.Cmd
	release func(t *testing.T, c *interopClient)
}

// record is the file the client's script appends one line to per event:
// "reason=... ip=... router=... dns=...".
func (c *interopClient) record() string { return filepath.Join(c.dir, "record") }

// events returns the recorded lines whose reason is one of reasons.
func (c *interopClient) events(reasons ...string) []map[string]string {
	data, _ := os.ReadFile(c.record())
	var out []map[string]string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		ev := map[string]string{}
		for f := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(f, "=")
			ev[k] = v
		}
		for _, r := range reasons {
			if strings.EqualFold(ev["reason"], r) {
				out = append(out, ev)
			}
		}
	}
	return out
}

// TestInterop serves ISC dhclient, busybox udhcpc and dhcpcd, each in its
// own namespace behind a bridge, from the server on a rawudp.PacketLink:
// each gets an address of the range, the default route and the DNS
// server; each renews (a 20 s lease, T1 at 10 s) through a restarted
// server that kept every lease; each release frees its address; no two
// share one. About 15 s.
func TestInterop(t *testing.T) {
	netnstest.Privileged(t, "ip", "ethtool", "unshare", "dhclient", "udhcpc", "dhcpcd")
	srvNS := netnstest.New(t, "d4s", netnstest.WithoutIPv6())
	srvNS.IP(t, "link", "add", "br0", "type", "bridge")
	srvNS.IP(t, "addr", "add", "192.168.77.1/24", "dev", "br0")
	srvNS.IP(t, "link", "set", "br0", "up")

	clients := []*interopClient{
		{name: "dhclient", mac: "02:00:00:77:00:01", host: "dhc", start: startDhclient, release: releaseDhclient},
		{name: "udhcpc", mac: "02:00:00:77:00:02", host: "udh", start: startUdhcpc, release: signalRelease(syscall.SIGUSR2)},
		{name: "dhcpcd", mac: "02:00:00:77:00:03", host: "dcd", start: startDhcpcd, release: signalRelease(syscall.SIGTERM)},
	}
	for i, c := range clients {
		c.ns = netnstest.New(t, "d4c", netnstest.WithoutIPv6())
		c.dir = t.TempDir()
		port := fmt.Sprintf("p%d", i)
		srvNS.IP(t, "link", "add", port, "type", "veth", "peer", "name", "c0", "netns", c.ns.Name())
		srvNS.IP(t, "link", "set", port, "master", "br0", "up")
		c.ns.IP(t, "link", "set", "c0", "address", c.mac, "up")
		// Full UDP checksums on the clients' kernel-sent renewals:
		// rawudp checks them, and a veth would leave them partial.
		c.ns.Run(t, "ethtool", "-K", "c0", "tx", "off")
	}

	// The kernel in the server's namespace answers ARP for the server's
	// address; a socket on UDP 67 that is never read keeps it from
	// answering the clients' unicasts with ICMP port unreachable.
	var sink net.PacketConn
	var link *rawudp.PacketLink
	var err error
	srvNS.Do(t, func() {
		if sink, err = net.ListenPacket("udp4", ":67"); err != nil {
			return
		}
		link, err = rawudp.OpenPacketLink("br0")
	})
	if err != nil {
		t.Fatalf("server sockets: %v", err)
	}
	defer sink.Close()
	conn := rawudp.New(link, ServerPort, 256)
	linkCtx, stopLink := context.WithCancel(context.Background())
	var linkWG sync.WaitGroup
	linkWG.Go(func() { link.Run(linkCtx, conn) })
	defer linkWG.Wait()
	defer stopLink()

	cfg := Config{
		ServerAddr: netip.MustParseAddr("192.168.77.1"),
		Subnet:     netip.MustParsePrefix("192.168.77.0/24"),
		RangeStart: netip.MustParseAddr("192.168.77.100"),
		RangeEnd:   netip.MustParseAddr("192.168.77.150"),
		LeaseTime:  20 * time.Second,
		Domain:     "lab",
		LeaseFile:  filepath.Join(t.TempDir(), "leases.json"),
		Log:        slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	run := func() (*Server, func()) {
		s, err := New(cfg, conn)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return s, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}
	s, stop := run()
	defer func() { stop() }()
	defer func() {
		if t.Failed() {
			for _, c := range clients {
				rec, _ := os.ReadFile(c.record())
				log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
				t.Logf("%s record:\n%s\n%s log:\n%s", c.name, rec, c.name, log)
			}
			st := conn.Stats()
			t.Logf("rawudp: received %d sent %d malformed %d queue_full %d fragments %d",
				st.Received.Load(), st.Sent.Load(), st.Malformed.Load(), st.QueueFull.Load(), st.Fragments.Load())
		}
	}()

	for _, c := range clients {
		c.cmd = c.start(c)
		logf, _ := os.Create(filepath.Join(c.dir, "log"))
		c.cmd.Stdout, c.cmd.Stderr = logf, logf
		// Its own process group, so that the cleanup ends the helpers
		// a client forks too (dhcpcd's privilege-separation proxies).
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.cmd.Start(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Cleanup(func() {
			syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			c.cmd.Wait()
			logf.Close()
		})
	}

	// Each is bound: an address of the range, router and DNS the server.
	bound := map[string]netip.Addr{}
	for _, c := range clients {
		ev := waitEvent(t, c, 15*time.Second, "BOUND")
		a, err := netip.ParseAddr(ev["ip"])
		if err != nil || a.Less(cfg.RangeStart) || cfg.RangeEnd.Less(a) {
			t.Errorf("%s bound %q, want an address of %v-%v", c.name, ev["ip"], cfg.RangeStart, cfg.RangeEnd)
		}
		if ev["router"] != "192.168.77.1" || ev["dns"] != "192.168.77.1" || ev["domain"] != "lab" {
			t.Errorf("%s got router %q dns %q domain %q, want 192.168.77.1, 192.168.77.1, lab", c.name, ev["router"], ev["dns"], ev["domain"])
		}
		// The client's script may record BOUND before it adds the route.
		var out string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			out = c.ns.Run(t, "ip", "-n", c.ns.Name(), "route", "show", "default")
			if strings.Contains(out, "via 192.168.77.1") || time.Now().After(deadline) {
				break
			}
		}
		if !strings.Contains(out, "via 192.168.77.1") {
			t.Errorf("%s: default route %q, want via 192.168.77.1", c.name, out)
		}
		for m, b := range bound {
			if b == a {
				t.Errorf("%s and %s share %v", c.name, m, a)
			}
		}
		bound[c.name] = a
	}
	if t.Failed() {
		t.FailNow()
	}
	hosts := s.Hosts()
	for _, c := range clients {
		if hosts[c.host] != bound[c.name] {
			t.Errorf("Hosts()[%q] = %v, want %s's %v", c.host, hosts[c.host], c.name, bound[c.name])
		}
	}

	// A restart keeps every lease.
	before := boundLeases(s)
	stop()
	s, stop = run()
	if after := boundLeases(s); fmt.Sprint(after) != fmt.Sprint(before) || len(after) != len(clients) {
		t.Errorf("bound leases after restart = %v, want %v", after, before)
	}

	// Each renews at T1 and the restarted server ACKs the same address.
	for _, c := range clients {
		ev := waitEvent(t, c, 15*time.Second, "RENEW")
		if ev["ip"] != bound[c.name].String() {
			t.Errorf("%s renewed %q, want %v", c.name, ev["ip"], bound[c.name])
		}
	}
	if n := s.Stats().Ack.Load(); n < uint64(len(clients)) {
		t.Errorf("restarted server ACKed %d, want ≥ %d renewals", n, len(clients))
	}

	// A release frees the address.
	for _, c := range clients {
		c.release(t, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		released := 0
		for _, l := range s.Status().Leases {
			if l.State == LeaseReleased {
				released++
			}
		}
		if released == len(clients) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released leases = %d, want %d: %+v", released, len(clients), s.Status().Leases)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := s.Status(); st.PoolUsed != 0 {
		t.Errorf("PoolUsed after the releases = %d, want 0", st.PoolUsed)
	}
	t.Logf("stats: discover %d request %d ack %d nak %d release %d; drops %v",
		s.Stats().Discover.Load(), s.Stats().Request.Load(), s.Stats().Ack.Load(), s.Stats().Nak.Load(), s.Stats().Release.Load(), dropCounts(s))
}

func dropCounts(s *Server) map[string]uint64 {
	out := map[string]uint64{}
	for r := range NumDropReasons {
		if n := s.Stats().Drops[r].Load(); n > 0 {
			out[r.String()] = n
		}
	}
	return out
}

func boundLeases(s *Server) map[string]netip.Addr {
	out := map[string]netip.Addr{}
	for _, l := range s.Status().Leases {
		if l.State == LeaseBound {
			out[l.MAC.String()] = l.Addr
		}
	}
	return out
}

func waitEvent(t *testing.T, c *interopClient, d time.Duration, reason string) map[string]string {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if evs := c.events(reason); len(evs) > 0 {
			return evs[len(evs)-1]
		}
	}
	t.Fatalf("%s: no %s event in %v", c.name, reason, d)
	return nil
}

func inNetns(c *interopClient, name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", c.ns.Name(), name}, args...)...)
}

// dhclientScript configures the address and default route dhclient
// reports (as dhclient-script would, without touching resolv.conf) and
// records the event.
const dhclientScript = `echo "reason=$reason ip=$new_ip_address router=$new_routers dns=$new_domain_name_servers domain=$new_domain_name lease=$new_dhcp_lease_time" >> "$REC"
case "$reason" in
PREINIT) ip link set dev "$interface" up ;;
BOUND|RENEW|REBIND|REBOOT)
	ip addr replace "$new_ip_address/$new_subnet_mask" dev "$interface"
	[ -n "$new_routers" ] && ip route replace default via "${new_routers%% *}" dev "$interface" ;;
EXPIRE|FAIL|RELEASE|STOP)
	[ -n "$old_ip_address" ] && ip addr del "$old_ip_address/$old_subnet_mask" dev "$interface" ;;
esac
exit 0
`

func dhclientArgs(c *interopClient) []string {
	return []string{"-4", "-cf", filepath.Join(c.dir, "dhclient.conf"), "-sf", filepath.Join(c.dir, "script"),
		"-lf", filepath.Join(c.dir, "dhclient.leases"), "-pf", filepath.Join(c.dir, "dhclient.pid"), "c0"}
}

func startDhclient(c *interopClient) *exec.Cmd {
	os.WriteFile(filepath.Join(c.dir, "dhclient.conf"), []byte(`send host-name "`+c.host+`";
request subnet-mask, broadcast-address, routers, domain-name, domain-name-servers, interface-mtu;
`), 0o644)
	os.WriteFile(filepath.Join(c.dir, "script"), []byte("#!/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\nREC="+c.record()+"\n"+dhclientScript), 0o755)
	return inNetns(c, "dhclient", append([]string{"-d", "-1", "-v"}, dhclientArgs(c)...)...)
}

// releaseDhclient runs dhclient -r, which stops the running one (by its
// pidfile) and sends DHCPRELEASE.
func releaseDhclient(t *testing.T, c *interopClient) {
	if out, err := inNetns(c, "dhclient", append([]string{"-r", "-v"}, dhclientArgs(c)...)...).CombinedOutput(); err != nil {
		t.Errorf("dhclient -r: %v: %s", err, out)
	}
}

func startUdhcpc(c *interopClient) *exec.Cmd {
	os.WriteFile(filepath.Join(c.dir, "script"), []byte("#!/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\nREC="+c.record()+`
echo "reason=$1 ip=$ip router=$router dns=$dns domain=$domain lease=$lease" >> "$REC"
case "$1" in
deconfig) ip addr flush dev "$interface"; ip link set "$interface" up ;;
bound|renew)
	ip addr replace "$ip/$mask" dev "$interface"
	[ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface" ;;
esac
exit 0
`), 0o755)
	return inNetns(c, "udhcpc", "-f", "-i", "c0", "-s", filepath.Join(c.dir, "script"), "-x", "hostname:"+c.host, "-t", "10", "-T", "1", "-A", "1")
}

// startDhcpcd runs dhcpcd on c0 only, with its own config and script,
// and tmpfs over /run and /var/lib in a private mount namespace, so that
// its pidfile, control socket, DUID and leases never touch the machine's.
func startDhcpcd(c *interopClient) *exec.Cmd {
	conf := filepath.Join(c.dir, "dhcpcd.conf")
	os.WriteFile(conf, []byte("allowinterfaces c0\nipv4only\nnoarp\nnoipv4ll\nduid\nrelease\nhostname "+c.host+"\noption domain_name_servers, domain_name, routers, subnet_mask\n"), 0o644)
	os.WriteFile(filepath.Join(c.dir, "script"), []byte("#!/bin/sh\nPATH=/usr/sbin:/usr/bin:/sbin:/bin\nREC="+c.record()+`
echo "reason=$reason ip=$new_ip_address router=$new_routers dns=$new_domain_name_servers domain=$new_domain_name lease=$new_dhcp_lease_time" >> "$REC"
exit 0
`), 0o755)
	sh := "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/dhcpcd && exec dhcpcd -B -4 -f " +
		conf + " -c " + filepath.Join(c.dir, "script") + " c0"
	return inNetns(c, "unshare", "--mount", "--propagation", "private", "sh", "-c", sh)
}

// signalRelease sends sig to the client (udhcpc: SIGUSR2 releases;
// dhcpcd, configured with "release": SIGTERM releases and exits).
func signalRelease(sig syscall.Signal) func(t *testing.T, c *interopClient) {
	return func(t *testing.T, c *interopClient) {
		if err := c.cmd.Process.Signal(sig); err != nil {
			t.Errorf("%s: signal %v: %v", c.name, sig, err)
		}
	}
}

// testWriter sends the server's log to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
