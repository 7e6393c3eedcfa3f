package hw

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The light ring: why a queue has two sockets.
//
// The TPACKET_V3 ring hands frames over a block at a time: the kernel
// fills the current block and gives it to user space only when the next
// frame does not fit or the retire timer fires (tp_retire_blk_tov, at
// least 1 ms, rounded up to a jiffy: 4 ms at HZ=250, 10 ms at HZ=100),
// and it wakes the reader (sk_data_ready) only then. Under load a block
// fills in well under that and one wakeup carries ~170 frames; with light
// traffic every frame waits for the timer, on each port it crosses (1.65
// ms of a 0.075 ms kernel RTT on the lab's veths). User space cannot read
// the live block instead: tpacket_rcv sets a frame's TP_STATUS_USER
// before it writes tp_len and tp_mac, with no barrier after the data
// copy, so nothing in the block says a frame is complete
// (net/packet/af_packet.c, tpacket_rcv and prb_fill_curr_block).
//
// So a single-queue port opens a second socket with a TPACKET_V2 ring:
// one frame per slot, handed over with its own status word after a write
// barrier and with a wakeup per frame. Both sockets join one
// PACKET_FANOUT_EBPF group whose program returns the member to take each
// frame, read from a one-element array map: the V2 "light" ring while
// traffic is light, the V3 ring once it is not (rates in constants.go).
// The receiver moves the port with one map update, which takes effect at
// once. (Swapping a PACKET_FANOUT_CBPF program instead waits for an RCU
// grace period, synchronize_net in __fanout_set_data_bpf: tens of
// milliseconds on a busy 2-core machine, during which the ring being
// left is not read and the V3 ring's 16 blocks, retired every 1 ms at a
// trickle, could overrun.) A frame steered by the old value is written
// within microseconds: the receiver empties the ring it leaves, and
// looks at it again before each V3 block, so frames stay in order across
// a move.
//
// The group has no PACKET_FANOUT_FLAG_ROLLOVER: a full ring that passed
// frames to the other would reorder a flow (the kernel rolls over a
// "huge" flow's frames at 75 % fill, picked by a sampled hash history,
// so a flow's frames alternate between the rings), and a reordered TCP
// segment costs a stream more than a lost one. A burst on an idle port
// that outruns the light ring's slots (LightRingSlots) before the
// receiver moves the port is a counted "ring" drop.

// Fanout member indexes, in join order.
const (
	fanoutBulk  = 0 // the V3 ring
	fanoutLight = 1 // the V2 light ring
)

// lightSettle is how long a move to the light ring keeps reading the V3
// ring for frames steered there just before the move: a frame in flight
// in tpacket_rcv takes microseconds.
const lightSettle = 200 * time.Microsecond

// lightRing is a queue's TPACKET_V2 socket and ring. Only the queue's
// routineReceive reads it.
type lightRing struct {
	// ringSocket's mapping is the ring: blocks of slotsPerBlock slots of
	// slotSize bytes (a slot never spans blocks).
	ringSocket
	slotSize, slotsPerBlock int
	blockSize, slots        int
	next                    int // next slot the kernel hands over
	// sel is the fanout program's one-element array: the member index
	// (fanoutBulk, fanoutLight) that takes the frames; prog the program.
	sel  *ebpf.Map
	prog *ebpf.Program
	// cond is waitCond as a func value, made once so that a wait (one
	// per frame at light rates) does not allocate; waitStop and woken
	// are its state for the current wait.
	cond     func(uintptr) bool
	waitStop *atomic.Bool
	woken    bool
}

// lightGeometry returns the light ring's slot size and count for frames
// of up to frameLen bytes: the slot holds the tpacket2_hdr, sockaddr_ll,
// the kernel's alignment and the reserve before the frame (macoff: 78
// bytes, 88 with a virtio-net header), rounded to TPACKET_ALIGNMENT. A block is a power
// of two (the kernel allocates each as 2^order pages, so any other size
// wastes the rest) of at least LightRingBlockSize and two slots: a 64 KiB
// superframe slot alone in a 128 KiB block would waste half of it.
func lightGeometry(frameLen int) (slotSize, slotsPerBlock, blockSize, blocks int) {
	const hdrRoom = 96 // macoff (88) with slack
	slotSize = (hdrRoom + frameLen + 15) &^ 15
	blockSize = os.Getpagesize()
	for blockSize < LightRingBlockSize || blockSize < 2*slotSize {
		blockSize *= 2
	}
	slotsPerBlock = blockSize / slotSize
	slots := LightRingSlots
	if frameLen > RingFrameSize {
		slots = LightRingGSOSlots
	}
	blocks = (slots + slotsPerBlock - 1) / slotsPerBlock
	return slotSize, slotsPerBlock, blockSize, blocks
}

// openLightRing opens q's light ring and joins it and q's V3 socket into
// one fanout group, the light ring taking the frames.
func openLightRing(q *rxQueue, filter []bpf.RawInstruction) (*lightRing, error) {
	p := q.port
	l := &lightRing{ringSocket: ringSocket{fd: -1}}
	l.cond = l.waitCond
	var err error
	l.sel, err = ebpf.NewMap(&ebpf.MapSpec{Name: "gvrouter_sel", Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("fanout selector map: %w", err)
	}
	l.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "gvrouter_fanout",
		Type:         ebpf.SocketFilter,
		Instructions: selectorInstructions(l.sel.FD()),
		License:      "Dual MIT/GPL",
	})
	if err != nil {
		l.close()
		return nil, fmt.Errorf("fanout selector program: %w", err)
	}
	arg := (unix.PACKET_FANOUT_EBPF | unix.PACKET_FANOUT_FLAG_UNIQUEID) << 16
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
		l.close()
		return nil, fmt.Errorf("PACKET_FANOUT_EBPF: %w", err)
	}
	id, err := unix.GetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("PACKET_FANOUT id: %w", err)
	}
	if err := unix.SetsockoptInt(q.fd, unix.SOL_PACKET, unix.PACKET_FANOUT_DATA, l.prog.FD()); err != nil {
		l.close()
		return nil, fmt.Errorf("PACKET_FANOUT_DATA: %w", err)
	}
	// The light ring's index is set before it joins: alone in the
	// group, the V3 socket takes every frame (the index is taken
	// modulo the members).
	if err := l.steer(true); err != nil {
		l.close()
		return nil, err
	}
	l.conn, err = packet.Listen(&net.Interface{Index: p.ifidx, Name: p.name}, packet.Raw, unix.ETH_P_ALL, &packet.Config{Filter: filter})
	if err != nil {
		l.close()
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := l.setup(p, uint16(id)); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// selectorInstructions is the fanout program: return sel[0] (0 if the
// lookup fails, which it cannot for an array).
func selectorInstructions(selFD int) asm.Instructions {
	return asm.Instructions{
		// *(u32 *)(fp - 4) = 0: the key
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, selFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "miss"),
		asm.LoadMem(asm.R0, asm.R0, 0, asm.Word),
		asm.Return(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("miss"),
		asm.Return(),
	}
}

func (l *lightRing) setup(p *Port, fanoutID uint16) error {
	var err error
	if l.rc, err = l.conn.SyscallConn(); err != nil {
		return err
	}
	if err := l.rc.Control(func(fd uintptr) { l.fd = int(fd) }); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(l.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fmt.Errorf("PACKET_VERSION TPACKET_V2: %w", err)
	}
	frameLen := p.maxLen
	if p.vnet {
		if err := unix.SetsockoptInt(l.fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return fmt.Errorf("PACKET_VNET_HDR: %w", err)
		}
		frameLen = MaxGSOFrameLen
	}
	var blocks int
	l.slotSize, l.slotsPerBlock, l.blockSize, blocks = lightGeometry(frameLen)
	l.slots = l.slotsPerBlock * blocks
	if err := unix.SetsockoptInt(l.fd, unix.SOL_PACKET, unix.PACKET_RESERVE, ringReserve); err != nil {
		return fmt.Errorf("PACKET_RESERVE: %w", err)
	}
	req := unix.TpacketReq{
		Block_size: uint32(l.blockSize),
		Block_nr:   uint32(blocks),
		Frame_size: uint32(l.slotSize),
		Frame_nr:   uint32(l.slots),
	}
	if err := unix.SetsockoptTpacketReq(l.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("PACKET_RX_RING (V2): %w", err)
	}
	if l.mapping, err = unix.Mmap(l.fd, 0, l.blockSize*blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap light ring: %w", err)
	}
	addReceiveRing(l.mapping)
	if err := unix.SetsockoptInt(l.fd, unix.SOL_PACKET, unix.PACKET_FANOUT, unix.PACKET_FANOUT_EBPF<<16|int(fanoutID)); err != nil {
		return fmt.Errorf("PACKET_FANOUT join %d: %w", fanoutID, err)
	}
	return nil
}

// steer points the fanout group at the light ring (light) or the V3
// ring. The change holds for every frame the kernel places after the
// map update; frames placed before are written within microseconds.
func (l *lightRing) steer(light bool) error {
	idx := uint32(fanoutBulk)
	if light {
		idx = fanoutLight
	}
	if err := l.sel.Update(uint32(0), idx, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("fanout selector: %w", err)
	}
	return nil
}

// slot returns slot i and its status word.
func (l *lightRing) slot(i int) ([]byte, *uint32) {
	off := i/l.slotsPerBlock*l.blockSize + i%l.slotsPerBlock*l.slotSize
	s := l.mapping[off : off+l.slotSize : off+l.slotSize]
	return s, (*uint32)(unsafe.Pointer(&s[shStatus]))
}

// ready reports whether the kernel handed over the next unread slot.
func (l *lightRing) ready() bool {
	_, st := l.slot(l.next)
	return atomic.LoadUint32(st)&tpStatusUser != 0
}

// collect parses the slots the kernel handed over, from l.next on, into frames[:0] (up to cap(frames) slots) and returns them and the
// number of slots taken; release hands slots back once their frames are
// done.
func (l *lightRing) collect(frames []Frame, maxLen int, vnet bool, drops *dropCounts) ([]Frame, int) {
	frames = frames[:0]
	n := 0
	for n < l.slots && n < cap(frames) {
		s, st := l.slot((l.next + n) % l.slots)
		if atomic.LoadUint32(st)&tpStatusUser == 0 {
			break
		}
		frames = parseSlot(s, frames, maxLen, vnet, drops)
		n++
	}
	return frames, n
}

// release hands n slots from l.next back to the kernel.
func (l *lightRing) release(n int) {
	for range n {
		_, st := l.slot(l.next)
		atomic.StoreUint32(st, 0) // TP_STATUS_KERNEL
		l.next = (l.next + 1) % l.slots
	}
}

// wait parks the goroutine until the next slot is the user's, stop is
// set, or d passes (os.ErrDeadlineExceeded).
func (l *lightRing) wait(stop *atomic.Bool, d time.Duration) error {
	if err := l.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	l.waitStop, l.woken = stop, false
	return l.rc.Read(l.cond)
}

// waitCond is wait's condition, called by the runtime's poller.
func (l *lightRing) waitCond(fd uintptr) bool {
	if l.ready() || l.waitStop.Load() {
		return true
	}
	if l.woken {
		// As rxQueue.wait: a wake without a frame is an error report
		// (link down); reading SO_ERROR clears it.
		unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
	}
	l.woken = true
	return false
}

func (l *lightRing) close() {
	if l.prog != nil {
		l.prog.Close()
		l.prog = nil
	}
	if l.sel != nil {
		l.sel.Close()
		l.sel = nil
	}
	removeReceiveRing(l.mapping) // before the unmap: ExtendFrame must not lend from it
	l.closeSocket()
}

// errLightStopped ends routineReceive's loop (stop or ctx).
var errLightStopped = errors.New("stopped")
