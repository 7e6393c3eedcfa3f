package wireguard

import (
	"net"

	gvstack "github.com/gvrouter/gvrouter/stack"
	"golang.zx2c4.com/wireguard/conn"
	"gvisor.dev/gvisor/pkg/buffer"
)

type connEndpoint = conn.Endpoint

func bufferOf(b []byte) buffer.Buffer { return buffer.MakeWithData(b) }

// The router's WAN sockets and the kernel's both serve as PacketConn.
var (
	_ PacketConn = (*gvstack.UDPConn)(nil)
	_ PacketConn = (*net.UDPConn)(nil)
	// The router's read and write a batch per call.
	_ BatchReader = (*gvstack.UDPConn)(nil)
	_ BatchWriter = (*gvstack.UDPConn)(nil)
	// The router's fast path forwards into the TUN.
	_ gvstack.FastLinkWriter = (*TUN)(nil)
)
