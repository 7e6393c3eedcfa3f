package xsk

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UmemConfig sizes a UMEM.
type UmemConfig struct {
	// FrameSize is the size of one frame (chunk), 2048 or 4096; 0 means
	// DefaultFrameSize. Aligned mode: every frame starts at a multiple of
	// it, which lets a descriptor's address name its frame.
	FrameSize int
	// Frames is the number of frames, e.g. 4096; 0 means DefaultFrames.
	// Size it to cover every ring it feeds: each socket's fill ring and
	// TX ring, plus what the caller holds at once.
	Frames int
	// Headroom is the space the kernel leaves free at the start of each
	// received frame, before its own XDP_PACKET_HEADROOM (256 bytes), e.g.
	// 0. The router pushes at most a few VLAN tags and a SecTAG in front of
	// a frame, which XDP_PACKET_HEADROOM already covers.
	Headroom int
}

// Sizing defaults.
const (
	// DefaultFrameSize is 2 KiB: a 1500-byte MTU frame with its tags plus
	// XDP_PACKET_HEADROOM fits, and twice as many frames fit in memory
	// as with 4 KiB.
	DefaultFrameSize = 2048
	// DefaultFrames is 4096 frames (8 MiB at 2 KiB): one socket's fill
	// and TX rings of DefaultRingSize each, with nothing left idle.
	DefaultFrames = 2 * DefaultRingSize
	// maxFrames bounds Frames so that the accounting array and the free
	// list stay small (1 GiB of UMEM at 4 KiB frames).
	maxFrames = 1 << 18
)

// Frame places: every UMEM frame is in exactly one.
const (
	stateFree uint8 = iota // on the UMEM's free list
	stateFill              // on a fill ring, or the kernel's until an RX ring returns it
	stateHeld              // the caller's: received, or allocated for transmit
	stateTX                // on a TX ring, or the kernel's until a completion ring returns it
	// stateLent is the caller's and on a TX ring at once: Send lent a
	// received frame to a TX ring while the caller's batch still holds
	// it. Release hands it to the ring (TX); completion hands it back
	// to the caller (Sent).
	stateLent
	// stateSent is the caller's after the TX ring it was lent to is done
	// with it; Release frees it. It is not lent twice.
	stateSent
	numStates
)

// Counts says where a UMEM's frames are. Free + Fill + RX + Held + Lent
// + TX + Completion is always the number of frames.
type Counts struct {
	// Free frames are on the free list, ready for a fill ring or Alloc.
	Free int
	// Fill frames were put on a fill ring and not yet received: they are
	// in the fill ring or in the driver.
	Fill int
	// RX frames wait on an RX ring to be read.
	RX int
	// Held frames are the caller's: received and not yet released or
	// transmitted, or allocated and not yet transmitted.
	Held int
	// Lent frames are the caller's and on a TX ring at once (Send lent
	// them): in flight from the buffer they arrived in.
	Lent int
	// TX frames were put on a TX ring and not yet completed.
	TX int
	// Completion frames were sent and wait on a completion ring to be
	// recycled.
	Completion int
}

// Total is the number of frames Counts accounts for.
func (c Counts) Total() int {
	return c.Free + c.Fill + c.RX + c.Held + c.Lent + c.TX + c.Completion
}

// Umem is the packet memory shared by one or more XSKs: an anonymous
// mapping cut into equal frames, registered with the kernel by the first
// socket made on it and shared by the others (XDP_SHARED_UMEM), so a frame
// received on one port can be sent from another without a copy.
//
// A Umem is safe for concurrent use. It keeps every frame's place (free,
// fill, held, TX) and checks each move, so a frame can neither leak nor be
// handed out twice: a descriptor whose frame is not where it should be is
// refused and counted (Stats.BadDescs).
type Umem struct {
	mem       []byte
	frameSize uint64
	shift     uint // log2(frameSize)
	headroom  uint64
	frames    int

	// mu protects free, state, holder, count, sockets, reg, nextID,
	// closed and badDescs.
	mu sync.Mutex
	// free is a stack of frame base addresses.
	free  []uint64
	state []uint8
	// holder is, for a frame in Fill, TX or Lent, the id of the socket
	// whose rings it went to, so that closing a socket takes back exactly its
	// frames, those the driver took off the fill ring included.
	holder []uint16
	count  [numStates]int
	// reg is an open socket bound to the UMEM, whose descriptor later
	// sockets name to share it (XDP_SHARED_UMEM); nil when none is open.
	reg      *Socket
	sockets  []*Socket
	nextID   uint16
	closed   bool
	badDescs uint64
}

// NewUmem maps a UMEM of cfg.Frames frames. The kernel learns of it when
// the first socket is made on it (NewSocket).
func NewUmem(cfg UmemConfig) (*Umem, error) {
	if cfg.FrameSize == 0 {
		cfg.FrameSize = DefaultFrameSize
	}
	if cfg.Frames == 0 {
		cfg.Frames = DefaultFrames
	}
	if cfg.FrameSize != 2048 && cfg.FrameSize != 4096 {
		return nil, fmt.Errorf("xsk: umem: frame size %d, want 2048 or 4096", cfg.FrameSize)
	}
	if cfg.Frames < 1 || cfg.Frames > maxFrames {
		return nil, fmt.Errorf("xsk: umem: %d frames, want 1 to %d", cfg.Frames, maxFrames)
	}
	// The kernel refuses headroom that leaves less than
	// XDP_PACKET_HEADROOM + 128 bytes of frame (xdp_umem_reg); keep room
	// for a full-size frame as well.
	if cfg.Headroom < 0 || cfg.Headroom > cfg.FrameSize-unix.XDP_PACKET_HEADROOM-minFrameData {
		return nil, fmt.Errorf("xsk: umem: headroom %d with %d-byte frames, want 0 to %d", cfg.Headroom, cfg.FrameSize, cfg.FrameSize-unix.XDP_PACKET_HEADROOM-minFrameData)
	}
	mem, err := unix.Mmap(-1, 0, cfg.Frames*cfg.FrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("xsk: umem: mmap %d bytes: %w", cfg.Frames*cfg.FrameSize, err)
	}
	u := &Umem{
		mem:       mem,
		frameSize: uint64(cfg.FrameSize),
		shift:     uint(bits.TrailingZeros(uint(cfg.FrameSize))),
		headroom:  uint64(cfg.Headroom),
		frames:    cfg.Frames,
		free:      make([]uint64, cfg.Frames),
		state:     make([]uint8, cfg.Frames),
		holder:    make([]uint16, cfg.Frames),
	}
	// Pop order: frame 0 first.
	for i := range u.free {
		u.free[i] = uint64(cfg.Frames-1-i) << u.shift
	}
	u.count[stateFree] = cfg.Frames
	return u, nil
}

// minFrameData is the least packet room a frame keeps after the headroom:
// a 1500-byte MTU frame with two VLAN tags.
const minFrameData = 1522

// FrameSize returns the size of one frame.
func (u *Umem) FrameSize() int { return int(u.frameSize) }

// Frames returns the number of frames.
func (u *Umem) Frames() int { return u.frames }

// DataOffset is where in its frame a received packet starts (in copy mode,
// and in zero-copy mode on drivers that keep the default headroom), and
// where Alloc places a packet: the UMEM's headroom plus
// XDP_PACKET_HEADROOM. The bytes before it are free for pushing headers.
func (u *Umem) DataOffset() int { return int(u.headroom) + unix.XDP_PACKET_HEADROOM }

// Frame returns the n bytes at UMEM address addr, with the capacity left
// to the end of the frame; nil if they do not lie inside one frame. The
// slice is valid while the frame is the caller's (Held).
func (u *Umem) Frame(addr uint64, n int) []byte {
	idx := addr >> u.shift
	end := (idx + 1) << u.shift
	if idx >= uint64(u.frames) || n < 0 || addr+uint64(n) > end {
		return nil
	}
	return u.mem[addr : addr+uint64(n) : end]
}

// Data returns the packet d describes (Frame(d.Addr, d.Len)).
func (u *Umem) Data(d Desc) []byte { return u.Frame(d.Addr, int(d.Len)) }

// Alloc gives the caller free frames for transmit: it fills descs with up
// to len(descs) frames (Addr at DataOffset in the frame, Len 0) and
// returns how many. Each becomes Held until it is transmitted or
// released.
func (u *Umem) Alloc(descs []Desc) int {
	u.mu.Lock()
	n := min(len(descs), len(u.free))
	top := len(u.free)
	for i := range n {
		a := u.free[top-1-i]
		u.state[a>>u.shift] = stateHeld
		descs[i] = Desc{Addr: a + u.headroom + unix.XDP_PACKET_HEADROOM}
	}
	u.free = u.free[:top-n]
	u.count[stateFree] -= n
	u.count[stateHeld] += n
	u.mu.Unlock()
	return n
}

// Release gives the caller's frames back: a Held frame (received or
// allocated) goes to the free list; a frame Send lent to a TX ring goes
// on belonging to that ring, and to the free list once the kernel
// completed it; a lent frame the kernel already completed goes to the
// free list. A descriptor whose frame is none of these is refused and
// counted (Stats.BadDescs). It returns how many frames it took back.
func (u *Umem) Release(descs []Desc) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	took := 0
	for _, d := range descs {
		idx := d.Addr >> u.shift
		if idx >= uint64(u.frames) {
			u.badDescs++
			continue
		}
		switch u.state[idx] {
		case stateHeld, stateSent:
			u.freeLocked(d.Addr, u.state[idx])
		case stateLent:
			u.moveLocked(d.Addr, stateLent, stateTX, u.holder[idx])
		default:
			u.badDescs++
			continue
		}
		took++
	}
	return took
}

// Locate returns the UMEM address of b's first byte if b lies inside one
// frame of u: a pointer range check, for telling a view of a received
// frame from other memory. It says nothing of the frame's place.
func (u *Umem) Locate(b []byte) (addr uint64, ok bool) {
	if len(b) == 0 || len(u.mem) == 0 {
		return 0, false
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(u.mem)))
	if off >= uintptr(len(u.mem)) { // below the UMEM too: the difference wraps
		return 0, false
	}
	addr = uint64(off)
	if end := (addr>>u.shift + 1) << u.shift; addr+uint64(len(b)) > end {
		return 0, false
	}
	return addr, true
}

// Extend returns b grown by head bytes at its front, in the same frame
// (b's first byte at index head), with the capacity left to the frame's
// end; nil if b does not lie in one frame of u (Locate) or fewer than
// head bytes of its frame lie before it. The bytes before a received
// packet are the UMEM headroom and XDP_PACKET_HEADROOM, which neither
// the kernel nor our program writes: the frame's holder may push headers
// into them (a VLAN tag, a SecTAG) and send the frame from there.
func (u *Umem) Extend(b []byte, head int) []byte {
	addr, ok := u.Locate(b)
	if !ok || head < 0 || addr&(u.frameSize-1) < uint64(head) {
		return nil
	}
	start := addr - uint64(head)
	return u.mem[start : addr+uint64(len(b)) : (addr>>u.shift+1)<<u.shift]
}

// moveLocked moves the frame of addr from one place to another, on
// behalf of socket id; it reports false, and counts a bad descriptor, if
// the frame was not in from.
func (u *Umem) moveLocked(addr uint64, from, to uint8, id uint16) bool {
	idx := addr >> u.shift
	if idx >= uint64(u.frames) || u.state[idx] != from {
		u.badDescs++
		return false
	}
	u.state[idx] = to
	u.holder[idx] = id
	u.count[from]--
	u.count[to]++
	return true
}

// takeFreeLocked pops up to len(dst) free frames into dst, marking them
// to on behalf of socket id, and returns how many.
func (u *Umem) takeFreeLocked(dst []uint64, to uint8, id uint16) int {
	n := min(len(dst), len(u.free))
	top := len(u.free)
	for i := range n {
		a := u.free[top-1-i]
		u.state[a>>u.shift] = to
		u.holder[a>>u.shift] = id
		dst[i] = a
	}
	u.free = u.free[:top-n]
	u.count[stateFree] -= n
	u.count[to] += n
	return n
}

// freeLocked puts the frame of addr, found in from, on the free list.
func (u *Umem) freeLocked(addr uint64, from uint8) bool {
	if !u.moveLocked(addr, from, stateFree, 0) {
		return false
	}
	u.free = append(u.free, addr>>u.shift<<u.shift)
	return true
}

// completeLocked takes back a frame a completion ring returned: to the
// free list, or, if it was lent and its holder still has it, to the
// holder (Sent). It reports false, and counts a bad descriptor, for a
// frame that was on no TX ring.
func (u *Umem) completeLocked(addr uint64) bool {
	idx := addr >> u.shift
	if idx < uint64(u.frames) && u.state[idx] == stateLent {
		return u.moveLocked(addr, stateLent, stateSent, 0)
	}
	return u.freeLocked(addr, stateTX)
}

// reclaimLocked takes back every frame on the rings of socket id, and
// those its driver queue held: Fill and TX frames to the free list, Lent
// ones to their holder (Sent). The kernel lets go of all of them when
// the socket closes.
func (u *Umem) reclaimLocked(id uint16) {
	for i, st := range u.state {
		if u.holder[i] != id {
			continue
		}
		switch st {
		case stateFill, stateTX:
			u.freeLocked(uint64(i)<<u.shift, st)
		case stateLent:
			u.moveLocked(uint64(i)<<u.shift, stateLent, stateSent, 0)
		}
	}
}

// Counts returns where the UMEM's frames are. It is exact when no socket
// of the UMEM is moving frames; while they move, a frame may be seen in
// the place it is leaving or the one it enters, but never in both.
func (u *Umem) Counts() Counts {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := Counts{
		Free: u.count[stateFree],
		Fill: u.count[stateFill],
		Held: u.count[stateHeld] + u.count[stateSent],
		Lent: u.count[stateLent],
		TX:   u.count[stateTX],
	}
	for _, s := range u.sockets {
		// What waits on the RX and completion rings is still Fill and
		// TX (or Lent) in the accounting: the rings' own indices say
		// how much.
		rx := min(int(s.rx.pending()), c.Fill)
		c.RX += rx
		c.Fill -= rx
		n := int(s.comp.pending())
		c.Completion += n
		tx := min(n, c.TX)
		c.TX -= tx
		c.Lent -= min(n-tx, c.Lent)
	}
	return c
}

// BadDescs returns how many descriptors were refused because their frame
// was not where the move needed it (a caller releasing a frame twice, or
// a kernel ring returning a frame it was never given).
func (u *Umem) BadDescs() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.badDescs
}

// ErrBusy means a Umem was closed while sockets still used it.
var ErrBusy = errors.New("umem still has sockets")

// Close unmaps the UMEM. Every socket made on it must be closed first.
func (u *Umem) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil
	}
	if len(u.sockets) > 0 {
		return fmt.Errorf("xsk: close umem: %w (%d open)", ErrBusy, len(u.sockets))
	}
	u.closed = true
	return unix.Munmap(u.mem)
}
