package hw

import (
	"golang.org/x/net/bpf"
)

// packetOutgoing is PACKET_OUTGOING (linux/if_packet.h): a frame this host
// sent, looped back to packet taps.
const packetOutgoing = 4

// outgoingFilter is the classic BPF program attached to every receive
// socket: it drops frames of type PACKET_OUTGOING, i.e. frames the kernel
// (or this very port) sends on the interface. PACKET_IGNORE_OUTGOING is not
// enough, because it is not honoured for sockets in a fanout group
// (notes/gvisor-netstack.md §0 item 5).
func outgoingFilter() ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: packetOutgoing, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffffffff},
		bpf.RetConstant{Val: 0},
	})
}
