package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// The receive data path, in the order a frame meets it, each stage with
// its function and file. dispatch.go, fastpath.go and classify.go put
// their functions in this order.
//
//  1. Port receive loop (hw/rx_linux.go rxQueue.routineReceive; an
//     AF_XDP or TAP port's Run alike): one batch per ring block, frames
//     pointing into the ring until the handler returns. The router puts
//     the port's receive queue in front of stage 2 (rxqueue.go
//     RxQueue.HandleBatch): a small batch that finds it empty goes on at
//     once; the rest is copied into flow queues and handed on by the
//     queue's worker (rxQueue.serve) in batches of its choosing, sparse
//     flows first, CoDel dropping or ECN-marking what waited too long.
//  2. Port entry (port.go PortInput.HandleBatch): the port's capture, if
//     one runs, then the port's Trunk; with none the batch is a counted
//     drop.
//  3. VLAN demux (vlan.go Trunk.HandleBatch): txBatcher.begin
//     (txbatch.go), the tags taken off (untag), each run of frames of one
//     interface to its endpoint.
//  4. Interface entry (macsec.go Endpoint.receive): the interface's
//     capture (capture.go Endpoint.captureRx), MACsec frames to the SecY
//     (MACsecLink.divert), whose plaintext comes back to its own
//     interface (macsec.go MACsecLink.Receive: that interface's capture,
//     then Endpoint.handleFrames, stage 5 on). With a download shaper
//     (shapein.go, sqm) the frames are queued there instead and come
//     back through Interface.DeliverShaped, stage 5 on.
//  5. Receive run (dispatch.go Endpoint.handleFramesInto): counters, on
//     a PPPoE interface the session's frames decapsulated in place
//     (pppoe.go Endpoint.decapPPPoE), the raw-frame taps (frametap.go Endpoint.tapFrames), the run's state
//     read once (rxRun), each frame to handleFrame; a superframe to
//     superframe.go Endpoint.handleSuperframe, which forwards it whole
//     (fastForwardSuper) or cuts it and takes each segment through
//     handleFrame (stages 6 to 9).
//  6. Fast path (fastpath.go fastCandidate, completePartialInPlace,
//     Endpoint.fastForward; the engine half is natengine's
//     Engine.FastPathAt): a frame of an offloaded flow is rewritten in
//     place and added to the run (fastRun.add). Under GROOn, TCP skips
//     it.
//  7. Classification (classify.go classify, classify4, classify6): frame
//     and IP header checks, the ingress source filter (srcfilter.go
//     sourceFilter.allows4/6), the fragment guard (fragguard.go
//     fragFilter.refused), NAT Prerouting (classify.go prerouting), the
//     TTL rule, the WAN input policy, checksums of packets for the router.
//  8. Next-hop cache (nexthop.go Endpoint.forwardNew): an IPv4 packet of a
//     new flow forwarded without netstack, added to the run like the fast
//     path's.
//  9. Slow path (dispatch.go Endpoint.handleFrame): fastRun.beforeSlow
//     (fastpath.go) puts the run's frames into their egress batches
//     first; groDecide (gro.go); a drop is counted, with ICMP where due
//     (ttl.go Endpoint.sendTimeExceeded, fragguard.go
//     Endpoint.sendIncompleteChain); GRO (gro.go groState.enqueue) or
//     deliver copies the frame once into a PacketBuffer for netstack.
// 10. Netstack forwards or terminates it; what it sends comes back in
//     endpoint.go Endpoint.WritePackets: NAT Postrouting and Offload
//     (nat.go Endpoint.natTransmit), then the egress's pending batch,
//     deferred while a receive batch runs.
// 11. Run end (dispatch.go Endpoint.handleFramesInto): fastRun.flush
//     (fastpath.go, Endpoint.appendFastLocked: the egress's tags pushed in
//     place, inplace.go, or the frame copied), the egress batches handed
//     to the trunk's sendSet, GRO flushed, counters added once, held
//     fragments delivered (nat.go deliverHeld).
// 12. Transmit (fastpath.go sendSet.send at the port batch's end;
//     endpoint.go Endpoint.flushTx, sendPendingLocked): the egress
//     interface's capture (capture.go Endpoint.captureTx), one
//     WriteFrames per egress interface (its port's writer, macsec.go
//     MACsecLink, or an upload shaper, package sqm, whose goroutine
//     writes to the port); then txBatcher.end (txbatch.go) sends what netstack
//     deferred, before the ring block goes back to the kernel.

// HandleBatch is the endpoint's hw.BatchHandler. It validates each frame,
// copies the accepted ones once into pooled gVisor buffers and delivers
// them to the NIC. Bad frames are dropped and counted by reason; nothing
// is logged. Frames are not used after HandleBatch returns.
//
// Calls for different queues may run concurrently.
func (e *Endpoint) HandleBatch(queue int, frames []hw.Frame) {
	if len(frames) == 0 {
		return
	}
	if e.tx != nil {
		e.tx.begin()
		defer e.tx.end()
	}
	e.captureRx(frames)
	if sh := e.shapeIn.Load(); sh != nil {
		// Download shaping, as in Endpoint.receive (shapein.go).
		if frames = sh.shapeFrames(frames, int(e.mtu.Load())); len(frames) == 0 {
			return
		}
	}
	e.handleFrames(frames)
}

// handleFrames is HandleBatch without the txBatcher bracket, which the
// caller (HandleBatch or a Trunk) holds around the whole port batch. The
// fast-path frames it queued are sent before it returns.
func (e *Endpoint) handleFrames(frames []hw.Frame) { e.handleFramesInto(frames, nil) }

// handleFramesInto is handleFrames; with ss set, the endpoints holding the
// run's unsent fast-path frames go into ss instead, for the caller to send
// once per port batch (a trunk's runs of frames per VLAN may be short).
func (e *Endpoint) handleFramesInto(frames []hw.Frame, ss *sendSet) {
	var bytes uint64
	for i := range frames {
		bytes += uint64(max(frames[i].WireLen, len(frames[i].Data)))
	}
	e.stats.rxPackets.Add(uint64(len(frames)))
	e.stats.rxBytes.Add(bytes)

	e.mu.RLock()
	d := e.dispatcher
	mac := e.mac
	e.mu.RUnlock()
	switch {
	case d == nil:
		e.stats.drops[dropNotAttached].Add(uint64(len(frames)))
		return
	case !e.up.Load():
		e.stats.drops[dropLinkDown].Add(uint64(len(frames)))
		return
	}
	if e.pppoeMode {
		// The session's IP frames become Ethernet ones (pppoe.go).
		if frames = e.decapPPPoE(frames); len(frames) == 0 {
			return
		}
	}
	if ts := e.taps.Load(); ts != nil {
		// Raw-frame taps come first: below the fast path and NAT.
		frames = e.tapFrames(ts, frames, mac, e.ingress.Load(), e.local.Load())
	}
	r := rxRun{
		d:         d,
		mac:       mac,
		local:     e.local.Load(),
		ingress:   e.ingress.Load(),
		mtu:       int(e.mtu.Load()),
		mode:      GROMode(e.gro.Load()),
		nat:       e.nat,
		in:        natIface(e.nicID),
		inputDrop: e.inputDrop.Load(),
		admitUDP:  e.admitUDP.Load(),
		frags:     e.frags,
	}
	if r.nat != nil {
		r.run.now = r.nat.Now()
	}
	for i := range frames {
		f := &frames[i]
		if f.GSO.Type != hw.GSONone {
			e.handleSuperframe(f, &r)
			continue
		}
		e.handleFrame(f, &r)
	}
	run := &r.run
	if run.n > 0 {
		run.flush()
	}
	if ss != nil {
		ss.take(run)
	} else {
		run.sendWaiting()
	}
	if run.hits > 0 {
		r.nat.AddFastPathHits(run.hits)
	}
	if run.nextHop > 0 {
		e.stats.nextHopForwarded.Add(run.nextHop)
	}
	if gs := r.gs; gs != nil {
		gs.flush()
		e.stats.groFlushed.Add(gs.out.delivered)
		e.stats.groCoalesced.Add(r.enqueued - gs.out.delivered)
		e.putGRO(gs)
	}
	if r.bypassed > 0 {
		e.stats.groBypassed.Add(r.bypassed)
	}
	if r.ver > 0 {
		e.stats.csumVerified.Add(r.ver)
		e.stats.csumBad.Add(r.bads)
	}
	if r.nat != nil && r.nat.HeldReady() {
		if tab := e.egress.Load(); tab != nil {
			r.nat.DrainHeld(func(pkt []byte, in natengine.Iface) { deliverHeld(*tab, pkt, in) })
		}
	}
}

// rxRun is the state of one receive run of an endpoint: what it read once
// for the run and what it counts for it. It lives on the receive
// goroutine's stack.
type rxRun struct {
	d         stack.NetworkDispatcher
	mac       tcpip.LinkAddress
	local     *localSet
	ingress   *sourceFilter
	mtu       int
	mode      GROMode
	nat       *natengine.Engine
	in        natengine.Iface
	inputDrop bool
	admitUDP  *[]uint16
	frags     *fragFilter

	run                           fastRun
	gs                            *groState
	enqueued, bypassed, ver, bads uint64
}

// handleFrame takes one frame of wire size through the fast path,
// classify, the next-hop cache, GRO and netstack.
func (e *Endpoint) handleFrame(f *hw.Frame, r *rxRun) {
	run := &r.run
	cand := r.nat != nil && fastCandidate(f, r.mac)
	if cand {
		if f.CsumPartial && completePartialInPlace(f.Data) {
			f.CsumPartial, f.CsumValid = false, true
		}
		// GROOn coalesces all TCP first, as Linux does before its
		// flowtable; merged packets are too big for the fast path.
		if (r.mode != GROOn || !isTCPFrame(f.Data)) && e.fastForward(f.Data, ingressPCP(f), r.nat, run) {
			return
		}
	}
	v := classify(f, r)
	if v.stolen {
		return
	}
	if cand && !v.dropped && !v.forUs && !v.fixPartial && v.proto == header.IPv4ProtocolNumber &&
		(r.mode != GROOn || !isTCPFrame(f.Data)) && e.forwardNew(f.Data, ingressPCP(f), r.nat, r.local, run) {
		return
	}
	run.beforeSlow()
	if !v.dropped {
		groDecide(r.mode, f, &v)
	}
	if v.verified {
		r.ver++
		if v.bad {
			r.bads++
		}
	}
	if v.dropped {
		e.stats.drop(v.drop)
		if v.ttlExpired {
			e.sendTimeExceeded(f.Data[header.EthernetMinimumSize:])
		}
		if v.reject {
			e.sendReject(f.Data[header.EthernetMinimumSize:], true)
		}
		if v.drop == dropFragIncompleteChain {
			e.sendIncompleteChain(f.Data[header.EthernetMinimumSize:])
		}
		return
	}
	if v.gro {
		if r.gs == nil {
			r.gs = e.getGRO(r.d, r.local)
		}
		r.gs.enqueue(f.Data, &v)
		r.enqueued++
		return
	}
	if v.bypass {
		r.bypassed++
	}
	deliver(r.d, f.Data, &v, e.pins)
}

// deliver copies frame into a pooled view and hands it to d. This is the
// hand-off point: everything after it is netstack's. pins may be nil.
func deliver(d stack.NetworkDispatcher, frame []byte, v *verdict, pins *forwardPins) {
	view := buffer.NewViewWithData(frame)
	if v.fixPartial {
		completePartialChecksum(v.l4Proto, view.AsSlice()[v.l4Off:v.l4End])
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithView(view)})
	pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	pkt.NetworkProtocolNumber = v.proto
	pkt.PktType = v.pktType
	d.DeliverNetworkPacket(v.proto, pkt)
	if v.proto == header.IPv4ProtocolNumber && pins != nil {
		// Every IPv4 packet, not only forwarded ones: netstack also runs
		// CheckForward for packets to the router's address on another NIC.
		pins.release(pkt)
	}
	pkt.DecRef()
}
