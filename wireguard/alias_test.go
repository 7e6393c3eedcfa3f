package wireguard

import (
	"golang.zx2c4.com/wireguard/conn"
	"gvisor.dev/gvisor/pkg/buffer"
)

type connEndpoint = conn.Endpoint

func bufferOf(b []byte) buffer.Buffer { return buffer.MakeWithData(b) }
