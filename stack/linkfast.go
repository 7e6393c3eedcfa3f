package stack

import (
	"encoding/binary"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/natengine"
)

// LinkFastPath is the fast path for what a link (LinkConfig: a WireGuard
// TUN) delivers: a decrypted packet of a flow the engine has offloaded
// from the link to an Endpoint is rewritten and goes straight into that
// Endpoint's transmit batch, as fastForward does for a port's frames, and
// never enters netstack. A flow is offloaded the same way as one from an
// Ethernet interface: assured, and one of its packets forwarded by
// netstack (after the link's NAT Prerouting and the firewall) left by the
// Endpoint, whose Postrouting offloads it with the link as the ingress.
// Every other packet goes to the slow path, netstack, in order.
type LinkFastPath struct {
	nat    *natengine.Engine
	in     natengine.Iface
	egress *atomic.Pointer[egressTable]
	// links are the links the fast path writes into: a flow from this
	// link to another (or back into this one, peer to peer) leaves by
	// a link, not an Endpoint.
	links *atomic.Pointer[linkTable]
}

// LinkFastPath returns the fast path of the link named name, or false if
// there is no such link or no NAT engine.
func (r *Netstack) LinkFastPath(name string) (*LinkFastPath, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id, ok := r.linkIDLocked(name)
	if !ok || r.nat == nil {
		return nil, false
	}
	return &LinkFastPath{nat: r.nat, in: natIface(id), egress: &r.egress, links: &r.linkOut}, true
}

// ForwardBatch takes one batch of the link's packets, in order: each
// bufs[i][offset:] is a bare IPv4 or IPv6 packet, and the offset bytes
// before it are room the fast path writes an Ethernet header into
// (offset >= 14; less sends every packet to slow). Packets of offloaded
// flows are forwarded; slow gets each other packet, in its place in the
// order (what the fast path queued before it leaves first). Consecutive
// TCP segments of one flow may leave as one superframe
// (linktcpgso.go), grown in the first one's buffer: bufs[i]'s capacity
// beyond its length must be its own, as wireguard-go's are. The frames
// are sent before ForwardBatch returns, so the caller may reuse bufs
// then. It reports how many packets it forwarded and how many it dropped
// (an egress removed since the flow was offloaded). It does not allocate.
func (l *LinkFastPath) ForwardBatch(bufs [][]byte, offset int, slow func(ip []byte)) (forwarded, dropped int) {
	var run fastRun
	run.now = l.nat.Now()
	tab := l.egress.Load()
	// tcp is the TCP superframe being grown in run's last entry
	// (linktcpgso.go); any other step ends it.
	tcp := tcpRun{idx: -1}
	for _, b := range bufs {
		if offset < header.EthernetMinimumSize || len(b) <= offset {
			tcp.idx = -1
			run.beforeSlow()
			slow(b[min(offset, len(b)):])
			continue
		}
		var et uint16
		switch b[offset] >> 4 {
		case 4:
			et = uint16(header.IPv4ProtocolNumber)
		case 6:
			et = uint16(header.IPv6ProtocolNumber)
		}
		frame := b[offset-header.EthernetMinimumSize:]
		binary.BigEndian.PutUint16(frame[12:], et)
		out, ok := natengine.NoIface, false
		if et != 0 {
			out, ok = l.nat.FastPathAt(frame, l.in, run.now)
		}
		if !ok {
			tcp.idx = -1
			run.beforeSlow()
			slow(b[offset:])
			continue
		}
		var oe *Endpoint
		if tab != nil {
			oe = tab.get(out)
		}
		if oe == nil {
			tcp.idx = -1
			if lw := l.links.Load().get(out); lw != nil {
				// Into a link: written now, in order with the
				// slow path's packets after it.
				run.hits++
				lw.WriteFast(frame[header.EthernetMinimumSize : header.EthernetMinimumSize+ipLength(frame)])
				continue
			}
			dropped++ // the egress went away after the offload (Apply invalidates)
			continue
		}
		run.hits++
		frame = frame[:header.EthernetMinimumSize+ipLength(frame)]
		if tcp.join(&run, oe, frame) {
			continue
		}
		run.add(oe, frame, -1)
		tcp.start(&run, oe, frame)
	}
	if run.n > 0 {
		run.flush()
	}
	run.sendWaiting()
	if run.hits > 0 {
		l.nat.AddFastPathHits(run.hits)
	}
	return int(run.hits), dropped
}

// FastLinkWriter is a link (LinkConfig.Endpoint) the fast path can
// forward into, found by type assertion: a flow offloaded with the link
// as its egress (the link's own NAT Postrouting offloads it, see
// natengine.Engine.OffloadAt) has its frames rewritten on their ingress
// Endpoint and handed over as bare IP packets, never entering netstack.
type FastLinkWriter interface {
	// WriteFast queues a copy of the IP packet ip, already through NAT,
	// for the link, or drops and counts it (a full queue); the caller
	// keeps ip. It must not block or allocate.
	WriteFast(ip []byte)
	// MTU is the link's MTU (stack.LinkEndpoint's).
	MTU() uint32
}

// linkTable maps NIC IDs to the links the fast path writes into;
// immutable once stored.
type linkTable []FastLinkWriter

// get returns the link with NAT interface out, or nil (t may be nil).
func (t *linkTable) get(out natengine.Iface) FastLinkWriter {
	if t == nil || out <= 0 || int(out) >= len(*t) {
		return nil
	}
	return (*t)[out]
}

// fastLink returns the link with NAT interface out that takes fast-path
// packets, or nil.
func (e *Endpoint) fastLink(out natengine.Iface) FastLinkWriter {
	if e.linkOut == nil {
		return nil
	}
	return e.linkOut.Load().get(out)
}

// superToLink cuts a superframe the fast path rewrote for link lw into
// packets of lw's MTU with complete checksums, as a port without
// offloads gets it (appendSuperLocked), and writes each.
func (e *Endpoint) superToLink(f *hw.Frame, lw FastLinkWriter) {
	seg, ok := newSegmenter(f.Data, header.EthernetMinimumSize, int(f.GSO.Size), int(lw.MTU()))
	if !ok {
		e.stats.drop(dropGSOMalformed)
		return
	}
	e.stats.gsoSegmented.Add(1)
	buf := e.getBuf(seg.hdrLen() + seg.mss)
	for i := range seg.count() {
		n := seg.segment(i, *buf)
		lw.WriteFast((*buf)[header.EthernetMinimumSize:n])
	}
	e.putBuf(buf)
}
