package stack

import (
	"fmt"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// LinkConfig is a point-to-point interface whose NIC is the caller's own
// IP-level link endpoint rather than an Ethernet Endpoint on a port: a
// WireGuard interface (package wireguard's TUN). Netstack adds it as a
// NIC, gives it its addresses and routes Routes into it; it has no MAC,
// no VLAN, no ARP or NDP, and none of the Endpoint's receive stages
// (classification, NAT Prerouting, GRO): what it delivers goes straight
// to netstack, which forwards it like any other packet. Packets that
// leave by an Endpoint still meet NAT Postrouting there.
type LinkConfig struct {
	// Name is the NIC name, e.g. "wg0"; unique among interfaces and
	// links.
	Name string
	// Endpoint is the link, e.g. a *wireguard.TUN. Netstack attaches it
	// when the NIC is made and closes it (LinkEndpoint.Close) when the
	// NIC is removed; the caller owns whatever runs behind it. A link
	// whose Endpoint changes between two Applys is recreated.
	Endpoint stack.LinkEndpoint
	// Addresses are the router's addresses on the link, e.g.
	// 10.8.0.1/24; each also makes a connected route.
	Addresses []netip.Prefix
	// Routes are prefixes routed into the link beyond its subnets, e.g.
	// a WireGuard peer's allowed IPs 192.168.50.0/24 (site to site).
	Routes []netip.Prefix
}

// link is a LinkConfig's NIC. Its Interface carries the id, name and
// addresses (syncAddrsLocked); its ep is nil, so it never enters
// Netstack.ifaces, whose users expect an Endpoint.
type link struct {
	ifc Interface
	ep  stack.LinkEndpoint
}

// linkEndpoint is a LinkConfig.Endpoint as netstack sees it: it wraps
// the dispatcher it is attached to, so that every IPv4 packet the link
// delivers has its forwarding pin released (pin.go), as deliver does for
// an Endpoint's packets.
type linkEndpoint struct {
	stack.LinkEndpoint
	pins *forwardPins
	tx   *txBatcher
}

// Attach implements stack.LinkEndpoint.
func (e *linkEndpoint) Attach(d stack.NetworkDispatcher) {
	if d == nil {
		e.LinkEndpoint.Attach(nil)
		return
	}
	e.LinkEndpoint.Attach(&linkDispatcher{NetworkDispatcher: d, pins: e.pins, tx: e.tx})
}

// linkDispatcher releases each delivered IPv4 packet's pin, and lets the
// link bracket a batch of deliveries (BeginBatch, EndBatch).
type linkDispatcher struct {
	stack.NetworkDispatcher
	pins *forwardPins
	tx   *txBatcher
}

// BeginBatch marks a batch of deliveries in progress: what netstack
// forwards out of them waits in each egress interface's pending frames
// (txBatcher) until EndBatch, and leaves in one write per interface, as
// a port's receive batch does. A WireGuard TUN brackets each batch of
// decrypted packets this way. Every BeginBatch needs its EndBatch, on
// the same goroutine.
func (d *linkDispatcher) BeginBatch() { d.tx.begin() }

// EndBatch ends a BeginBatch and sends what it deferred.
func (d *linkDispatcher) EndBatch() { d.tx.end() }

// DeliverNetworkPacket implements stack.NetworkDispatcher.
func (d *linkDispatcher) DeliverNetworkPacket(proto tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	d.NetworkDispatcher.DeliverNetworkPacket(proto, pkt)
	if proto == header.IPv4ProtocolNumber {
		d.pins.release(pkt)
	}
}

// validateLinks adds c.Links' problems to errs; names holds the
// interfaces' names.
func (c *Config) validateLinks(names map[string]bool, errs []error) []error {
	for i, l := range c.Links {
		switch {
		case l.Name == "":
			errs = append(errs, fmt.Errorf("link %d: no name", i))
		case names[l.Name]:
			errs = append(errs, fmt.Errorf("link %s: duplicate name", l.Name))
		}
		names[l.Name] = true
		if l.Endpoint == nil {
			errs = append(errs, fmt.Errorf("link %s: no endpoint", l.Name))
		}
		for _, p := range append(append([]netip.Prefix(nil), l.Addresses...), l.Routes...) {
			if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				errs = append(errs, fmt.Errorf("link %s: invalid prefix %s", l.Name, p))
			}
		}
	}
	return errs
}

// syncLinksLocked makes the links equal cfg.Links: removed or changed
// ones go, new ones are added, addresses follow. r.mu must be held.
func (r *Netstack) syncLinksLocked(cfg *Config) []error {
	var errs []error
	want := make(map[string]*LinkConfig, len(cfg.Links))
	for i := range cfg.Links {
		want[cfg.Links[i].Name] = &cfg.Links[i]
	}
	for name, l := range r.links {
		if c, ok := want[name]; !ok || c.Endpoint != l.ep {
			delete(r.links, name)
			if err := r.s.RemoveNIC(l.ifc.id); err != nil {
				errs = append(errs, fmt.Errorf("stack: link %s: RemoveNIC(%d): %s", name, l.ifc.id, err))
			}
			r.log.Debug("link removed", "name", name, "nic", l.ifc.id)
		}
	}
	for i := range cfg.Links {
		c := &cfg.Links[i]
		l := r.links[c.Name]
		if l == nil {
			r.nextID++
			ep := &linkEndpoint{LinkEndpoint: c.Endpoint, pins: r.pins, tx: &r.tx}
			if err := r.s.CreateNICWithOptions(r.nextID, ep, stack.NICOptions{Name: c.Name}); err != nil {
				errs = append(errs, fmt.Errorf("stack: link %s: CreateNIC(%d): %s", c.Name, r.nextID, err))
				continue
			}
			l = &link{ifc: Interface{name: c.Name, r: r, id: r.nextID}, ep: c.Endpoint}
			r.links[c.Name] = l
			r.log.Debug("link added", "name", c.Name, "nic", l.ifc.id, "mtu", c.Endpoint.MTU())
		}
		errs = append(errs, r.syncAddrsLocked(&l.ifc, c.Addresses)...)
	}
	return errs
}

// linkID returns the NIC ID of the link called name.
func (r *Netstack) linkIDLocked(name string) (tcpip.NICID, bool) {
	if l, ok := r.links[name]; ok {
		return l.ifc.id, true
	}
	return 0, false
}

// LinkAddresses returns the addresses of the link called name, or nil.
func (r *Netstack) LinkAddresses(name string) []netip.Prefix {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.links[name]; ok {
		return append([]netip.Prefix(nil), l.ifc.addrs...)
	}
	return nil
}
