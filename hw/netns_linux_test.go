package hw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// privileged skips t outside CI when the test cannot create namespaces;
// under CI=true it fails instead, so a green CI means these tests ran.
func privileged(t *testing.T) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("needs root (CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN)")
	}
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("needs %s: %v", tool, err)
		}
	}
}

var nsCounter atomic.Int32

// testNetns is a network namespace made by one test and deleted by its
// cleanup.
type testNetns struct {
	name string
	fd   int
}

func newNetns(t *testing.T) *testNetns {
	t.Helper()
	name := fmt.Sprintf("hwt-%d-%d", os.Getpid(), nsCounter.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "true" && bytes.Contains(out, []byte("Operation not permitted")) {
			t.Skipf("ip netns add: %v: %s", err, out)
		}
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	n := &testNetns{name: name, fd: -1}
	t.Cleanup(func() {
		if n.fd >= 0 {
			unix.Close(n.fd)
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open netns %s: %v", name, err)
	}
	n.fd = fd
	n.ip(t, "link", "set", "lo", "up")
	return n
}

// ip runs `ip -n NS args...`.
func (n *testNetns) ip(t *testing.T, args ...string) {
	t.Helper()
	n.run(t, "ip", append([]string{"-n", n.name}, args...)...)
}

// run runs a command inside the namespace and returns its output.
func (n *testNetns) run(t *testing.T, name string, args ...string) string {
	t.Helper()
	if name != "ip" {
		args = append([]string{"netns", "exec", n.name, name}, args...)
		name = "ip"
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// do runs f on a thread inside the namespace.
func (n *testNetns) do(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	// A fresh goroutine whose thread is thrown away if we cannot get back.
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Errorf("open own netns: %v", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			t.Errorf("setns %s: %v", n.name, err)
			return
		}
		f()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// sysctl reads a /proc/sys file inside the namespace.
func (n *testNetns) sysctl(t *testing.T, path string) string {
	t.Helper()
	var v []byte
	var err error
	n.do(t, func() { v, err = os.ReadFile(path) })
	if err != nil {
		t.Fatalf("read %s in %s: %v", path, n.name, err)
	}
	return strings.TrimSpace(string(v))
}

// rawSocket is a plain AF_PACKET socket on one interface, for injecting
// frames and watching what leaves a port.
type rawSocket struct {
	fd      int
	ifindex int
}

func (n *testNetns) rawSocket(t *testing.T, ifname string) *rawSocket {
	t.Helper()
	var s rawSocket
	var err error
	n.do(t, func() {
		var ifi *net.Interface
		if ifi, err = net.InterfaceByName(ifname); err != nil {
			return
		}
		s.ifindex = ifi.Index
		if s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL))); err != nil {
			return
		}
		err = unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("raw socket on %s: %v", ifname, err)
	}
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	t.Cleanup(func() { unix.Close(s.fd) })
	return &s
}

func (s *rawSocket) send(t *testing.T, frame []byte) {
	t.Helper()
	if err := unix.Sendto(s.fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: s.ifindex}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// waitFor reads frames until one contains marker (in-band, as the kernel
// shows it to a plain socket) or the deadline passes.
func (s *rawSocket) waitFor(marker []byte, d time.Duration) bool {
	buf := make([]byte, 65536)
	for end := time.Now().Add(d); time.Now().Before(end); {
		n, from, err := unix.Recvfrom(s.fd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if bytes.Contains(buf[:n], marker) {
			return true
		}
	}
	return false
}

// testPayloadFrame builds a broadcast frame with an experimental EtherType
// (IEEE 802 local experimental 0x88b5) carrying marker.
func testPayloadFrame(src net.HardwareAddr, marker string) []byte {
	f := make([]byte, 14, 64)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x88b5)
	f = append(f, marker...)
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// tagged inserts an 802.1Q tag after the MAC addresses.
func tagged(f []byte, tpid, tci uint16) []byte {
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = binary.BigEndian.AppendUint16(out, tpid)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, f[12:]...)
}

// collector is a BatchHandler that copies what it gets.
type collector struct {
	mu     sync.Mutex
	frames []Frame
}

func (c *collector) handle(queue int, frames []Frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range frames {
		f.Data = bytes.Clone(f.Data)
		c.frames = append(c.frames, f)
	}
}

// find waits until a frame containing marker arrives.
func (c *collector) find(marker []byte, d time.Duration) (Frame, bool) {
	end := time.Now().Add(d)
	for {
		c.mu.Lock()
		for _, f := range c.frames {
			if bytes.Contains(f.Data, marker) {
				c.mu.Unlock()
				return f, true
			}
		}
		c.mu.Unlock()
		if time.Now().After(end) {
			return Frame{}, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openIn opens a port inside n.
func openIn(t *testing.T, n *testNetns, cfg Config) *Port {
	t.Helper()
	var p *Port
	var err error
	n.do(t, func() { p, err = Open(cfg, nil) })
	if err != nil {
		if os.Getenv("CI") != "true" && errors.Is(err, unix.EPERM) {
			t.Skipf("Open: %v", err)
		}
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}
