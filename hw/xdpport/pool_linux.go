package xdpport

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/hw/xsk"
	"golang.org/x/sys/unix"
)

// framesPerSocket is what a UMEM holds for each socket on it: its fill
// ring and TX ring full at once, plus the receive batch its queue loop
// holds. With every socket's share in one UMEM no socket can starve
// another's fill ring, however the frames circulate between them.
const framesPerSocket = 2*ringSize + BatchSize

// umemHeadroom is the UMEM headroom (xsk.UmemConfig.Headroom): 0. The
// kernel puts every received packet XDP_PACKET_HEADROOM (256) bytes into
// its frame after the headroom, and neither it nor the port's program
// writes those bytes (no XDP metadata, no TX metadata), so the stack
// already has 256 bytes to push headers into before a frame it forwards
// in place: two VLAN tags and a SecTAG take 24. Headroom of our own
// would come off the packet room behind it, which a 2 KiB frame needs
// for a full-size frame with tags and a MACsec ICV (1792 bytes left
// after the 256; 1522 + 16 used).
const umemHeadroom = 0

// maxPushed is the most the stack pushes in front of a frame it forwards
// in place: a SecTAG with SCI (16) and two VLAN tags (8).
const maxPushed = 16 + 2*4

// The headroom the kernel leaves must cover maxPushed.
var _ [unix.XDP_PACKET_HEADROOM + umemHeadroom - maxPushed]struct{}

// Pool lets af_xdp ports share a UMEM (XDP_SHARED_UMEM, across
// interfaces since Linux 5.10), so that a frame received on one port
// leaves through another's TX ring from the buffer it arrived in, with no
// copy (Port.WriteFrames). Ports join it through Config.Pool.
//
// A UMEM is made when a port finds none to join, sized for the
// PoolConfig.Sockets sockets no other UMEM of the pool covers (at least
// the opening port's queues), and unmapped when its last port closes. A port joins a UMEM that has room
// for its queues and the same frame size; the kernel binds a socket that
// shares a UMEM in the UMEM's copy mode, so a zero-copy UMEM takes only
// interfaces that can do zero-copy and a copy-mode one only those that
// are content with copy mode (Config.Bind). Ports on different UMEMs
// still forward to each other, by copy.
//
// Pool is safe for concurrent use.
type Pool struct {
	sockets int

	// mu protects umems and nextID, and orders joins and leaves.
	mu     sync.Mutex
	umems  []*sharedUmem
	nextID int
}

// PoolConfig sizes a Pool's UMEMs.
type PoolConfig struct {
	// Sockets is how many sockets (queues, summed over the ports that
	// are to share) a UMEM is made for, e.g. 2 for two single-queue
	// ports; 0 means the first port's queues only. Each takes
	// framesPerSocket frames: 8.25 MiB at 2 KiB frames.
	Sockets int
}

// NewPool returns a Pool with no UMEM yet.
func NewPool(cfg PoolConfig) *Pool { return &Pool{sockets: max(cfg.Sockets, 0)} }

// sharedUmem is one UMEM of a Pool and the ports on it. Its fields other
// than umem, id, frameSize and slots are protected by the Pool's mu.
type sharedUmem struct {
	id        int
	umem      *xsk.Umem
	frameSize int
	// mode is the copy mode of its sockets (the first one's).
	mode xsk.Mode
	// slots is the sockets it was sized for, used those on it now.
	slots, used int
	// ports names the ports on it, in the order they joined.
	ports []string
}

// UmemInfo says which UMEM a port uses and who else does.
type UmemInfo struct {
	// ID is the pool's number for the UMEM, e.g. 1; 0 for a port's own
	// UMEM (no Pool).
	ID int
	// Ports are the ports on it, this one included, e.g. ["lan0",
	// "wan0"]: frames between them are sent without a copy.
	Ports []string
	// Frames and FrameSize are its size, e.g. 8448 frames of 2048 bytes.
	Frames, FrameSize int
	// Counts says where its frames are.
	Counts xsk.Counts
}

// Shared reports whether another port uses the UMEM too.
func (i UmemInfo) Shared() bool { return len(i.Ports) > 1 }

// UmemInfo returns the port's UMEM and the ports sharing it.
func (p *Port) UmemInfo() UmemInfo {
	info := UmemInfo{Ports: []string{p.name}, Frames: p.umem.Frames(), FrameSize: p.umem.FrameSize(), Counts: p.umem.Counts()}
	if p.share != nil {
		p.pool.mu.Lock()
		info.ID = p.share.id
		info.Ports = slices.Clone(p.share.ports)
		p.pool.mu.Unlock()
	}
	return info
}

// openSockets makes the port's Umem and one socket per queue on it:
// on a UMEM of cfg.Pool when it has one that fits, else on a Umem of the
// port's own (one the Pool keeps for later ports, if cfg.Pool is set).
func (p *Port) openSockets(cfg Config, queues, frameSize int) error {
	if cfg.Pool == nil {
		u, err := xsk.NewUmem(xsk.UmemConfig{FrameSize: frameSize, Frames: queues * framesPerSocket, Headroom: umemHeadroom})
		if err != nil {
			return fmt.Errorf("xdpport %s: %w", cfg.Name, err)
		}
		p.umem = u
		p.socks, err = p.newSockets(u, queues, cfg.Bind)
		return err
	}
	return cfg.Pool.join(p, queues, frameSize, cfg.Bind)
}

// join puts p's sockets on a UMEM of the pool: the first that has room
// and binds them, zero-copy ones first, else a new one.
func (pl *Pool) join(p *Port, queues, frameSize int, bind xsk.BindMode) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	candidates := make([]*sharedUmem, 0, len(pl.umems))
	for _, su := range pl.umems {
		if su.frameSize == frameSize && su.slots-su.used >= queues {
			candidates = append(candidates, su)
		}
	}
	// Zero-copy UMEMs first: a copy-mode one would take a zero-copy
	// capable interface into copy mode.
	slices.SortStableFunc(candidates, func(a, b *sharedUmem) int {
		return boolInt(b.mode == xsk.ModeZeroCopy) - boolInt(a.mode == xsk.ModeZeroCopy)
	})
	probed, canZC := false, false
	for _, su := range candidates {
		switch {
		case su.mode == xsk.ModeZeroCopy && bind == xsk.BindCopy,
			su.mode == xsk.ModeCopy && bind == xsk.BindZeroCopy:
			continue
		case su.mode == xsk.ModeCopy && bind == xsk.BindAuto:
			// Joining would settle copy mode: only if the interface
			// cannot do better.
			if !probed {
				var err error
				if canZC, err = p.probeZeroCopy(frameSize); err != nil {
					return err
				}
				probed = true
			}
			if canZC {
				continue
			}
		}
		socks, err := p.newSockets(su.umem, queues, xsk.BindAuto)
		if err != nil {
			if modeRefused(err) {
				// The interface cannot bind in this UMEM's mode.
				continue
			}
			return err
		}
		p.umem, p.socks, p.pool, p.share = su.umem, socks, pl, su
		su.used += queues
		su.ports = append(su.ports, p.name)
		p.log.Info("af_xdp port joins a shared umem", "umem", su.id, "with", su.ports[:len(su.ports)-1], "mode", su.mode)
		return nil
	}
	// A new UMEM is sized for the sockets the pool was told of that no
	// UMEM covers yet (all of them for the first), at least p's.
	left := pl.sockets
	for _, su := range pl.umems {
		left -= su.slots
	}
	slots := max(left, queues)
	u, err := xsk.NewUmem(xsk.UmemConfig{FrameSize: frameSize, Frames: slots * framesPerSocket, Headroom: umemHeadroom})
	if err != nil {
		return fmt.Errorf("xdpport %s: %w", p.name, err)
	}
	if probed && canZC {
		bind = xsk.BindZeroCopy
	}
	socks, err := p.newSockets(u, queues, bind)
	if err != nil {
		u.Close()
		return err
	}
	pl.nextID++
	su := &sharedUmem{id: pl.nextID, umem: u, frameSize: frameSize, mode: socks[0].Mode(), slots: slots, used: queues, ports: []string{p.name}}
	pl.umems = append(pl.umems, su)
	p.umem, p.socks, p.pool, p.share = u, socks, pl, su
	p.log.Info("af_xdp port opens a shared umem", "umem", su.id, "sockets", slots, "frames", u.Frames(), "mode", su.mode)
	return nil
}

// leave closes p's sockets, which hands every frame on their rings back
// to the UMEM (xsk.Socket.Close), and unmaps the UMEM when p was the last
// port on it. Both under the pool's lock, so that no port joins a UMEM
// whose sockets are all gone (it would register it anew).
func (pl *Pool) leave(p *Port) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var errs []error
	for _, s := range p.socks {
		errs = append(errs, s.Close())
	}
	su := p.share
	su.used -= len(p.socks)
	if i := slices.Index(su.ports, p.name); i >= 0 {
		su.ports = slices.Delete(su.ports, i, i+1)
	}
	if len(su.ports) == 0 {
		pl.umems = slices.DeleteFunc(pl.umems, func(o *sharedUmem) bool { return o == su })
		errs = append(errs, su.umem.Close())
	}
	return errors.Join(errs...)
}

// newSockets makes one socket per queue of p's interface on u; on error
// none is left.
func (p *Port) newSockets(u *xsk.Umem, queues int, bind xsk.BindMode) (_ []*xsk.Socket, err error) {
	socks := make([]*xsk.Socket, 0, queues)
	defer func() {
		if err != nil {
			for _, s := range socks {
				s.Close()
			}
		}
	}()
	for q := range queues {
		s, err := newSocket(u, xsk.SocketConfig{Ifindex: p.ifindex, Queue: q, Bind: bind})
		if err != nil && q == 0 && errors.Is(err, unix.ENOBUFS) {
			// xdp_umem_account_pages: without CAP_IPC_LOCK the UMEM is
			// charged to RLIMIT_MEMLOCK.
			return nil, fmt.Errorf("xdpport %s: %w (the %.1f MiB UMEM exceeds RLIMIT_MEMLOCK: raise it, e.g. LimitMEMLOCK=infinity, or grant CAP_IPC_LOCK)", p.name, err, float64(u.Frames()*u.FrameSize())/(1<<20))
		}
		if err != nil {
			return nil, fmt.Errorf("xdpport %s: %w", p.name, err)
		}
		socks = append(socks, s)
	}
	return socks, nil
}

// newSocket is u.NewSocket(cfg), waiting for a busy queue: a queue whose
// last socket just died (a router killed and restarted, a port closed
// and opened again, a zero-copy probe) stays bound until the kernel's
// deferred release runs.
func newSocket(u *xsk.Umem, cfg xsk.SocketConfig) (*xsk.Socket, error) {
	s, err := u.NewSocket(cfg)
	for end := time.Now().Add(busyWait); err != nil && errors.Is(err, unix.EBUSY) && time.Now().Before(end); {
		time.Sleep(busyWait / 40)
		s, err = u.NewSocket(cfg)
	}
	return s, err
}

// probeZeroCopy reports whether p's interface binds a socket in
// zero-copy mode, on a UMEM of two frames made for the question. A
// driver without zero-copy refuses at bind (veth: no ndo_xsk_wakeup),
// which leaves its queue free at once; one that binds leaves the queue
// to the kernel's deferred release, which newSockets waits for.
func (p *Port) probeZeroCopy(frameSize int) (bool, error) {
	u, err := xsk.NewUmem(xsk.UmemConfig{FrameSize: frameSize, Frames: 2})
	if err != nil {
		return false, fmt.Errorf("xdpport %s: zero-copy probe: %w", p.name, err)
	}
	defer u.Close()
	const probeRing = 64
	s, err := newSocket(u, xsk.SocketConfig{Ifindex: p.ifindex, Queue: 0, Bind: xsk.BindZeroCopy,
		RxSize: probeRing, TxSize: probeRing, FillSize: probeRing, CompletionSize: probeRing})
	if err != nil {
		if modeRefused(err) {
			return false, nil
		}
		return false, fmt.Errorf("xdpport %s: zero-copy probe: %w", p.name, err)
	}
	s.Close()
	return true, nil
}

// modeRefused reports whether a bind failed because the interface
// cannot bind in the copy mode asked for (or a shared UMEM's).
func modeRefused(err error) bool {
	return errors.Is(err, xsk.ErrUnsupported) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPROTONOSUPPORT)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// QueueCount returns how many sockets Open would make on the interface
// name in the calling thread's namespace (its receive queues, ethtool
// -l), for sizing a Pool before the ports open; 1 when it cannot tell.
func QueueCount(name string) int {
	ctl, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 1
	}
	defer unix.Close(ctl)
	return min(rxQueues(ctl, name), maxQueues)
}
