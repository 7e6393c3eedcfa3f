package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is a long-running process the lab started (router, iperf3 server,
// hw bridge). It is stopped by its PID only.
type child struct {
	name    string
	cmd     *exec.Cmd
	log     *slog.Logger
	logPath string // the child's stdout and stderr
	// done is closed when the process has exited; err is then its exit
	// status.
	done chan struct{}
	err  error
}

// startChild starts args[0] with args[1:] in namespace ns; its stdout and
// stderr go to logPath.
func startChild(log *slog.Logger, name, ns, logPath string, args ...string) (*child, error) {
	return startChildEnv(log, name, ns, logPath, nil, args...)
}

// startChildEnv is startChild with env added to the child's environment
// (e.g. KEA_PIDFILE_DIR=...).
func startChildEnv(log *slog.Logger, name, ns, logPath string, env []string, args ...string) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lab: %s: %w", name, err)
	}
	// Not bound to a context: the lab stops children itself, gently first.
	cmd := command(context.Background(), ns, args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("lab: start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: log, logPath: logPath, done: make(chan struct{})}
	log.Debug("lab: started", "child", name, "pid", cmd.Process.Pid, "cmd", strings.Join(cmd.Args, " "))
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child's PID, then SIGKILL after stopGrace, and
// waits for it. It returns the exit error unless the exit was the one
// asked for.
func (c *child) stop() error {
	if c == nil {
		return nil
	}
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopGrace):
			c.log.Warn("lab: child ignored SIGTERM, killing it", "child", c.name, "pid", c.cmd.Process.Pid,
				"log_tail", tail(c.logPath, 16<<10))
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		c.log.Debug("lab: stopped", "child", c.name, "pid", c.cmd.Process.Pid)
		var ee *exec.ExitError
		if errors.As(c.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return nil
			}
		}
	}
	return c.err
}

// tail returns the last n bytes of a file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
