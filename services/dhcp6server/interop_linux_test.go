package dhcp6server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/ipv6"

	"github.com/gvrouter/gvrouter/internal/netnstest"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// kernelTransport is a Transport over a kernel UDP socket on [::]:547 in
// the server's namespace, joined to ff02::1:2 on one interface, which
// learns each datagram's destination from IPV6_PKTINFO. It cannot know
// the source MAC (SrcMAC nil); the kernel resolves the Reply's.
type kernelTransport struct {
	c   net.PacketConn
	pc  *ipv6.PacketConn
	ifi *net.Interface
}

func newKernelTransport(t *testing.T, ns *netnstest.Netns, ifname string) *kernelTransport {
	t.Helper()
	kt := &kernelTransport{}
	var err error
	ns.Do(t, func() {
		if kt.ifi, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		if kt.c, err = net.ListenPacket("udp6", "[::]:547"); err != nil {
			return
		}
		kt.pc = ipv6.NewPacketConn(kt.c)
		if err = kt.pc.SetControlMessage(ipv6.FlagDst|ipv6.FlagInterface, true); err != nil {
			return
		}
		err = kt.pc.JoinGroup(kt.ifi, &net.UDPAddr{IP: AllRelayAgentsAndServers.AsSlice()})
	})
	if err != nil {
		t.Fatalf("server socket on %s: %v", ifname, err)
	}
	t.Cleanup(func() { kt.c.Close() })
	return kt
}

// Recv implements Transport.
func (kt *kernelTransport) Recv(ctx context.Context) (rawudp.Packet, error) {
	buf := make([]byte, 2048)
	for {
		if err := ctx.Err(); err != nil {
			return rawudp.Packet{}, err
		}
		kt.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, cm, src, err := kt.pc.ReadFrom(buf)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			continue
		}
		if err != nil {
			return rawudp.Packet{}, err
		}
		if cm == nil || cm.IfIndex != kt.ifi.Index {
			continue
		}
		ua := src.(*net.UDPAddr)
		s, _ := netip.AddrFromSlice(ua.IP)
		d, _ := netip.AddrFromSlice(cm.Dst)
		return rawudp.Packet{
			Payload: buf[:n:n],
			Src:     netip.AddrPortFrom(s.Unmap(), uint16(ua.Port)),
			Dst:     netip.AddrPortFrom(d.Unmap(), ServerPort),
		}, nil
	}
}

// Send implements Transport.
func (kt *kernelTransport) Send(p rawudp.Packet) error {
	cm := &ipv6.ControlMessage{Src: p.Src.Addr().AsSlice(), IfIndex: kt.ifi.Index}
	dst := &net.UDPAddr{IP: p.Dst.Addr().AsSlice(), Port: int(p.Dst.Port()), Zone: strconv.Itoa(kt.ifi.Index)}
	_, err := kt.pc.WriteTo(p.Payload, cm, dst)
	return err
}

// lab is a server namespace with a bridge br0 (MAC srvMAC, link-local
// fe80::1 only) and the server on it, and client namespaces, each with a
// c0 on the bridge.
type lab struct {
	srvNS   *netnstest.Netns
	clients []*netnstest.Netns
	srv     *Server
	stop    func()
}

var labCfg = Config{
	HWAddr: srvMAC, Addr: srvAddr,
	DNS:         []netip.Addr{dns1, dns2},
	Domains:     []string{"lan", "example.org"},
	RefreshTime: time.Hour,
}

func newLab(t *testing.T, nClients int) *lab {
	t.Helper()
	l := &lab{srvNS: netnstest.New(t, "d6s")}
	l.srvNS.IP(t, "link", "add", "br0", "address", srvMAC.String(), "type", "bridge", "mcast_snooping", "0")
	l.srvNS.IP(t, "link", "set", "br0", "addrgenmode", "none", "up")
	l.srvNS.IP(t, "addr", "add", "fe80::1/64", "dev", "br0", "nodad")
	for i := range nClients {
		ns := netnstest.New(t, "d6c")
		// No duplicate address detection: the clients' link-local
		// addresses are usable at once.
		ns.Do(t, func() {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/default/accept_dad", []byte("0"), 0); err != nil {
				t.Errorf("accept_dad: %v", err)
			}
		})
		port := fmt.Sprintf("p%d", i)
		l.srvNS.IP(t, "link", "add", port, "type", "veth", "peer", "name", "c0", "netns", ns.Name())
		l.srvNS.Do(t, func() {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+port+"/disable_ipv6", []byte("1"), 0); err != nil {
				t.Errorf("disable_ipv6 on %s: %v", port, err)
			}
		})
		l.srvNS.IP(t, "link", "set", port, "master", "br0", "up")
		ns.IP(t, "link", "set", "c0", "address", fmt.Sprintf("02:00:00:00:02:%02x", i+1), "up")
		l.clients = append(l.clients, ns)
	}
	tr := newKernelTransport(t, l.srvNS, "br0")
	cfg := labCfg
	cfg.Log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	if l.srv, err = New(cfg, tr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.srv.Run(ctx) }()
	var once sync.Once
	l.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

// client is a DHCPv6 client process in its own namespace, whose script
// appends "--- REASON" and its environment to a record file per event.
type client struct {
	name string
	ns   *netnstest.Netns
	dir  string
	cmd  *exec.Cmd
}

func (c *client) record() string { return filepath.Join(c.dir, "record") }

func (c *client) writeScript(t *testing.T) string {
	path := filepath.Join(c.dir, "script")
	// "=== end" closes each event, so that a reader never takes one the
	// script is still writing.
	script := "#!/bin/sh\n{ echo \"--- $reason\"; env; echo \"=== end\"; } >> " + c.record() + "\nexit 0\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs the client in its namespace in its own process group, so
// that the cleanup ends whatever it forked too.
func (c *client) start(t *testing.T, name string, args ...string) {
	t.Helper()
	c.cmd = exec.Command("ip", append([]string{"netns", "exec", c.ns.Name(), name}, args...)...)
	logf, err := os.Create(filepath.Join(c.dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
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

// event waits for the client's last event named one of reasons and
// returns its environment.
func (c *client) event(t *testing.T, d time.Duration, reasons ...string) map[string]string {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		data, _ := os.ReadFile(c.record())
		var last map[string]string
		var cur map[string]string
		for line := range strings.SplitSeq(string(data), "\n") {
			if r, ok := strings.CutPrefix(line, "--- "); ok {
				cur = nil
				if slices.Contains(reasons, r) {
					cur = map[string]string{}
				}
				continue
			}
			if line == "=== end" {
				// Complete: only now may it be the last.
				if cur != nil {
					last = cur
				}
				cur = nil
				continue
			}
			if k, v, ok := strings.Cut(line, "="); ok && cur != nil {
				cur[k] = v
			}
		}
		if last != nil {
			return last
		}
	}
	rec, _ := os.ReadFile(c.record())
	log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
	t.Fatalf("%s: no %v event in %v\nrecord:\n%s\nlog:\n%s", c.name, reasons, d, rec, log)
	return nil
}

// TestInterop has ISC dhclient 4.4 (-S, information-only) and dhcpcd 9
// (--inform6), each in its own namespace on the server's bridge, ask the
// server over a kernel socket. Each reports, decoded itself, the DNS
// servers and search domains, the refresh time (option 32, 3600 s here)
// and our DUID-LL as server id, and dhclient schedules its refresh at
// that time.
func TestInterop(t *testing.T) {
	netnstest.Privileged(t, "ip", "unshare", "dhclient", "dhcpcd")
	l := newLab(t, 2)
	dhc := &client{name: "dhclient", ns: l.clients[0], dir: t.TempDir()}
	conf := filepath.Join(dhc.dir, "dhclient.conf")
	os.WriteFile(conf, []byte("request dhcp6.name-servers, dhcp6.domain-search, dhcp6.info-refresh-time;\n"), 0o644)
	dhc.start(t, "dhclient", "-6", "-S", "-d", "-v", "-cf", conf, "-lf", filepath.Join(dhc.dir, "leases"),
		"-pf", filepath.Join(dhc.dir, "pid"), "-sf", dhc.writeScript(t), "c0")

	dcd := &client{name: "dhcpcd", ns: l.clients[1], dir: t.TempDir()}
	conf = filepath.Join(dcd.dir, "dhcpcd.conf")
	os.WriteFile(conf, []byte("allowinterfaces c0\nipv6only\nnoipv6rs\noption dhcp6_name_servers, dhcp6_domain_search\n"), 0o644)
	// tmpfs over /run and /var/lib in a private mount namespace: its
	// pidfile, control socket and DUID never touch the machine's.
	sh := "mount -t tmpfs tmpfs /run && mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/dhcpcd && exec dhcpcd -B -6 --inform6 -f " +
		conf + " -c " + dcd.writeScript(t) + " c0"
	dcd.start(t, "unshare", "--mount", "--propagation", "private", "sh", "-c", sh)

	wantDNS := []string{dns1.String(), dns2.String()}
	wantDomains := []string{"lan", "example.org"}
	for _, c := range []*client{dhc, dcd} {
		// dhclient -S reports its Reply as RENEW6, dhcpcd as INFORM6.
		ev := c.event(t, 15*time.Second, "RENEW6", "INFORM6")
		dns := strings.Fields(ev["new_dhcp6_name_servers"])
		var domains []string
		for _, d := range strings.Fields(ev["new_dhcp6_domain_search"]) {
			domains = append(domains, strings.TrimSuffix(d, "."))
		}
		if !slices.Equal(dns, wantDNS) || !slices.Equal(domains, wantDomains) {
			t.Errorf("%s: name servers %q, domain search %q; want %q, %q", c.name, dns, domains, wantDNS, wantDomains)
		}
		if rt := ev["new_dhcp6_info_refresh_time"]; rt != "3600" {
			t.Errorf("%s: info refresh time %q, want 3600", c.name, rt)
		}
		if id := duidFromEnv(ev["new_dhcp6_server_id"]); hex.EncodeToString(id) != hex.EncodeToString(srvDUID) {
			t.Errorf("%s: server id %q, want %x", c.name, ev["new_dhcp6_server_id"], srvDUID)
		}
	}
	var dlog []byte
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if dlog, _ = os.ReadFile(filepath.Join(dhc.dir, "log")); strings.Contains(string(dlog), "Refresh event scheduled in 3600 seconds") {
			break
		}
	}
	if !strings.Contains(string(dlog), "Refresh event scheduled in 3600 seconds") {
		t.Errorf("dhclient did not schedule its refresh at the server's 3600 s:\n%s", dlog)
	}
	st := l.srv.Stats()
	if st.Replied.Load() < 2 {
		t.Errorf("Replied = %d, want one per client at least", st.Replied.Load())
	}
	t.Logf("received %d replied %d drops %v", st.Received.Load(), st.Replied.Load(), dropCounts(l.srv))
}

// duidFromEnv reads a DUID as the clients' scripts get it: dhcpcd's hex,
// or dhclient's colon-separated bytes without leading zeros.
func duidFromEnv(s string) []byte {
	if !strings.Contains(s, ":") {
		b, _ := hex.DecodeString(s)
		return b
	}
	var out []byte
	for f := range strings.SplitSeq(s, ":") {
		v, err := strconv.ParseUint(f, 16, 8)
		if err != nil {
			return nil
		}
		out = append(out, byte(v))
	}
	return out
}

// abuseResult is what testdata/abuse.py prints.
type abuseResult struct {
	BadSent      int         `json:"bad_sent"`
	FloodSent    int         `json:"flood_sent"`
	FloodSeconds float64     `json:"flood_seconds"`
	During       abuseAnswer `json:"during"`
	After        abuseAnswer `json:"after"`
}

type abuseAnswer struct {
	Sent     int      `json:"sent"`
	From     string   `json:"from"`
	ServerID string   `json:"server_id"`
	DNS      []string `json:"dns"`
	Domains  []string `json:"domains"`
	Refresh  *int     `json:"refresh"`
}

// TestAbuse has scapy send bad input from a LAN host: an option cut
// short, an option header cut short, a Relay-forward, an
// Information-request with IA_NA, one with another server's identifier, a
// Solicit, one from a global source, one to ff02::1; each is counted under
// its reason. Then it floods Information-requests from one spoofed source
// while a client on another address of the same host asks: the flood gets
// no more than its rate, the client its Reply (decoded by scapy), during
// the flood and after it, and the server is still running.
func TestAbuse(t *testing.T) {
	netnstest.Privileged(t, "ip", "/usr/bin/python3")
	if out, err := exec.Command("/usr/bin/python3", "-c", "import scapy.layers.dhcp6").CombinedOutput(); err != nil {
		netnstest.SkipOrFail(t, "scapy: %v: %s", err, out)
	}
	l := newLab(t, 1)
	ns := l.clients[0]
	const flooder, good = "fe80::bad", "fe80::900d"
	ns.IP(t, "addr", "add", good+"/64", "dev", "c0", "nodad")
	script, err := filepath.Abs("testdata/abuse.py")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "netns", "exec", ns.Name(), "/usr/bin/python3", script, "c0", flooder, good, "2").Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("abuse.py: %v\n%s\n%s", err, out, stderr)
	}
	var res abuseResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("abuse.py printed %q: %v", out, err)
	}
	t.Logf("abuse.py: %s", out)
	if !l.srv.Status().Running {
		t.Fatal("server stopped")
	}
	l.stop()

	for name, a := range map[string]abuseAnswer{"during the flood": res.During, "after the flood": res.After} {
		if a.From != srvAddr.String() || a.ServerID != hex.EncodeToString(srvDUID) || a.Refresh == nil || *a.Refresh != 3600 {
			t.Errorf("Reply %s: %+v, want from %v, server id %x, refresh 3600", name, a, srvAddr, srvDUID)
			continue
		}
		slices.Sort(a.DNS)
		if want := []string{dns2.String(), dns1.String()}; !slices.Equal(a.DNS, want) || !slices.Equal(a.Domains, []string{"lan.", "example.org."}) {
			t.Errorf("Reply %s: DNS %q domains %q, want %q and lan., example.org.", name, a.DNS, a.Domains, want)
		}
	}
	st := l.srv.Stats()
	drops := dropCounts(l.srv)
	for reason, want := range map[string]uint64{
		"malformed": 2, "relay": 1, "ia_option": 1, "wrong_server_id": 1,
		"stateful_ignored": 1, "bad_source": 1, "wrong_destination": 1,
	} {
		if drops[reason] != want {
			t.Errorf("drops[%s] = %d, want %d (all: %v)", reason, drops[reason], want, drops)
		}
	}
	// The flood's share of the Replies: its burst and what its bucket
	// earned back while it lasted.
	floodMax := uint64(sourceBurst + int(res.FloodSeconds*sourceRate) + 1)
	goodSent := uint64(res.During.Sent + res.After.Sent)
	if st.Replied.Load() > goodSent+floodMax {
		t.Errorf("Replied = %d: more than the client's %d requests and the flood's %d", st.Replied.Load(), goodSent, floodMax)
	}
	if rl := drops["rate_limited"]; rl < uint64(res.FloodSent)/2 {
		t.Errorf("rate_limited = %d of a flood of %d", rl, res.FloodSent)
	}
	if got := st.Received.Load(); got != st.Replied.Load()+st.SendErrors.Load()+dropSum(l.srv) {
		t.Errorf("Received %d != replied %d + send errors %d + drops %v", got, st.Replied.Load(), st.SendErrors.Load(), drops)
	}
}

// testWriter sends the server's log to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
