package stack

import "encoding/binary"

// admitUDP reports whether a new flow to the router is a UDP datagram
// to one of ports (InterfaceConfig.AdmitUDP): the listen ports of the
// router's own servers on a wan interface, which the WAN input policy
// must let in (a WireGuard interface's listen port). l4 is the packet's
// transport part; it does not allocate.
func admitUDP(ports *[]uint16, proto uint8, l4 []byte) bool {
	if ports == nil || proto != protoUDP || len(l4) < 8 {
		return false
	}
	dst := binary.BigEndian.Uint16(l4[2:])
	for _, p := range *ports {
		if p == dst {
			return true
		}
	}
	return false
}

// storeAdmitUDP stores ports as e's admitted UDP ports (nil for none).
func (e *Endpoint) storeAdmitUDP(ports []uint16) {
	if len(ports) == 0 {
		e.admitUDP.Store(nil)
		return
	}
	p := append([]uint16(nil), ports...)
	e.admitUDP.Store(&p)
}
