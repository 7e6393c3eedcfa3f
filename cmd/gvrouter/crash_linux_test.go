package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// asRouterEnv makes the test binary act as the router binary (main) instead
// of running tests, so that the crash tests can SIGKILL a real `gvrouter run`.
const asRouterEnv = "GVROUTER_TEST_AS_ROUTER"

func TestMain(m *testing.M) {
	if os.Getenv(asRouterEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashLab is a LAN host — router — WAN host in three namespaces. The
// router's ports lan0 and wan0 carry what an operator may have set on
// them before handing them to the router.
type crashLab struct {
	lan, rtr, wan *netnstest.Netns
	dir           string // config, state directory, run directory, logs
	cfg           string // the router's config file
	stateDir      string
	runDir        string
	// client is the LAN host's UDP socket (echo); mu serialises its use.
	mu     sync.Mutex
	client *net.UDPConn
}

func newCrashLab(t *testing.T) *crashLab {
	t.Helper()
	netnstest.Privileged(t, "ip", "nft", "tc")
	l := &crashLab{
		lan: netnstest.New(t, "crl"), rtr: netnstest.New(t, "crr"), wan: netnstest.New(t, "crw"),
		dir: t.TempDir(),
	}
	l.stateDir = filepath.Join(l.dir, "state")
	l.runDir = filepath.Join(l.dir, "run")
	for _, p := range []struct {
		port        string
		host        *netnstest.Netns
		host4, rtr4 string
	}{{"lan0", l.lan, "10.1.0.2/24", "10.1.0.1"}, {"wan0", l.wan, "10.2.0.2/24", "10.2.0.1"}} {
		l.rtr.IP(t, "link", "add", p.port, "type", "veth", "peer", "name", "eth0", "netns", p.host.Name())
		l.rtr.IP(t, "link", "set", p.port, "up")
		p.host.IP(t, "link", "set", "eth0", "up")
		p.host.IP(t, "addr", "add", p.host4, "dev", "eth0")
		p.host.IP(t, "route", "add", "default", "via", p.rtr4)
	}
	// The operator's own settings on the ports.
	l.rtr.IP(t, "addr", "add", "192.0.2.1/24", "dev", "lan0")
	l.rtr.IP(t, "addr", "add", "192.0.2.9/24", "dev", "lan0")
	l.rtr.IP(t, "addr", "add", "198.51.100.1/24", "dev", "wan0", "valid_lft", "7200", "preferred_lft", "3600")
	l.rtr.IP(t, "addr", "add", "fd00:99::1/64", "dev", "wan0", "nodad")
	l.rtr.Do(t, func() {
		for _, p := range []string{"lan0", "wan0"} {
			if err := hw.SetOffloads(p, hw.Offloads{GRO: true, TSO: true, GSO: true, TxCsum: true, RxCsum: true}); err != nil {
				t.Errorf("SetOffloads(%s): %v", p, err)
			}
		}
	})
	l.cfg = filepath.Join(l.dir, "router.yaml")
	cfg := fmt.Sprintf(`ports: [{name: lan0}, {name: wan0}]
interfaces:
  - {name: lan, port: lan0, role: lan, addresses: [10.1.0.1/24]}
  - {name: wan, port: wan0, role: wan, addresses: [10.2.0.1/24]}
state_dir: %s
`, l.stateDir)
	if err := os.WriteFile(l.cfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l.echo(t)
	// Wait for DAD on the link-local addresses, so that "before" has
	// settled.
	time.Sleep(100 * time.Millisecond)
	return l
}

// state is what the router changes on both ports.
func (l *crashLab) state(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, p := range []string{"lan0", "wan0"} {
		var o hw.Offloads
		var err error
		l.rtr.Do(t, func() { o, err = hw.GetOffloads(p) })
		if err != nil {
			t.Fatalf("GetOffloads(%s): %v", p, err)
		}
		fmt.Fprintf(&b, "== %s gro=%v lro=%v\n%s\n", p, o.GRO, o.LRO, l.rtr.PortStateOf(t, p))
	}
	return b.String()
}

// routerProc is one `gvrouter run` (the test binary as main).
type routerProc struct {
	cmd     *exec.Cmd
	out     *syncBuffer
	pidfile string
	done    chan struct{}
	err     error
}

// syncBuffer is a bytes.Buffer that a process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start starts `gvrouter run` in the router namespace with args after the
// config and run directory. wait: until its pidfile names it.
func (l *crashLab) start(t *testing.T, pidfile string, args ...string) *routerProc {
	t.Helper()
	if pidfile == "" {
		pidfile = filepath.Join(l.runDir, "gvrouter.pid")
	}
	argv := append([]string{"netns", "exec", l.rtr.Name(), os.Args[0], "run", "-config", l.cfg, "-run-dir", l.runDir, "-pidfile", pidfile}, args...)
	cmd := exec.Command("ip", argv...)
	cmd.Env = append(os.Environ(), asRouterEnv+"=1")
	p := &routerProc{cmd: cmd, out: new(syncBuffer), pidfile: pidfile, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("router pid %d output:\n%s", cmd.Process.Pid, p.out)
		}
	})
	return p
}

// waitUp waits until the router wrote its pidfile: it has taken every
// port over.
func (p *routerProc) waitUp(t *testing.T) {
	t.Helper()
	want := strconv.Itoa(p.cmd.Process.Pid) + "\n"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(p.pidfile); err == nil && string(b) == want {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("router exited before it was up (%v):\n%s", p.err, p.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("router did not write %s within 30s:\n%s", p.pidfile, p.out)
		}
	}
}

// exit waits for the router to end and returns its exit error.
func (p *routerProc) exit(t *testing.T) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		t.Fatalf("router did not exit within 30s:\n%s", p.out)
		return nil
	}
}

func (p *routerProc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	if err := p.exit(t); err == nil {
		t.Fatal("SIGKILLed router exited cleanly")
	}
}

func (p *routerProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.exit(t); err != nil {
		t.Fatalf("router after SIGTERM: %v\n%s", err, p.out)
	}
}

// echo makes the WAN host echo UDP datagrams on port 7 and gives the LAN
// host a socket to send them from.
func (l *crashLab) echo(t *testing.T) {
	t.Helper()
	var srv, cli *net.UDPConn
	var err1, err2 error
	l.wan.Do(t, func() { srv, err1 = net.ListenUDP("udp4", &net.UDPAddr{Port: 7}) })
	l.lan.Do(t, func() { cli, err2 = net.ListenUDP("udp4", &net.UDPAddr{}) })
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); cli.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			srv.WriteToUDP(buf[:n], from)
		}
	}()
	l.client = cli
}

// ping checks that the LAN host reaches the WAN host through the router
// and back.
func (l *crashLab) ping(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	wan := &net.UDPAddr{IP: net.IPv4(10, 2, 0, 2), Port: 7}
	buf := make([]byte, 1500)
	for try := range 50 {
		probe := fmt.Sprintf("probe-%d-%d", time.Now().UnixNano(), try)
		l.client.WriteToUDP([]byte(probe), wan)
		l.client.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		for {
			n, _, err := l.client.ReadFromUDP(buf)
			if err != nil {
				break
			}
			if string(buf[:n]) == probe {
				return
			}
		}
	}
	t.Fatal("no UDP echo from the WAN host through the router within 10s")
}

// flood sends the WAN host 200 datagrams a second from the LAN host until
// the test ends: traffic through the router when it is killed.
func (l *crashLab) flood(t *testing.T) {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		wan := &net.UDPAddr{IP: net.IPv4(10, 2, 0, 2), Port: 7}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				l.mu.Lock()
				l.client.WriteToUDP([]byte("flood"), wan)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// TestCrashRestore kills a router with SIGKILL mid-traffic, starts it again
// (it adopts what the killed one left) and stops it cleanly: GRO,
// disable_ipv6, the addresses (link-local included), nftables tables and
// tc qdiscs of both ports are what they were before the first start. With
// either ingress drop, and twice over for a crash of the adopting router.
func TestCrashRestore(t *testing.T) {
	for _, with := range []string{"nft", "tc"} {
		t.Run(with, func(t *testing.T) {
			l := newCrashLab(t)
			before := l.state(t)
			r := l.start(t, "", "-ingress-drop", with)
			r.waitUp(t)
			l.ping(t)
			silenced := l.state(t)
			if silenced == before {
				t.Fatalf("the router changed nothing on its ports:\n%s", silenced)
			}
			l.flood(t)
			time.Sleep(300 * time.Millisecond)
			r.kill(t)
			if got := l.state(t); got != silenced {
				t.Fatalf("after SIGKILL:\n%s\nwant the ports left as the router had them:\n%s", got, silenced)
			}
			for range 2 {
				r = l.start(t, "", "-ingress-drop", with)
				r.waitUp(t)
				if !strings.Contains(r.out.String(), "adopting what a router that did not stop cleanly left") {
					t.Errorf("restarted router does not say it adopts the killed one's leftovers:\n%s", r.out)
				}
				l.ping(t)
				if got := l.state(t); got != silenced {
					t.Errorf("ports under the restarted router:\n%s\nwant:\n%s", got, silenced)
				}
				time.Sleep(200 * time.Millisecond)
				r.kill(t)
			}
			r = l.start(t, "", "-ingress-drop", with)
			r.waitUp(t)
			l.ping(t)
			r.stop(t)
			if got := l.state(t); got != before {
				t.Errorf("after crash, restart and clean stop:\n%s\nwant the state before the first start:\n%s", got, before)
			}
			if ports, _ := hw.RecordedPorts(l.stateDir); len(ports) != 0 {
				t.Errorf("records left after the clean stop: %v", ports)
			}
		})
	}
}

// TestRestoreCommand kills a router and runs `gvrouter restore`: the ports
// come back as they were before the router started, without a router.
// While a router runs, restore refuses and changes nothing.
func TestRestoreCommand(t *testing.T) {
	l := newCrashLab(t)
	before := l.state(t)
	r := l.start(t, "")
	r.waitUp(t)
	silenced := l.state(t)
	restore := func() (string, error) {
		cmd := exec.Command("ip", "netns", "exec", l.rtr.Name(), os.Args[0], "restore", "-config", l.cfg, "-run-dir", l.runDir)
		cmd.Env = append(os.Environ(), asRouterEnv+"=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := restore()
	if err == nil || !strings.Contains(out, fmt.Sprintf("is in use by router pid %d", r.cmd.Process.Pid)) {
		t.Errorf("restore while the router runs = %v:\n%s\nwant it refused, naming pid %d", err, out, r.cmd.Process.Pid)
	}
	if got := l.state(t); got != silenced {
		t.Errorf("a refused restore changed the ports:\n%s\nwant:\n%s", got, silenced)
	}
	l.flood(t)
	time.Sleep(200 * time.Millisecond)
	r.kill(t)
	out, err = restore()
	if err != nil || !strings.Contains(out, "restored lan0") || !strings.Contains(out, "restored wan0") {
		t.Fatalf("restore after SIGKILL = %v:\n%s", err, out)
	}
	if got := l.state(t); got != before {
		t.Errorf("after SIGKILL and restore:\n%s\nwant the state before the start:\n%s", got, before)
	}
	out, err = restore()
	if err != nil || !strings.Contains(out, "nothing to restore") {
		t.Errorf("second restore = %v:\n%s\nwant nothing to restore", err, out)
	}

	// A truncated record: reported, set aside, never a crash.
	r = l.start(t, "")
	r.waitUp(t)
	r.kill(t)
	rec := filepath.Join(l.stateDir, "ports", "lan0.json")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, b[:len(b)/3], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = restore()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "corrupt record") || !strings.Contains(out, "restored wan0") || strings.Contains(out, "panic") {
		t.Errorf("restore with a truncated lan0 record = %v:\n%s\nwant lan0 reported, wan0 restored, exit 1", err, out)
	}
	// The router starts over the set-aside record.
	r = l.start(t, "")
	r.waitUp(t)
	r.stop(t)
	if !strings.Contains(r.out.String(), "unreadable") && !strings.Contains(out, "set aside") {
		t.Errorf("neither restore nor the router reported the truncated record")
	}
}

// TestSecondInstance starts a second router on the ports of a running one,
// with another pidfile: on the same state directory and on another one it
// refuses, naming the first router's pid, and changes nothing: the first
// router's ingress drop and settings stay, and it still forwards.
func TestSecondInstance(t *testing.T) {
	l := newCrashLab(t)
	first := l.start(t, "")
	first.waitUp(t)
	running := l.state(t)
	pid := first.cmd.Process.Pid
	other := filepath.Join(l.dir, "other.yaml")
	b, err := os.ReadFile(l.cfg)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(l.stateDir), []byte(filepath.Join(l.dir, "state2")), 1)
	if err := os.WriteFile(other, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, cfg, want string
	}{
		{"same state_dir", l.cfg, fmt.Sprintf("state directory %s is in use by router pid %d", l.stateDir, pid)},
		{"other state_dir", other, fmt.Sprintf("port lan0 is in use by router pid %d", pid)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			saved := l.cfg
			l.cfg = tt.cfg
			second := l.start(t, filepath.Join(l.dir, "second.pid"))
			l.cfg = saved
			err := second.exit(t)
			if err == nil || !strings.Contains(second.out.String(), tt.want) {
				t.Errorf("second router = %v:\n%s\nwant it refused with %q", err, second.out, tt.want)
			}
			if got := l.state(t); got != running {
				t.Errorf("ports after the second router exited:\n%s\nwant the first router's settings untouched:\n%s", got, running)
			}
			if _, err := os.Stat(filepath.Join(l.dir, "second.pid")); !os.IsNotExist(err) {
				t.Errorf("second router's pidfile: stat error %v, want none written", err)
			}
			l.ping(t)
		})
	}
	first.stop(t)
}
