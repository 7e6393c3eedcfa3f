package router

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/gvrouter/gvrouter/natengine"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/natstatus"
	"github.com/gvrouter/gvrouter/stack"

	"github.com/gvrouter/gvrouter/router/status"
)

// Snapshot implements status.Source: what the status page shows, read from
// the live counters. It never includes a key or any other secret.
func (r *Router) Snapshot() status.Snapshot {
	s, e, maxConns := r.snapshot()
	if e != nil {
		// Outside r.mu: the census walks the whole table.
		s.Conntrack = natstatus.Counters(e, maxConns)
		r.nat.census.Get(e, time.Now()).Apply(s.Conntrack)
	}
	return s
}

// snapshot is Snapshot without the conntrack section; it returns the
// engine and its table limit for that.
func (r *Router) snapshot() (status.Snapshot, *natengine.Engine, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := status.Snapshot{
		Version: r.build.Version,
		Build:   r.build.Build,
		Started: r.started,
	}
	if r.cfg == nil || r.net == nil {
		return s, nil, 0
	}
	ip := r.net.Stack().Stats().IP
	s.Netstack = &status.Netstack{
		IPPacketsReceived:  ip.PacketsReceived.Value(),
		IPPacketsDelivered: ip.PacketsDelivered.Value(),
		IPPacketsSent:      ip.PacketsSent.Value(),
	}
	s.DHCPServers = r.svc.DHCP4ServersStatus()
	s.DHCPClients = r.svc.DHCP4ClientsStatus(r.learned.state.LeaseLost)
	s.PPPoE = r.svc.PPPoEStatus()
	s.DNS = r.svc.DNSStatus()
	s.IPv6 = r.ipv6StatusLocked()
	s.Neighbors = r.neighborsStatusLocked()
	s.SQM = r.sqmStatusLocked()
	s.PortMapping = r.portMapStatusLocked()
	s.WireGuard = r.wireGuardStatusLocked()
	fs := r.net.FragmentStats()
	s.Fragments = &status.Fragments{Tracked: fs.Tracked, Evicted: fs.Evicted}
	for _, ic := range r.cfg.Interfaces {
		ifc := r.net.Interface(ic.Name)
		rp := r.ports[ic.Port]
		if ifc == nil || rp == nil {
			continue
		}
		st := ifc.Stats()
		state := "down"
		if rp.port.LinkUp() {
			state = "up"
		}
		addrs := make([]string, 0, len(ic.Addresses))
		for _, a := range ic.Addresses {
			addrs = append(addrs, a.String())
		}
		mtu := ic.MTU
		if mtu == 0 {
			mtu = rp.port.MTU()
		}
		var (
			vlan  []int
			proto string
			pcp   *int
		)
		if len(ic.VLAN) > 0 {
			vlan = slices.Clone(ic.VLAN)
			proto = ic.VLANProtocol
			if proto == "" {
				proto = config.VLANProtocol8021Q
			}
			p := ic.PCP
			pcp = &p
		}
		g := st.GRO
		s.Interfaces = append(s.Interfaces, status.Interface{
			GROMode: ifc.GRO().String(),
			GRO: &status.GRO{
				Coalesced:        g.Coalesced,
				Flushed:          g.Flushed,
				BypassedForward:  g.BypassedForward,
				Segmented:        g.Segmented,
				ChecksumVerified: g.ChecksumVerified,
				ChecksumBad:      g.ChecksumBad,
			},
			VLAN:             vlan,
			VLANProtocol:     proto,
			PCP:              pcp,
			Name:             ic.Name,
			Port:             ic.Port,
			State:            state,
			MAC:              rp.port.HardwareAddr().String(),
			Addresses:        addrs,
			MTU:              mtu,
			NextHopForwarded: st.NextHopForwarded,
			GSO:              status.GSO{Received: st.GSO.Received, SentWhole: st.GSO.SentWhole, Segmented: st.GSO.Segmented},
			Tapped:           st.Tapped,
			RxPackets:        st.RxPackets,
			RxBytes:          st.RxBytes,
			TxPackets:        st.TxPackets,
			TxBytes:          st.TxBytes,
			Drops:            maps.Clone(st.Drops),
		})
	}
	names := make([]string, 0, len(r.ports))
	for name := range r.ports {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rp := r.ports[name]
		st := rp.port.Stats()
		state := "down"
		if rp.port.LinkUp() {
			state = "up"
		}
		drops := maps.Clone(st.Drops)
		if drops == nil {
			drops = map[string]uint64{}
		}
		maps.DeleteFunc(drops, func(_ string, n uint64) bool { return n == 0 })
		if n := rp.input.Dropped(); n > 0 {
			drops["no_interface"] = n
		}
		if rp.trunk != nil {
			for k, n := range rp.trunk.Drops() {
				drops[k] += n
			}
		}
		var aqm *status.PortAQM
		if rp.rxq != nil {
			aqm = portAQMStatus(rp.rxq)
			if aqm.Dropped > 0 {
				drops["aqm"] = aqm.Dropped
			}
			if aqm.Overlimit > 0 {
				drops["aqm_overlimit"] = aqm.Overlimit
			}
		}
		queues := rp.cfg.Queues
		driver, mode := portDriver(rp.port)
		s.Ports = append(s.Ports, status.Port{
			Driver:    driver,
			Mode:      mode,
			UMEM:      portUMEM(rp.port, st),
			AQM:       aqm,
			Name:      name,
			State:     state,
			MAC:       rp.port.HardwareAddr().String(),
			MTU:       rp.port.MTU(),
			Queues:    queues,
			RxPackets: st.RxPackets,
			RxBytes:   st.RxBytes,
			TxPackets: st.TxPackets,
			TxBytes:   st.TxBytes,
			Drops:     drops,
		})
	}
	for _, rt := range r.net.Routes() {
		via := ""
		if rt.Via.IsValid() {
			via = rt.Via.String()
		}
		s.Routes = append(s.Routes, status.Route{To: rt.To.String(), Via: via, Dev: rt.Dev})
	}
	r.macsecSnapshotLocked(&s)
	return s, r.nat.engine, r.nat.max
}

// portAQMStatus is what the status page shows of a port's receive queue.
func portAQMStatus(q *stack.RxQueue) *status.PortAQM {
	st := q.Stats()
	return &status.PortAQM{
		On:           q.Enabled(),
		Passed:       st.Passed,
		Queued:       st.Queued,
		Dropped:      st.Dropped,
		Marked:       st.Marked,
		Overlimit:    st.Overlimit,
		Copied:       st.Copied,
		Backlog:      st.Backlog,
		BacklogBytes: st.BacklogBytes,
		MaxSojournMs: float64(st.MaxSojourn) / float64(time.Millisecond),
	}
}
