package router

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/gvrouter/gvrouter/macsec"
	"github.com/gvrouter/gvrouter/router/config"
	"github.com/gvrouter/gvrouter/router/mkalink"
	"github.com/gvrouter/gvrouter/stack"
)

// runningSecY is one SecY of the config: the macsec core, the link that
// joins it to its lower interface and its own NIC, and the config it was
// built from.
type runningSecY struct {
	cfg config.MACsec
	// secy is the macsec core. With MKA its participant may replace it by
	// one of another cipher suite (mkaSecY.SwitchCipherSuite, on the
	// participant's goroutine), so it is read with Load; the router's
	// lock is not held for that swap.
	secy atomic.Pointer[macsec.SecY]
	// mc and secyLog are what secy was built with, for that rebuild.
	mc      macsec.Config
	secyLog *slog.Logger
	link    *stack.MACsecLink
	// mac is the lower port's MAC: the SecY NIC's MAC, as with Linux.
	mac      net.HardwareAddr
	lowerMTU int
	// closing marks a SecY that the next bind unbinds and closes.
	closing bool
	// mka keys the SecY when cfg.MKA is set (macsec_mka.go); nil for
	// static SAs.
	mka *mkalink.Link
}

// lowerOfLocked returns the port and L3 MTU of the interface a SecY sits
// on.
func (r *Router) lowerOfLocked(cfg *config.Config, ms *config.MACsec) (*runningPort, int, error) {
	ic := cfg.Interface(ms.On)
	if ic == nil {
		return nil, 0, fmt.Errorf("macsec %s: no interface %s", ms.Name, ms.On)
	}
	rp, ok := r.ports[ic.Port]
	if !ok {
		return nil, 0, fmt.Errorf("macsec %s: port %s is not open", ms.Name, ic.Port)
	}
	mtu := ic.MTU
	if mtu == 0 {
		mtu = rp.port.MTU()
	}
	return rp, mtu, nil
}

// saConfig translates a config SA.
func saConfig(sa *config.MACsecSA) macsec.SAConfig {
	id, _ := hex.DecodeString(sa.KeyID) // Validate checked it
	return macsec.SAConfig{AN: uint8(sa.AN), PN: sa.PN, Key: sa.Key, KeyID: id, SSCI: sa.SSCI, Salt: sa.Salt}
}

// newSecY builds and starts the SecY of ms with its SAs.
func (r *Router) newSecY(ms *config.MACsec, mac net.HardwareAddr, lowerMTU int) (*runningSecY, error) {
	rs := &runningSecY{cfg: *ms, link: stack.NewMACsecLink(), mac: mac, lowerMTU: lowerMTU}
	sci := macsec.SCI(ms.SCI)
	if sci == 0 {
		var m [6]byte
		copy(m[:], mac)
		sci = macsec.MakeSCI(m, macsec.PortES)
	}
	dir := ms.PNStore
	if dir == "" {
		dir = filepath.Join(cmp.Or(r.state.dir, config.DefaultStateDir), "macsec")
	}
	store, err := macsec.NewFileStore(dir)
	if err != nil {
		return nil, fmt.Errorf("macsec %s: %w", ms.Name, err)
	}
	mc := macsec.Config{
		SCI:              sci,
		Cipher:           ms.CipherSuite(),
		Encrypt:          ms.Encrypt,
		Protect:          ms.Protect,
		SendSCI:          ms.SendSCI,
		EndStation:       ms.EndStation,
		SCB:              ms.SCB,
		ReplayProtect:    ms.Replay,
		ReplayWindow:     ms.Window,
		Validate:         ms.ValidateFrames(),
		LowerMTU:         lowerMTU,
		PNStore:          store,
		AlwaysParallel:   ms.AlwaysParallel(),
		YieldBetweenRuns: r.macsecYield,
		Workers:          ms.Workers(),
		TX:               rs.link.Transmit,
		RX:               rs.link.Receive,
	}
	rs.mc, rs.secyLog = mc, r.log.With("component", "macsec", "name", ms.Name)
	s, err := macsec.New(mc, rs.secyLog)
	if err != nil {
		return nil, fmt.Errorf("macsec %s: %w", ms.Name, err)
	}
	rs.secy.Store(s)
	// The link gets the SecY before MKA starts, which may replace it.
	rs.link.SetSecY(s)
	if ms.MKA != nil {
		// No SA until MKA installs one: no protected traffic before.
		err = r.startMKA(rs, sci)
	} else {
		err = rs.applySAs(nil, ms)
	}
	if err != nil {
		rs.link.SetSecY(nil)
		s.Close()
		return nil, err
	}
	return rs, nil
}

// applySAs moves the SecY's SAs from old (nil for a new SecY) to ms:
// new and changed transmit SAs first, then the encoding SA, then the
// removals, so that a key rollover loses no frame.
func (rs *runningSecY) applySAs(old, ms *config.MACsec) error {
	var errs []error
	s := rs.secy.Load()
	var oldTX []config.MACsecSA
	var oldRX []config.MACsecRXSC
	if old != nil {
		oldTX, oldRX = old.TX, old.RX
	}
	for i := range ms.TX {
		sa := &ms.TX[i]
		if slices.ContainsFunc(oldTX, sa.Equal) {
			continue
		}
		if err := s.InstallTXSA(saConfig(sa)); err != nil {
			errs = append(errs, fmt.Errorf("macsec %s: %w", ms.Name, err))
		}
	}
	if err := s.SetEncodingSA(uint8(ms.EncodingSA)); err != nil {
		errs = append(errs, fmt.Errorf("macsec %s: %w", ms.Name, err))
	}
	for _, sa := range oldTX {
		if !slices.ContainsFunc(ms.TX, func(n config.MACsecSA) bool { return n.AN == sa.AN }) {
			s.RemoveTXSA(uint8(sa.AN))
		}
	}
	for i := range ms.RX {
		sc := &ms.RX[i]
		sci := macsec.SCI(sc.SCI)
		j := slices.IndexFunc(oldRX, func(o config.MACsecRXSC) bool { return o.SCI == sc.SCI })
		var prev []config.MACsecSA
		if j < 0 {
			if err := s.AddRXSC(sci); err != nil {
				errs = append(errs, fmt.Errorf("macsec %s: %w", ms.Name, err))
				continue
			}
		} else {
			prev = oldRX[j].SA
		}
		for k := range sc.SA {
			sa := &sc.SA[k]
			if slices.ContainsFunc(prev, sa.Equal) {
				continue
			}
			if err := s.InstallRXSA(sci, saConfig(sa)); err != nil {
				errs = append(errs, fmt.Errorf("macsec %s: %w", ms.Name, err))
			}
		}
		for _, sa := range prev {
			if !slices.ContainsFunc(sc.SA, func(n config.MACsecSA) bool { return n.AN == sa.AN }) {
				s.RemoveRXSA(sci, uint8(sa.AN))
			}
		}
	}
	for _, sc := range oldRX {
		if !slices.ContainsFunc(ms.RX, func(n config.MACsecRXSC) bool { return n.SCI == sc.SCI }) {
			if err := s.RemoveRXSC(macsec.SCI(sc.SCI)); err != nil {
				errs = append(errs, fmt.Errorf("macsec %s: %w", ms.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// syncMACsecLocked makes r.macsec follow cfg before the netstack is told
// the new interfaces: SecYs whose SAs alone changed are updated in place
// (no frame lost on a key rollover), new ones are built, and ones that
// are gone or changed otherwise are marked for bindMACsecLocked to close
// once their NICs are gone. The ports must be open.
func (r *Router) syncMACsecLocked(cfg *config.Config) error {
	if r.macsec == nil {
		r.macsec = make(map[string]*runningSecY)
	}
	var errs []error
	for name, rs := range r.macsec {
		ms := cfg.MACsecByName(name)
		if ms == nil {
			rs.closing = true
			continue
		}
		rp, mtu, err := r.lowerOfLocked(cfg, ms)
		if err != nil || !rs.cfg.SameSecY(ms) || !slices.Equal(rs.mac, rp.port.HardwareAddr()) || rs.lowerMTU != mtu {
			rs.closing = true
		}
	}
	for i := range cfg.MACsec {
		ms := &cfg.MACsec[i]
		if rs := r.macsec[ms.Name]; rs != nil && !rs.closing {
			if !rs.cfg.Equal(ms) {
				errs = append(errs, rs.applySAs(&rs.cfg, ms))
			}
			if rs.mka != nil && ms.MKA != nil && rs.cfg.MKA.Rekey != ms.MKA.Rekey {
				rs.mka.SetRekey(ms.MKA.Rekey)
				r.log.Info("mka rekey interval changed", "secy", ms.Name, "from", rs.cfg.MKA.Rekey, "to", ms.MKA.Rekey)
			}
			rs.cfg = *ms
			continue
		}
		rp, mtu, err := r.lowerOfLocked(cfg, ms)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rs, err := r.newSecY(ms, rp.port.HardwareAddr(), mtu)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if old := r.macsec[ms.Name]; old != nil {
			// Replaced: the old one is closed by bindMACsecLocked, under a
			// key of its own.
			r.macsec[ms.Name+"\x00old"] = old
		}
		r.macsec[ms.Name] = rs
	}
	return errors.Join(errs...)
}

// macsecInterfacesLocked returns the netstack interfaces of the SecYs
// whose lower interface is among ifcs.
func (r *Router) macsecInterfacesLocked(cfg *config.Config, ifcs []stack.InterfaceConfig) []stack.InterfaceConfig {
	var out []stack.InterfaceConfig
	for i := range cfg.MACsec {
		ms := &cfg.MACsec[i]
		rs := r.macsec[ms.Name]
		if rs == nil || rs.closing || !slices.ContainsFunc(ifcs, func(c stack.InterfaceConfig) bool { return c.Name == ms.On }) {
			continue
		}
		mtu := ms.MTU
		if mtu == 0 {
			mtu = rs.lowerMTU - stack.MACsecOverhead
		}
		out = append(out, stack.InterfaceConfig{
			Name:      ms.Name,
			MAC:       rs.mac,
			MTU:       uint32(mtu),
			Addresses: slices.Clone(ms.Addresses),
			Writer:    rs.link,
		})
	}
	return out
}

// bindMACsecLocked joins every SecY to its interfaces (again: Apply may
// have recreated the lower one) and closes the SecYs marked closing.
func (r *Router) bindMACsecLocked() {
	for name, rs := range r.macsec {
		if rs.closing {
			if r.net != nil && r.net.Interface(rs.cfg.On) != nil {
				r.net.UnbindMACsec(rs.cfg.On)
			}
			rs.stopMKA()
			rs.link.SetSecY(nil)
			rs.secy.Load().Close()
			delete(r.macsec, name)
		}
	}
	for _, rs := range r.macsec {
		if err := r.net.BindMACsec(rs.link, rs.cfg.On, rs.cfg.Name); err != nil {
			r.log.Error("macsec bind", "secy", rs.cfg.Name, "err", err)
		}
		r.bindMKALocked(rs)
	}
}

// macsecOnPortLocked returns the SecY NICs whose lower interface is on
// port, so they follow its carrier.
func (r *Router) macsecOnPortLocked(port string) []*stack.Interface {
	var out []*stack.Interface
	for _, rs := range r.macsec {
		ic := r.cfg.Interface(rs.cfg.On)
		if ic == nil || ic.Port != port {
			continue
		}
		if ifc := r.net.Interface(rs.cfg.Name); ifc != nil {
			out = append(out, ifc)
		}
	}
	return out
}

// closeMACsecLocked stops every SecY.
func (r *Router) closeMACsecLocked() {
	for name, rs := range r.macsec {
		rs.stopMKA()
		rs.link.SetSecY(nil)
		rs.secy.Load().Close()
		delete(r.macsec, name)
	}
}
