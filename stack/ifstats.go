package stack

import (
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// Stats returns the interface's counters: our endpoint's, plus netstack's
// per-NIC drop counters under "netstack_" names.
func (i *Interface) Stats() InterfaceStats {
	var s InterfaceStats
	i.ep.stats.fill(&s)
	info, ok := i.r.s.NICInfo()[i.id]
	if !ok {
		return s
	}
	add := func(name string, c *tcpip.StatCounter) {
		if c == nil {
			return
		}
		if v := c.Value(); v != 0 {
			s.Drops[name] += v
		}
	}
	add("netstack_malformed_l4", info.Stats.MalformedL4RcvdPackets)
	add("netstack_tx_no_buffer_space", info.Stats.TxPacketsDroppedNoBufferSpace)
	add("netstack_disabled_rx", info.Stats.DisabledRx.Packets)
	for proto, st := range info.NetworkStats {
		var ip *tcpip.IPStats
		var fam string
		switch proto {
		case ipv4.ProtocolNumber:
			if v, ok := st.(*ipv4.Stats); ok {
				ip, fam = &v.IP, "ipv4"
			}
		case ipv6.ProtocolNumber:
			if v, ok := st.(*ipv6.Stats); ok {
				ip, fam = &v.IP, "ipv6"
			}
		}
		if ip == nil {
			continue
		}
		p := "netstack_" + fam + "_"
		add(p+"malformed", ip.MalformedPacketsReceived)
		add(p+"malformed_fragment", ip.MalformedFragmentsReceived)
		add(p+"invalid_destination", ip.InvalidDestinationAddressesReceived)
		add(p+"invalid_source", ip.InvalidSourceAddressesReceived)
		add(p+"no_route", ip.Forwarding.Unrouteable)
		add(p+"ttl_exceeded", ip.Forwarding.ExhaustedTTL)
		add(p+"packet_too_big", ip.Forwarding.PacketTooBig)
		add(p+"host_unreachable", ip.Forwarding.HostUnreachable)
		add(p+"link_local_source", ip.Forwarding.LinkLocalSource)
		add(p+"link_local_destination", ip.Forwarding.LinkLocalDestination)
		add(p+"extension_header_problem", ip.Forwarding.ExtensionHeaderProblem)
		add(p+"no_buffer_space", ip.Forwarding.OutgoingDeviceNoBufferSpace)
		add(p+"outgoing_errors", ip.OutgoingPacketErrors)
	}
	return s
}
