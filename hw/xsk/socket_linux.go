package xsk

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultRingSize is the entries of each ring when SocketConfig leaves
// it 0: 2048 descriptors is ~2.5 ms of 64-byte frames at line rate on
// 1 GbE, and, like the TPACKET_V3 ring's ~2700 frames, absorbs a burst
// while a batch is processed.
const DefaultRingSize = 2048

// txBudget is how many frames one sendto(2) lets the kernel's copy-mode
// transmit take from the TX ring (XDP_MAX_TX_SKB_BUDGET, Linux 6.17; the
// default TX_BATCH_SIZE is 32): one wakeup per batch of the router's
// size (hw.TxBatchSize) rather than four.
const txBudget = 128

// BindMode says how a socket asks the driver for its frames.
type BindMode int

const (
	// BindAuto asks for zero-copy and falls back to copy mode when the
	// driver cannot (veth, most drivers without AF_XDP support).
	BindAuto BindMode = iota
	// BindZeroCopy insists on zero-copy (XDP_ZEROCOPY).
	BindZeroCopy
	// BindCopy asks for copy mode (XDP_COPY).
	BindCopy
)

// Mode is the copy mode a bound socket got.
type Mode int

const (
	// ModeCopy: the kernel copies each frame between its own buffers and
	// the UMEM (XDP_COPY).
	ModeCopy Mode = iota + 1
	// ModeZeroCopy: the driver DMAs straight into and out of the UMEM.
	ModeZeroCopy
)

func (m Mode) String() string {
	switch m {
	case ModeCopy:
		return "copy"
	case ModeZeroCopy:
		return "zero-copy"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// SocketConfig describes one XSK.
type SocketConfig struct {
	// Ifindex is the interface, e.g. 2, in the calling thread's network
	// namespace.
	Ifindex int
	// Queue is the interface's receive (and transmit) queue, e.g. 0.
	Queue int
	// RxSize, TxSize, FillSize and CompletionSize are ring entries,
	// powers of two; 0 means DefaultRingSize.
	RxSize, TxSize, FillSize, CompletionSize int
	// Bind chooses zero-copy or copy mode (BindAuto: zero-copy if the
	// driver can).
	Bind BindMode
}

// Desc describes one frame on a ring (struct xdp_desc): the UMEM address
// of its first byte, its length and option flags (XDP_PKT_CONTD etc.; 0
// here, as the socket does not ask for multi-buffer frames).
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// Socket is one AF_XDP socket bound to one queue of one interface, with
// its four rings over a Umem.
//
// Receive, Refill and Wait move frames in from the RX and fill rings and
// belong to one goroutine at a time (the queue's receiver). Transmit and
// Complete share the TX and completion rings under a lock, so any
// goroutine may send. Stats and Mode are safe for concurrent use.
type Socket struct {
	umem  *Umem
	id    uint16 // the Umem's name for it (Umem.holder)
	fd    int
	file  *os.File // fd in the Go runtime's poller, for Wait
	rc    syscall.RawConn
	ifidx int
	queue int
	mode  Mode

	rx   *descRing
	fill *addrRing
	// txMu protects tx, comp and the completion scratch.
	txMu    sync.Mutex
	tx      *descRing
	comp    *addrRing
	scratch []uint64   // fill and completion batches; fill side only
	cscr    []uint64   // completion batch; under txMu
	copies  []sendCopy // Send's copies of one pass; under txMu

	stop   atomic.Bool
	closed atomic.Bool
	// ready is Wait's test, made once so that Wait does not allocate.
	ready func(uintptr) bool

	rxPackets, rxBytes atomic.Uint64
	txPackets, txBytes atomic.Uint64
	txLent             atomic.Uint64
	txDropped          atomic.Uint64
	wakeErrs           atomic.Uint64
}

// refillBatch is the most frames Refill and Complete move under one
// lock of the Umem.
const refillBatch = 256

// NewSocket makes an XSK on u for cfg.Ifindex/cfg.Queue. The first socket
// registers u with the kernel; later ones share it (XDP_SHARED_UMEM) and
// must be on another interface or queue (each has its own fill and
// completion rings). With BindAuto a refused zero-copy bind is retried in
// copy mode on a fresh socket; Mode reports which one it got. A socket
// sharing the UMEM gets the first one's mode whatever cfg.Bind says (the
// kernel takes it from the UMEM), so one UMEM cannot join a zero-copy NIC
// and a copy-mode device: bind fails on the one that cannot. The socket
// still needs an XDP program that redirects its queue's frames to it
// (Program.Register) before it receives anything.
func (u *Umem) NewSocket(cfg SocketConfig) (*Socket, error) {
	for _, n := range []*int{&cfg.RxSize, &cfg.TxSize, &cfg.FillSize, &cfg.CompletionSize} {
		if *n == 0 {
			*n = DefaultRingSize
		}
		if *n < 1 || *n&(*n-1) != 0 || *n > 1<<20 {
			return nil, fmt.Errorf("xsk: socket on ifindex %d queue %d: ring size %d, want a power of two up to 2^20", cfg.Ifindex, cfg.Queue, *n)
		}
	}
	if cfg.Ifindex < 1 || cfg.Queue < 0 {
		return nil, fmt.Errorf("xsk: socket: bad ifindex %d or queue %d", cfg.Ifindex, cfg.Queue)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errors.New("xsk: socket: umem closed")
	}
	var s *Socket
	var err error
	switch {
	case u.reg != nil:
		// A socket sharing the UMEM takes its copy mode and wakeup
		// flag from the UMEM's first binding; the kernel refuses any
		// bind flag beside XDP_SHARED_UMEM (xsk_bind).
		s, err = u.openLocked(cfg, 0)
		if err == nil && cfg.Bind == BindZeroCopy && s.mode != ModeZeroCopy || err == nil && cfg.Bind == BindCopy && s.mode != ModeCopy {
			s.release()
			s, err = nil, fmt.Errorf("%w: a socket sharing a UMEM gets the UMEM's copy mode (%v)", ErrUnsupported, u.reg.mode)
		}
	case cfg.Bind == BindAuto:
		s, err = u.openLocked(cfg, unix.XDP_ZEROCOPY)
		if err != nil && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPROTONOSUPPORT)) {
			s, err = u.openLocked(cfg, unix.XDP_COPY)
		}
	case cfg.Bind == BindZeroCopy:
		s, err = u.openLocked(cfg, unix.XDP_ZEROCOPY)
	case cfg.Bind == BindCopy:
		s, err = u.openLocked(cfg, unix.XDP_COPY)
	default:
		return nil, fmt.Errorf("xsk: socket: bad bind mode %d", cfg.Bind)
	}
	if err != nil {
		return nil, fmt.Errorf("xsk: socket on ifindex %d queue %d: %w", cfg.Ifindex, cfg.Queue, err)
	}
	if u.reg == nil {
		u.reg = s
	}
	u.sockets = append(u.sockets, s)
	return s, nil
}

func sockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockopt(fd, opt int, p unsafe.Pointer, n *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(n)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// openLocked makes, sets up and binds one socket with copy flag cp
// (XDP_ZEROCOPY or XDP_COPY); on failure nothing of it is left.
func (u *Umem) openLocked(cfg SocketConfig, cp uint16) (*Socket, error) {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EAFNOSUPPORT) {
			return nil, fmt.Errorf("AF_XDP socket: %w: kernel without CONFIG_XDP_SOCKETS: %w", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("AF_XDP socket: %w", classify(err, "CAP_NET_RAW"))
	}
	if u.nextID == 1<<16-1 {
		unix.Close(fd)
		return nil, errors.New("too many sockets made on one umem")
	}
	u.nextID++ // ids start at 1; 0 is "no socket"
	s := &Socket{umem: u, id: u.nextID, fd: fd, ifidx: cfg.Ifindex, queue: cfg.Queue, scratch: make([]uint64, refillBatch), cscr: make([]uint64, refillBatch), copies: make([]sendCopy, refillBatch)}
	if err := s.setup(cfg, cp); err != nil {
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Socket) setup(cfg SocketConfig, cp uint16) error {
	u := s.umem
	shared := u.reg != nil
	if !shared {
		reg := unix.XDPUmemReg{
			Addr:     uint64(uintptr(unsafe.Pointer(&u.mem[0]))),
			Len:      uint64(len(u.mem)),
			Size:     uint32(u.frameSize),
			Headroom: uint32(u.headroom),
		}
		if err := sockopt(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
			return fmt.Errorf("XDP_UMEM_REG: %w", err)
		}
	}
	for _, r := range []struct {
		opt  int
		size int
	}{
		{unix.XDP_UMEM_FILL_RING, cfg.FillSize},
		{unix.XDP_UMEM_COMPLETION_RING, cfg.CompletionSize},
		{unix.XDP_RX_RING, cfg.RxSize},
		{unix.XDP_TX_RING, cfg.TxSize},
	} {
		v := int32(r.size)
		if err := sockopt(s.fd, r.opt, unsafe.Pointer(&v), 4); err != nil {
			return fmt.Errorf("ring option %d (%d entries): %w", r.opt, r.size, err)
		}
	}
	var off unix.XDPMmapOffsets
	n := uint32(unsafe.Sizeof(off))
	if err := getsockopt(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), &n); err != nil {
		return fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	if n != uint32(unsafe.Sizeof(off)) {
		// A pre-4.18-layout answer has no flags words.
		return fmt.Errorf("XDP_MMAP_OFFSETS: %d bytes, want %d (kernel too old)", n, unsafe.Sizeof(off))
	}
	var err error
	if s.rx, err = mapDescRing(s.fd, off.Rx, cfg.RxSize, unix.XDP_PGOFF_RX_RING); err != nil {
		return fmt.Errorf("rx ring: %w", err)
	}
	if s.tx, err = mapDescRing(s.fd, off.Tx, cfg.TxSize, unix.XDP_PGOFF_TX_RING); err != nil {
		return fmt.Errorf("tx ring: %w", err)
	}
	if s.fill, err = mapAddrRing(s.fd, off.Fr, cfg.FillSize, unix.XDP_UMEM_PGOFF_FILL_RING); err != nil {
		return fmt.Errorf("fill ring: %w", err)
	}
	if s.comp, err = mapAddrRing(s.fd, off.Cr, cfg.CompletionSize, unix.XDP_UMEM_PGOFF_COMPLETION_RING); err != nil {
		return fmt.Errorf("completion ring: %w", err)
	}
	sa := &unix.SockaddrXDP{Flags: unix.XDP_USE_NEED_WAKEUP | cp, Ifindex: uint32(cfg.Ifindex), QueueID: uint32(cfg.Queue)}
	mode := "copy"
	if cp == unix.XDP_ZEROCOPY {
		mode = "zero-copy"
	}
	if shared {
		sa.Flags = unix.XDP_SHARED_UMEM
		sa.SharedUmemFD = uint32(u.reg.fd)
		mode = "shared umem, " + u.reg.mode.String()
	}
	if err := unix.Bind(s.fd, sa); err != nil {
		return fmt.Errorf("bind (%s): %w", mode, err)
	}
	var opts struct{ flags uint32 }
	n = 4
	if err := getsockopt(s.fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), &n); err != nil {
		return fmt.Errorf("XDP_OPTIONS: %w", err)
	}
	s.mode = ModeCopy
	if opts.flags&unix.XDP_OPTIONS_ZEROCOPY != 0 {
		s.mode = ModeZeroCopy
	} else {
		// Best effort: kernels before 6.17 do not know the option and
		// keep sending 32 frames per wakeup.
		b := int32(min(txBudget, cfg.TxSize))
		sockopt(s.fd, unix.XDP_MAX_TX_SKB_BUDGET, unsafe.Pointer(&b), 4)
	}
	if err := unix.SetNonblock(s.fd, true); err != nil {
		return fmt.Errorf("non-blocking: %w", err)
	}
	s.file = os.NewFile(uintptr(s.fd), fmt.Sprintf("xsk:%d:%d", cfg.Ifindex, cfg.Queue))
	if s.rc, err = s.file.SyscallConn(); err != nil {
		return fmt.Errorf("poller: %w", err)
	}
	s.ready = func(uintptr) bool { return s.rx.avail(1) > 0 || s.stop.Swap(false) }
	return nil
}

// release unmaps the rings and closes the socket.
func (s *Socket) release() {
	for _, r := range []*ring{ringOf(s.rx), ringOf(s.tx), addrRingOf(s.fill), addrRingOf(s.comp)} {
		if r != nil {
			r.unmap()
		}
	}
	if s.file != nil {
		s.file.Close()
	} else if s.fd >= 0 {
		unix.Close(s.fd)
	}
	s.fd = -1
}

func ringOf(r *descRing) *ring {
	if r == nil {
		return nil
	}
	return &r.ring
}

func addrRingOf(r *addrRing) *ring {
	if r == nil {
		return nil
	}
	return &r.ring
}

// FD returns the socket's file descriptor, for an XSKMAP.
func (s *Socket) FD() int { return s.fd }

// Mode returns the copy mode the kernel granted (XDP_OPTIONS).
func (s *Socket) Mode() Mode { return s.mode }

// Queue returns the queue the socket is bound to.
func (s *Socket) Queue() int { return s.queue }

// Umem returns the socket's UMEM.
func (s *Socket) Umem() *Umem { return s.umem }

// Refill moves free frames onto the fill ring, as many as it has room
// for, and wakes the kernel if it asked (XDP_RING_NEED_WAKEUP). It
// returns how many frames it posted. Call it once per received batch.
func (s *Socket) Refill() int {
	u := s.umem
	total := 0
	for {
		room := s.fill.free(refillBatch)
		if room == 0 {
			break
		}
		u.mu.Lock()
		n := u.takeFreeLocked(s.scratch[:room], stateFill, s.id)
		u.mu.Unlock()
		if n == 0 {
			break
		}
		prod := s.fill.cachedProd
		for i := range n {
			s.fill.addrs[(prod+uint32(i))&s.fill.mask] = s.scratch[i]
		}
		s.fill.submit(uint32(n))
		total += n
		if uint32(n) < room {
			break
		}
	}
	if s.fill.needWakeup() {
		s.wakeRx()
	}
	return total
}

// wakeRx tells the driver the fill ring has frames again (a zero-length
// recvfrom, as libxdp does).
func (s *Socket) wakeRx() {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	if e != 0 && e != unix.EAGAIN && e != unix.EINTR {
		s.wakeErrs.Add(1)
	}
}

// Receive reads up to len(descs) received frames from the RX ring into
// descs and returns how many. Their frames become the caller's (Held)
// until it transmits them (on any socket of the Umem) or releases them
// (Umem.Release); their data is Umem.Data(descs[i]). It never waits.
func (s *Socket) Receive(descs []Desc) int {
	n := s.rx.avail(uint32(len(descs)))
	if n == 0 {
		return 0
	}
	u := s.umem
	cons := s.rx.cachedCons
	got := 0
	var bytes uint64
	u.mu.Lock()
	for i := range n {
		d := s.rx.descs[(cons+i)&s.rx.mask]
		if !u.moveLocked(d.Addr, stateFill, stateHeld, 0) {
			continue
		}
		descs[got] = Desc{Addr: d.Addr, Len: d.Len, Options: d.Options}
		bytes += uint64(d.Len)
		got++
	}
	u.mu.Unlock()
	s.rx.release(n)
	s.rxPackets.Add(uint64(got))
	s.rxBytes.Add(bytes)
	return got
}

// Transmit puts frames on the TX ring and wakes the kernel to send them.
// It takes descs[:n], where n is the room on the ring (it first recycles
// completed frames to make room), and returns n; descs[n:] stay the
// caller's. Each descriptor must name a Held frame of the Umem and lie
// inside it; one that does not is dropped and counted (Stats.TxDropped,
// and Umem.BadDescs if its frame was not Held). Transmitted frames
// return to the free list when the kernel completes them.
func (s *Socket) Transmit(descs []Desc) int {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	s.completeLocked()
	n := s.tx.free(uint32(len(descs)))
	if n == 0 {
		s.kickLocked()
		return 0
	}
	u := s.umem
	prod := s.tx.cachedProd
	queued := uint32(0)
	var bytes, dropped uint64
	u.mu.Lock()
	for _, d := range descs[:n] {
		if d.Len == 0 || u.Frame(d.Addr, int(d.Len)) == nil {
			// Empty, or running past its frame: the kernel would refuse
			// it (tx_invalid_descs). The frame, if it is the caller's,
			// goes back to the free list.
			u.freeLocked(d.Addr, stateHeld)
			dropped++
			continue
		}
		if !u.moveLocked(d.Addr, stateHeld, stateTX, s.id) {
			dropped++
			continue
		}
		s.tx.descs[(prod+queued)&s.tx.mask] = unix.XDPDesc{Addr: d.Addr, Len: d.Len}
		bytes += uint64(d.Len)
		queued++
	}
	u.mu.Unlock()
	if queued > 0 {
		s.tx.submit(queued)
		s.txPackets.Add(uint64(queued))
		s.txBytes.Add(bytes)
	}
	if dropped > 0 {
		s.txDropped.Add(dropped)
	}
	s.kickLocked()
	return int(n)
}

// kickLocked wakes the kernel's transmit when it asked (always in copy
// mode): a zero-length sendto. In copy mode each call sends up to
// txBudget frames and returns EAGAIN while more wait, or when the
// completion ring is full; completions are reaped and the call repeated,
// a bounded number of times. What is left goes out on the next kick.
func (s *Socket) kickLocked() {
	for range 8 {
		if s.tx.pending() == 0 || !s.tx.needWakeup() {
			return
		}
		// A raw syscall for the reason hw.Port.WriteFrames gives: it is
		// CPU work (in copy mode the whole transmit), not a wait.
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
			s.completeLocked()
			if e == 0 && s.tx.pending() == 0 {
				return
			}
		default:
			s.wakeErrs.Add(1)
			return
		}
	}
}

// Complete recycles frames the kernel has sent to the free list (or, if
// they were lent and are still held, to their holder) and returns how
// many. Transmit and Send call it too; call it once per batch on an idle
// sender so that completed frames do not wait. It returns at once, with
// 0, when the completion ring is empty or another goroutine is sending
// on the socket (which reaps it).
func (s *Socket) Complete() int {
	if !s.txMu.TryLock() {
		return 0
	}
	defer s.txMu.Unlock()
	if s.closed.Load() {
		return 0
	}
	return s.completeLocked()
}

func (s *Socket) completeLocked() int {
	u := s.umem
	total := 0
	for {
		n := s.comp.avail(refillBatch)
		if n == 0 {
			return total
		}
		cons := s.comp.cachedCons
		for i := range n {
			s.cscr[i] = s.comp.addrs[(cons+i)&s.comp.mask]
		}
		s.comp.release(n)
		u.mu.Lock()
		for _, a := range s.cscr[:n] {
			if u.completeLocked(a) {
				total++
			}
		}
		u.mu.Unlock()
	}
}

// Wait parks the goroutine in the runtime's poller until the RX ring has
// frames, d passes (it returns os.ErrDeadlineExceeded) or Wake is
// called. It belongs to the receiving goroutine.
func (s *Socket) Wait(d time.Duration) error {
	if s.closed.Load() {
		return os.ErrClosed
	}
	if err := s.file.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	return s.rc.Read(s.ready)
}

// Wake ends a Wait in progress (or the next one) at once.
func (s *Socket) Wake() {
	s.stop.Store(true)
	s.file.SetReadDeadline(time.Unix(1, 0))
}

// Stats are a socket's counters.
type Stats struct {
	// RxPackets and RxBytes count frames Receive returned.
	RxPackets, RxBytes uint64
	// TxPackets and TxBytes count frames Transmit and Send put on the
	// TX ring.
	TxPackets, TxBytes uint64
	// TxLent counts the frames of TxPackets that Send lent (sent from
	// the frame they were received in, without a copy).
	TxLent uint64
	// TxDropped counts descriptors Transmit refused (bad address, length
	// or place).
	TxDropped uint64
	// WakeErrors counts wakeup syscalls that failed with other than
	// EAGAIN/EBUSY/ENOBUFS (the device went away or down).
	WakeErrors uint64
	// The kernel's counters (XDP_STATISTICS): frames dropped for lack of
	// room in the RX ring (RxRingFull) or of frames on the fill ring
	// (RxFillEmpty), descriptors it refused, and the rest.
	RxDropped, RxInvalid, TxInvalid, RxRingFull, RxFillEmpty, TxRingEmpty uint64
}

// Stats returns the socket's counters, with the kernel's.
func (s *Socket) Stats() Stats {
	st := Stats{
		RxPackets:  s.rxPackets.Load(),
		RxBytes:    s.rxBytes.Load(),
		TxPackets:  s.txPackets.Load(),
		TxBytes:    s.txBytes.Load(),
		TxLent:     s.txLent.Load(),
		TxDropped:  s.txDropped.Load(),
		WakeErrors: s.wakeErrs.Load(),
	}
	if s.closed.Load() {
		return st
	}
	var ks unix.XDPStatistics
	n := uint32(unsafe.Sizeof(ks))
	if getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&ks), &n) == nil {
		st.RxDropped, st.RxInvalid, st.TxInvalid = ks.Rx_dropped, ks.Rx_invalid_descs, ks.Tx_invalid_descs
		st.RxRingFull, st.RxFillEmpty, st.TxRingEmpty = ks.Rx_ring_full, ks.Rx_fill_ring_empty_descs, ks.Tx_ring_empty_descs
	}
	return st
}

// Close closes the socket. Its frames on the fill, RX, TX and
// completion rings, and those the driver took off the fill ring, go
// back to the free list: the kernel lets go of them with the socket.
// Frames the caller holds stay Held until released. Close must not run
// concurrently with Receive, Refill or Wait.
func (s *Socket) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.txMu.Lock()
	defer s.txMu.Unlock()
	u := s.umem
	u.mu.Lock()
	defer u.mu.Unlock()
	s.release()
	u.reclaimLocked(s.id)
	for i, o := range u.sockets {
		if o == s {
			u.sockets = append(u.sockets[:i], u.sockets[i+1:]...)
			break
		}
	}
	if u.reg == s {
		// Any socket bound to the UMEM can be named for sharing it.
		u.reg = nil
		if len(u.sockets) > 0 {
			u.reg = u.sockets[0]
		}
	}
	return nil
}
