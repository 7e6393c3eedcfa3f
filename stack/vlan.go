package stack

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/gvrouter/gvrouter/hw"
)

// 802.1Q sub-interfaces.
//
// Every interface on a port is its own Endpoint and NIC. A Trunk is the
// port's hw.BatchHandler: it reads each frame's VLAN tags (the outer one
// from the ring header, where the kernel always puts it, and any tag still
// in-band at offset 12), finds the interface for that (outer, inner) VID
// pair in an immutable table, strips the in-band tags and hands runs of
// frames for one interface to that Endpoint's validation and delivery.
// Egress is in Endpoint.AddHeader, which pushes the MACs, the tags and the
// Ethertype in one LinkHeader().Push.
//
// PCP (IEEE 802.1Q clause 6.9.3): frames the router originates carry the
// interface's configured PCP. Forwarded frames carry it too, because
// netstack's forward path keeps no per-packet metadata from ingress:
// DeepCopyForForwarding (pinned gVisor, stack/packet_buffer.go) copies only
// the protocol numbers and the conntrack tuple, so the ingress PCP is lost
// once a packet enters netstack. Keeping it is the job of the fast path.

// VLAN TPIDs (IEEE 802.1Q clause 9.5: C-tag 0x8100, S-tag 0x88a8).
const (
	// TPID8021Q is the Customer VLAN tag's TPID.
	TPID8021Q = etherTypeVLAN
	// TPID8021AD is the Service VLAN tag's TPID (802.1ad QinQ outer tag).
	TPID8021AD = etherTypeQinQ

	// maxVID is the largest usable VID; 4095 (0xfff) is reserved (IEEE
	// 802.1Q clause 9.6, table 9-2).
	maxVID = 0xffe
	// maxTags is how many tags an interface may carry: QinQ.
	maxTags = 2
)

// vlanKey names the VLANs of a frame or an interface: n tags, the outer
// VID first. ad reports an outer S-tag (TPID other than 0x8100). VID-0
// (priority) tags are not counted.
type vlanKey struct {
	outer, inner uint16
	n            uint8
	ad           bool
}

func (k vlanKey) String() string {
	switch k.n {
	case 0:
		return "untagged"
	case 1:
		return fmt.Sprintf("vlan %d", k.outer)
	}
	return fmt.Sprintf("vlan [%d, %d]", k.outer, k.inner)
}

// keyOf returns the key of an interface config; validate has checked it.
func keyOf(c *InterfaceConfig) vlanKey {
	var k vlanKey
	switch len(c.VLAN) {
	case 2:
		k.inner = c.VLAN[1]
		fallthrough
	case 1:
		k.outer = c.VLAN[0]
		k.ad = c.VLANProtocol != 0 && c.VLANProtocol != TPID8021Q
	}
	k.n = uint8(len(c.VLAN))
	return k
}

// isTPID reports whether et is a VLAN tag's TPID.
func isTPID(et uint16) bool {
	return et == etherTypeVLAN || et == etherTypeQinQ || et == etherTypeQinQv1
}

// untag reads f's VLAN tags and removes the in-band ones from f.Data (it
// moves the MAC addresses forward over them, in place) and the ring-header
// one from f's metadata. Tags with VID 0 are priority tags and count as no
// tag (802.1Q clause 6.9.1). ok is false for a frame with more than two
// VLAN tags, VID 4095, or an inner tag that is not a C-tag; f is then
// unchanged. untag does not allocate.
func untag(f *hw.Frame) (k vlanKey, ok bool) {
	type tag struct{ tpid, tci uint16 }
	var tags [maxTags + 1]tag
	n := 0
	if f.VLANValid {
		tpid := f.VLANTPID
		if tpid == 0 {
			tpid = TPID8021Q
		}
		tags[0] = tag{tpid, f.VLANTCI}
		n = 1
	}
	d := f.Data
	off := 12
	for len(d) >= off+2+vlanTagLength {
		et := binary.BigEndian.Uint16(d[off:])
		if !isTPID(et) {
			break
		}
		if n == len(tags) {
			return k, false
		}
		tags[n] = tag{et, binary.BigEndian.Uint16(d[off+2:])}
		n++
		off += vlanTagLength
	}
	for i := range n {
		if tags[i].tci&0xfff == 0 {
			continue
		}
		vid := tags[i].tci & 0xfff
		switch {
		case vid > maxVID || k.n == maxTags:
			return vlanKey{}, false
		case k.n == 0:
			k.outer, k.ad = vid, tags[i].tpid != TPID8021Q
		default:
			if tags[i].tpid != TPID8021Q {
				return vlanKey{}, false
			}
			k.inner = vid
		}
		k.n++
	}
	if strip := off - 12; strip > 0 {
		copy(d[strip:strip+12], d[:12])
		f.Data = d[strip:]
		if f.WireLen >= strip {
			f.WireLen -= strip
		}
		if g := &f.GSO; g.NeedsCsum && int(g.CsumStart) >= strip {
			g.CsumStart -= uint16(strip) // offsets from the frame's start
		}
	}
	// The frame is untagged from here on; the outer tag's priority stays
	// behind for the fast path, which keeps it on forwarded frames
	// (ingressPCP).
	f.VLANValid, f.VLANTCI, f.VLANTPID = false, 0, 0
	if n > 0 {
		f.VLANTCI, f.VLANTPID = tags[0].tci&pcpMask, tags[0].tpid
	}
	return k, true
}

// pcpMask selects the priority code point of a TCI (IEEE 802.1Q 9.6).
const pcpMask = 0xe000

// ingressPCP returns the priority of the tag untag removed from f, or -1
// if f arrived untagged.
func ingressPCP(f *hw.Frame) int {
	if f.VLANValid || f.VLANTPID == 0 {
		return -1
	}
	return int(f.VLANTCI >> 13)
}

// trunkEntry maps one key to its endpoint.
type trunkEntry struct {
	key vlanKey
	ep  *Endpoint
}

// trunkTable is an immutable snapshot of a trunk's interfaces. A port
// carries a handful, so a linear scan beats a map.
type trunkTable struct {
	entries []trunkEntry
}

func (t *trunkTable) lookup(k vlanKey) *Endpoint {
	for i := range t.entries {
		if t.entries[i].key == k {
			return t.entries[i].ep
		}
	}
	return nil
}

// Trunk demultiplexes one port's frames to the interfaces on it by VLAN.
// Its table is an immutable snapshot replaced by Set, so the receive path
// takes no lock. Trunk is safe for concurrent use.
type Trunk struct {
	table atomic.Pointer[trunkTable]
	tx    *txBatcher
	// vlanUnknown counts frames for a VLAN (or untagged frames) with no
	// interface on this port, and frames with unusable tags.
	vlanUnknown atomic.Uint64
}

// NewTrunk returns a trunk with no interfaces, for one port.
func (r *Netstack) NewTrunk() *Trunk {
	t := &Trunk{tx: &r.tx}
	t.table.Store(&trunkTable{})
	return t
}

// Set makes ifcs the trunk's interfaces. Two interfaces with the same
// VLANs are an error, and the table is left as it was.
func (t *Trunk) Set(ifcs ...*Interface) error {
	next := &trunkTable{}
	for _, ifc := range ifcs {
		k := ifc.ep.vlan.Load().key
		if prev := next.lookup(k); prev != nil {
			return fmt.Errorf("stack: trunk: %s of interface %s is taken", k, ifc.name)
		}
		next.entries = append(next.entries, trunkEntry{key: k, ep: ifc.ep})
	}
	t.table.Store(next)
	return nil
}

// Drops returns the trunk's drop counters by reason; only "vlan_unknown"
// exists, present when non-zero.
func (t *Trunk) Drops() map[string]uint64 {
	m := map[string]uint64{}
	if n := t.vlanUnknown.Load(); n > 0 {
		m[dropVLANUnknown.String()] = n
	}
	return m
}

// HandleBatch is the port's hw.BatchHandler. Frames for one interface are
// handed over in runs, in arrival order, each to that Endpoint's
// validation and delivery; forwarded packets of the whole batch leave
// together (txBatcher). It rewrites frames in place (tags stripped) and
// does not allocate.
func (t *Trunk) HandleBatch(queue int, frames []hw.Frame) {
	if len(frames) == 0 {
		return
	}
	tab := t.table.Load()
	t.tx.begin()
	defer t.tx.end()
	var (
		cur     *Endpoint
		start   int
		n       int
		unknown uint64
		ss      sendSet
	)
	for i := range frames {
		f := frames[i]
		k, ok := untag(&f)
		var ep *Endpoint
		if ok {
			ep = tab.lookup(k)
		}
		if ep == nil {
			unknown++
			continue
		}
		if ep != cur {
			if cur != nil {
				cur.receive(frames[start:n], &ss)
			}
			cur, start = ep, n
		}
		frames[n] = f
		n++
	}
	if cur != nil {
		cur.receive(frames[start:n], &ss)
	}
	ss.send()
	if unknown > 0 {
		t.vlanUnknown.Add(unknown)
	}
}

// egressVLAN is what an endpoint's frames carry between the source MAC and
// the Ethertype: tags, outer first, each with the interface's PCP.
// Immutable once stored.
type egressVLAN struct {
	key  vlanKey
	pcp  uint8
	tpid uint16 // outer TPID; valid iff key.n > 0
	tags [maxTags * vlanTagLength]byte
	n    int // bytes of tags used
}

// newEgressVLAN encodes the tags of c (IEEE 802.1Q clause 9.6: TCI = PCP
// (3 bits), DEI (1 bit, 0), VID (12 bits)). The inner tag of QinQ is a
// C-tag (0x8100); both carry the PCP.
func newEgressVLAN(c *InterfaceConfig) *egressVLAN {
	v := &egressVLAN{key: keyOf(c), pcp: c.PCP}
	tpid := c.VLANProtocol
	if tpid == 0 {
		tpid = TPID8021Q
	}
	for i, vid := range c.VLAN {
		if i > 0 {
			tpid = TPID8021Q
		} else {
			v.tpid = tpid
		}
		binary.BigEndian.PutUint16(v.tags[v.n:], tpid)
		binary.BigEndian.PutUint16(v.tags[v.n+2:], uint16(c.PCP&7)<<13|vid&0xfff)
		v.n += vlanTagLength
	}
	return v
}
