package stack

import (
	"encoding/binary"
	"fmt"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/stack/gro"

	"github.com/gvrouter/gvrouter/hw"
)

// Selective GRO.
//
// Each receive batch of an endpoint gets a gro.GRO (gVisor stack/gro, used
// directly: fdbased's GRO merges forwarded TCP too, and netstack's forward
// path then drops the merged packets as too big). classify and groDecide
// pick the candidates by the interface's GROMode; the others go to the NIC
// one by one, as before. The GRO state is flushed at the end of the run of
// frames for the endpoint, so nothing is held across batches.
//
// gro.GRO updates only the IP length and the PSH/FIN flags of a merged
// packet, so groOutput, its dispatcher, recomputes the IPv4 header
// checksum and the TCP checksum of every merged packet before netstack
// sees it.
//
// GROOn also merges forwarded TCP. groOutput tags such a packet with its
// segment size in pkt.Mark (DeepCopyForForwarding copies Mark and nothing
// else of ours); forwardPins.CheckPostrouting turns the tag into
// GSOOptions, which keeps netstack's MTU check from dropping it, and
// Endpoint.WritePackets splits it again in software (segment.go), as Linux
// GRO + GSO does.

// GROMode is an interface's receive coalescing policy.
type GROMode uint8

const (
	// GROSelective coalesces TCP addressed to the router only; forwarded
	// packets pass one by one with their headers untouched. It is the
	// zero value and the default.
	GROSelective GROMode = iota
	// GROOff never coalesces.
	GROOff
	// GROOn coalesces all TCP, like Linux 4.2+; forwarded merged packets
	// are segmented again on egress.
	GROOn
)

var groModeNames = [...]string{GROSelective: "selective", GROOff: "off", GROOn: "on"}

func (m GROMode) String() string {
	if int(m) < len(groModeNames) {
		return groModeNames[m]
	}
	return fmt.Sprintf("GROMode(%d)", uint8(m))
}

// ParseGROMode parses "off", "on" or "selective".
func ParseGROMode(s string) (GROMode, error) {
	for i, n := range groModeNames {
		if n == s {
			return GROMode(i), nil
		}
	}
	return 0, fmt.Errorf("gro mode %q is not off, on or selective", s)
}

// groMarkFlag marks a forwarded merged packet in pkt.Mark; the low 16
// bits are its segment size. No one else sets Mark: the router has no
// iptables rules and no SO_MARK sockets.
const groMarkFlag = 1 << 31

// groState is one receive run's GRO. It is not safe for concurrent use;
// Endpoint.groPool hands one to each run.
type groState struct {
	g   gro.GRO
	out groOutput
}

// groOutput is the gro.GRO's dispatcher: it fixes the checksums of merged
// packets, tags forwarded ones for segmentation and hands them to the NIC.
type groOutput struct {
	e     *Endpoint
	d     stack.NetworkDispatcher
	local *localSet
	// delivered counts packets handed to d in this run.
	delivered uint64
}

func (e *Endpoint) getGRO(d stack.NetworkDispatcher, local *localSet) *groState {
	s, ok := e.groPool.Get().(*groState)
	if !ok {
		s = &groState{}
		s.g.Init(true)
		s.g.Dispatcher = &s.out
		s.out.e = e
	}
	s.out.d, s.out.local, s.out.delivered = d, local, 0
	return s
}

func (e *Endpoint) putGRO(s *groState) {
	s.out.d, s.out.local = nil, nil
	e.groPool.Put(s)
}

// groDecide makes v a GRO candidate (v.gro) or not, by mode. For GROOn it
// verifies the checksum of forwarded TCP the port did not validate: a
// merged packet gets new checksums, which must not launder a corrupt
// segment. A bad one is forwarded as it came.
func groDecide(mode GROMode, f *hw.Frame, v *verdict) {
	if v.tcpOff == 0 || mode == GROOff {
		return
	}
	if !v.forUs {
		if mode == GROSelective {
			v.bypass = true
			return
		}
		if !f.CsumValid && !f.CsumPartial {
			v.verified = true
			ip := f.Data[header.EthernetMinimumSize:]
			var ok bool
			if v.proto == header.IPv4ProtocolNumber {
				ok = l4ChecksumValid(false, ip[12:16], ip[16:20], protoTCP, f.Data[v.tcpOff:v.l4End])
			} else {
				ok = l4ChecksumValid(true, ip[8:24], ip[24:40], protoTCP, f.Data[v.tcpOff:v.l4End])
			}
			if !ok {
				v.bad = true
				return
			}
		}
	}
	v.gro = true
}

// enqueue copies frame into a pooled view and gives it to the GRO. The
// frame is trimmed to the IP length (Ethernet padding is not payload) and
// its TCP payload length travels in GSOOptions.MSS to groOutput.
func (s *groState) enqueue(frame []byte, v *verdict) {
	view := buffer.NewViewWithData(frame[:v.l4End])
	if v.fixPartial {
		completePartialChecksum(v.l4Proto, view.AsSlice()[v.l4Off:v.l4End])
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithView(view)})
	pkt.LinkHeader().Consume(header.EthernetMinimumSize)
	pkt.NetworkProtocolNumber = v.proto
	pkt.PktType = v.pktType
	pkt.RXChecksumValidated = true
	tcp := frame[v.tcpOff:v.l4End]
	pkt.GSOOptions.MSS = uint16(len(tcp) - int(tcp[12]>>4)*4)
	s.g.Enqueue(pkt)
	pkt.DecRef()
}

// flush delivers every packet the GRO holds. gVisor's GRO.Flush (pinned
// version, stack/gro/gro.go) delivers only the first packet of each
// bucket: it resets the list entry it removes before it takes the next
// one. The rest, segments of other flows that hashed to the same bucket,
// stayed behind for a later batch, or for good (a leaked packet once the
// endpoint went away). Each call takes one more per bucket, so flush
// calls it until one delivers nothing.
func (s *groState) flush() {
	for {
		n := s.out.delivered
		s.g.Flush()
		if s.out.delivered == n {
			return
		}
	}
}

// DeliverNetworkPacket implements stack.NetworkDispatcher.
func (o *groOutput) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	o.delivered++
	mss := int(pkt.GSOOptions.MSS)
	pkt.GSOOptions = stack.GSO{}
	if dst, merged := fixMerged(proto, pkt, mss); merged {
		if !o.local.has(proto, dst) {
			pkt.Mark = groMarkFlag | uint32(mss)
		}
	}
	o.d.DeliverNetworkPacket(proto, pkt)
	if proto == header.IPv4ProtocolNumber && o.e.pins != nil {
		o.e.pins.release(pkt)
	}
}

// DeliverLinkPacket implements stack.NetworkDispatcher.
func (o *groOutput) DeliverLinkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	o.d.DeliverLinkPacket(proto, pkt)
}

// fixMerged recomputes the IPv4 header checksum and the TCP checksum of
// pkt if its TCP payload is longer than mss, that is if gro.GRO merged it
// (the first segment's payload length is mss). It returns the destination
// address. pkt.Data() starts at the IP header, which has no options or
// extension headers (groDecide only picks such packets).
func fixMerged(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer, mss int) (dst []byte, merged bool) {
	ipLen := header.IPv4MinimumSize
	if proto == header.IPv6ProtocolNumber {
		ipLen = header.IPv6MinimumSize
	}
	hdr, ok := pkt.Data().PullUp(ipLen + header.TCPMinimumSize)
	if !ok {
		return nil, false
	}
	tcpLen := int(hdr[ipLen+12]>>4) * 4
	if hdr, ok = pkt.Data().PullUp(ipLen + tcpLen); !ok {
		return nil, false
	}
	size := pkt.Data().Size()
	var src []byte
	if proto == header.IPv4ProtocolNumber {
		src, dst = hdr[12:16], hdr[16:20]
	} else {
		src, dst = hdr[8:24], hdr[24:40]
	}
	if size-ipLen-tcpLen <= mss {
		return dst, false
	}
	if proto == header.IPv4ProtocolNumber {
		ip := header.IPv4(hdr)
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	}
	tcp := hdr[ipLen:]
	tcp[header.TCPChecksumOffset], tcp[header.TCPChecksumOffset+1] = 0, 0
	// The sum over the TCP segment is the sum over the whole packet minus
	// the IP header's (its length is even, so no byte swap).
	all := pkt.Data().Checksum()
	seg := checksum.Combine(all, ^checksum.Checksum(hdr[:ipLen], 0))
	c := ^checksum.Combine(pseudoHeaderSum(src, dst, protoTCP, size-ipLen), seg)
	binary.BigEndian.PutUint16(tcp[header.TCPChecksumOffset:], c)
	return dst, true
}

// has reports whether dst, an address of protocol proto, is local.
func (s *localSet) has(proto tcpip.NetworkProtocolNumber, dst []byte) bool {
	if proto == header.IPv4ProtocolNumber {
		return s.has4(dst)
	}
	return s.has6(dst)
}
