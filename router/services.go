package router

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/router/svc"
)

// The router's own services run in package svc, which sees the runtime
// only through svc.Env: the netstack's interfaces and sockets, the NAT
// engine's port reservations, the state directory, the logger, and the
// lease queue that brings what the clients learn back here, where
// leaseLoop applies it by the reload path.

// newServicesLocked returns the service manager on the netstack in
// force. r.mu must be held.
func (r *Router) newServicesLocked() *svc.Manager {
	n := r.net
	return svc.New(svc.Env{
		Log:       r.log,
		Interface: n.Interface,
		Sockets:   n,
		NAT:       r.nat.engine,
		Dir:       r.serviceDir,
		PortMTU:   r.portMTULocked,
		Post:      r.learned.queue.Post,
		Owned:     func(iface string) []netip.Prefix { return r.learned.owned6.Load().Except(iface) },
		ARPProbe:  r.arpProbe,
	})
}

// serviceDir returns (and creates, mode 0700) the state directory's
// subdirectory for a service's files, e.g. state_dir/dhcp4.
func (r *Router) serviceDir(sub string) (string, error) {
	dir := filepath.Join(r.state.dir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

// portMTULocked is the MTU of an open port, 0 if unknown. r.mu must be
// held.
func (r *Router) portMTULocked(port string) int {
	if rp := r.ports[port]; rp != nil {
		return rp.port.MTU()
	}
	return 0
}

// leaseLoop applies what the clients learn (DHCPv4 leases, RAs, the
// DHCPv6 delegation), a batch at a time, by the reload path, until ctx
// ends.
func (r *Router) leaseLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.learned.queue.Kick:
		}
		changes := r.learned.queue.Take()
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return
		}
		changed := false
		for name, c := range changes {
			if !r.svc.Owns(name, c.Owner) {
				continue // from a client a reload replaced
			}
			switch {
			case strings.HasPrefix(name, svc.DHCP4ClientPrefix), strings.HasPrefix(name, svc.PPPoEPrefix):
				changed = r.learned.state.TakeLease(c.Iface, c.Lease) || changed
			case strings.HasPrefix(name, svc.RALearnerPrefix):
				changed = r.learned.state.TakeRA(c.Iface, c.RA) || changed
			case strings.HasPrefix(name, svc.DHCP6ClientPrefix):
				changed = r.learned.state.TakeDelegation(c.Iface, c.PD, r.userCfg) || changed
			}
		}
		if changed {
			if err := r.reloadLocked(r.userCfg); err != nil {
				r.log.Error("applying DHCP lease", "err", err)
			}
		}
		r.mu.Unlock()
	}
}

// ipv6StatusLocked fills the status page's IPv6 section; nil when none of
// it runs. r.mu must be held.
func (r *Router) ipv6StatusLocked() *status.IPv6 {
	v := &status.IPv6{DHCPv6Servers: r.svc.DHCP6ServersStatus(), Delegation: r.svc.DHCP6ClientStatus(),
		LANRA: r.svc.RAAdvertisersStatus(), WANRA: r.svc.RALearnersStatus()}
	if subnets := r.learned.state.LANSubnets(); len(subnets) > 0 {
		v.LANPrefixes = subnets
	}
	if v.DHCPv6Servers == nil && v.LANPrefixes == nil && v.Delegation == nil && v.WANRA == nil && v.LANRA == nil {
		return nil
	}
	return v
}

var _ svc.Learned = (*learned.State)(nil)
