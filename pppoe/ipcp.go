package pppoe

import "net/netip"

// IPCP option types (RFC 1332 §3, RFC 1877 §1).
const (
	ipcpOptCompression  = 2
	ipcpOptAddress      = 3
	ipcpOptPrimaryDNS   = 129
	ipcpOptPrimaryNBNS  = 130
	ipcpOptSecondaryDNS = 131
)

// ipcp is the IPCP option logic: we ask for an address and two DNS
// servers with 0.0.0.0, the peer Naks with the values (RFC 1332 §3.3,
// RFC 1877 §1.1), and we Ack the peer's own non-zero address.
type ipcp struct {
	addr, dns1, dns2             [4]byte
	wantAddr, wantDNS1, wantDNS2 bool
	peer                         [4]byte
}

func (p *ipcp) reset() {
	*p = ipcp{wantAddr: true, wantDNS1: true, wantDNS2: true}
}

func (p *ipcp) request(b []byte) []byte {
	if p.wantAddr {
		b = AppendOption(b, ipcpOptAddress, p.addr[:])
	}
	if p.wantDNS1 {
		b = AppendOption(b, ipcpOptPrimaryDNS, p.dns1[:])
	}
	if p.wantDNS2 {
		b = AppendOption(b, ipcpOptSecondaryDNS, p.dns2[:])
	}
	return b
}

// check Acks the peer's address if it is a usable unicast address and
// rejects everything else: we assign no address and serve no DNS, and we
// do not do VJ compression.
func (p *ipcp) check(opts []Option, out []byte, failures int) (verdict, []byte) {
	rej := out
	for _, o := range opts {
		if o.Type == ipcpOptAddress && len(o.Data) == 4 && usableIPv4(o.Data) {
			continue
		}
		rej = AppendOption(rej, o.Type, o.Data)
	}
	if len(rej) > len(out) {
		return verdictRej, rej
	}
	p.peer = [4]byte{}
	for _, o := range opts {
		copy(p.peer[:], o.Data)
	}
	return verdictAck, out
}

// usableIPv4 reports whether a is an address a PPP peer may have:
// not 0.0.0.0, broadcast, multicast or loopback.
func usableIPv4(a []byte) bool {
	ip := netip.AddrFrom4([4]byte(a))
	return !ip.IsUnspecified() && !ip.IsMulticast() && !ip.IsLoopback() && ip != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

func (p *ipcp) acked(opts []Option) {}

// naked takes the peer's address and DNS servers; an unusable address
// is ignored and asked for again.
func (p *ipcp) naked(opts []Option) {
	for _, o := range opts {
		if len(o.Data) != 4 {
			continue
		}
		switch o.Type {
		case ipcpOptAddress:
			if usableIPv4(o.Data) {
				p.addr, p.wantAddr = [4]byte(o.Data), true
			}
		case ipcpOptPrimaryDNS:
			p.dns1, p.wantDNS1 = [4]byte(o.Data), true
		case ipcpOptSecondaryDNS:
			p.dns2, p.wantDNS2 = [4]byte(o.Data), true
		}
	}
}

func (p *ipcp) rejected(opts []Option) {
	for _, o := range opts {
		switch o.Type {
		case ipcpOptAddress:
			p.wantAddr = false
		case ipcpOptPrimaryDNS:
			p.wantDNS1, p.dns1 = false, [4]byte{}
		case ipcpOptSecondaryDNS:
			p.wantDNS2, p.dns2 = false, [4]byte{}
		}
	}
}

// result returns the agreed addresses; fields are invalid (zero) when
// not agreed.
func (p *ipcp) result() (local, peer netip.Addr, dns []netip.Addr) {
	if p.addr != [4]byte{} {
		local = netip.AddrFrom4(p.addr)
	}
	if p.peer != [4]byte{} {
		peer = netip.AddrFrom4(p.peer)
	}
	for _, d := range [][4]byte{p.dns1, p.dns2} {
		if d != [4]byte{} {
			dns = append(dns, netip.AddrFrom4(d))
		}
	}
	return local, peer, dns
}
