package router

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/statedir"
)

// StateLockName is the lock file in the state directory: one router per
// state directory, since the records in it are about the ports of one.
const StateLockName = "lock"

// LockStateDir creates the state directory (mode 0700) if needed and takes
// its lock. A second router, or `router restore` while a router runs, gets
// a *statedir.LockedError naming the holder's pid.
func LockStateDir(dir string) (*statedir.Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	return statedir.TryLock(filepath.Join(dir, StateLockName), "state directory "+dir)
}

// lock takes the state directory's lock and every port's, before the
// router touches anything: a second router refuses with nothing changed.
func (r *Router) lock(cfg *config.Config) error {
	if r.state.dir != "" {
		l, err := LockStateDir(r.state.dir)
		if err != nil {
			return err
		}
		r.state.lock = l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pc := range cfg.Ports {
		if err := r.lockPortLocked(pc.Name); err != nil {
			return err
		}
	}
	return nil
}

// lockPortLocked takes port's lock unless the router holds it or takes no
// port locks.
func (r *Router) lockPortLocked(port string) error {
	if r.state.runDir == "" || r.state.portLocks[port] != nil {
		return nil
	}
	l, err := hw.LockPort(r.state.runDir, port)
	if err != nil {
		return err
	}
	r.state.portLocks[port] = l
	return nil
}

// releasePortLocksLocked releases the locks of ports the router no longer
// has open.
func (r *Router) releasePortLocksLocked() {
	for name, l := range r.state.portLocks {
		if _, ok := r.ports[name]; !ok {
			l.Unlock()
			delete(r.state.portLocks, name)
		}
	}
}

func (r *Router) unlockPortsLocked() {
	for name, l := range r.state.portLocks {
		l.Unlock()
		delete(r.state.portLocks, name)
	}
}
