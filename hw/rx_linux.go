package hw

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
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
	// conn is the socket, opened and bound by github.com/mdlayher/packet:
	// non-blocking, in the Go runtime's poller.
	conn *packet.Conn
	// rc is conn's SyscallConn, taken once (each call allocates): the
	// ring code waits on it for a block without a syscall.
	rc syscall.RawConn
	// fd is conn's descriptor, for the setsockopts, mmap and sendmmsg the
	// library has no call for. It is valid until conn is closed, which
	// Close does only after every data-path user is gone (Port.mu).
	fd int
	// mapping is the socket's mmap: ring, then (queue 0 with a TX ring)
	// the TX ring.
	mapping []byte
	ring    []byte
	frames  []Frame // reused for every block; cap maxFramesPerBlock
	// blk is the next block the kernel hands over. It outlives one Run:
	// the kernel fills blocks in order and does not restart at 0.
	blk int
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
	q := &rxQueue{port: p, id: id, conn: conn, fd: -1}
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
// (PACKET_VERSION, PACKET_RX_RING, mmap), the TX ring if tx is not nil,
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
	if q.mapping != nil {
		unix.Munmap(q.mapping)
		q.mapping, q.ring = nil, nil
	}
	if q.conn != nil {
		q.conn.Close()
		q.conn, q.rc = nil, nil
	}
	q.fd = -1
}

// backlog returns how many full blocks wait behind block q.blk.
func (q *rxQueue) backlog() int {
	n := 0
	for i := 1; i < RingBlocks; i++ {
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
// status is the user's, stop is set, or PollTimeout passes (then it
// returns os.ErrDeadlineExceeded, so that ring statistics are sampled
// even on an idle port). wakeQueues sets a past deadline to end it at
// once; stop is checked after the deadline is set, so a wake cannot be
// lost.
func (q *rxQueue) wait(status *uint32, stop *atomic.Bool) error {
	if err := q.conn.SetReadDeadline(time.Now().Add(PollTimeout)); err != nil {
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
}

// routineReceive hands the ring's blocks to h in order until ctx is done
// or stop is set (wakeQueues). It is started by Run, which waits for it.
func (q *rxQueue) routineReceive(ctx context.Context, stop *atomic.Bool, h BatchHandler) error {
	p := q.port
	p.log.Debug("receive queue started", "queue", q.id)
	defer p.log.Debug("receive queue stopped", "queue", q.id)
	var drops dropCounts
	for {
		b := q.ring[q.blk*RingBlockSize : (q.blk+1)*RingBlockSize]
		status := (*uint32)(unsafe.Pointer(&b[bdBlockStatus]))
		if atomic.LoadUint32(status)&tpStatusUser == 0 {
			if stop.Load() || ctx.Err() != nil {
				return nil
			}
			err := q.wait(status, stop)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				q.sampleRingDrops()
			} else if err != nil {
				return fmt.Errorf("hw: %s queue %d: wait: %w", p.name, q.id, err)
			}
			continue
		}
		frames := parseBlock(b, q.frames, p.maxLen, p.vnet, &drops)
		if q.backlog() >= RingBacklogBlocks {
			for i := range frames {
				frames[i].Backlogged = true
			}
		}
		// Count before the handler runs, so that what it sees is
		// already in Stats.
		if drops != (dropCounts{}) {
			p.stats.addDrops(&drops)
			drops = dropCounts{}
		}
		if len(frames) > 0 {
			var bytes uint64
			for i := range frames {
				bytes += uint64(len(frames[i].Data))
			}
			p.stats.rxPackets.Add(uint64(len(frames)))
			p.stats.rxBytes.Add(bytes)
			h(q.id, frames)
		}
		// Hand the block back (TP_STATUS_KERNEL).
		atomic.StoreUint32(status, 0)
		q.blk = (q.blk + 1) % RingBlocks
		select {
		case <-ctx.Done():
			return nil
		default:
		}
	}
}
