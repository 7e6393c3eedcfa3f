package dnsforward

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// nsDialer opens sockets inside one network namespace: a goroutine
// locked to a thread that entered it serves the requests, so that the
// forwarder's dials (from its own goroutines, after the test may have
// failed) never touch a testing.TB. The thread dies with the goroutine.
type nsDialer struct {
	req  chan func()
	done chan struct{}
}

func newNSDialer(t *testing.T, ns string) *nsDialer {
	d := &nsDialer{req: make(chan func()), done: make(chan struct{})}
	ready := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with us
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		ready <- err
		if err != nil {
			return
		}
		for {
			select {
			case f := <-d.req:
				f()
			case <-d.done:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatalf("enter netns %s: %v", ns, err)
	}
	t.Cleanup(func() { close(d.done) })
	return d
}

// do runs f in the namespace, or gives up when the dialer is closed.
func (d *nsDialer) do(f func()) bool {
	finished := make(chan struct{})
	select {
	case d.req <- func() { f(); close(finished) }:
		<-finished
		return true
	case <-d.done:
		return false
	}
}

func (d *nsDialer) dialUDP(ctx context.Context, server netip.AddrPort, port uint16) (c net.Conn, err error) {
	if !d.do(func() {
		c, err = net.DialUDP("udp", &net.UDPAddr{Port: int(port)}, net.UDPAddrFromAddrPort(server))
	}) {
		return nil, net.ErrClosed
	}
	return c, err
}

func (d *nsDialer) dialTCP(ctx context.Context, server netip.AddrPort) (c net.Conn, err error) {
	if !d.do(func() {
		var dl net.Dialer
		c, err = dl.DialContext(ctx, "tcp", server.String())
	}) {
		return nil, net.ErrClosed
	}
	return c, err
}

// dig is one dig answer: its status, flags and answer records.
type digAnswer struct {
	status, flags string
	answers       []string
	out           string
}

var (
	digStatus = regexp.MustCompile(`status: ([A-Z]+)`)
	digFlags  = regexp.MustCompile(`;; flags: ([a-z ]+);`)
)

func dig(t *testing.T, ns *netnstest.Netns, args ...string) digAnswer {
	t.Helper()
	start := time.Now()
	out := ns.Run(t, "dig", append([]string{"+tries=1", "+time=3", "+noall", "+answer", "+comments"}, args...)...)
	t.Logf("dig %v: %v", args, time.Since(start))
	var a digAnswer
	a.out = out
	if m := digStatus.FindStringSubmatch(out); m != nil {
		a.status = m[1]
	}
	if m := digFlags.FindStringSubmatch(out); m != nil {
		a.flags = m[1]
	}
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			a.answers = append(a.answers, strings.Join(strings.Fields(l), " "))
		}
	}
	return a
}

// TestInteropDnsmasqDig runs the forwarder on kernel sockets in a namespace
// between dnsmasq (the upstream, authoritative for a test zone, in its own
// namespace) and dig (the LAN client, in a third), independent
// implementations on both sides: an upstream answer, a cached answer
// (dnsmasq sees one query), NXDOMAIN cached, a TC answer retried over TCP,
// a local host name and its PTR answered locally.
func TestInteropDnsmasqDig(t *testing.T) {
	netnstest.Privileged(t, "ip", "dnsmasq", "dig")
	up := netnstest.New(t, "dnf", netnstest.WithoutIPv6())
	fw := netnstest.New(t, "dnf", netnstest.WithoutIPv6())
	cl := netnstest.New(t, "dnf", netnstest.WithoutIPv6())
	up.IP(t, "link", "add", "u0", "type", "veth", "peer", "name", "f0", "netns", fw.Name())
	fw.IP(t, "link", "add", "f1", "type", "veth", "peer", "name", "c0", "netns", cl.Name())
	up.IP(t, "addr", "add", "10.53.0.1/24", "dev", "u0")
	fw.IP(t, "addr", "add", "10.53.0.2/24", "dev", "f0")
	fw.IP(t, "addr", "add", "10.54.0.1/24", "dev", "f1")
	cl.IP(t, "addr", "add", "10.54.0.2/24", "dev", "c0")
	up.IP(t, "link", "set", "u0", "up")
	fw.IP(t, "link", "set", "f0", "up")
	fw.IP(t, "link", "set", "f1", "up")
	cl.IP(t, "link", "set", "c0", "up")

	// dnsmasq, authoritative for test. so that its negative answers
	// carry the SOA that RFC 2308 caching needs (its auth mode serves
	// --host-record and --txt-record, not --address).
	dir := t.TempDir()
	logFile := filepath.Join(dir, "queries.log")
	long := strings.Repeat("x", 250)
	txt := strings.Repeat(","+long, 6) // ~1.5 KiB: over the 1232 bytes of UDP
	cmd := exec.Command("ip", "netns", "exec", up.Name(), "dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
		"--listen-address=10.53.0.1", "--bind-interfaces", "--port=53", "--user=root", "--pid-file="+filepath.Join(dir, "pid"),
		"--log-queries", "--log-facility="+logFile,
		"--auth-zone=test", "--auth-server=ns.test,u0", "--auth-ttl=300", "--auth-soa=1,hostmaster.test,1200,120,604800",
		"--host-record=www.test,192.0.2.10", "--host-record=other.test,192.0.2.11", "--txt-record=big.test"+txt)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dnsmasq: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("dnsmasq output:\n%s\nquery log:\n%s", out, b)
		}
	})
	upstreamQueries := func(what string) int {
		b, _ := os.ReadFile(logFile)
		return strings.Count(string(b), "auth["+what+"] ")
	}
	waitFor(t, "dnsmasq to start", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "started")
	})

	// The forwarder on kernel sockets in fw.
	d := newNSDialer(t, fw.Name())
	f, err := New(Config{
		Upstreams: []netip.AddrPort{netip.MustParseAddrPort("10.53.0.1:53")},
		Domain:    "lan",
		DialUDP:   d.dialUDP,
		DialTCP:   d.dialTCP,
		Timeout:   2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.SetHosts(map[string][]netip.Addr{"laptop": {netip.MustParseAddr("192.168.1.10")}})
	var pc net.PacketConn
	var l net.Listener
	var lerr error
	fw.Do(t, func() {
		if pc, lerr = net.ListenPacket("udp", "10.54.0.1:53"); lerr != nil {
			return
		}
		l, lerr = net.Listen("tcp", "10.54.0.1:53")
	})
	if lerr != nil {
		t.Fatalf("listen in %s: %v", fw.Name(), lerr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); f.Serve(ctx, pc) }()
	go func() { defer wg.Done(); f.ServeTCP(ctx, l) }()
	go func() { defer wg.Done(); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); pc.Close() })

	const server = "@10.54.0.1"
	t.Run("upstream answer", func(t *testing.T) {
		a := dig(t, cl, server, "www.test", "A")
		if a.status != "NOERROR" || len(a.answers) != 1 || !strings.HasSuffix(a.answers[0], "IN A 192.0.2.10") {
			t.Fatalf("dig www.test = %s %v, want NOERROR and 192.0.2.10:\n%s", a.status, a.answers, a.out)
		}
		if !strings.Contains(a.flags, "ra") || strings.Contains(a.flags, "aa") {
			t.Errorf("flags %q, want ra and not aa", a.flags)
		}
		if n := upstreamQueries("A"); n != 1 {
			t.Errorf("dnsmasq saw %d A queries, want 1", n)
		}
	})
	t.Run("cached answer", func(t *testing.T) {
		for _, args := range [][]string{{"www.test", "A"}, {"+tcp", "www.test", "A"}, {"+noedns", "WWW.TEST", "A"}} {
			a := dig(t, cl, append([]string{server}, args...)...)
			if a.status != "NOERROR" || len(a.answers) != 1 || !strings.Contains(a.answers[0], "192.0.2.10") {
				t.Errorf("dig %v = %s %v, want the cached 192.0.2.10", args, a.status, a.answers)
			}
		}
		if n := upstreamQueries("A"); n != 1 {
			t.Errorf("dnsmasq saw %d A queries, want still 1", n)
		}
	})
	t.Run("NXDOMAIN cached", func(t *testing.T) {
		for range 2 {
			a := dig(t, cl, server, "nx.test", "A", "+authority")
			if a.status != "NXDOMAIN" || len(a.answers) != 1 || !strings.Contains(a.answers[0], "SOA ns.test. hostmaster.test.") {
				t.Errorf("dig nx.test = %s %v, want NXDOMAIN with the SOA", a.status, a.answers)
			}
		}
		if n := upstreamQueries("A"); n != 2 {
			t.Errorf("dnsmasq saw %d A queries, want 2 (www, nx once)", n)
		}
	})
	t.Run("TC retried over TCP", func(t *testing.T) {
		a := dig(t, cl, server, "big.test", "TXT", "+ignore")
		if !strings.Contains(a.flags, "tc") || len(a.answers) != 0 {
			t.Errorf("dig +ignore big.test over UDP: flags %q %d answers, want tc and none", a.flags, len(a.answers))
		}
		a = dig(t, cl, server, "+tcp", "big.test", "TXT")
		if a.status != "NOERROR" || len(a.answers) != 1 || strings.Count(a.answers[0], long) != 6 {
			t.Errorf("dig +tcp big.test = %s, %d answers, want the whole TXT", a.status, len(a.answers))
		}
		if n := upstreamQueries("TXT"); n != 2 {
			t.Errorf("dnsmasq saw %d TXT queries, want 2 (UDP with TC, then TCP)", n)
		}
		if st := f.Status(); st.TCRetries != 1 {
			t.Errorf("TCRetries = %d, want 1", st.TCRetries)
		}
	})
	t.Run("local name", func(t *testing.T) {
		a := dig(t, cl, server, "laptop.lan", "A")
		if a.status != "NOERROR" || len(a.answers) != 1 || !strings.HasSuffix(a.answers[0], "IN A 192.168.1.10") {
			t.Errorf("dig laptop.lan = %s %v, want 192.168.1.10", a.status, a.answers)
		}
		if a = dig(t, cl, server, "nobody.lan", "A"); a.status != "NXDOMAIN" {
			t.Errorf("dig nobody.lan = %s, want NXDOMAIN", a.status)
		}
	})
	t.Run("PTR", func(t *testing.T) {
		a := dig(t, cl, server, "-x", "192.168.1.10")
		if a.status != "NOERROR" || len(a.answers) != 1 || !strings.HasSuffix(a.answers[0], "IN PTR laptop.lan.") {
			t.Errorf("dig -x 192.168.1.10 = %s %v, want laptop.lan.", a.status, a.answers)
		}
		if a = dig(t, cl, server, "-x", "192.168.1.99"); a.status != "NXDOMAIN" {
			t.Errorf("dig -x 192.168.1.99 = %s, want NXDOMAIN", a.status)
		}
	})
	if n := upstreamQueries("PTR") + upstreamQueries("A") - 2; n != 0 {
		t.Errorf("dnsmasq saw %d local questions, want none", n)
	}
	st := f.Status()
	t.Logf("forwarder: %+v", st)
	if st.CacheHits < 5 || st.LocalAnswers != 4 || st.UpstreamQueries != 3 {
		t.Errorf("CacheHits %d LocalAnswers %d UpstreamQueries %d, want >= 5, 4, 3 (TCP retries are TCRetries)", st.CacheHits, st.LocalAnswers, st.UpstreamQueries)
	}
}
