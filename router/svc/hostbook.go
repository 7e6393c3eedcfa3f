package svc

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gvrouter/gvrouter/services/dhcp4server"
	"github.com/gvrouter/gvrouter/services/dnsforward"
	"github.com/gvrouter/gvrouter/stack"
)

// hostBook feeds the forwarder the host names of the DHCP servers'
// leases. Each server's OnChange calls refresh on its own goroutine; the
// book has its own lock so that it never takes the runtime's lock there.
//
// A lease's host is also named by IPv6 (AAAA): by the addresses the lan
// interface's neighbour cache holds for the lease's MAC (a SLAAC host's
// addresses, once it has spoken to or through the router), refreshed
// every neighborRefresh. A host not yet seen in NDP has no AAAA.
type hostBook struct {
	mu      sync.Mutex
	fwd     *dnsforward.Forwarder
	servers map[string]*dhcp4server.Server // by interface
	// iface finds an interface's neighbour cache (set once in New).
	iface func(name string) *stack.Interface
	// last is what lastFwd was last given.
	last    map[string][]netip.Addr
	lastFwd *dnsforward.Forwarder
}

// neighborRefresh is how often the book reads the lan neighbour caches.
const neighborRefresh = 5 * time.Second

// watchNeighbors refreshes the book every neighborRefresh until ctx ends.
func (b *hostBook) watchNeighbors(ctx context.Context) {
	t := time.NewTicker(neighborRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.refresh()
		}
	}
}

func (b *hostBook) setForwarder(f *dnsforward.Forwarder) {
	b.mu.Lock()
	b.fwd = f
	b.mu.Unlock()
	b.refresh()
}

// setServer registers (srv) or forgets (nil) the DHCP server of iface.
func (b *hostBook) setServer(iface string, srv *dhcp4server.Server) {
	b.mu.Lock()
	if srv == nil {
		delete(b.servers, iface)
	} else {
		if b.servers == nil {
			b.servers = map[string]*dhcp4server.Server{}
		}
		b.servers[iface] = srv
	}
	b.mu.Unlock()
	b.refresh()
}

// refresh gives the forwarder every server's hosts.
func (b *hostBook) refresh() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fwd == nil {
		return
	}
	hosts := map[string][]netip.Addr{}
	add := func(name string, a netip.Addr) {
		if !slices.Contains(hosts[name], a) {
			hosts[name] = append(hosts[name], a)
		}
	}
	for iface, srv := range b.servers {
		for name, a := range srv.Hosts() {
			add(name, a)
		}
		var ifc *stack.Interface
		if b.iface != nil {
			ifc = b.iface(iface)
		}
		if ifc == nil {
			continue
		}
		byMAC := map[string][]netip.Addr{}
		for _, n := range ifc.Neighbors6() {
			if !n.Addr.IsLinkLocalUnicast() && n.Addr.IsGlobalUnicast() {
				byMAC[n.MAC.String()] = append(byMAC[n.MAC.String()], n.Addr)
			}
		}
		if len(byMAC) == 0 {
			continue
		}
		for _, l := range srv.Status().Leases {
			if l.Hostname == "" || !l.Static && l.State != dhcp4server.LeaseBound {
				continue
			}
			for _, a := range byMAC[l.MAC.String()] {
				add(strings.ToLower(l.Hostname), a)
			}
		}
	}
	for _, as := range hosts {
		slices.SortFunc(as, func(x, y netip.Addr) int { return x.Compare(y) })
	}
	if b.fwd == b.lastFwd && maps.EqualFunc(hosts, b.last, slices.Equal[[]netip.Addr]) {
		return // the periodic refresh found nothing new
	}
	b.last, b.lastFwd = hosts, b.fwd
	b.fwd.SetHosts(hosts)
}
