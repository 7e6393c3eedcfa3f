package router

import "github.com/gvrouter/gvrouter/router/status"

// ipv6StatusLocked fills the status page's IPv6 section; nil when none of
// it runs. r.mu must be held.
func (r *Router) ipv6StatusLocked() *status.IPv6 {
	v := &status.IPv6{DHCPv6Servers: r.dhcp6ServersStatusLocked(), Delegation: r.dhcp6ClientStatusLocked(),
		LANRA: r.raAdvertisersStatusLocked(), WANRA: r.raLearnersStatusLocked()}
	if subnets := r.learned.LANSubnets(); len(subnets) > 0 {
		v.LANPrefixes = subnets
	}
	if v.DHCPv6Servers == nil && v.LANPrefixes == nil && v.Delegation == nil && v.WANRA == nil && v.LANRA == nil {
		return nil
	}
	return v
}
