package hw

import (
	"errors"
	"os"
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
func (p *Port) LinkUp() bool { return p.linkUp.Load() }

// SetLinkHandler sets f to be called, from the port's link goroutine, each
// time the link goes up or down. A nil f removes the handler.
func (p *Port) SetLinkHandler(f func(up bool)) {
	if f == nil {
		p.linkHandler.Store(nil)
		return
	}
	p.linkHandler.Store(&f)
}

// setLink records the link state and calls the handler if it changed.
// Only the link goroutine calls it.
func (p *Port) setLink(up bool) {
	if p.linkUp.Swap(up) == up {
		return
	}
	p.log.Info("link changed", "up", up)
	if f := p.linkHandler.Load(); f != nil {
		(*f)(up)
	}
}

// sampleLink reads the flags and records the link state.
func (p *Port) sampleLink() {
	flags, err := p.flags()
	p.setLink(err == nil && linkUpFlags(flags))
}

// dialLinkEvents subscribes to RTNLGRP_LINK in the calling thread's
// network namespace (Open's, which is the port's). Tests set it to make
// the subscription fail.
var dialLinkEvents = func() (*rtnetlink.Conn, error) {
	return rtnetlink.Dial(&netlink.Config{Groups: unix.RTMGRP_LINK})
}

// startLink starts the link goroutine: on link events from an rtnetlink
// subscription, so that a carrier change reaches the handler (the stack,
// the fast path, the status page) within milliseconds; or, if the
// subscription fails (no netlink in a sandbox, a seccomp filter), by
// sampling the flags every LinkPollInterval, with the reason logged. It
// runs on Open's thread, in the port's namespace.
func (p *Port) startLink() {
	c, err := dialLinkEvents()
	if err != nil {
		p.log.Warn("link events: netlink subscription failed, polling the link state instead", "every", LinkPollInterval, "err", err)
		p.linkDone.Add(1)
		go p.routinePollLink()
		return
	}
	p.linkConn = c
	// A change between Open's first sample and the subscription has no
	// event of ours: sample once more now that events are queued.
	p.sampleLink()
	p.linkDone.Add(1)
	go p.routineLinkEvents(c)
}

// stopLinkRoutine stops the link goroutine and waits for it. Only Close
// calls it.
func (p *Port) stopLinkRoutine() {
	close(p.stopLink)
	if p.linkConn != nil {
		p.linkConn.Close() // wakes Receive
	}
	p.linkDone.Wait()
}

// routineLinkEvents follows RTM_NEWLINK/RTM_DELLINK messages about the
// port's interface until Close. The socket lives in the port's namespace,
// so this goroutine needs no namespace switch. If the kernel dropped
// events (ENOBUFS: the socket's buffer overflowed) the flags are sampled
// again; if the socket fails otherwise, the goroutine falls back to
// polling.
func (p *Port) routineLinkEvents(c *rtnetlink.Conn) {
	defer p.linkDone.Done()
	p.log.Debug("link watcher started", "source", "netlink")
	defer p.log.Debug("link watcher stopped")
	for {
		msgs, raw, err := c.Receive()
		select {
		case <-p.stopLink:
			return
		default:
		}
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				p.sampleLink()
				continue
			}
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// A message the library could not decode also lands here
			// (Receive returns no messages then): the flags tell the
			// truth, and the next event may decode.
			var oerr *netlink.OpError
			if !errors.As(err, &oerr) {
				p.sampleLink()
				continue
			}
			p.log.Warn("link events: netlink receive failed, polling the link state instead", "every", LinkPollInterval, "err", err)
			p.pollLink()
			return
		}
		for i, m := range msgs {
			lm, ok := m.(*rtnetlink.LinkMessage)
			if !ok || int(lm.Index) != p.ifidx {
				continue
			}
			// RTM_DELLINK carries the last flags; the interface is gone
			// all the same.
			p.setLink(linkUpFlags(lm.Flags) && raw[i].Header.Type != unix.RTM_DELLINK)
		}
	}
}

// routinePollLink samples the link state every LinkPollInterval until
// Close: the fallback when there is no netlink subscription.
func (p *Port) routinePollLink() {
	defer p.linkDone.Done()
	p.log.Debug("link watcher started", "source", "poll")
	defer p.log.Debug("link watcher stopped")
	p.pollLink()
}

func (p *Port) pollLink() {
	t := time.NewTicker(LinkPollInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stopLink:
			return
		case <-t.C:
		}
		p.sampleLink()
	}
}
