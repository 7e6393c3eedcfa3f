package hw

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// netns is a handle on the network namespace a port was opened in, so that
// Close undoes its kernel settings there even when called from a thread in
// another namespace.
type netns struct {
	fd int
}

func currentNetns() (netns, error) {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return netns{fd: -1}, fmt.Errorf("open own network namespace: %w", err)
	}
	return netns{fd: fd}, nil
}

func (n netns) close() {
	if n.fd >= 0 {
		unix.Close(n.fd)
	}
}

func sameNamespace(a, b int) bool {
	var sa, sb unix.Stat_t
	if unix.Fstat(a, &sa) != nil || unix.Fstat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// do runs f on a thread in n. Child processes f starts inherit n.
func (n netns) do(f func() error) error {
	runtime.LockOSThread()
	orig, err := currentNetns()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.close()
	if sameNamespace(orig.fd, n.fd) {
		defer runtime.UnlockOSThread()
		return f()
	}
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace: %w", err)
	}
	ferr := f()
	if err := unix.Setns(orig.fd, unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: the runtime ends it with the goroutine
		// rather than reuse a thread in the wrong namespace.
		return fmt.Errorf("return to network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}
