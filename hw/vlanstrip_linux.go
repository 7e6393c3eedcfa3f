package hw

import (
	"fmt"
	"log/slog"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// ethFlagRxVLAN is ETH_FLAG_RXVLAN (linux/ethtool.h), the ETHTOOL_GFLAGS
// bit of NETIF_F_HW_VLAN_CTAG_RX: the driver strips the outer 802.1Q tag
// into the packet's metadata.
const ethFlagRxVLAN = 1 << 8

// featureRxVLAN is NETIF_F_HW_VLAN_CTAG_RX's netdev feature name (ethtool
// -k shows it as rx-vlan-offload).
const featureRxVLAN = "rx-vlan-hw-parse"

// rxVLAN reports whether ifname's driver strips 802.1Q tags on receive.
// A device without the flags call does not.
func rxVLAN(ctl int, ifname string) (bool, error) {
	flags, err := ethtool(ctl, ifname, unix.ETHTOOL_GFLAGS, 0)
	if err != nil && !unsupported(err) {
		return false, fmt.Errorf("hw: ethtool get flags on %s: %w", ifname, err)
	}
	return flags&ethFlagRxVLAN != 0, nil
}

// setRxVLAN turns ifname's receive VLAN stripping on or off, leaving the
// other flags as they are.
func setRxVLAN(ctl int, ifname string, on bool) error {
	if err := setEthFlag(ctl, ifname, ethFlagRxVLAN, on); err != nil {
		return fmt.Errorf("hw: ethtool set rxvlan=%v on %s: %w", on, ifname, err)
	}
	return nil
}

// TakeoverConfig says what TakeOver changes on a port.
type TakeoverConfig struct {
	// Name is the kernel interface, e.g. "eth0".
	Name string
	// StateDir holds the takeover record (hw/takeover), e.g.
	// "/var/lib/gvrouter"; "" keeps it in memory only, so a crash loses
	// it.
	StateDir string
	// RxVLANOff turns the driver's receive 802.1Q and 802.1ad tag
	// stripping off (rx-vlan-hw-parse, rx-vlan-stag-hw-parse), so tags
	// stay in the frame: AF_XDP, unlike the TPACKET_V3 ring header, has
	// no field for a stripped tag.
	RxVLANOff bool
	// Silence takes the kernel's addresses off the port, as Port does:
	// every IPv4 address removed and IPv6 off (which takes the
	// link-local address with it), so that the kernel, which XDP keeps
	// from hearing the port, does not speak on it either (ARP and
	// neighbour discovery for its addresses, DAD, router solicitations,
	// MLD reports). The GRO/LRO and ingress-drop steps of Port are not
	// part of it: XDP takes every frame before either matters.
	Silence bool
	// MTU is the port's L3 MTU, e.g. 1500; 0 means the interface's own
	// (from before a crashed run raised it). The kernel MTU is raised to
	// MTU + 4*ExtraTags when it is below that, as Open does for
	// Config.MTU and Config.ExtraTags (which say why), recorded first.
	MTU int
	// ExtraTags is Config.ExtraTags.
	ExtraTags int
}

// Takeover is the kernel settings a port backend other than Port (the
// AF_XDP one, hw/xdpport) changed on its interface, kept in the same
// takeover record as Port's: each change is recorded before it is made,
// Restore puts them back, and after a crash the next TakeOver (or Open)
// adopts the record and the package's Restore (`gvrouter restore`) undoes
// it. It is not safe for concurrent use.
type Takeover struct {
	k   *kernelState
	ns  netns
	ctl int
	mtu int
}

// MTU is the port's L3 MTU: TakeoverConfig.MTU, or the interface's own
// from before any raise.
func (t *Takeover) MTU() int { return t.mtu }

// TakeOver makes the changes cfg asks for on cfg.Name in the calling
// thread's namespace, recording each first. A crashed router's record of
// this interface is adopted, so its values from before stand. On error
// nothing stays changed. A nil log discards messages.
func TakeOver(cfg TakeoverConfig, log *slog.Logger) (_ *Takeover, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkIfname(cfg.Name); err != nil {
		return nil, fmt.Errorf("hw: take over: %w", err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ifi, err := net.InterfaceByName(cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("hw: take over %s: %w: %w", cfg.Name, ErrNotFound, err)
	}
	t := &Takeover{ctl: -1}
	if t.ns, err = currentNetns(); err != nil {
		return nil, fmt.Errorf("hw: take over %s: %w", cfg.Name, err)
	}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	if t.ctl, err = ctlSocket(); err != nil {
		return nil, fmt.Errorf("hw: take over %s: %w", cfg.Name, err)
	}
	if t.k, err = newKernelState(cfg.Name, ifi.Index, ifi.HardwareAddr, cfg.StateDir, log.With("port", cfg.Name)); err != nil {
		return nil, err
	}
	undo := func(err error) (*Takeover, error) {
		if rerr := t.k.restore(t.ctl); rerr != nil {
			log.Warn("undo kernel settings", "port", cfg.Name, "err", rerr)
		}
		t.k = nil
		return nil, err
	}
	if cfg.RxVLANOff {
		if err := t.k.rxVLANOff(t.ctl); err != nil {
			return undo(err)
		}
		if err := t.k.rxSTagOff(t.ctl); err != nil {
			return undo(err)
		}
	}
	if cfg.Silence {
		if err := t.k.quietAddrs(); err != nil {
			return undo(err)
		}
	}
	kernelMTU := ifi.MTU
	if t.k.rec.MTU != 0 {
		// A crashed run raised it: the MTU from before is the port's.
		kernelMTU = t.k.rec.MTU
	}
	t.mtu = kernelMTU
	if cfg.MTU != 0 {
		t.mtu = cfg.MTU
	}
	if want := t.mtu + VLANTagLen*cfg.ExtraTags; (cfg.ExtraTags > 0 || cfg.MTU != 0) && ifi.MTU < want {
		if err := t.k.recordMTU(kernelMTU); err != nil {
			return undo(err)
		}
		if err := setMTU(t.ctl, cfg.Name, want); err != nil {
			return undo(fmt.Errorf("hw: take over %s: raise kernel MTU to %d (MTU %d, %d extra VLAN tags): %w", cfg.Name, want, t.mtu, cfg.ExtraTags, err))
		}
		log.Debug("kernel MTU raised", "port", cfg.Name, "from", kernelMTU, "to", want, "extra_tags", cfg.ExtraTags)
	}
	return t, nil
}

// rxVLANOff records that stripping was on, if it is, and turns it off.
// A device that cannot change it (EOPNOTSUPP: it has no stripping to
// turn off, or cannot turn it off) is left as it is and logged.
func (k *kernelState) rxVLANOff(ctl int) error {
	on, err := rxVLAN(ctl, k.ifname)
	if err != nil || !on {
		return err
	}
	if k.rec.SetFeature(featureRxVLAN, true) {
		if err := k.save(); err != nil {
			return err
		}
	}
	if err := setRxVLAN(ctl, k.ifname, false); err != nil {
		if unsupported(err) {
			k.log.Warn("rx VLAN stripping cannot be turned off: outer tags reach the router only as the driver leaves them", "err", err)
			return nil
		}
		return err
	}
	k.log.Debug("rx VLAN stripping off")
	return nil
}

// rxSTagOff does for the driver's 802.1ad (S-tag) stripping what
// rxVLANOff does for 802.1Q's: the legacy flags have no bit for it, so it
// goes by its feature name (features_linux.go).
func (k *kernelState) rxSTagOff(ctl int) error {
	on, changeable, err := getFeature(ctl, k.ifname, featureRxSTag)
	if unsupported(err) || (err == nil && !on) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hw: ethtool get %s on %s: %w", featureRxSTag, k.ifname, err)
	}
	if !changeable {
		k.log.Warn("rx 802.1ad stripping cannot be turned off: outer S-tags reach the router only as the driver leaves them")
		return nil
	}
	if k.rec.SetFeature(featureRxSTag, true) {
		if err := k.save(); err != nil {
			return err
		}
	}
	if err := setFeature(ctl, k.ifname, featureRxSTag, false); err != nil {
		if unsupported(err) {
			k.log.Warn("rx 802.1ad stripping cannot be turned off: outer S-tags reach the router only as the driver leaves them", "err", err)
			return nil
		}
		return fmt.Errorf("hw: ethtool set %s off on %s: %w", featureRxSTag, k.ifname, err)
	}
	k.log.Debug("rx 802.1ad stripping off")
	return nil
}

// Restore puts back what TakeOver changed, in the namespace it ran in,
// and removes the record. What it could not put back stays recorded.
// It is safe to call twice.
func (t *Takeover) Restore() error {
	if t.k == nil {
		return nil
	}
	err := t.ns.do(func() error { return t.k.restore(t.ctl) })
	t.k = nil
	t.close()
	return err
}

func (t *Takeover) close() {
	if t.ctl >= 0 {
		unix.Close(t.ctl)
		t.ctl = -1
	}
	t.ns.close()
	t.ns.fd = -1
}
