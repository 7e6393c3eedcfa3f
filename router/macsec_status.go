package router

import (
	"maps"
	"slices"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/status"
)

// macsecSnapshotLocked adds each SecY to s: its NIC to s.Interfaces and
// the `ip -s macsec show` view to s.MACsec. Key ids only, never keys.
func (r *Router) macsecSnapshotLocked(s *status.Snapshot) {
	names := slices.Sorted(maps.Keys(r.macsec))
	for _, name := range names {
		rs := r.macsec[name]
		if rs.closing {
			continue
		}
		ms := &rs.cfg
		if ifc := r.net.Interface(ms.Name); ifc != nil {
			st := ifc.Stats()
			state := "down"
			if ifc.Up() {
				state = "up"
			}
			addrs := make([]string, 0, len(ms.Addresses))
			for _, a := range ms.Addresses {
				addrs = append(addrs, a.String())
			}
			s.Interfaces = append(s.Interfaces, status.Interface{
				Name:      ms.Name,
				Port:      ms.On,
				State:     state,
				MAC:       rs.mac.String(),
				Addresses: addrs,
				MTU:       int(ifc.MTU()),
				RxPackets: st.RxPackets,
				RxBytes:   st.RxBytes,
				TxPackets: st.TxPackets,
				TxBytes:   st.TxBytes,
				Drops:     maps.Clone(st.Drops),
			})
		}
		secy := rs.secy.Load()
		snap := secy.Snapshot()
		c := secy.Config()
		m := status.MACsec{
			Name:         ms.Name,
			On:           ms.On,
			SCI:          c.SCI.String(),
			Cipher:       snap.Cipher,
			Encrypt:      c.Encrypt,
			Protect:      c.Protect,
			SendSCI:      c.SendSCI,
			EndStation:   c.EndStation,
			SCB:          c.SCB,
			Replay:       c.ReplayProtect,
			Window:       c.ReplayWindow,
			Validate:     c.Validate.String(),
			EncodingSA:   int(snap.EncodingSA),
			Counters:     snap.SecY,
			TXSC:         snap.TXSC,
			WorkerFrames: snap.WorkerFrames,
		}
		if rs.mka != nil {
			m.MKA = rs.mka.Status(rs.cfg.MKA.Priority)
		}
		if c.Cipher != ms.CipherSuite() {
			m.CipherConfigured = ms.CipherSuite().String() // MKA switched it
		}
		if n := rs.link.Dropped(); n > 0 {
			m.Counters["LinkUnbound"] = n // non-MIB: frames dropped while the SecY had no interface
		}
		for _, an := range slices.Sorted(maps.Keys(snap.TXSA)) {
			cnt := snap.TXSA[an]
			next := cnt["NextPN"]
			m.TXSA = append(m.TXSA, status.MACsecSA{
				AN: int(an), State: "on", NextPN: next, KeyID: keyID(ms.TX, int(an)), Counters: withoutNextPN(cnt),
			})
		}
		for _, sci := range slices.Sorted(maps.Keys(snap.RXSC)) {
			sc := snap.RXSC[sci]
			out := status.MACsecRXSC{SCI: sci, Counters: sc.Counters}
			var cfgSAs []configSA
			for _, rx := range ms.RX {
				if macsec.SCI(rx.SCI).String() == sci {
					for _, sa := range rx.SA {
						cfgSAs = append(cfgSAs, configSA{sa.AN, sa.KeyID})
					}
				}
			}
			for _, an := range slices.Sorted(maps.Keys(sc.SA)) {
				cnt := sc.SA[an]
				id := ""
				for _, c := range cfgSAs {
					if c.an == int(an) {
						id = c.keyID
					}
				}
				next := cnt["NextPN"]
				out.SA = append(out.SA, status.MACsecSA{AN: int(an), State: "on", NextPN: next, KeyID: id, Counters: withoutNextPN(cnt)})
			}
			m.RXSC = append(m.RXSC, out)
		}
		s.MACsec = append(s.MACsec, m)
	}
}

type configSA struct {
	an    int
	keyID string
}

// keyID returns the key id of SA an among sas.
func keyID(sas []config.MACsecSA, an int) string {
	for _, sa := range sas {
		if sa.AN == an {
			return sa.KeyID
		}
	}
	return ""
}

// withoutNextPN returns the counters of an SA without NextPN, which
// MACsecSA shows as a field of its own.
func withoutNextPN(c map[string]uint64) map[string]uint64 {
	delete(c, "NextPN")
	return c
}
