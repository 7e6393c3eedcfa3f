package hw

import "errors"

// Config describes one port.
type Config struct {
	// Name is the kernel interface, e.g. "eth0".
	Name string
	// Queues is the number of receive rings joined with PACKET_FANOUT
	// (hash), e.g. 4; 0 means the profile's default.
	Queues int
	// MTU is the L3 MTU, e.g. 1500; 0 means the interface's own. Received
	// frames longer than MTU + MaxL2Overhead are dropped as "oversize".
	// Open raises the interface's kernel MTU to it when it is below
	// (the kernel refuses longer sends: see ExtraTags), e.g. to 1508 for
	// RFC 4638 PPPoE, and Close restores it. Not done with KeepKernel.
	MTU int
	// Profile is the hardware profile: "bcm47094", "ixgbe" or "generic"
	// ("" = generic).
	Profile string
	// ExtraTags is how many in-band VLAN tags the port's full-size frames
	// carry beyond the one the kernel allows for: 0 for 802.1Q, 1 for a
	// single 802.1ad tag or 802.1Q-in-802.1Q, 2 for 802.1ad QinQ. The
	// kernel refuses an AF_PACKET send (packet_snd) longer than MTU + 14,
	// + 4 only when the outer TPID is 0x8100
	// (packet_extra_vlan_len_allowed), and veth drops a delivery longer
	// than MTU + 18 (is_skb_forwardable). Open raises the interface's
	// kernel MTU to MTU + 4*ExtraTags when it is below that, and Close
	// restores it. Not done with KeepKernel.
	ExtraTags int
	// StateDir is the router's state directory, e.g. "/var/lib/gvrouter":
	// Open writes what it changes in the kernel to a record there
	// (hw/takeover) before changing it, adopts the record a crashed run
	// left, and Close (or Restore) puts back what the record says. ""
	// keeps the record in memory only, so a crash loses it.
	StateDir string
	// Tx is how the port transmits, e.g. TxRing; TxDefault (the zero
	// value) means the profile's DefaultTx.
	Tx TxMode
	// VnetHdr turns virtio-net headers (PACKET_VNET_HDR) on the port's
	// sockets on or off, e.g. VnetOn; VnetDefault (the zero value) means
	// the profile's Profile.VnetHdr. With them the port takes a local
	// sender's TSO/GSO superframes (Frame.GSO) instead of dropping them as
	// "oversize", and sends superframes whole (GSOWriter). If the kernel
	// refuses the option, a port with VnetDefault logs it and goes on
	// without; one with VnetOn fails to open.
	VnetHdr VnetMode
	// KeepKernel, for benches and tests only, leaves the kernel's settings
	// of the interface alone: no offload changes, addresses, IPv6 or
	// ingress drop.
	KeepKernel bool
	// BlockRingOnly receives on the TPACKET_V3 ring alone, without the
	// light ring a single-queue port reads while traffic is light
	// (lightring_linux.go): every frame then waits for its ring block
	// to retire (RingRetireTimeout or more). For tests of the block
	// ring, and hosts that would rather not spend the light ring's
	// memory (LightRingSlots, LightRingGSOSlots).
	BlockRingOnly bool
}

// TxMode is a port's transmit path. Both paths take the same batches
// (FrameWriter) and count the same way; they differ in where the bytes
// go: sendmmsg hands the kernel the caller's buffers (the kernel copies
// each frame into an skb), the TX ring copies each frame into a slot of
// memory shared with the kernel, which sends the slot's pages without a
// further copy.
type TxMode string

const (
	// TxDefault is the profile's choice (Profile.DefaultTx).
	TxDefault TxMode = ""
	// TxSendmmsg sends each batch with sendmmsg(2), TxBatchSize frames
	// per call, on the socket of receive queue 0.
	TxSendmmsg TxMode = "sendmmsg"
	// TxRing copies each batch into a PACKET_TX_RING (TPACKET_V3) on
	// receive queue 0's socket and sends it with one send(2).
	TxRing TxMode = "ring"
	// TxRingBypass is TxRing with PACKET_QDISC_BYPASS: frames go straight
	// to the driver, skipping the interface's qdisc (and its
	// back-pressure and any shaping configured on it).
	TxRingBypass TxMode = "ring-bypass"
)

// VnetMode says whether a port's sockets carry virtio-net headers.
type VnetMode string

const (
	// VnetDefault is the profile's choice (Profile.VnetHdr).
	VnetDefault VnetMode = ""
	// VnetOn puts a virtio-net header in front of every frame received
	// and sent.
	VnetOn VnetMode = "on"
	// VnetOff receives and sends bare frames: superframes are "oversize"
	// drops.
	VnetOff VnetMode = "off"
)

// TxModes lists the valid non-default TxMode values, for messages.
var TxModes = []TxMode{TxSendmmsg, TxRing, TxRingBypass}

// Offloads are the kernel features of an interface that change what
// AF_PACKET delivers or what a peer sends: with GRO or LRO on, the ring
// sees merged frames larger than the MTU; with TSO/GSO on, a local sender
// hands over oversized frames; with TX checksum offload, partial
// checksums (notes/gvisor-netstack.md §0 item 2).
type Offloads struct {
	GRO, LRO, TSO, GSO, TxCsum, RxCsum bool
}

var (
	// ErrNotFound means the interface named in Config.Name does not exist
	// in the calling thread's network namespace.
	ErrNotFound = errors.New("no such interface")
	// ErrDown means the interface is administratively down; bring it up
	// (ip link set IF up) before opening it. A missing carrier is not an
	// error: the port opens and follows the link.
	ErrDown = errors.New("interface is administratively down")
	// ErrNotEthernet means the interface does not carry Ethernet frames
	// (loopback, tun, ppp, ...): its frames could not be parsed.
	ErrNotEthernet = errors.New("not an Ethernet interface")
	// ErrRunning means Run was called while another Run of the same port
	// (or a Bridge using it) was still receiving.
	ErrRunning = errors.New("port already running")
	// ErrClosed means the port was closed.
	ErrClosed = errors.New("port closed")
)
