package hw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// rxQueue is one AF_PACKET socket with its TPACKET_V3 receive ring. Its
// ring and frames are used by one routineReceive at a time.
type rxQueue struct {
	port *Port
	id   int
	// ringSocket's mapping is the socket's mmap: ring, then (queue 0
	// with a TX ring) the TX ring.
	ringSocket
	ring   []byte
	frames []Frame // reused for every block; cap maxFramesPerBlock
	// blk is the next block the kernel hands over. It outlives one Run:
	// the kernel fills blocks in order and does not restart at 0.
	blk int

	// light is the queue's light ring (lightring_linux.go), nil on a
	// multi-queue port, with Config.BlockRingOnly, or on a kernel that
	// refused it. The rest is routineReceive's: lightOn says the fanout
	// steers frames to the light ring; draining, that it just did and
	// the V3 block the kernel was filling is still to be read (until
	// it is empty and settleUntil passed, or drainUntil); lightBroken,
	// that a steering call failed and the queue stays on its V3 ring.
	// winStart and winFrames count the frames of the current rate
	// window (LightEnterWindow, LightLeaveWindow).
	light                                        *lightRing
	lightOn, draining, lightBroken               bool
	drainUntil, settleUntil, winStart, lastStats time.Time
	winFrames                                    int
	// toLight and toBulk count the queue's moves, lightDrops the ring
	// drops of its light ring (also in the port's "ring" drops); for
	// tests.
	toLight, toBulk, lightDrops atomic.Uint64
	// hold is the Backlog the loop serves (RunBacklog), nil with Run;
	// readRun counts the blocks read with more ready behind them since
	// the loop last served it. Both routineReceive's.
	hold    Backlog
	readRun int
	// holder is hold as a RingHolder, nil if it is none; nHeld is how
	// many V3 blocks before blk it still keeps from the kernel (the
	// oldest first: the kernel fills blocks in ring order). Both
	// routineReceive's.
	holder RingHolder
	nHeld  int
}

// openQueue creates queue id of n. github.com/mdlayher/packet opens the
// socket and attaches the outgoing filter before it binds it, so no
// unfiltered frame is ever queued on it. The ring is set up after bind
// (the library binds inside Listen): frames that arrive in between go to
// the socket's plain receive queue, which the ring never reads, and are
// freed with the socket. With n > 1 the queue joins the port's fanout
// group (hash); the first queue creates the group and stores its id in
// fanoutID.
//
// tx, for queue 0 of a port with a TX ring, is set up on the same socket
// and mapped behind the receive ring (txring_linux.go says why).
func openQueue(p *Port, id, n int, fanoutID *uint16, filter []bpf.RawInstruction, tx *txRing) (*rxQueue, error) {
	conn, err := packet.Listen(&net.Interface{Index: p.ifidx, Name: p.name}, packet.Raw, unix.ETH_P_ALL, &packet.Config{Filter: filter})
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("AF_PACKET socket: %w (needs CAP_NET_RAW)", err)
		}
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	q := &rxQueue{port: p, id: id, ringSocket: ringSocket{conn: conn, fd: -1}}
	if q.rc, err = conn.SyscallConn(); err != nil {
		q.close()
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := q.rc.Control(func(fd uintptr) { q.fd = int(fd) }); err != nil {
		q.close()
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := q.setup(n, fanoutID, tx); err != nil {
		q.close()
		return nil, err
	}
	if n == 1 && !p.blockRingOnly {
		// A multi-queue port's sockets already share a hash fanout
		// group; a socket is in one group at most.
		l, err := openLightRing(q, filter)
		if err != nil {
			// The V3 ring alone still works, with its retire latency.
			p.log.Warn("no light ring: frames wait for their ring block to retire", "queue", id, "err", err)
		} else {
			q.light, q.lightOn = l, true
		}
	}
	return q, nil
}

// errNoVnetHdr marks the kernel refusing PACKET_VNET_HDR.
var errNoVnetHdr = errors.New("PACKET_VNET_HDR")

// The socket is in the Go runtime's poller (the library opens it
// non-blocking), so that a receive queue with an empty ring parks its
// goroutine instead of sleeping in poll(2). A goroutine in a blocking
// syscall holds its P: after 20 µs sysmon takes the P away and wakes
// another thread for it, and keeps polling every 20 µs while that goes
// on; under a SYN flood sysmon alone took ~14 % of the router's CPU and
// the thread handoffs (futex) more. Non-blocking also makes sendmmsg on
// the socket never wait (see WriteFrames).

// setup sets what github.com/mdlayher/packet has no call for: the socket
// buffers (SO_RCVBUFFORCE), PACKET_QDISC_BYPASS, the TPACKET_V3 ring
// (PACKET_VERSION, PACKET_RESERVE, PACKET_RX_RING, mmap), the TX ring if tx is not nil,
// and PACKET_FANOUT.
func (q *rxQueue) setup(n int, fanoutID *uint16, tx *txRing) error {
	for _, opt := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if err := unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, opt[0], SocketBufferSize); err != nil {
			// Without CAP_NET_ADMIN, fall back to the capped option.
			if err := unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, opt[1], SocketBufferSize); err != nil {
				return fmt.Errorf("socket buffer: %w", err)
			}
		}
	}
	if qdiscBypass {
		if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
		}
	}
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fmt.Errorf("PACKET_VERSION TPACKET_V3: %w", err)
	}
	if q.port.vnet {
		// Before the rings: the kernel refuses it (EBUSY) once a ring
		// exists. It applies to both directions of the socket: the
		// receive ring gets a header before each frame, and every send
		// on this socket (sendmmsg and the TX ring) must put one there.
		if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return fmt.Errorf("%w: %w", errNoVnetHdr, err)
		}
	}
	// Before the ring, as PACKET_VNET_HDR: room before every frame
	// (RingHeadroom, lend_linux.go).
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_RESERVE, ringReserve); err != nil {
		return fmt.Errorf("PACKET_RESERVE: %w", err)
	}
	req := unix.TpacketReq3{
		Block_size:     RingBlockSize,
		Block_nr:       RingBlocks,
		Frame_size:     RingFrameSize,
		Frame_nr:       RingBlockSize * RingBlocks / RingFrameSize,
		Retire_blk_tov: uint32(RingRetireTimeout.Milliseconds()),
	}
	if err := unix.SetsockoptTpacketReq3(q.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	size := RingBlockSize * RingBlocks
	if tx != nil {
		// Both rings must be set before the socket is mapped, and are
		// mapped together (packet_mmap).
		if err := tx.setup(q.fd); err != nil {
			return err
		}
		size += tx.size()
	}
	mapping, err := unix.Mmap(q.fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap ring: %w", err)
	}
	q.mapping = mapping
	q.ring = mapping[:RingBlockSize*RingBlocks]
	addReceiveRing(q.ring)
	if tx != nil {
		tx.mem = mapping[RingBlockSize*RingBlocks:]
	}
	q.frames = make([]Frame, 0, maxFramesPerBlock(RingBlockSize))
	if n > 1 {
		// Hash fanout keeps each flow on one queue. No DEFRAG flag: the
		// router forwards fragments as they come.
		if q.id == 0 {
			arg := unix.PACKET_FANOUT_HASH<<16 | unix.PACKET_FANOUT_FLAG_UNIQUEID<<16
			if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
				return fmt.Errorf("PACKET_FANOUT: %w", err)
			}
			v, err := unix.GetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
			if err != nil {
				return fmt.Errorf("PACKET_FANOUT id: %w", err)
			}
			*fanoutID = uint16(v)
		} else {
			arg := unix.PACKET_FANOUT_HASH<<16 | int(*fanoutID)
			if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
				return fmt.Errorf("PACKET_FANOUT join %d: %w", *fanoutID, err)
			}
		}
	}
	return nil
}

func (q *rxQueue) close() {
	if q.light != nil {
		q.light.close()
		q.light = nil
	}
	if q.mapping != nil {
		removeReceiveRing(q.ring) // before the unmap: ExtendFrame must not lend from it
	}
	q.closeSocket()
	q.ring = nil
}

// backlog returns how many full blocks wait behind block q.blk (the
// blocks held for a RingHolder, behind those, are not waiting).
func (q *rxQueue) backlog() int {
	n := 0
	for i := 1; i < RingBlocks-q.nHeld; i++ {
		k := (q.blk + i) % RingBlocks
		status := (*uint32)(unsafe.Pointer(&q.ring[k*RingBlockSize+bdBlockStatus]))
		if atomic.LoadUint32(status)&tpStatusUser == 0 {
			break
		}
		n++
	}
	return n
}

// wait parks the goroutine in the runtime's poller until the block at
// status is the user's, stop is set, or d passes (then it returns
// os.ErrDeadlineExceeded: ring statistics are sampled and the rate
// window closed even on an idle port). wakeQueues sets a past deadline to end it at
// once; stop is checked after the deadline is set, so a wake cannot be
// lost.
func (q *rxQueue) wait(status *uint32, stop *atomic.Bool, d time.Duration) error {
	if err := q.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	woken := false
	return q.rc.Read(func(fd uintptr) bool {
		if atomic.LoadUint32(status)&tpStatusUser != 0 || stop.Load() {
			return true
		}
		if woken {
			// Woken without a block: the link went down (ENETDOWN,
			// POLLERR). Reading SO_ERROR clears it; the kernel re-hooks
			// the socket when the link comes back.
			unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		}
		woken = true
		return false
	})
}

// wakeQueues ends the waits of p's receive queues (see wait).
func (p *Port) wakeQueues() {
	for _, q := range p.queues {
		q.conn.SetReadDeadline(time.Unix(1, 0))
		if q.light != nil {
			q.light.conn.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

// sampleRingDrops adds the kernel's drop count since the last sample
// (PACKET_STATISTICS, read through the library, resets on read) to the
// "ring" drops. It runs once per PollTimeout or Stats call, not per frame.
func (q *rxQueue) sampleRingDrops() {
	st, err := q.conn.Stats()
	if err == nil && st.Drops != 0 {
		q.port.stats.drops[dropRing].Add(uint64(st.Drops))
	}
	if q.light != nil {
		st, err := q.light.conn.Stats()
		if err == nil && st.Drops != 0 {
			q.port.stats.drops[dropRing].Add(uint64(st.Drops))
			q.lightDrops.Add(uint64(st.Drops))
		}
	}
}

// routineReceive hands the rings' frames to h in order until ctx is done
// or stop is set (wakeQueues): the V3 ring's a block at a time, the
// light ring's as they land. It is started by Run, which waits for it.
//
// With a Backlog (b not nil, h unused) the loop hands batches to
// b.HandleRing and serves b whenever the rings have nothing ready, so
// the one goroutine both reads the ring and runs the data path.
func (q *rxQueue) routineReceive(ctx context.Context, stop *atomic.Bool, h BatchHandler, b Backlog) error {
	p := q.port
	q.hold, q.readRun = b, 0
	q.holder, _ = b.(RingHolder)
	defer func() {
		q.letGoAll()
		q.hold, q.holder = nil, nil
	}()
	p.log.Debug("receive queue started", "queue", q.id, "light_ring", q.light != nil)
	defer p.log.Debug("receive queue stopped", "queue", q.id)
	var drops dropCounts
	q.winStart, q.winFrames, q.lastStats = time.Now(), 0, time.Now()
	for {
		var err error
		if q.lightOn && !q.draining {
			err = q.stepLight(ctx, stop, h, &drops)
		} else {
			err = q.stepBulk(ctx, stop, h, &drops)
		}
		if err == errLightStopped {
			return nil
		}
		if err != nil {
			return fmt.Errorf("hw: %s queue %d: %w", p.name, q.id, err)
		}
		select {
		case <-ctx.Done():
			return nil
		default:
		}
	}
}

// stepBulk hands the next V3 block to h, or waits for it. While
// draining, it waits only as long as the kernel's current block has
// frames (LightDrainTimeout at most), then lets the light ring go.
func (q *rxQueue) stepBulk(ctx context.Context, stop *atomic.Bool, h BatchHandler, drops *dropCounts) error {
	p := q.port
	b := q.ring[q.blk*RingBlockSize : (q.blk+1)*RingBlockSize]
	status := (*uint32)(unsafe.Pointer(&b[bdBlockStatus]))
	if atomic.LoadUint32(status)&tpStatusUser == 0 {
		if q.serveBacklog() {
			q.countBulk(0)
			return nil
		}
		timeout := PollTimeout
		switch {
		case q.draining:
			// A frame the old selector sent here is written within
			// microseconds (lightSettle); the kernel then retires the
			// block on its timer if it holds any (num_pkts is counted
			// as a frame is placed).
			now := time.Now()
			if !q.blockHasFrames() && !now.Before(q.settleUntil) || now.After(q.drainUntil) {
				q.draining = false
				return nil
			}
			timeout = max(q.settleUntil.Sub(now), lightSettle)
		case q.light != nil && !q.lightBroken:
			timeout = LightEnterWindow
		}
		if stop.Load() || ctx.Err() != nil {
			return errLightStopped
		}
		err := q.wait(status, stop, timeout)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			q.sampleIdle()
		} else if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		q.countBulk(0)
		return nil
	}
	if q.light != nil && !q.lightOn {
		// Frames the selector sent to the light ring just before the
		// move came first.
		q.drainLight(h, drops)
	}
	frames := parseBlock(b, q.frames, p.maxLen, p.vnet, drops)
	behind := q.backlog()
	if behind >= RingBacklogBlocks {
		for i := range frames {
			frames[i].Backlogged = true
		}
	}
	if q.holder != nil {
		// The block stays the loop's until the holder is done with
		// its frames (returnBlocks).
		q.deliverBlock(frames, drops, behind > 0)
		q.nHeld++
		q.blk = (q.blk + 1) % RingBlocks
		q.returnBlocks(RingHeldBlocks)
	} else {
		q.deliver(frames, drops, h, behind > 0)
		// Hand the block back (TP_STATUS_KERNEL).
		atomic.StoreUint32(status, 0)
		q.blk = (q.blk + 1) % RingBlocks
	}
	q.countBulk(len(frames))
	if q.hold != nil && behind > 0 {
		if q.readRun++; q.readRun >= BacklogReadBlocks {
			q.serveBacklog()
		}
	}
	return nil
}

// serveBacklog serves one batch of the loop's Backlog, if it has one,
// and reports whether it handed any frames on.
func (q *rxQueue) serveBacklog() bool {
	if q.hold == nil {
		return false
	}
	q.readRun = 0
	served := q.hold.ServeBacklog(q.id)
	q.returnBlocks(RingHeldBlocks)
	return served
}

// returnBlocks hands the kernel back the held blocks, oldest first,
// whose frames the holder no longer holds, and past keep held blocks the
// oldest whatever it holds (the holder copies those frames first):
// RingHeldBlocks while the loop runs, 0 as it ends (letGoAll).
func (q *rxQueue) returnBlocks(keep int) {
	for q.nHeld > 0 {
		blk := (q.blk - q.nHeld + RingBlocks) % RingBlocks
		if q.holder.Holding(q.id, blk) > 0 {
			if q.nHeld <= keep {
				return
			}
			q.holder.LetGo(q.id, blk)
		}
		q.returnBlock(blk)
	}
}

// returnBlock hands block blk, the oldest held, back to the kernel
// (TP_STATUS_KERNEL).
func (q *rxQueue) returnBlock(blk int) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&q.ring[blk*RingBlockSize+bdBlockStatus])), 0)
	q.nHeld--
}

// letGoAll hands every held block back, the holder copying what it
// still holds of them: the loop is ending, and the ring may be unmapped
// before the holder is served empty.
func (q *rxQueue) letGoAll() { q.returnBlocks(0) }

// blockHasFrames reports whether block q.blk, still the kernel's, has
// frames in it.
func (q *rxQueue) blockHasFrames() bool {
	numPkts := (*uint32)(unsafe.Pointer(&q.ring[q.blk*RingBlockSize+bdNumPkts]))
	return atomic.LoadUint32(numPkts) != 0
}

// blockReady reports whether the kernel handed over block q.blk.
func (q *rxQueue) blockReady() bool {
	status := (*uint32)(unsafe.Pointer(&q.ring[q.blk*RingBlockSize+bdBlockStatus]))
	return atomic.LoadUint32(status)&tpStatusUser != 0
}

// sampleIdle samples the ring drops after a wait timed out, at most once
// per PollTimeout.
func (q *rxQueue) sampleIdle() {
	if now := time.Now(); now.Sub(q.lastStats) >= PollTimeout {
		q.lastStats = now
		q.sampleRingDrops()
	}
}

// deliver counts a batch and hands it to h, or to the loop's Backlog
// with more (frames are ready behind these). Drops are counted before h
// runs, so that what it sees is already in Stats.
func (q *rxQueue) deliver(frames []Frame, drops *dropCounts, h BatchHandler, more bool) {
	q.count(frames, drops)
	if len(frames) == 0 {
		return
	}
	if q.hold != nil {
		q.hold.HandleRing(q.id, frames, more)
		return
	}
	h(q.id, frames)
}

// deliverBlock is deliver for a V3 block the loop keeps for its
// RingHolder: block q.blk's frames go to HoldRing.
func (q *rxQueue) deliverBlock(frames []Frame, drops *dropCounts, more bool) {
	q.count(frames, drops)
	if len(frames) > 0 {
		q.holder.HoldRing(q.id, frames, more, q.blk)
	}
}

// count adds a batch to the port's counters, and drops seen reading it.
func (q *rxQueue) count(frames []Frame, drops *dropCounts) {
	p := q.port
	if *drops != (dropCounts{}) {
		p.stats.addDrops(drops)
		*drops = dropCounts{}
	}
	var bytes uint64
	for i := range frames {
		bytes += uint64(len(frames[i].Data))
	}
	p.stats.rxPackets.Add(uint64(len(frames)))
	p.stats.rxBytes.Add(bytes)
}

// drainLight hands every frame waiting in the light ring to h. It runs
// when the V3 ring has frames ready behind them (a move to it), so a
// Backlog is told there is more.
func (q *rxQueue) drainLight(h BatchHandler, drops *dropCounts) {
	p := q.port
	for q.light.ready() {
		frames, n := q.light.collect(q.frames, p.maxLen, p.vnet, drops)
		q.deliver(frames, drops, h, true)
		q.light.release(n)
	}
}

// countBulk adds n frames of the V3 ring to the rate window and moves
// the queue to its light ring when the window closes under
// LightEnterFrames. Once per block or wait, never per frame.
func (q *rxQueue) countBulk(n int) {
	if q.light == nil || q.lightBroken || q.lightOn {
		return
	}
	q.winFrames += n
	now := time.Now()
	if now.Sub(q.winStart) < LightEnterWindow {
		return
	}
	seen := q.winFrames
	q.winStart, q.winFrames = now, 0
	if seen >= LightEnterFrames {
		return
	}
	if err := q.light.steer(true); err != nil {
		q.port.log.Warn("light ring: steering failed; the queue stays on its V3 ring", "queue", q.id, "err", err)
		q.lightBroken = true
		return
	}
	q.toLight.Add(1)
	q.lightOn, q.draining = true, true
	q.settleUntil, q.drainUntil = now.Add(lightSettle), now.Add(LightDrainTimeout)
}

// stepLight hands the light ring's waiting frames to h, or waits for
// one; past LightLeaveFrames in LightLeaveWindow, or LightBurstFrames
// at once, it moves the queue to its V3 ring.
func (q *rxQueue) stepLight(ctx context.Context, stop *atomic.Bool, h BatchHandler, drops *dropCounts) error {
	p := q.port
	frames, n := q.light.collect(q.frames, p.maxLen, p.vnet, drops)
	if n == 0 {
		if q.blockReady() {
			// A block of frames steered to the V3 ring before the
			// move that retired after LightDrainTimeout.
			return q.stepBulk(ctx, stop, h, drops)
		}
		if q.serveBacklog() {
			return nil
		}
		if stop.Load() || ctx.Err() != nil {
			return errLightStopped
		}
		timeout := PollTimeout
		if q.blockHasFrames() {
			// The V3 ring's current block still holds frames (see
			// above): its retire wakes the V3 socket, not this one.
			timeout = time.Millisecond
		}
		err := q.light.wait(stop, timeout)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			q.sampleIdle()
		} else if err != nil {
			return fmt.Errorf("wait light ring: %w", err)
		}
		return nil
	}
	now := time.Now()
	if now.Sub(q.winStart) >= LightLeaveWindow {
		q.winStart, q.winFrames = now, 0
	}
	q.winFrames += n
	if q.winFrames < LightLeaveFrames && n < LightBurstFrames {
		q.deliver(frames, drops, h, false)
		q.light.release(n)
		return nil
	}
	// Towards the V3 ring: from the map update on, frames go there,
	// behind every frame in the light ring.
	if err := q.light.steer(false); err != nil {
		// Stay on the light ring: it still takes every frame.
		p.log.Warn("light ring: steering failed; the queue stays on its light ring", "queue", q.id, "err", err)
		q.winStart, q.winFrames = now, 0
		q.deliver(frames, drops, h, false)
		q.light.release(n)
		return nil
	}
	q.toBulk.Add(1)
	// A burst: with a Backlog, held rather than run, so that the light
	// ring's few slots empty before the burst overflows them.
	q.deliver(frames, drops, h, true)
	q.light.release(n)
	q.drainLight(h, drops)
	q.lightOn = false
	q.winStart, q.winFrames = time.Now(), 0
	return nil
}
