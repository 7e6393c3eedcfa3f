package router

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/gvrouter/gvrouter/router/config"
)

// appliedLease is what a DHCP lease gives its interface, in config
// terms: the router applies it by the same by-difference path as a
// reload (Apply on the netstack, SetRules on the NAT engine), so flows
// through everything else are untouched.
type appliedLease struct {
	Addr   netip.Prefix // e.g. 198.51.100.23/24
	Routes []config.Route
	MTU    int          // 0 = none (or ignored by the client)
	DNS    []netip.Addr // the lease's DNS servers, upstreams when dns: names none
}

// equal reports whether a and b configure the same.
func (a *appliedLease) equal(b *appliedLease) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Addr == b.Addr && a.MTU == b.MTU && slices.Equal(a.DNS, b.DNS) &&
		slices.EqualFunc(a.Routes, b.Routes, config.Route.Equal)
}

// withLeases returns cfg with each lease's address, routes and MTU added
// to its interface, as if they were written in the file. cfg is not
// changed. portMTU caps a lease's MTU at the port's (0 = unknown).
func withLeases(cfg *config.Config, leases map[string]*appliedLease, portMTU func(port string) int) *config.Config {
	if len(leases) == 0 {
		return cfg
	}
	out := *cfg
	out.Interfaces = slices.Clone(cfg.Interfaces)
	out.Routes = slices.Clone(cfg.Routes)
	for i := range out.Interfaces {
		ic := &out.Interfaces[i]
		l := leases[ic.Name]
		if l == nil || ic.DHCP == nil {
			continue
		}
		if l.Addr.IsValid() && !slices.ContainsFunc(ic.Addresses, func(p netip.Prefix) bool { return p.Addr() == l.Addr.Addr() }) {
			ic.Addresses = append(slices.Clone(ic.Addresses), l.Addr)
		}
		if l.MTU > 0 && ic.MTU == 0 {
			mtu := l.MTU
			if pm := portMTU(ic.Port); pm > 0 {
				mtu = min(mtu, pm)
			}
			ic.MTU = mtu
		}
		for _, r := range l.Routes {
			r.Dev = ic.Name
			// A route in the file wins over the lease's for the same
			// destination (the operator's word is final).
			if slices.ContainsFunc(out.Routes, func(s config.Route) bool { return s.To == r.To }) {
				continue
			}
			out.Routes = append(out.Routes, r)
		}
	}
	return &out
}

// leaseQueue carries lease changes from the DHCP clients' goroutines to
// the router's leaseLoop, which applies them under the router's lock.
// Only the newest change per interface is kept: a client may report
// several before one is applied, and only its present state matters.
// Posting never blocks, so a client can always be stopped.
type leaseQueue struct {
	mu      sync.Mutex
	pending map[string]leaseChange
	kick    chan struct{}
}

// leaseChange is one client's new state; owner identifies the client (a
// *runningService), so that a change from a client a reload has replaced
// is ignored. The queue's key is the service's name; iface is its
// interface. One of lease, ra and pd is the news, by the service's kind.
type leaseChange struct {
	owner any
	iface string
	lease *appliedLease // dhcp4client: nil = no lease
	ra    *learnedRA    // ra6 learner: nil = no router, no prefix
	pd    *delegation   // dhcp6client: nil = no delegation
}

func newLeaseQueue() *leaseQueue {
	return &leaseQueue{pending: make(map[string]leaseChange), kick: make(chan struct{}, 1)}
}

// post records the new state of the service named name.
func (q *leaseQueue) post(name string, c leaseChange) {
	q.mu.Lock()
	q.pending[name] = c
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// take returns and clears the pending changes.
func (q *leaseQueue) take() map[string]leaseChange {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.pending
	q.pending = make(map[string]leaseChange)
	return p
}

// portMTULocked is the MTU of an open port, 0 if unknown. r.mu must be
// held.
func (r *Router) portMTULocked(port string) int {
	if rp := r.ports[port]; rp != nil {
		return rp.port.MTU()
	}
	return 0
}

// dropStaleLeasesLocked forgets the leases of interfaces cfg no longer
// runs a DHCP client on. r.mu must be held.
func (r *Router) dropStaleLeasesLocked(cfg *config.Config) {
	for name := range r.leases {
		if ic := cfg.Interface(name); ic == nil || ic.DHCP == nil {
			delete(r.leases, name)
		}
	}
}
