package mkalink

import (
	"encoding/hex"

	"github.com/gvrouter/gvrouter/mka"
	"github.com/gvrouter/gvrouter/router/status"
)

// Status returns the participant's state and counters for the status
// page, JSON and metrics, with priority, our key server priority. It
// holds names of keys (CKN, KI, AN), never a key.
func (l *Link) Status(priority int) *status.MACsecMKA {
	st := l.p.State()
	ps := l.p.Stats()
	s := &status.MACsecMKA{
		CKN:       hex.EncodeToString(l.ckn),
		Priority:  priority,
		MI:        st.MI.String(),
		MN:        st.MN,
		KeyServer: st.KeyServer,
		Live:      peers(st.Live),
		Potential: peers(st.Potential),
		Latest:    key(st.Latest),
		Previous:  key(st.Previous),
		LastRoll:  st.LastRoll,
		Counters: map[string]uint64{
			"mkpdus_sent":       ps.MKPDUsSent.Load(),
			"mkpdus_received":   ps.MKPDUsReceived.Load(),
			"mkpdus_accepted":   ps.MKPDUsAccepted.Load(),
			"invalid_icv":       ps.InvalidICV.Load(),
			"replayed":          ps.Replayed.Load(),
			"malformed":         ps.MalformedTotal(),
			"unknown_ckn":       ps.UnknownCKN.Load(),
			"bad_agility":       ps.BadAlgorithmAgility.Load(),
			"loopback":          ps.Loopback.Load(),
			"mi_collisions":     ps.MICollisions.Load(),
			"peer_timeouts":     ps.PeerTimeouts.Load(),
			"saks_generated":    ps.SAKsGenerated.Load(),
			"saks_received":     ps.SAKsReceived.Load(),
			"sak_rolls":         ps.SAKRolls.Load(),
			"sak_unwrap_failed": ps.SAKUnwrapFailed.Load(),
			"sak_rejected":      ps.SAKRejected.Load(),
			"secy_errors":       ps.SecYErrors.Load(),
			"suite_switches":    ps.SuiteSwitches.Load(),
			"send_errors":       ps.SendErrors.Load(),
			"rx_queue_full":     l.stats.RxQueueFull.Load(),
			"rx_too_long":       l.stats.RxTooLong.Load(),
			"no_lower":          l.stats.NoLower.Load(),
			"periodic_rekeys":   l.stats.Rekeys.Load(),
		},
	}
	if st.KeyServerSCI != 0 {
		s.KeyServerSCI = st.KeyServerSCI.String()
	}
	return s
}

func peers(ps []mka.PeerState) []status.MKAPeer {
	out := make([]status.MKAPeer, 0, len(ps))
	for _, p := range ps {
		out = append(out, status.MKAPeer{SCI: p.SCI.String(), MI: p.MI.String(), MN: p.MN, Priority: int(p.Priority), KeyServer: p.KeyServer})
	}
	return out
}

func key(k *mka.KeyState) *status.MKAKey {
	if k == nil {
		return nil
	}
	return &status.MKAKey{KeyServerMI: k.KI.MI.String(), KN: k.KI.KN, AN: int(k.AN), RX: k.RX, TX: k.TX, Installed: k.Installed}
}
