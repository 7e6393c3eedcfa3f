package hw

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
)

// Profile names what differs between the boards the router runs on.
type Profile struct {
	// Name is the profile's config name, e.g. "bcm47094".
	Name string
	// DefaultQueues is the number of receive queues (PACKET_FANOUT members)
	// a port opens when Config.Queues is 0.
	DefaultQueues int
	// RxCsumOffload reports that the NIC verifies received L4 checksums, so
	// Frame.CsumValid may be set on frames from the wire.
	RxCsumOffload bool
	// DefaultTx is the transmit path a port uses when Config.Tx is
	// TxDefault. sendmmsg on every profile. End to end on veth
	// (scripts/bench.sh, docs/performance.md, 2026-12-05) the ring with
	// PACKET_QDISC_BYPASS forwards wire-size frames 0.98-1.31x as fast as
	// sendmmsg (the plain ring 0.90-1.20x), but only sendmmsg sends a
	// superframe whole behind a virtio-net header: with the hosts sending
	// TSO superframes, the generic profile's usual case, the ring runs at
	// 0.17-0.35x, since every superframe is cut in software first. On
	// the boards bypass would also give up the qdisc's back-pressure and
	// shaping, and neither has been measured; Config.Tx is there to do it.
	DefaultTx TxMode
	// VnetHdr is whether a port's sockets carry virtio-net headers when
	// Config.VnetHdr is VnetDefault. They let a local sender's TSO/GSO
	// superframes through (veth, tap, virtio: the router in a VM or a
	// container, or a host on the same machine), at the cost of ten
	// bytes read per received frame and a second iovec and header parse
	// per sent one, which BenchmarkTransmit could not tell from the noise
	// on a loaded 2-vCPU VM (vnet=on against vnet=off, interleaved, six
	// runs: medians 1.7 against 1.9 µs per 60-byte frame, 1.4 against
	// 1.7 per 1514-byte one). On for "generic", the profile of those
	// devices; off for the boards' NICs, which never deliver superframes
	// (GRO and LRO are off on a port), so their slower cores pay nothing
	// for them.
	VnetHdr bool
	// Doc describes the board and how its ports are named.
	Doc string
}

var profiles = map[string]Profile{
	"bcm47094": {
		Name:          "bcm47094",
		DefaultTx:     TxSendmmsg,
		VnetHdr:       false,
		DefaultQueues: 1,
		RxCsumOffload: false,
		Doc: "Broadcom BCM47094 (Northstar, 2x Cortex-A9, 32-bit ARM): one bgmac " +
			"Ethernet (no RX checksum offload, one RX queue) wired to the CPU port of " +
			"a BCM53012 switch. On swconfig-era kernels eth0 carries every switch " +
			"port as 802.1Q-tagged frames (VLAN 1 = LAN, VLAN 2 = WAN): open eth0 and " +
			"demultiplex by Frame.VLANTCI (the kernel strips the tag into the ring " +
			"header). On DSA kernels (OpenWrt 22.03 and later) the switch ports are " +
			"netdevs: open br-lan (its member ports are still bridged by the switch " +
			"in hardware) and wan. One queue: with two cores, one receive goroutine " +
			"per port leaves the other core for the peer port and the control plane.",
	},
	"ixgbe": {
		Name:          "ixgbe",
		DefaultTx:     TxSendmmsg,
		VnetHdr:       false,
		DefaultQueues: runtime.NumCPU(),
		RxCsumOffload: true,
		Doc: "Intel 82599/X540 10 GbE (ixgbe): RSS spreads flows over hardware " +
			"queues; the port opens one TPACKET_V3 ring per core (Config.Queues " +
			"overrides) joined with PACKET_FANOUT hash, so each flow stays on one " +
			"receive goroutine. RX checksum offload marks verified frames CsumValid.",
	},
	"generic": {
		Name:          "generic",
		DefaultTx:     TxSendmmsg,
		VnetHdr:       true,
		DefaultQueues: 1,
		RxCsumOffload: false,
		Doc: "Any Linux netdev, veth included: one receive queue unless " +
			"Config.Queues says otherwise, no assumption about checksum offload.",
	},
}

// LookupProfile returns the profile called name; "" is "generic".
func LookupProfile(name string) (Profile, error) {
	if name == "" {
		name = "generic"
	}
	p, ok := profiles[name]
	if !ok {
		names := slices.Sorted(maps.Keys(profiles))
		return Profile{}, fmt.Errorf("hw: unknown hardware profile %q (want one of %s)", name, strings.Join(names, ", "))
	}
	return p, nil
}
