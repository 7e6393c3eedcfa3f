package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// deadPID returns the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// livePID starts a process that lives until the test ends and returns its PID.
func livePID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// testNetns creates a namespace and removes it when the test ends.
func testNetns(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	if err := addNetns(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if netnsExists(name) {
			deleteNetns(ctx, name)
		}
	})
}

func TestCleanStale(t *testing.T) {
	requirePrivileged(t)
	dead, live, reused := deadPID(t), livePID(t), livePID(t)
	self := os.Getpid()
	// reused's owner file names another start time: its PID now belongs
	// to a process that is not the lab run that made the namespace.
	deadTagged := filepath.Join(runDir, runPrefix(dead)+"t3")
	if err := os.MkdirAll(deadTagged, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(deadTagged) })
	for _, pid := range []int{dead, reused} {
		dir := filepath.Join(runDir, runPrefix(pid))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "owner"), fmt.Appendf(nil, "%d 1\n", pid), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		remove bool
	}{
		{fmt.Sprintf("gvl%d-lan", dead), true},
		{fmt.Sprintf("gvl%d-rtr", dead), true},
		{fmt.Sprintf("gvl%d-wan", reused), true},
		{fmt.Sprintf("gvl%dt3-wan", dead), true}, // a tagged run (Options.runTag)
		{fmt.Sprintf("gvl%d-lan", live), false},
		{fmt.Sprintf("gvl%dt3-lan", live), false},
		{fmt.Sprintf("gvl%d-lan", self), false},
		{fmt.Sprintf("gvl%dt3-lan", self), false},
		{fmt.Sprintf("gvl%dx3-lan", dead), false}, // not a lab namespace name
		{fmt.Sprintf("xgvl%d-lan", dead), false},  // foreign prefix
		{fmt.Sprintf("gvl%d", dead), false},       // not a lab namespace name
		{fmt.Sprintf("gvl%d-LAN", dead), false},   // not a lab namespace name
		{fmt.Sprintf("test-%d", dead), false},
	}
	for _, tc := range tests {
		testNetns(t, tc.name)
	}
	before := listNetns(t)
	removed, err := cleanStale(context.Background(), testLogger(t), self)
	if err != nil {
		t.Fatalf("cleanStale() error: %v", err)
	}
	for _, tc := range tests {
		if got := !netnsExists(tc.name); got != tc.remove {
			t.Errorf("cleanStale() removed %s = %v, want %v", tc.name, got, tc.remove)
		}
	}
	// Lab namespaces that existed before the test and are not of dead
	// runs are still there. Other test packages' namespaces (hwt-, vsw-,
	// ...) come and go while go test runs packages in parallel, so only
	// the lab's own prefix is checked.
	for _, n := range before {
		if strings.HasPrefix(n, prefixHead) && !netnsExists(n) && !contains(removed, n) {
			t.Errorf("namespace %s vanished without being reported", n)
		}
	}
	for _, n := range removed {
		if m := nsNameRE.FindStringSubmatch(n); m == nil {
			t.Errorf("cleanStale() removed %s, which is no lab namespace", n)
		}
	}
	for _, dir := range []string{filepath.Join(runDir, runPrefix(dead)), filepath.Join(runDir, runPrefix(reused)), deadTagged} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("run directory %s of a dead owner: stat error %v, want not exist", dir, err)
		}
	}
}

func TestOwnerAlive(t *testing.T) {
	requirePrivileged(t)
	if !ownerAlive(os.Getpid()) {
		t.Errorf("ownerAlive(self) = false, want true")
	}
	if pid := deadPID(t); ownerAlive(pid) {
		t.Errorf("ownerAlive(dead %d) = true, want false", pid)
	}
	pid := livePID(t)
	if !ownerAlive(pid) {
		t.Errorf("ownerAlive(live %d) = false, want true", pid)
	}
	// A correct owner file keeps it alive.
	dir, err := writeOwner(runPrefix(pid), pid)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if !ownerAlive(pid) {
		t.Errorf("ownerAlive(live %d with its owner file) = false, want true", pid)
	}
}

func TestInNetns(t *testing.T) {
	requirePrivileged(t)
	ns := fmt.Sprintf("gvl%d-innetns", os.Getpid())
	testNetns(t, ns)
	hostFwd, err := readSysctl("net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	var links string
	err = inNetns(ns, func() error {
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		links = string(b)
		if err != nil {
			return err
		}
		want := "1"
		if hostFwd == "1" {
			want = "0"
		}
		return writeSysctl("net/ipv4/ip_forward", want, false)
	})
	if err != nil {
		t.Fatalf("inNetns() error: %v", err)
	}
	// /proc/net/dev: two header lines, then one line per interface.
	if lines := strings.Split(strings.TrimSpace(links), "\n"); len(lines) != 3 || !strings.Contains(lines[2], "lo:") {
		t.Errorf("new namespace's /proc/thread-self/net/dev:\n%s\nwant only lo", links)
	}
	if got, _ := readSysctl("net/ipv4/ip_forward"); got != hostFwd {
		t.Errorf("host ip_forward changed from %s to %s by a write in %s", hostFwd, got, ns)
	}
	k, err := readKernelState(ns)
	if err != nil {
		t.Fatal(err)
	}
	if k.IPForward == hostFwd {
		t.Errorf("readKernelState(%s).IPForward = %s, want the value written there", ns, k.IPForward)
	}

	// A socket made in the namespace stays there: its loopback listener is
	// reachable from the namespace and not from the machine's own.
	if err := nsRun(context.Background(), ns, "ip", "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	ln, err := listenIn(ns, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := dialIn(context.Background(), ns, ln.Addr().String(), proofTimeout)
	if err != nil {
		t.Fatalf("dialIn(%s, %s) error: %v", ns, ln.Addr(), err)
	}
	c.Close()
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		// Something else may listen on the same port on the host; it must
		// not be ours.
		buf := make([]byte, 2)
		n, _ := c.Read(buf)
		c.Close()
		if string(buf[:n]) == "hi" {
			t.Errorf("listener made in %s answered in the machine's own namespace", ns)
		}
	}
}

func listNetns(t *testing.T) []string {
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
