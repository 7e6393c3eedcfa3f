package hw

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The TX ring (TxRing, TxRingBypass) and how it stays in step with the
// kernel.
//
// The ring is PACKET_TX_RING on receive queue 0's socket, mapped in one
// mmap after its receive ring, so it is TPACKET_V3 like that ring (V3
// transmit uses fixed slots, as V2 does). On that socket the kernel hands
// the frames we send to no tap of our own: the port's receive sockets
// (its fanout group) are skipped as the sender (skb_loop_sk), as they are
// for sendmmsg on that socket, where a TX socket of its own would have
// each frame cloned to queue 0's tap and run through the outgoing filter
// there. (A first version did that; on veth, 60-byte frames, it measured
// 1.96 us/frame against 1.78-1.92 on queue 0's socket: within the noise.)
// Each slot is a tpacket3_hdr and the frame after it; tp_status says
// whose the slot is:
//
//	AVAILABLE    ours: free to fill
//	SEND_REQUEST filled by us; the next send(2) hands it to the kernel
//	SENDING      the kernel's: an skb points at the slot's pages (the
//	             kernel does not copy the frame) until the device is done
//	             with it, then the skb's destructor makes it AVAILABLE
//	WRONG_FORMAT the kernel refused the frame (too long for the MTU, ...)
//
// The kernel walks the slots in order from its own head index, only in
// send(2) (tpacket_snd), and stops at the first slot that is not
// SEND_REQUEST. So txRing.head, the next slot we fill, equals the
// kernel's head between sends, as long as every slot we filled and the
// kernel did not take is made AVAILABLE again and head moved back to the
// first of them: a frame the kernel did not take (socket buffer full, a
// qdisc drop it asks us to retry, a refused frame) is dropped and
// counted, never left in the ring for a later send. All of it happens
// under txRing.mu, and the kernel touches a SEND_REQUEST slot only inside
// our send, so no slot changes hands behind our back except SENDING ->
// AVAILABLE.

// tpacket3_hdr (linux/if_packet.h) as a TX slot header, and the
// tp_status values of a TX ring. tp_next_offset (offset 0) must stay 0:
// the kernel refuses variable-sized TX slots.
const (
	t3Len    = 16 // tp_len, uint32
	t3Status = 20 // tp_status, uint32
	// txDataOff is where the kernel reads a frame in its slot:
	// tp_hdrlen - sizeof(struct sockaddr_ll) = TPACKET3_HDRLEN - 20 =
	// TPACKET_ALIGN(sizeof(struct tpacket3_hdr)) (tpacket_parse_header,
	// without PACKET_TX_HAS_OFF).
	txDataOff = frameHdrLen

	tpStatusAvailable   = 0
	tpStatusSendRequest = 1 << 0
	tpStatusSending     = 1 << 1
	tpStatusWrongFormat = 1 << 2
	// tpStatusBusy are the bits that make a slot not ours; the
	// destructor may or in timestamp bits, which do not.
	tpStatusBusy = tpStatusSendRequest | tpStatusSending | tpStatusWrongFormat
)

// txRing is a port's PACKET_TX_RING; see the comment above. It is safe
// for concurrent use: writers take mu.
type txRing struct {
	fd  int    // queue 0's socket
	mem []byte // the ring, part of queue 0's mapping
	// slotSize is the size of one slot; dataMax is the longest frame
	// written to one: the port's MTU + MaxL2Overhead, which a slot is
	// sized for. A longer frame never reaches the kernel, which would
	// log each one (tpacket_parse_header's "packet size is too long").
	slotSize, dataMax int
	slotsPerBlock     int
	nslots            int
	bypass            bool
	// vnet: the socket has PACKET_VNET_HDR, so every slot holds a
	// virtio-net header before its frame (tpacket_snd reads it there);
	// the ring sends plain frames only, each behind a zero header.
	vnet bool
	// devMTU is the interface's MTU in the kernel. With vnet headers
	// tpacket_snd no longer refuses a frame longer than it allows (it
	// leaves that to the segmentation a vnet header may ask for), and a
	// plain frame too long for the device then fails in the driver and
	// stops the whole send; so the ring refuses such frames itself, by the
	// kernel's rule (tooLong).
	devMTU int

	// mu protects head, frame and the contents of every slot that is ours.
	mu   sync.Mutex
	head int
	// frame[k] is the index in WriteFrames' batch of the frame in the
	// k-th slot filled since the last send, so that frames the kernel
	// did not take can be counted and those after a refused one sent
	// again.
	frame []int32
}

// txSlotSize is the TX ring slot that holds a frame of maxLen bytes,
// behind a virtio-net header if vnet.
func txSlotSize(maxLen int, vnet bool) int {
	if vnet {
		maxLen += VnetHdrLen
	}
	return (txDataOff + maxLen + TxRingSlotAlign - 1) / TxRingSlotAlign * TxRingSlotAlign
}

// newTxRing sizes the TX ring of a port whose frames are up to maxLen
// bytes; queue 0's setup creates and maps it (txRing.setup).
func newTxRing(maxLen, devMTU int, bypass, vnet bool) (*txRing, error) {
	slot := txSlotSize(maxLen, vnet)
	if slot > TxRingBlockSize {
		return nil, fmt.Errorf("TX ring: a %d-byte frame does not fit a %d-byte block", maxLen, TxRingBlockSize)
	}
	r := &txRing{fd: -1, slotSize: slot, dataMax: maxLen, bypass: bypass, vnet: vnet, devMTU: devMTU}
	r.slotsPerBlock = TxRingBlockSize / r.slotSize
	r.nslots = r.slotsPerBlock * TxRingBlocks
	r.frame = make([]int32, r.nslots)
	return r, nil
}

// size is the ring's length in the socket's mapping.
func (r *txRing) size() int { return TxRingBlockSize * TxRingBlocks }

// setup sets PACKET_QDISC_BYPASS and PACKET_TX_RING on fd, which is in
// TPACKET_V3 with its receive ring set and not yet mapped.
func (r *txRing) setup(fd int) error {
	if r.bypass {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
			return fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
		}
	}
	req := unix.TpacketReq3{
		Block_size: TxRingBlockSize,
		Block_nr:   TxRingBlocks,
		Frame_size: uint32(r.slotSize),
		Frame_nr:   uint32(r.nslots),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return fmt.Errorf("PACKET_TX_RING: %w", err)
	}
	r.fd = fd
	return nil
}

// close forgets the socket and the memory; queue 0 unmaps and closes them.
func (r *txRing) close() {
	r.mem = nil
	r.fd = -1
}

// slot returns slot k (0 <= k < nslots); slots do not span blocks, so
// a block may end in unused bytes.
func (r *txRing) slot(k int) []byte {
	off := k/r.slotsPerBlock*TxRingBlockSize + k%r.slotsPerBlock*r.slotSize
	return r.mem[off : off+r.slotSize : off+r.slotSize]
}

// status returns slot k's tp_status word, shared with the kernel.
func (r *txRing) status(k int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.slot(k)[t3Status]))
}

// freeSlots counts the slots that are ours (not busy), for tests.
func (r *txRing) freeSlots() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k := range r.nslots {
		if atomic.LoadUint32(r.status(k))&tpStatusBusy == 0 {
			n++
		}
	}
	return n
}

// tooLong reports whether the kernel would refuse f without vnet
// headers: longer than the device's MTU and Ethernet header, unless the
// excess is one 802.1Q tag (tpacket_snd: dev->mtu + reserve, and
// packet_extra_vlan_len_allowed).
func (r *txRing) tooLong(f []byte) bool {
	n := len(f) - EthernetHeaderLen
	if n <= r.devMTU {
		return false
	}
	return n > r.devMTU+VLANTagLen || binary.BigEndian.Uint16(f[12:]) != etherTypeVLAN
}

// maxEINTR bounds how often one WriteFrames resends after EINTR (the
// kernel returns it only for a blocking send, which ours is not).
const maxEINTR = 3

// write implements WriteFrames on the ring: it fills free slots from
// frames, hands them to the kernel with one send(2) per ring's worth, and
// counts what did not go (see the comment at the top of the file). It
// returns the number of frames the kernel took and an error only when the
// port cannot send at all. The caller holds Port.mu for reading.
func (r *txRing) write(p *Port, frames [][]byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var drops dropCounts
	sent, sentBytes := 0, uint64(0)
	var fatal error
	// checked is how far frames have been checked for size: a frame
	// before it that was dropped for its size is not counted again when
	// frames after a refused one are filled again.
	i, checked, eintr := 0, 0, 0
	for i < len(frames) {
		start, n := r.head, 0
		for i < len(frames) && n < r.nslots {
			f := frames[i]
			if len(f) > r.dataMax || len(f) < EthernetHeaderLen {
				if i >= checked {
					if len(f) > r.dataMax {
						drops[dropTxOversize]++
					} else {
						drops[dropTxError]++
					}
				}
				i++
				continue
			}
			if r.vnet && r.tooLong(f) {
				if i >= checked {
					drops[dropTxError]++
				}
				i++
				continue
			}
			k := (start + n) % r.nslots
			st := r.status(k)
			if atomic.LoadUint32(st)&tpStatusBusy != 0 {
				break // ring full: the kernel still has this slot
			}
			s := r.slot(k)
			if r.vnet {
				clear(s[txDataOff : txDataOff+VnetHdrLen])
				copy(s[txDataOff+VnetHdrLen:], f)
				le.PutUint32(s[t3Len:], uint32(VnetHdrLen+len(f)))
			} else {
				copy(s[txDataOff:], f)
				le.PutUint32(s[t3Len:], uint32(len(f)))
			}
			atomic.StoreUint32(st, tpStatusSendRequest)
			r.frame[n] = int32(i)
			n++
			i++
		}
		checked = max(checked, i)
		if n == 0 {
			if i < len(frames) {
				// Not one slot free: drop the rest, do not wait for
				// the device.
				drops[dropTxRingFull] += uint64(len(frames) - i)
			}
			break
		}
		// A raw syscall, never blocking, for the reason WriteFrames
		// gives for sendmmsg.
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(r.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)

		// The kernel took a prefix of the n slots.
		taken := 0
		for taken < n {
			st := atomic.LoadUint32(r.status((start + taken) % r.nslots))
			if st&(tpStatusSendRequest|tpStatusWrongFormat) != 0 {
				break
			}
			taken++
		}
		for _, fi := range r.frame[:taken] {
			sentBytes += uint64(len(frames[fi]))
		}
		sent += taken
		r.head = (start + taken) % r.nslots
		if taken == n {
			continue
		}
		// Take back the slots the kernel left, so its head and ours
		// agree again.
		u := r.head
		refused := atomic.LoadUint32(r.status(u))&tpStatusWrongFormat != 0
		for j := taken; j < n; j++ {
			atomic.StoreUint32(r.status((start+j)%r.nslots), tpStatusAvailable)
		}
		untaken := uint64(n - taken)
		switch {
		case errno == unix.ENETDOWN || errno == unix.ENXIO || errno == unix.ENODEV || errno == unix.EBADF:
			drops[dropTxError] += untaken + uint64(len(frames)-i)
			fatal = fmt.Errorf("hw: send on %s: %w", p.name, errno)
			i = len(frames)
		case refused:
			// Drop the refused frame, fill the rest again.
			drops[dropTxError]++
			i = int(r.frame[taken]) + 1
		case errno == unix.EINTR && eintr < maxEINTR:
			eintr++
			i = int(r.frame[taken])
		case errno == 0 || errno == unix.ENOBUFS || errno == unix.EAGAIN || errno == unix.EINTR:
			// The socket buffer or the device queue is full.
			drops[dropTxNoBufs] += untaken
		default:
			drops[dropTxError] += untaken
		}
	}
	p.stats.txPackets.Add(uint64(sent))
	p.stats.txBytes.Add(sentBytes)
	p.stats.addDrops(&drops)
	return sent, fatal
}
