package status

import (
	"maps"
	"slices"

	"github.com/gvrouter/gvrouter/pppoe"
)

// PPPoE is one wan interface's PPPoE session (addresses: [pppoe]): the
// session's own Status (state, session id, AC, uptime, reconnects and
// why the last session ended, LCP echo RTT, negotiated MTU, the IPCP and
// IPv6CP results, counters) with the interface it runs on.
type PPPoE struct {
	Interface string `json:"interface"`
	pppoe.Status
}

// PPPoEStates are the session phases as PPPoE.State spells them;
// gvrouter_pppoe_state has a series for each.
var PPPoEStates = []string{"idle", "discovery", "request", "establish", "auth", "network", "up", "backoff", "stopped"}

// normalizePPPoE gives a sampled Snapshot's PPPoE sections their own
// slices and maps, never nil, so JSON has [] and {} not null.
func normalizePPPoE(snap *Snapshot) {
	if snap.PPPoE == nil {
		return
	}
	snap.PPPoE = slices.Clone(snap.PPPoE)
	for k := range snap.PPPoE {
		p := &snap.PPPoE[k]
		if p.Counters == nil {
			p.Counters = map[string]uint64{}
		} else {
			p.Counters = maps.Clone(p.Counters)
		}
		if p.IPv4 != nil {
			v := *p.IPv4
			v.DNS = slices.Clone(v.DNS)
			p.IPv4 = &v
		}
		if p.IPv6 != nil {
			v := *p.IPv6
			p.IPv6 = &v
		}
	}
}
