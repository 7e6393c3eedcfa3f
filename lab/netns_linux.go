package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// netnsDir is where `ip netns` keeps its named namespaces.
	netnsDir = "/run/netns"
	// runDir holds one directory per run: its owner file, the router's
	// config and log. It lives on tmpfs, so a reboot clears it together
	// with the namespaces.
	runDir = "/run/gvrouter-lab"
	// prefixHead starts every lab prefix; the owner's PID follows it.
	prefixHead = "gvl"
)

// nsNameRE matches namespace names a lab run creates: gvl<pid>-<role>,
// or gvl<pid>t<n>-<role> for run n of a process that runs several labs
// at once (Options.runTag). Submatches: the run's prefix, the PID.
var nsNameRE = regexp.MustCompile(`^(` + prefixHead + `([0-9]+)(?:t[0-9]+)?)-[a-z0-9]+$`)

// prefixRE matches a run directory name: gvl<pid> or gvl<pid>t<n>.
// Submatches as nsNameRE's.
var prefixRE = regexp.MustCompile(`^(` + prefixHead + `([0-9]+)(?:t[0-9]+)?)$`)

// runPrefix is the prefix of this process's lab run.
func runPrefix(pid int) string { return prefixHead + strconv.Itoa(pid) }

// procStatFields returns the fields of /proc/PID/stat from field 3
// (state) on: f[i] is field i+3.
func procStatFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no comm field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return f, nil
}

// procStartTime returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/PID/stat), which tells a live owner from a later
// process that got the same PID.
func procStartTime(pid int) (uint64, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// userHZ is the unit of the times in /proc/PID/stat (USER_HZ, 100 on
// every Linux architecture the router runs on).
const userHZ = 100

// procCPU returns the CPU time process pid has used, user and system
// (fields 14 and 15 of /proc/PID/stat), all threads.
func procCPU(pid int) (time.Duration, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(u+k) * time.Second / userHZ, nil
}

// ownerAlive reports whether the run with owner pid still has its owner.
// A PID that exists but started at another time than the owner file says
// belongs to a new process: the owner is gone.
func ownerAlive(pid int) bool { return runOwnerAlive(runPrefix(pid), pid) }

// runOwnerAlive is ownerAlive for the run with prefix prefix (the owner
// file of a tagged run is in its own directory).
func runOwnerAlive(prefix string, pid int) bool {
	if pid <= 0 {
		return false
	}
	start, err := procStartTime(pid)
	if err != nil {
		// ENOENT: no such process. Anything else: assume alive, so that
		// doubt never removes a live run's namespaces.
		return !errors.Is(err, fs.ErrNotExist)
	}
	b, err := os.ReadFile(filepath.Join(runDir, prefix, "owner"))
	if err != nil {
		return true // no owner file (yet): the PID alone decides
	}
	var p int
	var s uint64
	if _, err := fmt.Sscanf(string(b), "%d %d", &p, &s); err != nil || p != pid {
		return true
	}
	return s == start
}

// writeOwner creates this run's directory and owner file.
func writeOwner(prefix string, pid int) (string, error) {
	start, err := procStartTime(pid)
	if err != nil {
		return "", fmt.Errorf("lab: owner: %w", err)
	}
	dir := filepath.Join(runDir, prefix)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	owner := fmt.Sprintf("%d %d\n", pid, start)
	if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(owner), 0o600); err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	return dir, nil
}

// cleanStale removes the namespaces and run directories of earlier lab
// runs whose owner process is gone. It keeps names that are not gvl<pid>-*
// or gvl<pid>t<n>-*, runs whose owner is alive and the runs of process
// self. It returns the namespaces it removed.
func cleanStale(ctx context.Context, log *slog.Logger, self int) ([]string, error) {
	var removed []string
	var errs []error
	alive := map[string]bool{} // by run prefix
	isStale := func(prefix, pidStr string) bool {
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == self {
			return false
		}
		a, ok := alive[prefix]
		if !ok {
			a = runOwnerAlive(prefix, pid)
			alive[prefix] = a
		}
		return !a
	}
	ents, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("lab: %w", err)
	}
	for _, e := range ents {
		m := nsNameRE.FindStringSubmatch(e.Name())
		if m == nil || !isStale(m[1], m[2]) {
			continue
		}
		log.Info("lab: removing namespace of a dead run", "netns", e.Name())
		if err := deleteNetns(ctx, e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	dirs, err := os.ReadDir(runDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("lab: %w", err))
	}
	for _, e := range dirs {
		m := prefixRE.FindStringSubmatch(e.Name())
		if m == nil || !isStale(m[1], m[2]) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(runDir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("lab: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

// addNetns creates the named namespace.
func addNetns(ctx context.Context, name string) error {
	return run(ctx, "ip", "netns", "add", name)
}

// deleteNetns removes the named namespace; processes still inside keep it
// alive, unnamed, until they exit.
func deleteNetns(ctx context.Context, name string) error {
	return run(ctx, "ip", "netns", "delete", name)
}

// netnsExists reports whether the named namespace exists.
func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join(netnsDir, name))
	return err == nil
}

// inNetns runs fn on an OS thread that has joined the named namespace.
// Sockets fn creates stay in that namespace after it returns; files under
// /proc/thread-self/net and /proc/sys/net show that namespace's state
// (not /proc/net and /proc/self, which follow the main thread). fn must
// not start goroutines that need the namespace.
func inNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored := false
		defer func() {
			// A thread whose namespace could not be restored is left
			// locked, so the runtime ends it with this goroutine.
			if restored {
				runtime.UnlockOSThread()
			}
		}()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("lab: open own netns: %w", err)
			restored = true
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join(netnsDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("lab: netns %s: %w", name, err)
			restored = true
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			errc <- fmt.Errorf("lab: setns %s: %w", name, err)
			restored = true
			return
		}
		err = fn()
		restored = unix.Setns(orig, unix.CLONE_NEWNET) == nil
		errc <- err
	}()
	return <-errc
}

// command returns a command run in namespace ns (the machine's own if ns
// is ""). It runs in its own process group, so a terminal's SIGINT reaches
// only the lab, which then stops it; it gets SIGKILL if the lab dies.
func command(ctx context.Context, ns string, name string, args ...string) *exec.Cmd {
	if ns != "" {
		args = append([]string{"netns", "exec", ns, name}, args...)
		name = "ip"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs a command in the machine's own namespace and returns its
// combined output in the error if it fails.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, "", name, args...)
	return err
}

// output runs a command in namespace ns and returns its stdout.
func output(ctx context.Context, ns string, name string, args ...string) ([]byte, error) {
	cmd := command(ctx, ns, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("lab: %s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// nsRun runs a command in namespace ns.
func nsRun(ctx context.Context, ns string, name string, args ...string) error {
	_, err := output(ctx, ns, name, args...)
	return err
}
