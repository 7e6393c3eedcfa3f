package stack

import (
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

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
