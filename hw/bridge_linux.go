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
}

func newBridgeQueue() *bridgeQueue {
	n := maxFramesPerBlock(RingBlockSize)
	return &bridgeQueue{
		out: make([][]byte, 0, n),
		// A block's frame data fits in a block; each frame may grow by
		// one tag.
		scratch: make([]byte, 0, RingBlockSize+n*VLANTagLen),
	}
}

// forward sends frames to dst straight from ring memory. A frame whose
// outer tag the kernel stripped is copied into scratch with its tag put
// back after the MAC addresses (IEEE 802.1Q clause 9).
func (bq *bridgeQueue) forward(dst FrameWriter, frames []Frame) {
	out, s := bq.out[:0], bq.scratch[:0]
	for i := range frames {
		f := &frames[i]
		if !f.VLANValid || len(f.Data) < 12 {
			out = append(out, f.Data)
			continue
		}
		need := len(f.Data) + VLANTagLen
		if cap(s)-len(s) < need {
			// Cannot happen for ring blocks; stay correct anyway.
			dst.WriteFrames(out)
			out, s = out[:0], s[:0]
		}
		buf := s[len(s) : len(s)+need]
		copy(buf, f.Data[:12])
		binary.BigEndian.PutUint16(buf[12:], f.VLANTPID)
		binary.BigEndian.PutUint16(buf[14:], f.VLANTCI)
		copy(buf[16:], f.Data[12:])
		s = s[:len(s)+need]
		out = append(out, buf)
	}
	dst.WriteFrames(out)
	clear(out)
	bq.out = out[:0]
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
