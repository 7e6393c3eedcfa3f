package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked means a lock is held by another process (or another Lock in
// this one). Errors of TryLock that wrap it are *LockedError.
var ErrLocked = errors.New("in use")

// LockedError says who holds a lock TryLock could not take.
type LockedError struct {
	What string // what the lock protects, e.g. "port eth0"
	Path string // the lock file
	PID  int    // the holder's process ID as it wrote it; 0 if unknown
}

// Error implements error: "port eth0 is in use by router pid 1234".
func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%s is in use by router pid %d (lock %s)", e.What, e.PID, e.Path)
	}
	return fmt.Sprintf("%s is in use by another router (lock %s)", e.What, e.Path)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is an exclusive flock on a file that holds its owner's process ID.
// The kernel releases it when the process ends, however it ends.
type Lock struct {
	f *os.File
	// sock is the listening socket of an abstract-name lock
	// (TryLockAbstract), -1 if none.
	sock int
	// also is released with this lock (LockPort takes two).
	also *Lock
}

// TryLock takes the exclusive lock on path without waiting, creating the
// file (and its directory, mode 0755) if needed, and writes this
// process's ID into it. what names the locked thing in errors, e.g.
// "port eth0". If another holder has it, the error is a *LockedError.
func TryLock(path, what string) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("statedir: lock %s: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("statedir: lock %s: %w", what, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockedError{What: what, Path: path, PID: readPID(path)}
		}
		return nil, fmt.Errorf("statedir: lock %s: %w", what, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, sock: -1}, nil
}

// TryLockAbstract takes the lock named name in the abstract socket
// namespace of the calling thread's network namespace: a listening Unix
// socket "@name". Unlike a file it cannot be put elsewhere by a flag or
// a different run directory, every process of the namespace sees it, and
// the kernel frees it when the process ends. The holder's process ID comes
// from SO_PEERCRED of a connection to it. what names the locked thing in
// errors; if another process holds it the error is a *LockedError whose
// Path is "@name".
func TryLockAbstract(name, what string) (*Lock, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("statedir: lock %s: %w", what, err)
	}
	sa := &unix.SockaddrUnix{Name: "@" + name}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, &LockedError{What: what, Path: "@" + name, PID: abstractHolder(sa)}
		}
		return nil, fmt.Errorf("statedir: lock %s: %w", what, err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("statedir: lock %s: %w", what, err)
	}
	return &Lock{sock: fd}, nil
}

// abstractHolder returns the process ID listening on sa, or 0.
func abstractHolder(sa *unix.SockaddrUnix) int {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sa); err != nil {
		return 0
	}
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0
	}
	return int(cred.Pid)
}

// With returns l, holding also too: Unlock releases both.
func (l *Lock) With(also *Lock) *Lock {
	l.also = also
	return l
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// Unlock releases the lock. The file stays: removing a lock file races
// with a process that has just opened it. Unlock of a nil Lock does
// nothing.
func (l *Lock) Unlock() error {
	if l == nil {
		return nil
	}
	var err error
	if l.f != nil {
		err = l.f.Close() // closing the only descriptor releases the flock
		l.f = nil
	}
	if l.sock >= 0 {
		err = errors.Join(err, unix.Close(l.sock))
		l.sock = -1
	}
	if l.also != nil {
		err = errors.Join(err, l.also.Unlock())
		l.also = nil
	}
	return err
}
