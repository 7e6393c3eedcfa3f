package hw

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// bridgeQueue is the forwarding state of one receive queue of a bridged
// port: the frame list handed to WriteFrames and scratch space for frames
// whose stripped VLAN tag must go back in-band. Only that queue's
// goroutine uses it.
type bridgeQueue struct {
	out     [][]byte
	scratch []byte
	// gso is out's offload metadata, for a batch that has superframes or
	// partial checksums (vnet headers on); offload says whether it has.
	gso     []GSO
	offload bool
}

func newBridgeQueue() *bridgeQueue {
	n := maxFramesPerBlock(RingBlockSize)
	return &bridgeQueue{
		out: make([][]byte, 0, n),
		gso: make([]GSO, 0, n),
		// A block's frame data fits in a block; each frame may grow by
		// one tag.
		scratch: make([]byte, 0, RingBlockSize+n*VLANTagLen),
	}
}

// forward sends frames to dst straight from ring memory. A frame whose
// outer tag the kernel stripped gets its tag put back after the MAC
// addresses (IEEE 802.1Q clause 9) in the ring's room before it
// (RingHeadroom), or, outside a ring, in a copy in scratch. Superframes and
// partial checksums (vnet headers on) go on with their metadata, which
// dst sends whole if it can (GSOWriter) and counts as dropped if not.
func (bq *bridgeQueue) forward(dst FrameWriter, frames []Frame) {
	out, s, gso := bq.out[:0], bq.scratch[:0], bq.gso[:0]
	bq.offload = false
	for i := range frames {
		f := &frames[i]
		g := f.GSO
		g.DataValid = false // a receive-only flag
		if g != (GSO{}) {
			bq.offload = true
		}
		if !f.VLANValid || len(f.Data) < 12 {
			out = append(out, f.Data)
			gso = append(gso, g)
			continue
		}
		if x := extendInRing(f.Data, VLANTagLen); x != nil {
			// In the ring's room before the frame (lend_linux.go).
			copy(x[:12], x[VLANTagLen:VLANTagLen+12])
			binary.BigEndian.PutUint16(x[12:], f.VLANTPID)
			binary.BigEndian.PutUint16(x[14:], f.VLANTCI)
			out = append(out, x)
			gso = append(gso, retagGSO(g))
			continue
		}
		need := len(f.Data) + VLANTagLen
		if cap(s)-len(s) < need {
			// Cannot happen for ring blocks; stay correct anyway.
			bq.write(dst, out, gso)
			out, s, gso = out[:0], s[:0], gso[:0]
		}
		buf := s[len(s) : len(s)+need]
		copy(buf, f.Data[:12])
		binary.BigEndian.PutUint16(buf[12:], f.VLANTPID)
		binary.BigEndian.PutUint16(buf[14:], f.VLANTCI)
		copy(buf[16:], f.Data[12:])
		s = s[:len(s)+need]
		out = append(out, buf)
		gso = append(gso, retagGSO(g))
	}
	bq.write(dst, out, gso)
	clear(out)
	bq.out, bq.gso = out[:0], gso[:0]
}

// retagGSO is g for the frame with its tag back in-band: the offsets
// into the frame move by the tag.
func retagGSO(g GSO) GSO {
	if g.NeedsCsum {
		g.CsumStart += VLANTagLen
	}
	if g.Type != GSONone {
		g.HdrLen += VLANTagLen
	}
	return g
}

// write sends out, with its metadata if the batch has any.
func (bq *bridgeQueue) write(dst FrameWriter, out [][]byte, gso []GSO) {
	if w, ok := dst.(GSOWriter); ok && bq.offload {
		w.WriteFramesGSO(out, gso)
		return
	}
	dst.WriteFrames(out)
}

// BridgePort is a port Bridge can join: a Port, or an AF_XDP port
// (hw/xdpport), whose frames never carry a stripped tag.
type BridgePort interface {
	FrameWriter
	// Run hands received batches to h until ctx ends (Port.Run).
	Run(ctx context.Context, h BatchHandler) error
	// Queues is the number of receive queues Run reads, each on a
	// goroutine of its own.
	Queues() int
	// SetPromiscuous turns the interface's promiscuous mode on for as
	// long as the port is open.
	SetPromiscuous(on bool) error
}

var _ BridgePort = (*Port)(nil)

// Bridge forwards every frame received on a to b and every frame received
// on b to a, straight from ring memory, until ctx is done: a layer-2
// bridge made of the port code alone (the baseline of the router bench).
// It puts both ports in promiscuous mode for as long as they are open.
// Both ports must not be running otherwise.
func Bridge(ctx context.Context, a, b BridgePort) error {
	for _, p := range []BridgePort{a, b} {
		if err := p.SetPromiscuous(true); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run := func(src, dst BridgePort) error {
		qs := make([]*bridgeQueue, src.Queues())
		for i := range qs {
			qs[i] = newBridgeQueue()
		}
		err := src.Run(ctx, func(queue int, frames []Frame) {
			qs[queue].forward(dst, frames)
		})
		cancel() // one side stopping stops the bridge
		return err
	}
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { errA = run(a, b) })
	wg.Go(func() { errB = run(b, a) })
	wg.Wait()
	return errors.Join(errA, errB)
}

// SetPromiscuous turns the interface's promiscuous mode on or off
// through a packet membership (PACKET_MR_PROMISC, github.com/mdlayher/packet's
// SetPromiscuous) on queue 0's socket; the kernel drops it with the
// socket.
func (p *Port) SetPromiscuous(on bool) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.queues[0].conn.SetPromiscuous(on); err != nil {
		return fmt.Errorf("hw: promiscuous mode on %s: %w", p.name, err)
	}
	return nil
}
