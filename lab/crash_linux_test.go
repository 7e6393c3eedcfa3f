package lab

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a lab process (see TestMain)
// instead of running tests: "crash" builds a lab, starts a child in it and
// waits to be killed; "keep" runs Run with Keep and bench mode (b);
// "wgpeer" is a wireguard-go peer (wgPeer).
const helperEnv = "GVL_LAB_HELPER"

func TestMain(m *testing.M) {
	flag.Parse()
	switch os.Getenv(helperEnv) {
	case "":
		if !flagSet("test.parallel") {
			flag.Set("test.parallel", strconv.Itoa(maxParallel))
		}
		code := m.Run()
		removeRouterBuilds()
		os.Exit(code)
	case "crash":
		l := newLab(Options{}, os.Getpid())
		if _, err := writeOwner(l.prefix, os.Getpid()); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		l.dir = filepath.Join(runDir, l.prefix)
		if err := l.build(context.Background()); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		c, err := startChild(l.log, "sleeper", l.rtrNS, filepath.Join(l.dir, "sleep.log"), "sleep", "300")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("ready", c.cmd.Process.Pid)
		select {} // until SIGKILL
	case "wgpeer":
		if err := wgPeer(); err != nil {
			fmt.Fprintln(os.Stderr, "wireguard peer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "pppoeac":
		if err := pppoeACHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "pppoe ac:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "fakerouter":
		if err := fakeRouter(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "fake router:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "keep":
		err := Run(context.Background(), Options{
			Keep: true, Bench: true, BenchModes: "b", BenchSeconds: 1, BenchRuns: 1, Stdout: os.Stdout,
		})
		fmt.Println("run returned", err)
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// maxParallel is go test's -parallel for the lab unless the command line
// sets it: enough for every parallel test at once, since labSlots and
// parallelLongLab decide how many run (go test's default, GOMAXPROCS,
// would be 2 on CI and could start the longest test last).
const maxParallel = 64

// flagSet reports whether the command line set flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// startHelper starts this test binary as a lab process and returns it with
// a reader of its stdout.
func startHelper(t *testing.T, role string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

// waitLine reads lines until one starts with prefix.
func waitLine(t *testing.T, sc *bufio.Scanner, prefix string) string {
	t.Helper()
	for sc.Scan() {
		t.Logf("helper: %s", sc.Text())
		if strings.HasPrefix(sc.Text(), prefix) {
			return sc.Text()
		}
		if strings.HasPrefix(sc.Text(), "error") {
			t.Fatalf("helper failed: %s", sc.Text())
		}
	}
	t.Fatalf("helper ended without %q", prefix)
	return ""
}

// gone reports whether process pid is gone or a zombie.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

// TestCrashRecovery kills a lab process with SIGKILL and checks that its
// child died with it and that the next run's cleanStale removes exactly
// its namespaces and run directory.
func TestCrashRecovery(t *testing.T) {
	requirePrivileged(t)
	cmd, sc := startHelper(t, "crash")
	f := strings.Fields(waitLine(t, sc, "ready "))
	childPID, _ := strconv.Atoi(f[1])
	pid := cmd.Process.Pid
	want := []string{runPrefix(pid) + "-lan", runPrefix(pid) + "-rtr", runPrefix(pid) + "-wan"}
	t.Cleanup(func() {
		for _, ns := range want {
			if netnsExists(ns) {
				deleteNetns(context.Background(), ns)
			}
		}
		os.RemoveAll(filepath.Join(runDir, runPrefix(pid)))
	})
	// A live owner's namespaces are kept.
	if removed, err := cleanStale(context.Background(), testLogger(t), os.Getpid()); err != nil || contains(removed, want[0]) {
		t.Fatalf("cleanStale() with the owner alive = %v, %v; want its namespaces kept", removed, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); !gone(childPID); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("child %d of the killed lab process still runs", childPID)
			syscall.Kill(childPID, syscall.SIGKILL)
			break
		}
	}
	for _, ns := range want {
		if !netnsExists(ns) {
			t.Fatalf("namespace %s vanished before cleanup", ns)
		}
	}
	removed, err := cleanStale(context.Background(), testLogger(t), os.Getpid())
	if err != nil {
		t.Fatalf("cleanStale() error: %v", err)
	}
	for _, ns := range want {
		if !contains(removed, ns) || netnsExists(ns) {
			t.Errorf("cleanStale() did not remove %s (removed %v)", ns, removed)
		}
	}
	if _, err := os.Stat(filepath.Join(runDir, runPrefix(pid))); !os.IsNotExist(err) {
		t.Errorf("run directory of the killed run: stat error %v, want not exist", err)
	}
}

// TestKeepSIGINT runs a kept lab in another process, sends it SIGINT and
// checks that it tore everything down and exited cleanly.
func TestKeepSIGINT(t *testing.T) {
	requirePrivileged(t, "iperf3")
	cmd, sc := startHelper(t, "keep")
	waitLine(t, sc, "lab is up")
	pid := cmd.Process.Pid
	if got := labNamespaces(t, pid); len(got) != 3 {
		t.Fatalf("kept lab namespaces = %v, want 3", got)
	}
	cmd.Process.Signal(os.Interrupt)
	line := waitLine(t, sc, "run returned")
	if err := cmd.Wait(); err != nil || line != "run returned <nil>" {
		t.Errorf("kept lab after SIGINT: %q, exit %v; want nil error, exit 0", line, err)
	}
	if got := labNamespaces(t, pid); len(got) != 0 {
		t.Errorf("namespaces left after SIGINT: %v", got)
	}
	if _, err := os.Stat(filepath.Join(runDir, runPrefix(pid))); !os.IsNotExist(err) {
		t.Errorf("run directory left after SIGINT (stat error %v)", err)
	}
}
