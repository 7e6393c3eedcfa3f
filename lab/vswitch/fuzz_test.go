package vswitch

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/internal/netnstest"
)

// FuzzForward feeds arbitrary frames and ring metadata to the lab switch
// and checks what leaves it: never the ingress port, the MAC addresses
// unchanged, a C-tag of a VLAN the port carries tagged, and the length
// changed by whole tags only.
func FuzzForward(f *testing.F) {
	plain := netnstest.Frame(macBcast, macLAN, "seed")
	f.Add(plain, false, uint16(0), uint16(0), uint8(portLAN))
	f.Add(plain, true, uint16(0xa002), uint16(0x8100), uint8(portCPU))
	f.Add(plain, true, uint16(100), uint16(0x88a8), uint8(portLAN))
	f.Add(netnstest.Tag(plain, 0x8100, 0x2001), false, uint16(0), uint16(0), uint8(portCPU))
	f.Add(netnstest.Tag(plain, 0x8100, 0x2001)[:16], false, uint16(0), uint16(0), uint8(portCPU))
	f.Add(netnstest.Frame([]byte{0x01, 0x80, 0xc2, 0, 0, 0}, macLAN, "stp"), false, uint16(0), uint16(0), uint8(portLAN))
	f.Fuzz(func(t *testing.T, data []byte, vlanValid bool, tci, tpid uint16, port uint8) {
		ts := newTestSwitch(t, labConfig)
		in := int(port) % len(labConfig.Ports)
		fr := hw.Frame{Data: data, WireLen: len(data), VLANValid: vlanValid, VLANTCI: tci, VLANTPID: tpid}
		out := ts.send(in, fr)
		if len(out[in]) != 0 {
			t.Fatalf("frame sent back out its ingress port %d", in)
		}
		for p, frames := range out {
			if len(frames) > 1 {
				t.Fatalf("port %d got %d copies of one frame", p, len(frames))
			}
			for _, o := range frames {
				if len(o) < 14 || !bytes.Equal(o[:12], data[:12]) {
					t.Fatalf("port %d got % x, want the MACs of % x", p, o, data)
				}
				if d := len(o) - len(data); d < -4 || d > 8 || d%4 != 0 {
					t.Fatalf("port %d got %d bytes from %d", p, len(o), len(data))
				}
				if pc := labConfig.Ports[p]; len(pc.Tagged) > 0 {
					vid := binary.BigEndian.Uint16(o[14:]) & vidMask
					if binary.BigEndian.Uint16(o[12:]) != TPIDCTag || !slices.Contains(pc.Tagged, vid) {
						t.Fatalf("port %s got % x, want a C-tag of one of %v", pc.Name, o[:18], pc.Tagged)
					}
				}
			}
		}
	})
}
