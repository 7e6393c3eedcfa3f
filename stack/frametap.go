package stack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/gvrouter/gvrouter/hw"
)

// Raw-frame taps.
//
// Some of the router's own protocols work below IP, or before the router
// has an address: a DHCPv4 client sends from 0.0.0.0 and hears answers to
// an address it does not have yet, a DHCPv4 server answers a host that
// cannot yet answer ARP (RFC 2131 section 4.1), an RFC 5227 ARP probe
// watches ARP, and later RA/DHCPv6 and MKA (EAPOL) need the same. Netstack
// sockets can do none of this, and the NAT engine would drop the
// exchange. So each interface has taps, below netstack, the fast path and
// NAT: Interface.AddTap registers one for a TapMatch, and
// Interface.WriteFrame sends a whole frame out of the interface.
//
// Receive. The endpoint's receive run (handleFramesInto) loads the
// interface's tap set once per run with one atomic load; with no tap
// that is all it costs. With taps, each frame of the run that is for this
// host (unicast to the interface's MAC, broadcast or multicast), whole and
// untagged (a Trunk has removed the interface's tags, in-band or from the
// ring header) is compared with each tap's TapMatch (a few byte compares),
// and a matching frame goes to the tap's Deliver. A frame some tap
// consumed is taken out of the run before the fast path, classification
// and NAT, and counted as tapped; the rest carry on unchanged, so a tap
// may watch frames (ARP) netstack must still see.
//
// Transmit. WriteFrame copies an untagged frame into a pooled buffer,
// inserting the interface's VLAN tags (with its PCP) after the MAC
// addresses as AddHeader does, and queues it behind the frames netstack
// wrote, on the same txBatcher rules (a frame written while receive
// batches run leaves with their forwarded packets). It does not pass the
// NAT engine: its frames are the caller's as they are.

// Tap receives frames from an interface's receive path before netstack,
// the fast path and the NAT engine see them (Interface.AddTap).
// services/rawudp's *Conn is one.
type Tap interface {
	// Deliver is handed one received frame that matched the tap's
	// TapMatch, as an untagged Ethernet frame (the interface's VLAN
	// tags removed, EtherType at offset 12, a CHECKSUM_PARTIAL UDP or TCP
	// checksum completed). It reports whether the tap consumed the
	// frame: true keeps it from netstack and NAT (counted as tapped);
	// false leaves it to the next tap and then to the usual path, as a
	// tap that only watches frames (ARP) must.
	//
	// frame is the receive batch's memory: Deliver must neither modify
	// it nor keep it after it returns (copy what it keeps). Deliver runs
	// on the port's receive goroutines, concurrently for different
	// receive queues, and must not block; it may call WriteFrame.
	Deliver(frame []byte) bool
}

// TapMatch says which frames a tap is offered. A frame matches when every
// non-zero field matches; the receive path checks it with a few byte
// compares before it calls Deliver.
type TapMatch struct {
	// EtherType is the frame's EtherType after the interface's VLAN
	// tags, e.g. 0x0806 (ARP), 0x0800 (IPv4), 0x86dd (IPv6), 0x888e
	// (EAPOL, IEEE 802.1X clause 11.3, for MKA). Required; a VLAN TPID is
	// refused.
	EtherType uint16
	// IPProto, if not zero, is the IP protocol: the IPv4 Protocol field
	// or the Next Header of the IPv6 fixed header (no extension header
	// is walked), e.g. 17 (UDP), 58 (ICMPv6). Only with EtherType 0x0800
	// or 0x86dd.
	IPProto uint8
	// DstPort, if not zero, is the destination port, e.g. 68 (DHCPv4
	// client), 67 (DHCPv4 server), 546 (DHCPv6 client). Only with
	// IPProto 6 (TCP) or 17 (UDP). An IPv4 fragment other than the
	// first carries no port and never matches.
	DstPort uint16
}

// ErrInvalidTapMatch is returned by AddTap for a TapMatch that can never
// be met as documented: no EtherType, a VLAN TPID as EtherType, IPProto
// with an EtherType other than IPv4 or IPv6, DstPort without TCP or UDP.
var ErrInvalidTapMatch = errors.New("stack: invalid tap match")

func (m TapMatch) String() string {
	s := fmt.Sprintf("ethertype %#04x", m.EtherType)
	if m.IPProto != 0 {
		s += fmt.Sprintf(" proto %d", m.IPProto)
	}
	if m.DstPort != 0 {
		s += fmt.Sprintf(" port %d", m.DstPort)
	}
	return s
}

func (m TapMatch) validate() error {
	ip := m.EtherType == uint16(header.IPv4ProtocolNumber) || m.EtherType == uint16(header.IPv6ProtocolNumber)
	switch {
	case m.EtherType == 0, isTPID(m.EtherType):
		return fmt.Errorf("%w: %s: need an EtherType that is not a VLAN TPID", ErrInvalidTapMatch, m)
	case m.IPProto != 0 && !ip:
		return fmt.Errorf("%w: %s: IPProto needs EtherType 0x0800 or 0x86dd", ErrInvalidTapMatch, m)
	case m.DstPort != 0 && m.IPProto != protoTCP && m.IPProto != protoUDP:
		return fmt.Errorf("%w: %s: DstPort needs IPProto 6 (TCP) or 17 (UDP)", ErrInvalidTapMatch, m)
	}
	return nil
}

// matches reports whether frame, an untagged Ethernet frame of at least
// EthernetMinimumSize octets, matches m. It does not allocate.
func (m *TapMatch) matches(frame []byte) bool {
	if binary.BigEndian.Uint16(frame[12:]) != m.EtherType {
		return false
	}
	if m.IPProto == 0 {
		return true
	}
	ip := frame[header.EthernetMinimumSize:]
	var proto uint8
	var l4 int
	if m.EtherType == uint16(header.IPv4ProtocolNumber) {
		if len(ip) < header.IPv4MinimumSize || ip[0]>>4 != 4 {
			return false
		}
		proto, l4 = ip[9], int(ip[0]&0xf)*4
		if m.DstPort != 0 && (l4 < header.IPv4MinimumSize || binary.BigEndian.Uint16(ip[6:])&0x1fff != 0) {
			return false // no L4 header where it should be, or a later fragment
		}
	} else {
		if len(ip) < header.IPv6MinimumSize || ip[0]>>4 != 6 {
			return false
		}
		proto, l4 = ip[6], header.IPv6MinimumSize
	}
	if proto != m.IPProto {
		return false
	}
	return m.DstPort == 0 || (len(ip) >= l4+4 && binary.BigEndian.Uint16(ip[l4+2:]) == m.DstPort)
}

// tapEntry is one registered tap.
type tapEntry struct {
	m TapMatch
	t Tap
}

// tapSet is an immutable snapshot of an endpoint's taps, in registration
// order. The endpoint holds nil when there is none.
type tapSet struct {
	taps []*tapEntry
}

// offer hands f to the first tap that matches and consumes it, and
// reports whether one did. mac is the interface's MAC; src, if not nil,
// is its ingress source filter: an IP frame it refuses is offered to no
// tap (classify drops and counts it).
func (ts *tapSet) offer(f *hw.Frame, mac tcpip.LinkAddress, src *sourceFilter, local *localSet) bool {
	d := f.Data
	if f.VLANValid || f.WireLen > len(d) || len(d) < header.EthernetMinimumSize {
		return false // not this interface's, or cut short: classify drops it
	}
	if d[0]&1 == 0 && string(d[:header.EthernetAddressSize]) != string(mac) {
		return false // unicast to another host
	}
	completed := false
	for _, te := range ts.taps {
		if !te.m.matches(d) {
			continue
		}
		if src != nil && !src.allowsFrame(d, local) {
			return false
		}
		if f.CsumPartial && !completed {
			// As the fast path does: the tap checks checksums itself.
			completed = true
			if completePartialInPlace(d) {
				f.CsumPartial, f.CsumValid = false, true
			}
		}
		if te.t.Deliver(d) {
			return true
		}
	}
	return false
}

// tapFrames offers each frame to the taps in ts and returns frames without
// the ones a tap consumed (compacted in place, order kept), counting
// those. src and local are offer's. It does not allocate.
func (e *Endpoint) tapFrames(ts *tapSet, frames []hw.Frame, mac tcpip.LinkAddress, src *sourceFilter, local *localSet) []hw.Frame {
	n := 0
	for i := range frames {
		if ts.offer(&frames[i], mac, src, local) {
			continue
		}
		if n != i {
			frames[n] = frames[i]
		}
		n++
	}
	if tapped := len(frames) - n; tapped > 0 {
		e.stats.tapped.Add(uint64(tapped))
	}
	return frames[:n]
}

// addTap appends t to e's taps.
func (e *Endpoint) addTap(m TapMatch, t Tap) (remove func(), err error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%w: %s: nil tap", ErrInvalidTapMatch, m)
	}
	te := &tapEntry{m: m, t: t}
	e.tapMu.Lock()
	next := &tapSet{}
	if old := e.taps.Load(); old != nil {
		next.taps = slices.Clone(old.taps)
	}
	next.taps = append(next.taps, te)
	e.taps.Store(next)
	e.tapMu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { e.removeTap(te) }) }, nil
}

// removeTap takes te out of e's taps; with none left the set is nil
// again, so the receive path is back to one atomic load per run.
func (e *Endpoint) removeTap(te *tapEntry) {
	e.tapMu.Lock()
	defer e.tapMu.Unlock()
	old := e.taps.Load()
	if old == nil {
		return
	}
	keep := make([]*tapEntry, 0, len(old.taps))
	for _, x := range old.taps {
		if x != te {
			keep = append(keep, x)
		}
	}
	if len(keep) == 0 {
		e.taps.Store(nil)
		return
	}
	e.taps.Store(&tapSet{taps: keep})
}

// Errors of WriteFrame.
var (
	// ErrFrameInvalid: the frame is shorter than an Ethernet header or
	// carries a VLAN tag of its own (WriteFrame adds the interface's).
	ErrFrameInvalid = errors.New("stack: frame shorter than an Ethernet header or tagged")
	// ErrFrameTooBig: the frame's payload is larger than the interface's
	// MTU (counted as the drop "tx_oversize").
	ErrFrameTooBig = errors.New("stack: frame larger than the interface MTU")
	// ErrLinkDown: the link is down or the interface has no writer
	// (counted as the drop "link_down").
	ErrLinkDown = errors.New("stack: link down")
	// ErrInsideSource: an IP frame with a LAN source on a wan interface
	// (InterfaceConfig.EgressFilter; counted as the drop
	// "inside_source_out").
	ErrInsideSource = errors.New("stack: inside source on an outside interface")
	// ErrPPPoEDown: an IP frame on a PPPoE interface whose session is
	// not up (counted as the drop "pppoe_down").
	ErrPPPoEDown = errors.New("stack: PPPoE session down")
)

// writeFrame is Interface.WriteFrame.
func (e *Endpoint) writeFrame(frame []byte) error {
	if len(frame) < header.EthernetMinimumSize || isTPID(binary.BigEndian.Uint16(frame[12:])) {
		return ErrFrameInvalid
	}
	w := e.writer.Load()
	if w == nil || !e.up.Load() {
		e.stats.drop(dropLinkDown)
		return ErrLinkDown
	}
	mtu := int(e.mtu.Load())
	if len(frame)-header.EthernetMinimumSize > mtu {
		e.stats.drop(dropTxOversize)
		return ErrFrameTooBig
	}
	if f := e.egressFilter.Load(); f != nil && f.insideSource(frame, header.EthernetMinimumSize) {
		e.stats.drop(dropInsideSourceOut)
		return ErrInsideSource
	}
	// On a PPPoE interface an IP frame (a service's RS, DHCPv6 or
	// DHCPv4 message) goes into the session as netstack's do; the
	// session's own discovery and control frames go as they are.
	var ps *pppoeSession
	pad := 0
	if e.pppoeMode && isIPEtherType(binary.BigEndian.Uint16(frame[12:])) {
		if ps = e.pppoe.Load(); ps == nil {
			e.stats.drop(dropPPPoEDown)
			return ErrPPPoEDown
		}
		pad = pppoeOverhead
	}
	v := e.vlan.Load()
	n := len(frame) + v.n
	e.txMu.Lock()
	buf := e.getBuf(w.head + pad + mtu + maxHeaderLength + w.tail)
	out := (*buf)[w.head+pad : w.head+pad+n]
	copy(out, frame[:12])
	copy(out[12:], v.tags[:v.n])
	copy(out[12+v.n:], frame[12:])
	if ps != nil {
		out = (*buf)[w.head : w.head+pad+n]
		pushPPPoE(out, v.n, ps) // an IP frame: it cannot refuse
		e.stats.pppoe.encapsulated.Add(1)
	}
	b := &e.pending
	b.add(out, buf)
	e.txDirty.Store(true)
	var err error
	if e.tx == nil || !e.tx.deferring() || len(b.frames) >= hw.TxBatchSize {
		err = e.sendPendingLocked(w)
	}
	e.txMu.Unlock()
	return err
}

// FrameLink is what a protocol that speaks raw frames on an interface
// (MKA, a PPPoE session) needs of it: taps for the frames it answers and
// a way to send its own. *Interface implements it; the glue packages
// (router/mkalink, router/pppoelink) take it instead of the Interface.
type FrameLink interface {
	// AddTap registers t for the frames m matches; remove unregisters it.
	AddTap(m TapMatch, t Tap) (remove func(), err error)
	// WriteFrame sends one untagged Ethernet frame; it copies frame.
	WriteFrame(frame []byte) error
}

var _ FrameLink = (*Interface)(nil)

// AddTap registers t for the frames this interface receives that match m
// (see Tap and TapMatch) and returns the function that removes it again
// (safe to call more than once). Taps are offered a frame in the order
// they were added, until one consumes it. After remove returns no receive
// batch that starts later calls t; one already running may still do so.
//
// Taps belong to this *Interface: an interface Apply recreates (its MAC
// changed; fetch it again with Netstack.Interface) starts without any.
// ErrInvalidTapMatch is returned for a match that cannot be met.
func (i *Interface) AddTap(m TapMatch, t Tap) (remove func(), err error) {
	remove, err = i.ep.addTap(m, t)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", i.name, err)
	}
	return remove, nil
}

// WriteFrame sends one untagged Ethernet frame (header included, source
// MAC as the caller set it, e.g. Interface.MAC) out of the interface: the
// interface's VLAN tags and PCP are inserted after the MAC addresses, as
// on netstack's own frames (and on a PPPoE interface an IPv4 or IPv6
// frame goes into the session, to the AC, as they do: ErrPPPoEDown
// while it is not up), and the frame goes to the interface's writer
// (a SecY on a MACsec interface), in order with netstack's frames,
// counted as tx. It bypasses netstack and the NAT engine. WriteFrame is
// safe for concurrent use with the data path and may be called from
// Tap.Deliver; frame is not kept after it returns.
//
// The frame is sent at once, or, while receive batches are running, with
// their forwarded packets at the end of the batch; an error the writer
// returns then is only counted (drop "tx_error"). ErrFrameInvalid,
// ErrFrameTooBig and ErrLinkDown are returned for a frame not sent.
func (i *Interface) WriteFrame(frame []byte) error {
	if err := i.ep.writeFrame(frame); err != nil {
		return fmt.Errorf("interface %s: write frame: %w", i.name, err)
	}
	return nil
}

// HardwareAddr returns the interface's Ethernet address, as MAC does; with
// WriteFrame it makes an Interface the link of a services/rawudp Conn.
func (i *Interface) HardwareAddr() net.HardwareAddr { return i.MAC() }
