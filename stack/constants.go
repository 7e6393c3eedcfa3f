package stack

import "gvisor.dev/gvisor/pkg/tcpip/header"

const (
	// maxHeaderLength is the link header room the endpoint asks netstack
	// to reserve: a 14-byte Ethernet header plus two 4-byte tags (802.1ad
	// QinQ, IEEE 802.1Q clause 9), so AddHeader pushes the whole header
	// into the same headroom without netstack's Push overflowing.
	maxHeaderLength = header.EthernetMinimumSize + maxTags*vlanTagLength

	// vlanTagLength is one 802.1Q/802.1ad tag (TPID + TCI).
	vlanTagLength = 4

	// inbandTagAllowance lets a frame carry one in-band tag beyond the MTU
	// before it counts as oversize, so that a tagged frame is counted as
	// "vlan_unknown" rather than "oversize".
	inbandTagAllowance = vlanTagLength

	// defaultMTU is the L3 MTU of an interface whose config gives none
	// (Ethernet, RFC 894).
	defaultMTU = 1500

	// icmpErrorMaxSize is the largest ICMP error we build: RFC 1812
	// section 4.3.2.3 says an ICMP error should quote as much of the
	// original datagram as fits without the error exceeding 576 bytes,
	// which is also what gVisor does for the errors it sends itself.
	icmpErrorMaxSize = header.IPv4MinimumProcessableDatagramSize

	// gsoBufSize is the flattening buffer for software segmentation: the
	// largest packet gro.GRO builds (64 KiB) plus link headers, so it is
	// allocated once per endpoint.
	gsoBufSize = 1<<16 + maxHeaderLength
)

// Ethertypes that carry an in-band VLAN tag (IEEE 802.1Q, 802.1ad, and the
// pre-standard 0x9100 QinQ TPID).
const (
	etherTypeVLAN   = 0x8100
	etherTypeQinQ   = 0x88a8
	etherTypeQinQv1 = 0x9100
)
