package hw

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Port is one kernel interface opened for the router: one TPACKET_V3
// receive ring per queue and batched transmit. Its methods are safe for
// concurrent use.
type Port struct {
	name   string
	ifidx  int
	hwaddr net.HardwareAddr
	mtu    int
	maxLen int // largest accepted frame: mtu + MaxL2Overhead
	// vnet: the sockets carry virtio-net headers (Config.VnetHdr); fixed
	// once open returns.
	vnet bool
	// blockRingOnly is Config.BlockRingOnly.
	blockRingOnly bool
	log           *slog.Logger

	ns  netns
	ctl int // control socket in the port's namespace (ioctls)
	// kernel records and undoes what Open changed in the kernel (the MTU
	// raised for ExtraTags included); nil with KeepKernel.
	kernel *kernelState

	queues []*rxQueue
	txFD   int // queue 0's socket; sendmmsg on it
	txMode TxMode
	// tx is the TX ring (on txFD) with TxRing or TxRingBypass, else nil
	// (sendmmsg on txFD).
	tx *txRing
	// groups are the multicast MACs SetMulticast joined on queue 0's
	// socket (as strings of 6 bytes); protected by mu.
	groups []string

	stats counters

	// link follows the carrier; set by Open once the port is complete.
	link *LinkWatcher

	// mu protects closed and the sockets and rings against Close: data
	// path users hold it for reading.
	mu     sync.RWMutex
	closed bool
	// running counts Run calls in progress; stopRun wakes them.
	running   sync.WaitGroup
	receiving atomic.Bool // a Run owns the rings
	runMu     sync.Mutex  // protects stopRun and runID
	stopRun   map[int]func()
	runID     int
}

// Open opens the interface cfg.Name in the calling thread's network
// namespace: it checks that the interface exists and is up, makes the
// kernel leave it to the router (unless cfg.KeepKernel) and creates the
// receive rings. Close undoes all of it. A nil log discards messages.
func Open(cfg Config, log *slog.Logger) (*Port, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Everything Open creates must come from one namespace: the calling
	// thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prof, err := LookupProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	nq := cfg.Queues
	if nq == 0 {
		nq = prof.DefaultQueues
	}
	if nq < 1 || nq > 64 {
		return nil, fmt.Errorf("hw: open %s: %d queues, want 1 to 64", cfg.Name, nq)
	}
	if cfg.MTU < 0 {
		return nil, fmt.Errorf("hw: open %s: negative MTU %d", cfg.Name, cfg.MTU)
	}

	if cfg.Name == "" {
		return nil, errors.New("hw: open: no interface name")
	}
	tx := cfg.Tx
	if tx == TxDefault {
		tx = prof.DefaultTx
	}
	if !slices.Contains(TxModes, tx) {
		return nil, fmt.Errorf("hw: open %s: unknown transmit mode %q (want one of %v)", cfg.Name, tx, TxModes)
	}
	vnet := cfg.VnetHdr
	switch vnet {
	case VnetDefault:
	case VnetOn, VnetOff:
	default:
		return nil, fmt.Errorf("hw: open %s: unknown vnet header mode %q (want on or off)", cfg.Name, vnet)
	}
	p := &Port{name: cfg.Name, log: log.With("port", cfg.Name), ctl: -1, txFD: -1, txMode: tx}
	p.vnet = vnet == VnetOn || vnet == VnetDefault && prof.VnetHdr
	p.blockRingOnly = cfg.BlockRingOnly
	p.ns, err = currentNetns()
	if err != nil {
		return nil, fmt.Errorf("hw: open %s: %w", cfg.Name, err)
	}
	if err := p.open(cfg, prof, nq); err != nil {
		p.closeResources()
		return nil, err
	}
	// On Open's thread, in the port's namespace.
	p.link = StartLinkWatcher(p.ifidx, p.sampleLinkUp, p.log)
	p.log.Info("port open", "ifindex", p.ifidx, "mac", p.hwaddr.String(), "mtu", p.mtu, "queues", nq, "tx", p.txMode, "vnet_hdr", p.vnet, "profile", prof.Name, "link", p.link.Up(), "link_events", p.link.Subscribed())
	return p, nil
}

func (p *Port) open(cfg Config, prof Profile, nq int) error {
	var err error
	p.ctl, err = ctlSocket()
	if err != nil {
		return fmt.Errorf("hw: open %s: %w", cfg.Name, err)
	}
	ifr, err := unix.NewIfreq(cfg.Name)
	if err != nil {
		return fmt.Errorf("hw: open %q: bad interface name: %w", cfg.Name, err)
	}
	if err := unix.IoctlIfreq(p.ctl, unix.SIOCGIFINDEX, ifr); err != nil {
		if errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("hw: open %s: %w", cfg.Name, ErrNotFound)
		}
		return fmt.Errorf("hw: open %s: interface index: %w", cfg.Name, err)
	}
	p.ifidx = int(ifr.Uint32())
	flags, err := p.flags()
	if err != nil {
		return fmt.Errorf("hw: open %s: %w", cfg.Name, err)
	}
	if flags&unix.IFF_UP == 0 {
		return fmt.Errorf("hw: open %s: %w (ip link set %s up)", cfg.Name, ErrDown, cfg.Name)
	}
	if err := unix.IoctlIfreq(p.ctl, unix.SIOCGIFHWADDR, ifr); err != nil {
		return fmt.Errorf("hw: open %s: hardware address: %w", cfg.Name, err)
	}
	// ifr_hwaddr is a struct sockaddr: family (the ARPHRD_ type), then
	// the address.
	raw := (*[unix.IFNAMSIZ + 16]byte)(unsafe.Pointer(ifr))
	if typ := binary.NativeEndian.Uint16(raw[unix.IFNAMSIZ:]); typ != unix.ARPHRD_ETHER {
		return fmt.Errorf("hw: open %s: %w (link type %d)", cfg.Name, ErrNotEthernet, typ)
	}
	p.hwaddr = append(net.HardwareAddr(nil), raw[unix.IFNAMSIZ+2:unix.IFNAMSIZ+8]...)
	ifr, _ = unix.NewIfreq(cfg.Name)
	if err := unix.IoctlIfreq(p.ctl, unix.SIOCGIFMTU, ifr); err != nil {
		return fmt.Errorf("hw: open %s: mtu: %w", cfg.Name, err)
	}
	kernelMTU := int(ifr.Uint32())
	devMTU := kernelMTU // what the kernel checks sends against
	if !cfg.KeepKernel {
		p.kernel, err = newKernelState(cfg.Name, p.ifidx, p.hwaddr, cfg.StateDir, p.log)
		if err != nil {
			return err
		}
		if p.kernel.rec.MTU != 0 {
			// A crashed run raised it: the MTU from before is the port's.
			kernelMTU = p.kernel.rec.MTU
		}
	}
	p.mtu = kernelMTU
	if cfg.MTU != 0 {
		p.mtu = cfg.MTU
	}
	p.maxLen = p.mtu + MaxL2Overhead
	// The kernel refuses sends longer than its MTU allows: raise it to
	// the port's MTU (say 1508 for RFC 4638 PPPoE) and the extra tags'
	// room when it is below.
	if want := p.mtu + VLANTagLen*cfg.ExtraTags; (cfg.ExtraTags > 0 || cfg.MTU != 0) && !cfg.KeepKernel && kernelMTU < want {
		if err := p.kernel.recordMTU(kernelMTU); err != nil {
			return err
		}
		if err := setMTU(p.ctl, p.name, want); err != nil {
			return fmt.Errorf("hw: open %s: raise kernel MTU to %d (MTU %d, %d extra VLAN tags): %w", cfg.Name, want, p.mtu, cfg.ExtraTags, err)
		}
		devMTU = want
		p.log.Debug("kernel MTU raised", "from", kernelMTU, "to", want, "extra_tags", cfg.ExtraTags)
	}

	if p.kernel != nil {
		if err := p.ns.do(func() error { return p.kernel.silence(p.ctl) }); err != nil {
			p.kernel = nil // silence undid itself
			return err
		}
	}

	filter, err := outgoingFilter()
	if err != nil {
		return fmt.Errorf("hw: open %s: assemble filter: %w", cfg.Name, err)
	}
	if p.txMode == TxRing || p.txMode == TxRingBypass {
		if p.tx, err = newTxRing(p.maxLen, devMTU, p.txMode == TxRingBypass, p.vnet); err != nil {
			return fmt.Errorf("hw: open %s: %w", cfg.Name, err)
		}
	}
	var fanoutID uint16
	for i := range nq {
		var tx *txRing
		if i == 0 {
			tx = p.tx
		}
		q, err := openQueue(p, i, nq, &fanoutID, filter, tx)
		if errors.Is(err, errNoVnetHdr) && cfg.VnetHdr == VnetDefault && i == 0 {
			// An old kernel: go on without, as before vnet headers.
			p.log.Warn("no virtio-net headers: local senders' TSO/GSO superframes will be oversize drops", "err", err)
			p.vnet = false
			if tx != nil {
				tx.vnet = false
			}
			q, err = openQueue(p, i, nq, &fanoutID, filter, tx)
		}
		if err != nil {
			return fmt.Errorf("hw: open %s: queue %d: %w", cfg.Name, i, err)
		}
		p.queues = append(p.queues, q)
	}
	p.txFD = p.queues[0].fd
	return nil
}

// Name returns the kernel interface name, e.g. "eth0".
func (p *Port) Name() string { return p.name }

// HardwareAddr returns the interface's MAC address.
func (p *Port) HardwareAddr() net.HardwareAddr { return p.hwaddr }

// MTU returns the port's L3 MTU (Config.MTU, or the interface's own).
func (p *Port) MTU() int { return p.mtu }

// TxMode returns the port's transmit path: Config.Tx, or the profile's
// DefaultTx.
func (p *Port) TxMode() TxMode { return p.txMode }

// VnetHdr reports whether the port's sockets carry virtio-net headers
// (Config.VnetHdr): received superframes arrive whole, with Frame.GSO.
func (p *Port) VnetHdr() bool { return p.vnet }

// Queues returns the number of receive queues.
func (p *Port) Queues() int { return len(p.queues) }

// Stats returns a snapshot of the port's counters. It samples the kernel's
// ring drop counters first.
func (p *Port) Stats() Stats {
	p.mu.RLock()
	if !p.closed {
		for _, q := range p.queues {
			q.sampleRingDrops()
		}
	}
	p.mu.RUnlock()
	return p.stats.snapshot()
}

// Close stops Run, undoes the kernel settings Open changed and releases
// the sockets and rings. It returns the errors met while restoring.
func (p *Port) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	p.mu.Unlock()

	p.runMu.Lock()
	for _, stop := range p.stopRun {
		stop()
	}
	p.runMu.Unlock()
	p.running.Wait()
	p.link.Stop()

	err := p.closeResources()
	p.log.Info("port closed")
	return err
}

// closeResources releases everything open created, restoring the kernel's
// settings first.
func (p *Port) closeResources() error {
	var err error
	if p.tx != nil {
		p.tx.close()
		p.tx = nil
	}
	for _, q := range p.queues {
		q.close()
	}
	p.queues = nil
	if p.kernel != nil {
		err = errors.Join(err, p.ns.do(func() error { return p.kernel.restore(p.ctl) }))
		p.kernel = nil
	}
	if p.ctl >= 0 {
		unix.Close(p.ctl)
		p.ctl = -1
	}
	p.ns.close()
	p.ns.fd = -1
	return err
}

// Run receives frames on every queue and hands them to h, one batch per
// ring block, until ctx is done or the port is closed. Each queue runs on
// its own goroutine; h is called concurrently for different queues. Run
// returns nil when ctx ends, ErrClosed when Close stopped it.
func (p *Port) Run(ctx context.Context, h BatchHandler) error {
	return p.run(ctx, h, nil)
}

// RunBacklog is Run with b.HandleRing as the handler, and b served by
// each receive loop when its ring has nothing ready (hw.Backlog).
func (p *Port) RunBacklog(ctx context.Context, b Backlog) error {
	return p.run(ctx, nil, b)
}

var _ BacklogRunner = (*Port)(nil)

func (p *Port) run(ctx context.Context, h BatchHandler, b Backlog) error {
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return ErrClosed
	}
	p.running.Add(1)
	p.mu.RUnlock()
	defer p.running.Done()
	if !p.receiving.CompareAndSwap(false, true) {
		return fmt.Errorf("hw: run %s: %w", p.name, ErrRunning)
	}
	defer p.receiving.Store(false)

	var stopped atomic.Bool
	wake := func() {
		stopped.Store(true)
		p.wakeQueues()
	}
	p.runMu.Lock()
	p.runID++
	id := p.runID
	if p.stopRun == nil {
		p.stopRun = make(map[int]func())
	}
	p.stopRun[id] = wake
	p.runMu.Unlock()
	// Close sets closed before it calls the wakers, so either it saw ours
	// or we see closed here.
	p.mu.RLock()
	if p.closed {
		wake()
	}
	p.mu.RUnlock()
	// Close releases the queues once Run returns: the waker must be done
	// with them by then.
	stop := AfterFuncWait(ctx, wake)
	defer stop()

	errs := make([]error, len(p.queues))
	var wg sync.WaitGroup
	for i, q := range p.queues {
		wg.Go(func() { errs[i] = q.routineReceive(ctx, &stopped, h, b) })
	}
	wg.Wait()

	p.runMu.Lock()
	delete(p.stopRun, id)
	p.runMu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if ctx.Err() == nil {
		return ErrClosed
	}
	return nil
}
