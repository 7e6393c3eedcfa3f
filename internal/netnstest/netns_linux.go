package netnstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

var counter atomic.Int32

// Netns is a network namespace made by one test and deleted by its
// cleanup.
type Netns struct {
	name string
	fd   int
}

// Option changes how New sets up a namespace.
type Option func(*options)

type options struct {
	noIPv6 bool
}

// WithoutIPv6 disables IPv6 (net.ipv6.conf.{all,default}.disable_ipv6)
// in the new namespace before anything else is set up in it, so that the
// interfaces made in it send no DAD, router or listener messages to
// disturb a test's counters.
func WithoutIPv6() Option { return func(o *options) { o.noIPv6 = true } }

// New makes the namespace PREFIX-PID-N, brings its lo up and deletes the
// namespace, and only it, when tb ends, failed or not. When the namespace
// cannot be made for lack of privilege it skips tb outside CI.
func New(tb testing.TB, prefix string, opts ...Option) *Netns {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	name := fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), counter.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		if !CI() && bytes.Contains(out, []byte("Operation not permitted")) {
			tb.Skipf("ip netns add: %v: %s", err, out)
		}
		tb.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	n := &Netns{name: name, fd: -1}
	tb.Cleanup(func() {
		if n.fd >= 0 {
			unix.Close(n.fd)
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("open netns %s: %v", name, err)
	}
	n.fd = fd
	if o.noIPv6 {
		n.Do(tb, func() {
			for _, f := range []string{"all", "default"} {
				if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("1"), 0); err != nil {
					tb.Errorf("disable IPv6 in %s: %v", name, err)
				}
			}
		})
	}
	n.IP(tb, "link", "set", "lo", "up")
	return n
}

// Name is the namespace's name, as `ip netns` knows it.
func (n *Netns) Name() string { return n.name }

// IP runs `ip -n NAME args...`.
func (n *Netns) IP(tb testing.TB, args ...string) {
	tb.Helper()
	n.Run(tb, "ip", append([]string{"-n", n.name}, args...)...)
}

// Run runs a command and returns its output, failing tb if it fails. The
// command runs inside the namespace (through `ip netns exec`) unless it
// is ip itself, which Run runs as it is given so that the caller chooses
// its -n.
func (n *Netns) Run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	if name != "ip" {
		args = append([]string{"netns", "exec", n.name, name}, args...)
		name = "ip"
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Do runs f on an OS thread inside the namespace and returns when f has.
// f must not call tb.FailNow (or Fatal, Skip): it runs on another
// goroutine; it reports errors through variables it shares with the
// caller or through tb.Errorf.
func (n *Netns) Do(tb testing.TB, f func()) {
	tb.Helper()
	done := make(chan struct{})
	// A fresh goroutine, so that its thread, when it cannot be brought
	// back to its own namespace, dies with it instead of serving others.
	go func() {
		defer close(done)
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			tb.Errorf("open own netns: %v", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			tb.Errorf("setns %s: %v", n.name, err)
			return
		}
		f()
		// Unlock only when back home; otherwise the thread dies with
		// the goroutine.
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

// Sysctl reads a /proc/sys file inside the namespace, spaces trimmed.
func (n *Netns) Sysctl(tb testing.TB, path string) string {
	tb.Helper()
	var v []byte
	var err error
	n.Do(tb, func() { v, err = os.ReadFile(path) })
	if err != nil {
		tb.Fatalf("read %s in %s: %v", path, n.name, err)
	}
	return strings.TrimSpace(string(v))
}

// HasXDP reports whether `ip -d -j link show` lists an XDP program on
// ifname in n: the independent check of the tests that an AF_XDP socket's
// program is attached, and gone after its process was killed.
func (n *Netns) HasXDP(t testing.TB, ifname string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", n.name, "-d", "-j", "link", "show", "dev", ifname).Output()
	if err != nil {
		t.Fatalf("ip link show %s: %v", ifname, err)
	}
	var links []map[string]json.RawMessage
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s: %v: %s", ifname, err, out)
	}
	_, ok := links[0]["xdp"]
	return ok
}
