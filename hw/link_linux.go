package hw

import (
	"time"

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

// LinkUp reports whether the link was up (administratively up with
// carrier) at the last sample, at most LinkPollInterval ago.
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

// routineLink samples the link state every LinkPollInterval until Close.
// The control socket lives in the port's namespace, so this goroutine
// needs no namespace switch.
func (p *Port) routineLink() {
	defer p.linkDone.Done()
	p.log.Debug("link watcher started")
	defer p.log.Debug("link watcher stopped")
	t := time.NewTicker(LinkPollInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stopLink:
			return
		case <-t.C:
		}
		flags, err := p.flags()
		up := err == nil && linkUpFlags(flags)
		if p.linkUp.Swap(up) == up {
			continue
		}
		p.log.Info("link changed", "up", up)
		if f := p.linkHandler.Load(); f != nil {
			(*f)(up)
		}
	}
}
