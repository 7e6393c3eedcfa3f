package dhcp6server

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"
)

// options is one immutable set of the options SetOptions changes, with
// their encodings ready.
type options struct {
	dns     []netip.Addr
	domains []string
	dnsOpt  dhcpv6.Option // option 23; nil = no DNS
	domOpt  dhcpv6.Option // option 24; nil = no domains
}

func newOptions(dns []netip.Addr, domains []string) *options {
	o := &options{dns: slices.Clone(dns)}
	for _, d := range domains {
		o.domains = append(o.domains, strings.TrimSuffix(d, "."))
	}
	if len(o.dns) > 0 {
		ips := make([]net.IP, len(o.dns))
		for i, a := range o.dns {
			ips[i] = a.AsSlice()
		}
		o.dnsOpt = dhcpv6.OptDNS(ips...)
	}
	if len(o.domains) > 0 {
		o.domOpt = dhcpv6.OptDomainSearchList(&rfc1035label.Labels{Labels: slices.Clone(o.domains)})
	}
	return o
}

// duidLL is the DUID-LL of an Ethernet address (RFC 8415 §11.4): type 3,
// hardware type 1 (Ethernet), the address.
func duidLL(mac net.HardwareAddr) *dhcpv6.DUIDLL {
	return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac}
}

// reply builds the Reply to the Information-request m (RFC 8415 §18.3.6):
// its transaction ID; the Server Identifier; the Client Identifier, byte
// for byte, if m had one (§16.10: none if it had none); then, each only
// when m's Option Request option names it (§21.7: "Other top-level option
// codes MUST appear in the Option Request option or they will not be sent
// by the server"), DNS servers, the domain search list and the refresh
// time.
func (s *Server) reply(m *dhcpv6.Message, clientID []byte) []byte {
	o := s.opts.Load()
	r := &dhcpv6.Message{MessageType: dhcpv6.MessageTypeReply, TransactionID: m.TransactionID}
	r.Options.Add(s.serverID)
	if clientID != nil {
		r.Options.Add(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionClientID, OptionData: clientID})
	}
	oro := m.Options.RequestedOptions()
	if o.dnsOpt != nil && oro.Contains(dhcpv6.OptionDNSRecursiveNameServer) {
		r.Options.Add(o.dnsOpt)
	}
	if o.domOpt != nil && oro.Contains(dhcpv6.OptionDomainSearchList) {
		r.Options.Add(o.domOpt)
	}
	if oro.Contains(dhcpv6.OptionInformationRefreshTime) {
		r.Options.Add(s.refresh)
	}
	return r.ToBytes()
}

// refreshOption is option 32 for d, whole seconds (§21.23).
func refreshOption(d time.Duration) dhcpv6.Option {
	return dhcpv6.OptInformationRefreshTime(d.Truncate(time.Second))
}
