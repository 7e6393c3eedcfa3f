package capture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// SocketName is the control socket's file name in the run directory
// (/run/gvrouter/capture.sock).
const SocketName = "capture.sock"

// ErrNotAllowed is returned to a peer that is neither root, the daemon's
// own user, nor in the daemon's group.
var ErrNotAllowed = errors.New("capture: not allowed: root or the daemon's group only")

// Server serves captures on a Unix socket. A capture shows a SecY's
// plaintext and everyone's traffic, so the socket is mode 0660 and each
// connection's peer is checked again with SO_PEERCRED (a socket file's
// mode alone is not enough if its directory is shared).
type Server struct {
	m   *Manager
	log *slog.Logger
	// gid is the daemon's group: its members may capture.
	gid int
	wg  sync.WaitGroup
}

// NewServer returns a server for m; members of group gid (and root, and
// the daemon's own user) may capture.
func NewServer(m *Manager, gid int, log *slog.Logger) *Server {
	return &Server{m: m, gid: gid, log: log}
}

// Listen creates the control socket at path, mode 0660, group gid,
// replacing a stale one.
func Listen(path string, gid int) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if err := os.Chown(path, -1, gid); err != nil {
		ln.Close()
		return nil, fmt.Errorf("capture: %w", err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("capture: %w", err)
	}
	return ln, nil
}

// Serve accepts connections until ln is closed, then waits for the
// captures in flight (which end when ctx does).
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	defer s.wg.Wait()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("capture: accept: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.serveConn(ctx, c)
		}()
	}
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	fail := func(err error) { _ = writeRecord(c, recError, []byte(err.Error())) }
	cred, err := peerCred(c)
	if err != nil {
		fail(err)
		return
	}
	if !s.allowed(cred) {
		s.log.Warn("capture refused", "uid", cred.Uid, "gid", cred.Gid, "pid", cred.Pid)
		fail(ErrNotAllowed)
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, maxRequest)).ReadBytes('\n')
	if err != nil {
		fail(fmt.Errorf("capture: request: %w", err))
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		fail(fmt.Errorf("capture: request: %w", err))
		return
	}
	start, _, err := s.m.Prepare(req)
	if err != nil {
		fail(err)
		return
	}
	// The client hanging up ends the capture: a read sees EOF.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:])
		cancel()
	}()
	s.log.Info("capture started", "iface", req.Iface, "uid", cred.Uid, "filter", req.Filter)
	res, err := start(ctx, recordWriter{c})
	if err != nil {
		fail(err)
		return
	}
	s.log.Info("capture done", "iface", req.Iface, "captured", res.Captured, "dropped", res.Dropped)
	b, _ := json.Marshal(res)
	_ = writeRecord(c, recResult, b)
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("capture: peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("capture: peer credentials: %w", err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("capture: peer credentials: %w", cerr)
	}
	return cred, nil
}

// allowed reports whether the peer is root, the daemon's user, or in the
// daemon's group (primary, or supplementary as /proc/PID/status says).
func (s *Server) allowed(c *unix.Ucred) bool {
	if c.Uid == 0 || int(c.Uid) == os.Geteuid() || int(c.Gid) == s.gid {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(c.Pid)) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if g, ok := strings.CutPrefix(l, "Groups:"); ok {
			for _, f := range strings.Fields(g) {
				if f == strconv.Itoa(s.gid) {
					return true
				}
			}
		}
	}
	return false
}

// Dial asks the daemon listening at path for the capture r and copies
// the pcapng stream to out until the capture ends; it returns the
// daemon's Result or its refusal.
func Dial(ctx context.Context, path string, r Request, out io.Writer) (Result, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Result{}, fmt.Errorf("capture: %w (is the router running?)", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.(*net.UnixConn).CloseWrite() })
	defer stop()
	b, _ := json.Marshal(r)
	if _, werr := c.Write(append(b, '\n')); werr != nil {
		// A refusing server answers and hangs up before it reads.
		if _, err := readStream(c, out); err != nil && !strings.HasPrefix(err.Error(), "capture: control socket:") {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("capture: %w", werr)
	}
	return readStream(c, out)
}
