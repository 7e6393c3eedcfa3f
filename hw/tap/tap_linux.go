// Package tap is the router's way into the board's own kernel: a TAP
// interface the router creates and whose frames it reads and writes
// through the TAP's file descriptor, as VPP's host interfaces and DPDK's
// exception path do. Once the router owns the ports the kernel has no
// address on them; on the TAP it has one, and the router forwards to it
// like to any LAN host.
//
// The TAP is not persistent: the kernel deletes it when the last file
// descriptor on it closes, so it goes with the router's process even
// after SIGKILL. AF_PACKET on the kernel's side is not used: it would see
// the kernel's frames as outgoing.
//
// A Tap satisfies what the router needs of a port (hw.FrameWriter and the
// receive loop, link state and counters of hw.Port).
package tap

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gvrouter/gvrouter/hw"
	"golang.org/x/sys/unix"
)

// BatchSize is how many frames Run reads before it hands them over.
const BatchSize = 64

// DefaultMTU is the kernel side's MTU when Config.MTU is 0.
const DefaultMTU = 1500

// Config says what TAP to create.
type Config struct {
	// Name is the kernel's interface name, e.g. "gvr-host" (at most 15
	// bytes).
	Name string
	// MTU of the link, e.g. 1500; 0 = DefaultMTU.
	MTU int
	// Addresses are the router's side of the link, e.g. [10.255.0.1/30]:
	// the kernel's default route of each family goes via the one in the
	// subnet of its first kernel address of that family.
	Addresses []netip.Prefix
	// KernelAddresses are given to the kernel's side, e.g. [10.255.0.2/30].
	KernelAddresses []netip.Prefix
}

// Tap is an open TAP. Its methods are safe for concurrent use; one Run at
// a time.
type Tap struct {
	name    string
	ifindex int
	hwaddr  net.HardwareAddr // the router's side
	mtu     int
	maxLen  int
	log     *slog.Logger

	file *os.File // the TAP's fd, in the Go poller (non-blocking)
	rc   syscall.RawConn
	fd   int
	ctl  int // AF_INET datagram socket for interface ioctls

	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	// drops by hw.Drop* reason: oversize and malformed on receive,
	// tx_nobufs and tx_error on transmit. (A read error ends Run, which
	// returns it; the TAP has no ring to overflow.)
	oversize, malformed, txNoBufs, txError atomic.Uint64

	// link follows the kernel side's state (hw.LinkWatcher: netlink
	// events, or a poll where those fail).
	link *hw.LinkWatcher

	// mu protects closed and fd against Close: writers hold it for
	// reading.
	mu     sync.RWMutex
	closed bool
	runMu  sync.Mutex // one Run at a time
}

// Open creates the TAP cfg.Name in the calling thread's network
// namespace, brings the kernel's side up with cfg.KernelAddresses and a
// default route per family via the router's address, and returns it. An
// existing persistent TAP of that name is taken over and made
// non-persistent, so that it too goes with the process. A nil log
// discards messages.
func Open(cfg Config, log *slog.Logger) (_ *Tap, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Name == "" || len(cfg.Name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tap: bad interface name %q (1..15 bytes)", cfg.Name)
	}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = DefaultMTU
	}
	if mtu < 68 || mtu > 65535-hw.MaxL2Overhead {
		return nil, fmt.Errorf("tap %s: MTU %d out of range", cfg.Name, mtu)
	}
	// The TAP, its ioctls and its netlink requests must all be in one
	// namespace: the calling thread's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := &Tap{name: cfg.Name, mtu: mtu, maxLen: mtu + hw.MaxL2Overhead, log: log.With("port", cfg.Name), fd: -1, ctl: -1}
	defer func() {
		if err != nil {
			t.closeFDs()
		}
	}()
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("tap %s: open /dev/net/tun: %w", cfg.Name, err)
	}
	t.fd = fd
	ifr, err := unix.NewIfreq(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", cfg.Name, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return nil, fmt.Errorf("tap %s: TUNSETIFF: %w (is another interface of that name not a TAP?)", cfg.Name, err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 0); err != nil {
		return nil, fmt.Errorf("tap %s: TUNSETPERSIST 0: %w", cfg.Name, err)
	}
	if t.ctl, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("tap %s: control socket: %w", cfg.Name, err)
	}
	if err := t.setupKernel(cfg); err != nil {
		return nil, err
	}
	t.hwaddr = make(net.HardwareAddr, 6)
	rand.Read(t.hwaddr)
	t.hwaddr[0] = t.hwaddr[0]&^1 | 2 // unicast, locally administered
	// os.NewFile puts a non-blocking fd in the runtime's poller, so Run
	// waits in epoll, not in a thread.
	t.file = os.NewFile(uintptr(fd), "/dev/net/tun:"+cfg.Name)
	if t.rc, err = t.file.SyscallConn(); err != nil {
		return nil, fmt.Errorf("tap %s: %w", cfg.Name, err)
	}
	// On Open's thread, in the TAP's namespace.
	t.link = hw.StartLinkWatcher(t.ifindex, t.sampleLink, t.log.With("what", "host tap"))
	t.log.Info("host tap open", "ifindex", t.ifindex, "mac", t.hwaddr.String(), "mtu", mtu, "kernel_addresses", cfg.KernelAddresses)
	return t, nil
}

// setupKernel sets the kernel side's MTU, brings it up and gives it its
// addresses and default routes.
func (t *Tap) setupKernel(cfg Config) error {
	ifr, _ := unix.NewIfreq(t.name)
	if err := unix.IoctlIfreq(t.ctl, unix.SIOCGIFINDEX, ifr); err != nil {
		return fmt.Errorf("tap %s: interface index: %w", t.name, err)
	}
	t.ifindex = int(ifr.Uint32())
	ifr, _ = unix.NewIfreq(t.name)
	ifr.SetUint32(uint32(t.mtu))
	if err := unix.IoctlIfreq(t.ctl, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("tap %s: set MTU %d: %w", t.name, t.mtu, err)
	}
	ifr, _ = unix.NewIfreq(t.name)
	if err := unix.IoctlIfreq(t.ctl, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tap %s: flags: %w", t.name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(t.ctl, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("tap %s: up: %w", t.name, err)
	}
	for _, k := range cfg.KernelAddresses {
		if err := hw.AddAddress(t.ifindex, k); err != nil {
			return fmt.Errorf("tap %s: add address %s: %w", t.name, k, err)
		}
	}
	for _, gw := range Gateways(cfg.Addresses, cfg.KernelAddresses) {
		def := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if gw.Is6() {
			def = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		if err := hw.AddRoute(t.ifindex, def, gw); err != nil {
			return fmt.Errorf("tap %s: default route via %s: %w", t.name, gw, err)
		}
	}
	return nil
}

// Gateways returns the kernel's default gateways: per family, the
// router's address in the subnet of the first kernel address of that
// family that has one.
func Gateways(router, kernel []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	var have4, have6 bool
	for _, k := range kernel {
		if k.Addr().Is4() && have4 || k.Addr().Is6() && have6 {
			continue
		}
		for _, r := range router {
			if r.Masked() == k.Masked() && r.Addr() != k.Addr() {
				out = append(out, r.Addr())
				if k.Addr().Is4() {
					have4 = true
				} else {
					have6 = true
				}
				break
			}
		}
	}
	return out
}

// Name returns the kernel's interface name.
func (t *Tap) Name() string { return t.name }

// Ifindex returns the kernel's interface index.
func (t *Tap) Ifindex() int { return t.ifindex }

// HardwareAddr is the router side's MAC, random and locally
// administered; the kernel's side has its own.
func (t *Tap) HardwareAddr() net.HardwareAddr { return t.hwaddr }

// MTU returns the link's MTU.
func (t *Tap) MTU() int { return t.mtu }

// LinkUp reports whether the kernel's side is up, as the last link event
// said (or, without a netlink subscription, the last sample, at most
// hw.LinkPollInterval ago).
func (t *Tap) LinkUp() bool { return t.link.Up() }

// SetLinkHandler sets f to be called each time the kernel's side goes up
// or down (someone ran "ip link set gvr-host down"). A nil f removes it.
func (t *Tap) SetLinkHandler(f func(up bool)) { t.link.SetHandler(f) }

// sampleLink reads the kernel side's flags: the link watcher's sample.
func (t *Tap) sampleLink() bool {
	ifr, err := unix.NewIfreq(t.name)
	if err != nil || unix.IoctlIfreq(t.ctl, unix.SIOCGIFFLAGS, ifr) != nil {
		return false
	}
	f := ifr.Uint16()
	return f&unix.IFF_UP != 0 && f&unix.IFF_RUNNING != 0
}

// Stats returns the counters, with every hw.Drop* reason present.
func (t *Tap) Stats() hw.Stats {
	return hw.Stats{
		RxPackets: t.rxPackets.Load(),
		RxBytes:   t.rxBytes.Load(),
		TxPackets: t.txPackets.Load(),
		TxBytes:   t.txBytes.Load(),
		Drops: map[string]uint64{
			hw.DropTruncated: 0,
			hw.DropOversize:  t.oversize.Load(),
			hw.DropMalformed: t.malformed.Load(),
			hw.DropRing:      0,
			hw.DropTxError:   t.txError.Load(),
			hw.DropTxNoBufs:  t.txNoBufs.Load(),
		},
	}
}

// WriteFrames implements hw.FrameWriter: one write(2) per frame, the
// TAP's unit (a write is one frame). A frame the kernel refuses is
// dropped and counted: tx_nobufs when its queue is full (EAGAIN), else
// tx_error. It returns an error only when the TAP cannot send at all
// (closed, or the kernel's side is down: EIO). It does not allocate.
func (t *Tap) WriteFrames(frames [][]byte) (int, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		t.txError.Add(uint64(len(frames)))
		return 0, hw.ErrClosed
	}
	sent, sentBytes := 0, uint64(0)
	var nobufs, txerr uint64
	var fatal error
	for i := 0; i < len(frames); i++ {
		f := frames[i]
		if len(f) < hw.EthernetHeaderLen {
			txerr++
			continue
		}
		// Raw, as hw.Port's sendmmsg: a TAP write is CPU work (the
		// kernel's receive of the frame), never a wait on this
		// non-blocking fd.
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(t.fd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)))
		switch errno {
		case 0:
			sent++
			sentBytes += uint64(len(f))
		case unix.EINTR:
			i--
		case unix.EAGAIN, unix.ENOBUFS, unix.ENOMEM:
			nobufs++
		case unix.EIO, unix.EBADFD, unix.EBADF:
			txerr += uint64(len(frames) - i)
			fatal = fmt.Errorf("tap: write on %s: %w", t.name, errno)
			i = len(frames)
		default:
			txerr++
		}
	}
	t.txPackets.Add(uint64(sent))
	t.txBytes.Add(sentBytes)
	if nobufs != 0 {
		t.txNoBufs.Add(nobufs)
	}
	if txerr != 0 {
		t.txError.Add(txerr)
	}
	return sent, fatal
}

// reader is Run's state: its buffers and the poller callback, made once
// per Run so that a batch does not allocate.
type reader struct {
	t      *Tap
	bufs   [BatchSize][]byte
	frames [BatchSize]hw.Frame
	n      int
	bytes  uint64
	err    error
	fn     func(fd uintptr) bool
}

// read reads frames until BatchSize or until none is waiting. It returns
// false, to wait in the poller, when none was there at all.
func (r *reader) read(fd uintptr) bool {
	for r.n < BatchSize {
		buf := r.bufs[r.n]
		n, err := unix.Read(int(fd), buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return r.n > 0
		case err != nil:
			r.err = err
			return true
		case n > r.t.maxLen:
			r.t.oversize.Add(1)
			continue
		case n < hw.EthernetHeaderLen:
			r.t.malformed.Add(1)
			continue
		}
		r.frames[r.n] = hw.Frame{Data: buf[:n], WireLen: n}
		r.bytes += uint64(n)
		r.n++
	}
	return true
}

// Run reads frames and hands them to h in batches (queue 0) until ctx
// ends (it returns nil) or the TAP fails or is closed (it returns the
// error). The frames' checksums are not vouched for: a TAP without a
// virtio-net header gets fully checksummed frames from the kernel, which
// the stack checks like any other.
func (t *Tap) Run(ctx context.Context, h hw.BatchHandler) error {
	if !t.runMu.TryLock() {
		return errors.New("tap: Run already running")
	}
	defer t.runMu.Unlock()
	t.mu.RLock()
	closed := t.closed
	t.mu.RUnlock()
	if closed {
		return hw.ErrClosed
	}
	// One buffer a frame, one more byte than the largest accepted, so
	// that a longer frame shows as too long instead of cut to fit.
	r := &reader{t: t}
	mem := make([]byte, BatchSize*(t.maxLen+1))
	for i := range r.bufs {
		r.bufs[i] = mem[i*(t.maxLen+1) : (i+1)*(t.maxLen+1) : (i+1)*(t.maxLen+1)]
	}
	r.fn = r.read
	t.file.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { t.file.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	for {
		r.n, r.bytes, r.err = 0, 0, nil
		err := t.rc.Read(r.fn)
		if r.n > 0 {
			t.rxPackets.Add(uint64(r.n))
			t.rxBytes.Add(r.bytes)
			h(0, r.frames[:r.n])
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = r.err
		}
		if err != nil {
			t.mu.RLock()
			closed := t.closed
			t.mu.RUnlock()
			if closed {
				return hw.ErrClosed
			}
			return fmt.Errorf("tap: read on %s: %w", t.name, err)
		}
	}
}

// Close deletes the TAP (it is not persistent: closing its only fd
// unregisters it) and ends Run. It is safe to call twice.
func (t *Tap) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.link.Stop()
	t.log.Info("host tap closed")
	return t.closeFDs()
}

func (t *Tap) closeFDs() error {
	var err error
	if t.file != nil {
		err = t.file.Close()
	} else if t.fd >= 0 {
		err = unix.Close(t.fd)
	}
	t.fd = -1
	if t.ctl >= 0 {
		unix.Close(t.ctl)
		t.ctl = -1
	}
	return err
}
