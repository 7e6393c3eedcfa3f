package hw

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gvrouter/gvrouter/hw/takeover"
	"github.com/gvrouter/gvrouter/statedir"
	"golang.org/x/sys/unix"
)

// LockPort takes the exclusive lock on port ifname of the calling
// thread's network namespace: two routers in different namespaces may own
// interfaces of the same name, two in one may not. It is two locks, both
// freed by the kernel when the process ends: the abstract socket
// "@gvrouter/port/<ifname>" of the namespace, which no flag can move (two
// routers started with different run directories still meet there), and
// the file <runDir>/ports/<netns inode>.<ifname>.lock beside the pidfile,
// where an operator can see it. Take it before Open and release it after
// Close. If another router holds it the error is a *statedir.LockedError,
// "port eth0 is in use by router pid N".
func LockPort(runDir, ifname string) (*statedir.Lock, error) {
	var st unix.Stat_t
	runtime.LockOSThread()
	err := unix.Stat("/proc/thread-self/ns/net", &st)
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("hw: lock port %s: network namespace: %w", ifname, err)
	}
	if err := checkIfname(ifname); err != nil {
		return nil, fmt.Errorf("hw: lock port: %w", err)
	}
	ns, err := statedir.TryLockAbstract("gvrouter/port/"+ifname, "port "+ifname)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(runDir, "ports", fmt.Sprintf("%d.%s.lock", st.Ino, ifname))
	f, err := statedir.TryLock(path, "port "+ifname)
	if err != nil {
		ns.Unlock()
		return nil, err
	}
	return f.With(ns), nil
}

func checkIfname(s string) error {
	if s == "" || len(s) >= unix.IFNAMSIZ || s == "." || s == ".." {
		return fmt.Errorf("bad interface name %q", s)
	}
	for _, c := range s {
		if c == '/' || c == 0 {
			return fmt.Errorf("bad interface name %q", s)
		}
	}
	return nil
}

// RecordedPorts returns the ports that have a takeover record in
// stateDir: those a router has open now, or one that did not stop cleanly
// left behind.
func RecordedPorts(stateDir string) ([]string, error) {
	s, err := takeover.NewStore(stateDir)
	if err != nil {
		return nil, err
	}
	return s.Ports()
}

// ErrNoRecord means Restore found no record of the port: no router
// changed it, or its last router stopped cleanly.
var ErrNoRecord = errors.New("no takeover record")

// Restore puts back the kernel settings of port ifname (in the calling
// thread's namespace) that the record in stateDir lists, as a router's
// clean stop would, and removes the record. It does not open the port.
// The caller holds the port's lock (LockPort), so no router runs on it. A
// record about an earlier boot or another interface is discarded with a
// warning (the kernel already forgot what it lists); a corrupt one is set
// aside and reported.
func Restore(stateDir, ifname string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("port", ifname)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	store, err := takeover.NewStore(stateDir)
	if err != nil {
		return err
	}
	rec, err := store.Load(ifname)
	if errors.Is(err, takeover.ErrCorrupt) {
		to, serr := store.SetAside(ifname)
		return errors.Join(fmt.Errorf("hw: restore %s: %w; set aside as %s: the settings it held are lost", ifname, err, to), serr)
	}
	if err != nil {
		return fmt.Errorf("hw: restore %s: %w", ifname, err)
	}
	if rec == nil {
		return fmt.Errorf("hw: restore %s: %w in %s", ifname, ErrNoRecord, takeover.Dir(stateDir))
	}
	ctl, err := ctlSocket()
	if err != nil {
		return fmt.Errorf("hw: restore %s: %w", ifname, err)
	}
	defer unix.Close(ctl)
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return fmt.Errorf("hw: restore %q: %w", ifname, err)
	}
	if err := unix.IoctlIfreq(ctl, unix.SIOCGIFINDEX, ifr); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("hw: restore %s: %w (record kept: %s)", ifname, ErrNotFound, store.Path(ifname))
		}
		return fmt.Errorf("hw: restore %s: %w", ifname, err)
	}
	ifindex := int(ifr.Uint32())
	boot, ns, err := kernelIdentity()
	if err != nil {
		return fmt.Errorf("hw: restore %s: %w", ifname, err)
	}
	if rec.BootID != boot || rec.Netns != ns || rec.Ifindex != ifindex {
		if rec.BootID == boot && rec.Netns != ns {
			return fmt.Errorf("hw: restore %s: the record is about network namespace %d, this is %d: run the restore where the router ran (record kept: %s)",
				ifname, rec.Netns, ns, store.Path(ifname))
		}
		log.Warn("state record is about an earlier boot or another interface: nothing to restore; discarded",
			"record_boot", rec.BootID, "record_ifindex", rec.Ifindex, "since", rec.Since)
		if rec.BootID == boot {
			// The interface was recreated; tables named after the old
			// one may remain.
			for _, t := range rec.NFTables {
				nftDeleteTable(t)
			}
		}
		return store.Remove(ifname)
	}
	k := &kernelState{ifname: ifname, ifindex: ifindex, log: log, now: time.Now, store: store, rec: rec}
	if err := k.restore(ctl); err != nil {
		return err
	}
	log.Info("port restored from its takeover record", "since", rec.Since)
	return nil
}
