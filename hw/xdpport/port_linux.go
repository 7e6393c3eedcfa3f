package xdpport

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/hw/xsk"
	"golang.org/x/sys/unix"
)

// BatchSize is the most frames one receive hands to the handler, and
// the most one TX ring submission takes: wireguard-go's
// conn.IdealBatchSize, as hw.TxBatchSize.
const BatchSize = hw.TxBatchSize

// ringSize is each socket's ring entries. xsk.DefaultRingSize (2048)
// absorbs a burst while a batch is processed, like the TPACKET_V3 ring.
const ringSize = xsk.DefaultRingSize

// maxQueues bounds the sockets of one port: each costs a fill and a TX
// ring's worth of Umem frames (8 MiB at 2 KiB frames).
const maxQueues = 64

// busyWait is how long Open retries a queue the kernel reports bound
// (EBUSY). Closing an XSK releases its queue from a workqueue after an
// RCU grace period (xp_release_deferred), measured at well under a
// second; a queue still busy after 2 s is held by a live socket.
const busyWait = 2 * time.Second

// Drop reasons beyond hw's, the extra keys of Stats().Drops.
const (
	// DropFillEmpty counts frames the kernel had no fill-ring frame for
	// (XDP_STATISTICS rx_fill_ring_empty_descs): the receive loop fell
	// behind refilling.
	DropFillEmpty = "xdp_fill_empty"
	// DropUmemEmpty counts frames WriteFrames dropped because no Umem
	// frame was free to copy them into.
	DropUmemEmpty = "xdp_umem_empty"
	// DropInvalid counts descriptors the kernel refused (rx/tx
	// invalid_descs) or xsk refused on transmit.
	DropInvalid = "xdp_invalid"
)

// Config describes one AF_XDP port.
type Config struct {
	// Name is the kernel interface, e.g. "eth0".
	Name string
	// Queues is how many receive queues get a socket, e.g. 4; 0 means
	// every queue the interface reports (ethtool -l).
	Queues int
	// MTU is the L3 MTU, e.g. 1500; 0 means the interface's own. Frames
	// longer than MTU + hw.MaxL2Overhead are dropped as oversize.
	MTU int
	// ExtraTags is hw.Config.ExtraTags: how many VLAN tags beyond one
	// the port's full-size frames carry (1 for 802.1ad or QinQ); Open
	// raises the kernel MTU for them, recorded and restored as there.
	ExtraTags int
	// Bind asks for zero-copy, copy mode or either (xsk.BindAuto).
	Bind xsk.BindMode
	// Attach asks for the native or generic XDP hook, or either.
	Attach xsk.AttachMode
	// StateDir holds the takeover record of the kernel settings Open
	// changes (hw.TakeOver), e.g. "/var/lib/gvrouter"; "" keeps it in
	// memory only, so a crash leaves them changed.
	StateDir string
	// Pool is the UMEMs the port may share with other ports, so that
	// frames between them leave without a copy; nil gives the port a
	// UMEM of its own.
	Pool *Pool
}

// Port is an interface opened with AF_XDP. Its methods are safe for
// concurrent use; one Run at a time.
type Port struct {
	name    string
	ifindex int
	hwaddr  net.HardwareAddr
	mtu     int
	maxLen  int
	log     *slog.Logger
	ctl     int // AF_INET datagram socket in the port's namespace, for flags
	// kernel records and undoes the kernel settings Open changed (RX
	// VLAN stripping, addresses, IPv6); nil once restored.
	kernel *hw.Takeover
	// groups holds the multicast memberships and promiscuous mode
	// (multicast_linux.go); set by Open, closed by release.
	groups *hw.Memberships

	umem *xsk.Umem
	// pool and share are the Pool and the UMEM of it the port is on;
	// nil for a UMEM of its own.
	pool  *Pool
	share *sharedUmem
	prog  *xsk.Program
	socks []*xsk.Socket
	tx    []txSlot
	txRR  atomic.Uint32
	mode  xsk.Mode
	hook  xsk.XDPMode

	rxPackets, rxBytes  atomic.Uint64
	txPackets, txBytes  atomic.Uint64
	oversize, malformed atomic.Uint64
	txRingFull, noUmem  atomic.Uint64
	txInvalid           atomic.Uint64
	txZeroCopy          atomic.Uint64

	linkUp      atomic.Bool
	linkHandler atomic.Pointer[func(up bool)]
	stopLink    chan struct{}
	linkDone    sync.WaitGroup

	// mu protects running and released, and orders Close against Run
	// and Stats. closed is set once, under mu; the queue loops poll it.
	mu       sync.Mutex
	closed   atomic.Bool
	running  bool
	released bool
	runWG    sync.WaitGroup
}

// txSlot is one socket's transmit side and the scratch WriteFrames uses
// on it; mu protects frames.
type txSlot struct {
	mu     sync.Mutex
	sock   *xsk.Socket
	frames [BatchSize][]byte
}

// Open opens cfg.Name in the calling thread's network namespace: one
// Umem, one socket per queue, and the XDP program attached through a BPF
// link, so it is removed when the process ends, even by SIGKILL. A nil
// log discards messages. Errors wrap xsk.ErrPermission or
// xsk.ErrUnsupported when the caller should fall back to AF_PACKET.
func Open(cfg Config, log *slog.Logger) (_ *Port, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" || len(cfg.Name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("xdpport: bad interface name %q", cfg.Name)
	}
	// Sockets, the program's link and the ioctls all act in the calling
	// thread's namespace.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ifi, err := net.InterfaceByName(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("xdpport %s: %w: %w", cfg.Name, hw.ErrNotFound, err)
	}
	if len(ifi.HardwareAddr) != 6 || ifi.Flags&net.FlagLoopback != 0 {
		return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, hw.ErrNotEthernet)
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, hw.ErrDown)
	}
	p := &Port{name: cfg.Name, ifindex: ifi.Index, hwaddr: ifi.HardwareAddr, ctl: -1,
		log: log.With("port", cfg.Name, "driver", "af_xdp"), stopLink: make(chan struct{})}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	if p.ctl, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("xdpport %s: control socket: %w", cfg.Name, err)
	}
	// Tags must stay in the frame: AF_XDP has no field for a tag the
	// driver stripped. Recorded before it changes (hw/takeover).
	// The kernel is silenced as on hw.Port, for what XDP does not cover
	// (doc.go, "Kernel settings").
	// The kernel MTU is raised for extra tags (and the port's MTU is the
	// one from before a crashed run raised it).
	tc := hw.TakeoverConfig{Name: cfg.Name, StateDir: cfg.StateDir, RxVLANOff: true, Silence: true, MTU: cfg.MTU, ExtraTags: cfg.ExtraTags}
	if p.kernel, err = hw.TakeOver(tc, p.log); err != nil {
		if errors.Is(err, unix.EPERM) {
			// No CAP_NET_ADMIN: AF_PACKET will not get far either,
			// but the caller decides.
			return nil, fmt.Errorf("xdpport %s: %w: %w", cfg.Name, xsk.ErrPermission, err)
		}
		return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, err)
	}
	p.mtu = p.kernel.MTU()
	p.maxLen = p.mtu + hw.MaxL2Overhead
	if p.groups, err = hw.OpenMemberships(cfg.Name); err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("xdpport %s: %w: %w", cfg.Name, xsk.ErrPermission, err)
		}
		return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, err)
	}
	queues := cfg.Queues
	if queues == 0 {
		queues = rxQueues(p.ctl, cfg.Name)
	}
	if queues < 1 || queues > maxQueues {
		return nil, fmt.Errorf("xdpport %s: %d queues, want 1 to %d", cfg.Name, queues, maxQueues)
	}
	frameSize := xsk.DefaultFrameSize
	if p.maxLen > frameSize-unix.XDP_PACKET_HEADROOM {
		frameSize = 4096
	}
	if p.maxLen > frameSize-unix.XDP_PACKET_HEADROOM {
		return nil, fmt.Errorf("xdpport %s: %w: MTU %d needs multi-buffer frames", cfg.Name, xsk.ErrUnsupported, p.mtu)
	}
	if err := p.openSockets(cfg, queues, frameSize); err != nil {
		return nil, err
	}
	p.mode = p.socks[0].Mode()
	p.tx = make([]txSlot, queues)
	for i := range p.tx {
		p.tx[i].sock = p.socks[i]
	}
	// Frames of a queue with no socket are dropped, not passed: once the
	// port is the router's the kernel's stack must not answer on it.
	if p.prog, err = xsk.NewProgram(xsk.ProgramConfig{Queues: queues, Fallback: xsk.ActionDrop}); err != nil {
		return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, err)
	}
	for _, s := range p.socks {
		if err := p.prog.Register(s); err != nil {
			return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, err)
		}
	}
	if p.hook, err = p.prog.Attach(p.ifindex, cfg.Attach); err != nil {
		return nil, fmt.Errorf("xdpport %s: %w", cfg.Name, err)
	}
	for _, s := range p.socks {
		s.Refill()
	}
	p.linkUp.Store(p.sampleLink())
	p.linkDone.Add(1)
	go p.routineLink()
	p.log.Info("af_xdp port open", "ifindex", p.ifindex, "queues", queues, "mode", p.Mode(), "mtu", p.mtu, "umem_frames", p.umem.Frames())
	return p, nil
}

// ethtoolChannels is struct ethtool_channels (linux/ethtool.h).
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

// rxQueues returns the interface's receive queues as ETHTOOL_GCHANNELS
// reports them: the larger of combined and rx-only channels (ixgbe
// reports combined only, veth rx = combined = 1). A driver without the
// call has one queue.
func rxQueues(ctl int, name string) int {
	ch := ethtoolChannels{cmd: unix.ETHTOOL_GCHANNELS}
	var ifr [unix.IFNAMSIZ + 24]byte
	copy(ifr[:], name)
	*(*uintptr)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = uintptr(unsafe.Pointer(&ch))
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(ctl), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr[0])))
	runtime.KeepAlive(&ch)
	if e != 0 {
		return 1
	}
	return max(1, int(ch.rxCount), int(ch.combinedCount))
}

// Name returns the kernel's interface name.
func (p *Port) Name() string { return p.name }

// Ifindex returns the kernel's interface index.
func (p *Port) Ifindex() int { return p.ifindex }

// HardwareAddr returns the interface's MAC.
func (p *Port) HardwareAddr() net.HardwareAddr { return p.hwaddr }

// MTU returns the port's L3 MTU.
func (p *Port) MTU() int { return p.mtu }

// Queues returns how many queues have a socket.
func (p *Port) Queues() int { return len(p.socks) }

// Driver returns "af_xdp", the backend's name in config and status.
func (p *Port) Driver() string { return "af_xdp" }

// Mode returns the copy mode and XDP hook the port got, e.g. "copy,
// native" on veth or "zero-copy, native" on ixgbe.
func (p *Port) Mode() string { return p.mode.String() + ", " + p.hook.String() }

// ZeroCopy reports whether the driver DMAs into the Umem.
func (p *Port) ZeroCopy() bool { return p.mode == xsk.ModeZeroCopy }

// Umem returns the port's Umem, for frame accounting (Umem.Counts).
func (p *Port) Umem() *xsk.Umem { return p.umem }

// Stats returns the port's counters, with the kernel's per-socket drop
// counts summed: every hw.Drop* reason and the Drop* of this package are
// present. ring is frames the kernel dropped for a full RX ring (or
// another reason of its own), tx_nobufs frames refused for a full TX
// ring.
func (p *Port) Stats() hw.Stats {
	var ring, fill, invalid uint64
	p.mu.Lock()
	if !p.released {
		for _, s := range p.socks {
			st := s.Stats()
			// The kernel counts a frame it had no fill-ring frame for
			// in rx_dropped as well as in rx_fill_ring_empty_descs
			// (xp_alloc, __xsk_rcv): count it once, as fill empty.
			ring += st.RxRingFull + st.RxDropped - min(st.RxDropped, st.RxFillEmpty)
			fill += st.RxFillEmpty
			invalid += st.RxInvalid + st.TxInvalid + st.TxDropped
		}
	}
	p.mu.Unlock()
	txPackets, zc := p.txPackets.Load(), p.txZeroCopy.Load()
	return hw.Stats{
		RxPackets:  p.rxPackets.Load(),
		RxBytes:    p.rxBytes.Load(),
		TxPackets:  txPackets,
		TxBytes:    p.txBytes.Load(),
		TxZeroCopy: zc,
		TxCopied:   txPackets - min(zc, txPackets),
		Drops: map[string]uint64{
			hw.DropTruncated: 0,
			hw.DropOversize:  p.oversize.Load(),
			hw.DropMalformed: p.malformed.Load(),
			hw.DropRing:      ring,
			hw.DropTxError:   0,
			hw.DropTxNoBufs:  p.txRingFull.Load(),
			DropFillEmpty:    fill,
			DropUmemEmpty:    p.noUmem.Load(),
			DropInvalid:      invalid + p.txInvalid.Load(),
		},
	}
}

// Close detaches the program, ends Run and closes the sockets and the
// Umem. It is safe to call twice.
func (p *Port) Close() error {
	p.mu.Lock()
	if p.closed.Swap(true) {
		p.mu.Unlock()
		return nil
	}
	close(p.stopLink)
	for _, s := range p.socks {
		s.Wake()
	}
	p.mu.Unlock()
	// The queue loops see closed and return; only then may the sockets
	// go (xsk.Socket.Close must not race Receive).
	p.runWG.Wait()
	p.linkDone.Wait()
	for i := range p.tx {
		// Let a WriteFrames in progress finish.
		p.tx[i].mu.Lock()
		defer p.tx[i].mu.Unlock()
	}
	p.mu.Lock()
	err := p.release()
	p.mu.Unlock()
	p.log.Info("af_xdp port closed")
	return err
}

// release frees what Open made, in reverse order.
func (p *Port) release() error {
	p.released = true
	var errs []error
	if p.prog != nil {
		errs = append(errs, p.prog.Close())
	}
	if p.share != nil {
		errs = append(errs, p.pool.leave(p))
	} else {
		for _, s := range p.socks {
			errs = append(errs, s.Close())
		}
		if p.umem != nil {
			errs = append(errs, p.umem.Close())
		}
	}
	if p.groups != nil {
		errs = append(errs, p.groups.Close())
	}
	if p.kernel != nil {
		errs = append(errs, p.kernel.Restore())
		p.kernel = nil
	}
	if p.ctl >= 0 {
		unix.Close(p.ctl)
		p.ctl = -1
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("xdpport %s: close: %w", p.name, err)
	}
	return nil
}
