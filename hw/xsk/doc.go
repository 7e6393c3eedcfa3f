// Package xsk owns the mechanics of AF_XDP for the router's ports: the
// UMEM (packet memory shared with the kernel), the four rings of each
// socket, binding one socket per receive queue, and the XDP program that
// steers each queue's frames to its socket. It knows nothing of netstack
// or the router's config; package hw/xdpport builds ports on it.
//
// # Frames
//
// A Umem is cut into equal frames (2 or 4 KiB). Every frame is in exactly
// one place, and the Umem checks each move between them:
//
//	free ──Refill──► fill ring / driver ──► RX ring ──Receive──► held by the caller
//	  ▲                                                         │    │     │
//	  └───────────────────── Release ───────────────────────────┘    │     │ Transmit
//	  │                                                   Send lends │     │
//	  │                          ┌──────────── lent ◄────────────────┘     │
//	  │                  Release │              │ completion               │
//	  │                          ▼              ▼                          │
//	  └── Complete ◄── completion ring ◄── TX ring ◄───────────────────────┘
//	                                            (a lent frame completed
//	                                             first is held until Release)
//
// Counts reports how many frames are in each place, so tests (and the
// status page) can check that none leaks. A frame received on one socket
// may be transmitted on any socket of the same Umem, which with
// XDP_SHARED_UMEM may sit on another interface: a forwarded frame leaves
// from the buffer it arrived in. Transmit hands a frame over to the TX
// ring; Send lends a received frame the caller still holds, and copies
// anything else (send_linux.go says how a lent frame's two owners let
// go, and why a frame is lent once).
//
// # Rings
//
// Each ring is shared with the kernel and has one producer and one
// consumer; ring_linux.go says how indices are published (sync/atomic
// on the producer and consumer words). Sockets bind with
// XDP_USE_NEED_WAKEUP, so the data path makes a syscall only when the
// kernel asks for one: a zero-length sendto to start transmit, a
// zero-length recvfrom when the fill ring ran dry. All per-frame work is
// done in batches and allocates nothing.
//
// # Modes
//
// A socket asks for zero-copy (XDP_ZEROCOPY) and falls back to copy mode
// (XDP_COPY) when the driver cannot; Socket.Mode says which it got. The
// XDP program is attached in the driver (native) or, failing that, in the
// generic hook; Program.Mode says which.
//
// # veth
//
// veth has native XDP (attaching a program switches its receive side to
// NAPI) but no zero-copy (no ndo_xsk_wakeup: XDP_ZEROCOPY fails with
// EOPNOTSUPP), so on veth a socket runs in copy mode on native XDP.
// Measured on Linux 6.18, neither direction needs anything on the peer
// end (no program, and GRO off, veth's default there): frames the peer sends (veth_xmit) reach the program on our end,
// and XSK transmit in copy mode builds an skb for veth_xmit, which the
// peer receives like any other. What does need the peer's NAPI (an XDP
// program, or GRO, on the receiving veth) is a program redirecting
// frames *into* a veth (ndo_xdp_xmit: XDP_REDIRECT to a devmap, or
// XDP_TX); the kernel reports it as NETDEV_XDP_ACT_NDO_XMIT on the
// sending end (veth: "take into account peer device for
// NETDEV_XDP_ACT_NDO_XMIT xdp_features flag", 2023). This package does
// neither.
//
// # Privileges
//
// Loading and attaching the program needs CAP_BPF and CAP_NET_ADMIN,
// the sockets CAP_NET_RAW. Errors for a missing one wrap ErrPermission
// and name it; errors for a kernel that cannot wrap ErrUnsupported. Both
// tell the caller to fall back to AF_PACKET.
package xsk
