package router

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/learned"
	"github.com/gvrouter/gvrouter/router/natrules"
)

// Reload applies cfg, which has already been parsed and validated: ports
// that appear are opened, ports that disappear are closed and restored,
// and the netstack is told the new interfaces, addresses and routes, so
// whatever did not change (and every connection across it) keeps running.
// If a new port cannot be opened nothing is changed and the old config
// stays in force.
func (r *Router) Reload(cfg *config.Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("router is closed")
	}
	r.userCfg = cfg
	return r.reloadLocked(cfg)
}

// reloadLocked moves the router to cfg (the file's config) with the DHCP
// leases in force added (learned.State.Effective): a reload and a lease change take
// the same path. r.mu must be held.
func (r *Router) reloadLocked(cfg *config.Config) error {
	r.learned.state.DropStale(cfg)
	cfg = r.learned.state.Effective(cfg, r.portMTULocked)
	old := r.cfg

	// Open new ports first: the only step that can fail on the machine.
	var opened []string
	for _, pc := range cfg.Ports {
		if rp, ok := r.ports[pc.Name]; ok && samePort(rp.cfg, pc) && old.Hardware == cfg.Hardware && rp.extraTags == extraTags(cfg, pc.Name) && rp.host == hostKey(cfg, pc.Name) {
			continue
		}
		if _, ok := r.ports[pc.Name]; ok {
			continue // changed port: reopened below, after the old one is closed
		}
		if err := r.openPortLocked(cfg, pc); err != nil {
			for _, name := range opened {
				r.ports[name].port.Close()
				delete(r.ports, name)
			}
			r.releasePortLocksLocked()
			return err
		}
		opened = append(opened, pc.Name)
	}

	// Ports that are gone or changed lose their interfaces first, then
	// close, so netstack never writes to a closed port.
	var changed []config.Port
	for name, rp := range r.ports {
		pc := cfg.Port(name)
		switch {
		case pc == nil:
			rp.input.SetTrunk(nil)
		case !samePort(rp.cfg, *pc) || old.Hardware != cfg.Hardware || rp.extraTags != extraTags(cfg, name) || rp.host != hostKey(cfg, name):
			rp.input.SetTrunk(nil)
			changed = append(changed, *pc)
		}
	}
	// A SecY that cannot be built (say, its PN store is unwritable) is
	// reported; the rest of the config is applied.
	msErr := r.syncMACsecLocked(cfg)
	wgGone := r.syncWireGuardLocked(cfg)
	interim := *cfg
	interim.Interfaces = slices.DeleteFunc(slices.Clone(cfg.Interfaces), func(ic config.Interface) bool {
		if ic.WireGuard != nil {
			return false // a link on no port: it stays through the reload
		}
		_, ok := r.ports[ic.Port]
		return !ok || slices.ContainsFunc(changed, func(p config.Port) bool { return p.Name == ic.Port }) || cfg.Port(ic.Port) == nil
	})
	sc, err := r.stackConfigLocked(&interim)
	if err != nil {
		return err
	}
	if err := r.net.Apply(sc); err != nil {
		return errors.Join(msErr, fmt.Errorf("netstack: %w", err))
	}
	errs := []error{msErr}
	for name, rp := range r.ports {
		if cfg.Port(name) == nil || slices.ContainsFunc(changed, func(p config.Port) bool { return p.Name == name }) {
			if err := r.stopPort(rp); err != nil {
				errs = append(errs, fmt.Errorf("port %s: %w", name, err))
			}
			delete(r.ports, name)
		}
	}
	for _, pc := range changed {
		if err := r.openPortLocked(cfg, pc); err != nil {
			errs = append(errs, err)
		}
	}

	// Now the full interface set.
	sc, err = r.stackConfigLocked(cfg)
	if err != nil {
		errs = append(errs, err)
	} else if err := r.net.Apply(sc); err != nil {
		errs = append(errs, fmt.Errorf("netstack: %w", err))
	}
	for _, l := range wgGone {
		l.Close() // netstack no longer has its link
	}
	if err := r.applyWireGuardLocked(cfg); err != nil {
		errs = append(errs, err)
	}
	r.bindSQMLocked(cfg)
	r.cfg = cfg
	r.setListenPolicyLocked(cfg)
	r.net.SetUnassigned6(r.learned.state.Unassigned())
	r.learned.owned6.Store(learned.NewOwned(cfg, r.learned.state.Delegation()))
	// The engine outlives the reload with every flow; only its rules
	// change. New interfaces got new IDs above, so the rules follow Apply.
	if err := r.applyNATLocked(); err != nil {
		errs = append(errs, fmt.Errorf("nat: %w", err))
	}
	if natrules.RoutingChanged(old, cfg) {
		// SetRules and Apply already bump the fast-path generation; this
		// states the contract: offloaded flows re-take the slow path once
		// when routes or interfaces change.
		r.nat.engine.InvalidateFastPath()
	}
	if what := natrules.RestartNeeded(old, cfg); what != "" {
		r.log.Warn("config change needs a restart to take effect; the running values stay", "key", what)
	}
	if old.StateDirectory() != cfg.StateDirectory() {
		r.log.Warn("config change needs a restart to take effect; the running values stay", "key", "state_dir", "running", r.state.dir)
	}
	r.releasePortLocksLocked()
	r.bindMACsecLocked()
	r.bindPortsLocked()
	for _, rp := range r.ports {
		r.startPortLocked(rp)
	}
	if !slices.EqualFunc(old.Status.Listen, cfg.Status.Listen, config.Listen.Equal) ||
		!sameInterfaceAddrs(old, cfg) {
		sinks := r.sinks
		r.closeListenersLocked()
		if err := r.listenLocked(cfg.Status); err != nil {
			errs = append(errs, err)
		}
		for _, a := range sinks {
			if err := r.serveDiscardLocked(a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := r.svc.Sync(cfg, &r.learned.state); err != nil {
		errs = append(errs, err)
	}
	if err := r.syncPortMapLocked(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func samePort(a, b config.Port) bool {
	return a.Name == b.Name && a.Queues == b.Queues && a.MTU == b.MTU && a.Kind == b.Kind
}

// sameInterfaceAddrs reports whether the interfaces the status page listens
// on kept their addresses.
func sameInterfaceAddrs(a, b *config.Config) bool {
	for _, l := range b.Status.Listen {
		if l.Interface == "" {
			continue
		}
		ia, ib := a.Interface(l.Interface), b.Interface(l.Interface)
		if ia == nil || ib == nil || !slices.Equal(ia.Addresses, ib.Addresses) {
			return false
		}
	}
	return true
}
