package hw

import (
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// flags returns the interface's SIOCGIFFLAGS flags.
func (p *Port) flags() (uint32, error) {
	ifr, err := unix.NewIfreq(p.name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(p.ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		return 0, err
	}
	return uint32(ifr.Uint16()), nil
}

// linkUpFlags reports a usable link: administratively up and running
// (carrier present, operstate up).
func linkUpFlags(flags uint32) bool {
	return flags&unix.IFF_UP != 0 && flags&unix.IFF_RUNNING != 0
}

// LinkUp reports whether the link is up (administratively up with
// carrier), as the last link event said; without a netlink subscription,
// as sampled at most LinkPollInterval ago.
func (p *Port) LinkUp() bool { return p.link.Up() }

// SetLinkHandler sets f to be called, from the port's link goroutine, each
// time the link goes up or down. A nil f removes the handler.
func (p *Port) SetLinkHandler(f func(up bool)) { p.link.SetHandler(f) }

// sampleLinkUp reads the flags: the link watcher's sample.
func (p *Port) sampleLinkUp() bool {
	flags, err := p.flags()
	return err == nil && linkUpFlags(flags)
}

// dialLinkEvents subscribes to RTNLGRP_LINK in the calling thread's
// network namespace. Tests set it to make the subscription fail.
var dialLinkEvents = func() (*rtnetlink.Conn, error) {
	return rtnetlink.Dial(&netlink.Config{Groups: unix.RTMGRP_LINK})
}

// LinkWatcher follows one interface's link state (administratively up
// with carrier: IFF_UP and IFF_RUNNING) and calls a handler on each
// change. It learns of changes from an rtnetlink RTNLGRP_LINK
// subscription, so a carrier loss reaches the handler (the stack, the
// fast path, the status page) within milliseconds; if the subscription
// cannot be made (no netlink in a sandbox, a seccomp filter) or its socket
// fails, it logs why and samples every LinkPollInterval instead. Its
// methods are safe for concurrent use; one goroutine, stopped by Stop,
// calls the handler.
type LinkWatcher struct {
	ifindex int
	sample  func() bool // the state now, e.g. from SIOCGIFFLAGS
	log     *slog.Logger

	up      atomic.Bool
	handler atomic.Pointer[func(up bool)]
	conn    *rtnetlink.Conn // the subscription; nil when polling
	stop    chan struct{}
	done    sync.WaitGroup
}

// StartLinkWatcher starts watching interface ifindex of the calling
// thread's network namespace, whose state sample reads (it must not
// block). The state starts as sample says.
func StartLinkWatcher(ifindex int, sample func() bool, log *slog.Logger) *LinkWatcher {
	w := &LinkWatcher{ifindex: ifindex, sample: sample, log: log, stop: make(chan struct{})}
	w.up.Store(sample())
	c, err := dialLinkEvents()
	if err != nil {
		log.Warn("link events: netlink subscription failed, polling the link state instead", "every", LinkPollInterval, "err", err)
		w.done.Add(1)
		go w.routinePoll()
		return w
	}
	w.conn = c
	// A change between the first sample and the subscription has no event
	// of ours: sample once more now that events are queued.
	w.set(sample())
	w.done.Add(1)
	go w.routineEvents()
	return w
}

// Up reports the link state as last seen.
func (w *LinkWatcher) Up() bool { return w.up.Load() }

// Subscribed reports whether w follows netlink events (not polling).
func (w *LinkWatcher) Subscribed() bool { return w.conn != nil }

// SetHandler sets f to be called, from w's goroutine, each time the link
// goes up or down. A nil f removes the handler.
func (w *LinkWatcher) SetHandler(f func(up bool)) {
	if f == nil {
		w.handler.Store(nil)
		return
	}
	w.handler.Store(&f)
}

// Stop stops w's goroutine and waits for it; the handler is not called
// after Stop returns. Call it once.
func (w *LinkWatcher) Stop() {
	close(w.stop)
	if w.conn != nil {
		w.conn.Close() // wakes Receive
	}
	w.done.Wait()
}

// set records the link state and calls the handler if it changed. Only
// w's goroutine (and StartLinkWatcher before it) calls it.
func (w *LinkWatcher) set(up bool) {
	if w.up.Swap(up) == up {
		return
	}
	w.log.Info("link changed", "up", up)
	if f := w.handler.Load(); f != nil {
		(*f)(up)
	}
}

// routineEvents follows RTM_NEWLINK/RTM_DELLINK messages about the
// interface until Stop. The socket lives in the interface's namespace, so
// this goroutine needs no namespace switch. If the kernel dropped events
// (ENOBUFS: the socket's buffer overflowed) the state is sampled again; if
// the socket fails otherwise, the goroutine falls back to polling.
func (w *LinkWatcher) routineEvents() {
	defer w.done.Done()
	w.log.Debug("link watcher started", "source", "netlink")
	defer w.log.Debug("link watcher stopped")
	for {
		msgs, raw, err := w.conn.Receive()
		select {
		case <-w.stop:
			return
		default:
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				w.set(w.sample())
				continue
			}
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// A message the library could not decode also lands here
			// (Receive returns no messages then): the sample tells the
			// truth, and the next event may decode.
			var oerr *netlink.OpError
			if !errors.As(err, &oerr) {
				w.set(w.sample())
				continue
			}
			w.log.Warn("link events: netlink receive failed, polling the link state instead", "every", LinkPollInterval, "err", err)
			w.poll()
			return
		}
		for i, m := range msgs {
			lm, ok := m.(*rtnetlink.LinkMessage)
			if !ok || int(lm.Index) != w.ifindex {
				continue
			}
			// RTM_DELLINK carries the last flags; the interface is gone
			// all the same.
			w.set(linkUpFlags(lm.Flags) && raw[i].Header.Type != unix.RTM_DELLINK)
		}
	}
}

// routinePoll samples the link state every LinkPollInterval until Stop:
// the fallback when there is no netlink subscription.
func (w *LinkWatcher) routinePoll() {
	defer w.done.Done()
	w.log.Debug("link watcher started", "source", "poll")
	defer w.log.Debug("link watcher stopped")
	w.poll()
}

func (w *LinkWatcher) poll() {
	t := time.NewTicker(LinkPollInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.set(w.sample())
	}
}
