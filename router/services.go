package router

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/stack"
)

// The router's own services (issue 18) run on its netstack and its
// interfaces' raw-frame taps, never on the host kernel: a DHCPv4 client
// per interface with "dhcp" among its addresses, a DHCPv4 server per lan
// interface with dhcp_server:, and the DNS forwarder. syncServicesLocked
// starts what the config in force asks for and, on reload, restarts only
// the services whose settings (or interface) changed; a service may take
// part of its settings in place instead (serviceSpec.update).

// Service name prefixes (the name is the prefix and the interface).
const (
	dhcp4ClientPrefix = "dhcp4client "
	raLearnerPrefix   = "ra6learner "
	dhcp6ClientPrefix = "dhcp6client "
)

// runningService is one service's goroutine and what it holds.
type runningService struct {
	name   string // e.g. "dhcp4server eth0.1"
	spec   any    // the settings it was started with; a reload restarts it iff they differ
	live   any    // the settings it took in place (serviceSpec.live), last applied
	ifc    *stack.Interface
	cancel context.CancelFunc
	done   chan struct{}
	// undo releases what it holds (taps, port reservations, sockets),
	// last first, after its goroutine ended.
	undo []func()
	// impl is the service (*dhcp4server.Server, ...), for the status page.
	impl any
}

// stop ends the service and waits for it.
func (s *runningService) stop() {
	s.cancel()
	<-s.done
	s.release()
}

// release runs the undo steps, last first.
func (s *runningService) release() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// abort releases what a service that failed to start holds and returns
// err, for its start function to return.
func (s *runningService) abort(err error) (*runningService, error) {
	s.release()
	return nil, err
}

// newServiceLocked is the runningService name will be on the interface
// iface, with the settings spec and nothing held yet. r.mu must be held.
func (r *Router) newServiceLocked(name, iface string, spec any) (*runningService, error) {
	ifc := r.net.Interface(iface)
	if ifc == nil {
		return nil, errNoInterface(iface)
	}
	return &runningService{name: name, spec: spec, ifc: ifc}, nil
}

// startService runs run on its own goroutine until ctx ends, logging an error
// it stops with.
func (r *Router) startService(s *runningService, run func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(r.ctx)
	s.cancel, s.done = cancel, make(chan struct{})
	log := r.log.With("service", s.name)
	go func() {
		defer close(s.done)
		if err := run(ctx); err != nil && ctx.Err() == nil {
			log.Error("service stopped", "err", err)
		}
	}()
}

// syncServicesLocked brings the running services in line with cfg (the
// config in force, leases included). r.mu must be held.
func (r *Router) syncServicesLocked(cfg *config.Config) error {
	want := map[string]serviceSpec{}
	for _, ic := range cfg.Interfaces {
		if ic.DHCP != nil {
			if sp, err := r.dhcpClientSpec(ic); err != nil {
				r.log.Error("dhcp client not started", "interface", ic.Name, "err", err)
			} else {
				want[dhcp4ClientPrefix+ic.Name] = sp
			}
		}
		if ic.Role == config.RoleWAN && cfg.DelegatingWAN() == ic.Name {
			if sp, err := r.dhcp6ClientSpec(ic); err != nil {
				r.log.Error("dhcpv6 client not started", "interface", ic.Name, "err", err)
			} else {
				want[dhcp6ClientPrefix+ic.Name] = sp
			}
		}
		if sp, ok := r.raLearnerSpec(cfg, ic); ok {
			want[raLearnerPrefix+ic.Name] = sp
		}
		if sp, ok := r.raAdvertiserSpec(cfg, ic); ok {
			want[raAdvertiserPrefix+ic.Name] = sp
		}
		if sp, ok := r.dhcp6ServerSpec(cfg, ic); ok {
			want[dhcp6ServerPrefix+ic.Name] = sp
		}
		if ic.DHCPServer != nil {
			if sp, err := r.dhcpServerSpec(cfg, ic); err != nil {
				r.log.Error("dhcp server not started", "interface", ic.Name, "err", err)
			} else {
				want["dhcp4server "+ic.Name] = sp
			}
		}
	}
	if sp, ok := r.dnsSpec(cfg); ok {
		want[dnsServiceName] = sp
	}
	var errs []error
	for name, s := range r.services {
		sp, ok := want[name]
		if ok && reflect.DeepEqual(sp.spec, s.spec) && s.ifc == r.net.Interface(sp.iface) {
			err := r.updateServiceLocked(s, sp)
			if err == nil {
				delete(want, name)
				continue
			}
			r.log.Warn("service not updated in place, restarting it", "service", name, "err", err)
		}
		s.stop()
		delete(r.services, name)
	}
	for name, sp := range want {
		s, err := sp.start(r, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		s.live = sp.live
		r.services[name] = s
	}
	r.syncDNSUpstreamsLocked()
	r.syncRALocked()
	return errors.Join(errs...)
}

// serviceSpec is a service the config asks for: its settings, its
// interface and how to start it.
type serviceSpec struct {
	// spec is the settings a change of which restarts the service
	// (compared with reflect.DeepEqual).
	spec  any
	iface string
	start func(r *Router, name string) (*runningService, error)
	// live is the settings the running service takes in place, and
	// update gives them to it (s.live holds the last ones it took): a
	// reload that changes only live keeps the service and its state. An
	// update error restarts the service. nil update: live is unused.
	live   any
	update func(r *Router, s *runningService, live any) error
}

// updateServiceLocked gives s the in-place settings of sp, if they
// changed. r.mu must be held.
func (r *Router) updateServiceLocked(s *runningService, sp serviceSpec) error {
	if reflect.DeepEqual(sp.live, s.live) {
		return nil
	}
	if sp.update == nil {
		return errors.New("settings changed and the service takes none in place")
	}
	if err := sp.update(r, s, sp.live); err != nil {
		return err
	}
	s.live = sp.live
	return nil
}

// stopServicesLocked stops every service (Close). r.mu must be held.
func (r *Router) stopServicesLocked() {
	for name, s := range r.services {
		s.stop()
		delete(r.services, name)
	}
}

// serviceDir returns (and creates, mode 0700) the state directory's
// subdirectory for a service's files, e.g. state_dir/dhcp4.
func (r *Router) serviceDir(sub string) (string, error) {
	dir := filepath.Join(r.stateDir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

func errNoInterface(name string) error {
	return fmt.Errorf("interface %s is not in the netstack", name)
}
