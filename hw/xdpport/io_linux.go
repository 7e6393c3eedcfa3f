package xdpport

import (
	"context"
	"fmt"
	"time"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"golang.org/x/sys/unix"
)

// idleWait is how long a queue loop sleeps in the poller with nothing
// received before it refills the fill ring and checks for Close again. A
// frame wakes it at once, so this only bounds how stale an idle
// queue's fill ring can get.
const idleWait = 100 * time.Millisecond

// Run receives on every queue, one goroutine each, and hands batches of
// frames to h until ctx ends (it returns nil) or the port is closed (it
// returns hw.ErrClosed). Frames are views of Umem frames, valid until h
// returns; they carry no VLAN or checksum metadata (AF_XDP has none):
// a tag the driver left in-band stays in Data, and checksums are the
// stack's to check.
func (p *Port) Run(ctx context.Context, h hw.BatchHandler) error {
	return p.run(ctx, h, nil)
}

// RunBacklog is Run with b.HandleRing as the handler, and b served by
// each queue loop when its RX ring has nothing ready (hw.Backlog).
func (p *Port) RunBacklog(ctx context.Context, b hw.Backlog) error {
	return p.run(ctx, nil, b)
}

var _ hw.BacklogRunner = (*Port)(nil)

func (p *Port) run(ctx context.Context, h hw.BatchHandler, b hw.Backlog) error {
	p.mu.Lock()
	switch {
	case p.closed.Load():
		p.mu.Unlock()
		return hw.ErrClosed
	case p.running:
		p.mu.Unlock()
		return hw.ErrRunning
	}
	p.running = true
	p.runWG.Add(len(p.socks))
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()
	stop := hw.AfterFuncWait(ctx, func() {
		for _, s := range p.socks {
			s.Wake()
		}
	})
	defer stop()
	for _, s := range p.socks {
		go p.routineReceive(ctx, s, h, b)
	}
	p.runWG.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return hw.ErrClosed
}

// receiver is one queue loop's scratch, made once per Run.
type receiver struct {
	descs  [BatchSize]xsk.Desc
	frames [BatchSize]hw.Frame
}

// routineReceive is the queue's receiver: the only goroutine that
// touches its socket's RX and fill rings. It ends when ctx does or the
// port closes; Run waits for it. With a Backlog (b not nil, h unused)
// it hands batches to b.HandleRing and serves b whenever the RX ring has
// nothing ready, or after hw.BacklogReadBlocks full batches in a row.
func (p *Port) routineReceive(ctx context.Context, s *xsk.Socket, h hw.BatchHandler, b hw.Backlog) {
	defer p.runWG.Done()
	p.log.Debug("receiver started", "queue", s.Queue())
	defer p.log.Debug("receiver stopped", "queue", s.Queue())
	r := &receiver{}
	u := p.umem
	q := s.Queue()
	readRun := 0
	for ctx.Err() == nil && !p.closed.Load() {
		// Per batch: frames the kernel has sent from this queue's TX
		// ring go back to the free list (frames of any port, with a
		// shared UMEM), then as many as the fill ring has room for go
		// onto it.
		s.Complete()
		s.Refill()
		n := s.Receive(r.descs[:])
		if n == 0 {
			if b != nil {
				readRun = 0
				if b.ServeBacklog(q) {
					continue
				}
			}
			s.Wait(idleWait)
			continue
		}
		// A full batch: the RX ring likely has more behind it.
		more := n == len(r.descs)
		kept := 0
		var bytes uint64
		var oversize, malformed uint64
		for _, d := range r.descs[:n] {
			switch {
			case int(d.Len) > p.maxLen:
				oversize++
				continue
			case d.Len < hw.EthernetHeaderLen:
				malformed++
				continue
			}
			r.frames[kept] = hw.Frame{Data: u.Data(d), WireLen: int(d.Len)}
			bytes += uint64(d.Len)
			kept++
		}
		if kept > 0 {
			p.rxPackets.Add(uint64(kept))
			p.rxBytes.Add(bytes)
			if b != nil {
				b.HandleRing(q, r.frames[:kept], more)
			} else {
				h(q, r.frames[:kept])
			}
			clear(r.frames[:kept]) // no view of a released frame outlives the batch
		}
		// Frames the handler forwarded without a copy (WriteFrames lent
		// them to a TX ring) stay on that ring; the rest are free.
		if oversize != 0 {
			p.oversize.Add(oversize)
		}
		if malformed != 0 {
			p.malformed.Add(malformed)
		}
		u.Release(r.descs[:n])
		if b != nil && more {
			if readRun++; readRun >= hw.BacklogReadBlocks {
				readRun = 0
				b.ServeBacklog(q)
			}
		}
	}
}

// LinkUp reports whether the link was up (administratively up with
// carrier) at the last sample, at most hw.LinkPollInterval ago.
func (p *Port) LinkUp() bool { return p.linkUp.Load() }

// SetLinkHandler sets f to be called, from the port's link goroutine,
// each time the link goes up or down. A nil f removes it.
func (p *Port) SetLinkHandler(f func(up bool)) {
	if f == nil {
		p.linkHandler.Store(nil)
		return
	}
	p.linkHandler.Store(&f)
}

func (p *Port) sampleLink() bool {
	ifr, err := unix.NewIfreq(p.name)
	if err != nil || unix.IoctlIfreq(p.ctl, unix.SIOCGIFFLAGS, ifr) != nil {
		return false
	}
	f := ifr.Uint16()
	return f&unix.IFF_UP != 0 && f&unix.IFF_RUNNING != 0
}

// routineLink samples the link every hw.LinkPollInterval until Close.
// The control socket was made in the port's namespace, so this
// goroutine needs no namespace switch.
func (p *Port) routineLink() {
	defer p.linkDone.Done()
	p.log.Debug("link watcher started")
	defer p.log.Debug("link watcher stopped")
	tick := time.NewTicker(hw.LinkPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.stopLink:
			return
		case <-tick.C:
		}
		up := p.sampleLink()
		if p.linkUp.Swap(up) == up {
			continue
		}
		p.log.Info("link changed", "up", up)
		if f := p.linkHandler.Load(); f != nil {
			(*f)(up)
		}
	}
}

// String names the port for messages, e.g. "af_xdp va (copy, native)".
func (p *Port) String() string { return fmt.Sprintf("af_xdp %s (%s)", p.name, p.Mode()) }
