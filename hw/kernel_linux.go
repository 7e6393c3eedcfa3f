package hw

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/hw/takeover"
	"golang.org/x/sys/unix"
)

// kernelState changes the kernel's settings for a port and puts them back.
// Every change is first written to its record (takeover.Record) with the
// value from before, and the record is saved to the state directory when
// there is one, so that a router started after a crash, or `router
// restore`, can put back what a crashed router changed. It is used by
// Open, Close and Restore only, on a thread in the port's namespace.
type kernelState struct {
	ifname  string
	ifindex int
	log     *slog.Logger
	now     func() time.Time

	store *takeover.Store // nil: the record lives in memory only
	rec   *takeover.Record
}

// Offload features the router turns off, by their netdev feature names
// (the kernel's netdev_features_strings, which ethtool -k --json and the
// ethtool netlink API use too).
const (
	featureGRO = "rx-gro"
	featureLRO = "rx-lro"
)

// offloadField maps a recorded feature name to its Offloads field.
func offloadField(o *Offloads, name string) *bool {
	switch name {
	case featureGRO:
		return &o.GRO
	case featureLRO:
		return &o.LRO
	}
	return nil
}

// newKernelState returns the kernel state of a port about to be taken
// over: the record a crashed router left in stateDir if it is about this
// very interface (same boot, namespace and interface index), so that its
// values from before the first takeover stand, or a new one. A corrupt
// record is reported and set aside; a record of an unknown version is
// refused. stateDir "" keeps the record in memory only.
func newKernelState(ifname string, ifindex int, mac net.HardwareAddr, stateDir string, log *slog.Logger) (*kernelState, error) {
	k := &kernelState{ifname: ifname, ifindex: ifindex, log: log, now: time.Now}
	boot, ns, err := kernelIdentity()
	if err != nil {
		return nil, fmt.Errorf("hw: open %s: %w", ifname, err)
	}
	fresh := &takeover.Record{
		Version: takeover.Version, Port: ifname, BootID: boot, Netns: ns, Ifindex: ifindex,
		MAC: mac.String(), Since: k.now().UTC(), PID: os.Getpid(),
	}
	k.rec = fresh
	if stateDir == "" {
		return k, nil
	}
	if k.store, err = takeover.NewStore(stateDir); err != nil {
		return nil, fmt.Errorf("hw: open %s: %w", ifname, err)
	}
	rec, err := k.store.Load(ifname)
	var verr *takeover.VersionError
	switch {
	case errors.As(err, &verr):
		return nil, fmt.Errorf("hw: open %s: %w", ifname, err)
	case errors.Is(err, takeover.ErrCorrupt):
		to, serr := k.store.SetAside(ifname)
		log.Error("state record unreadable: set aside, and the settings it held are lost (check the port's addresses, IPv6 and offloads by hand)",
			"err", err, "moved_to", to, "move_err", serr)
	case err != nil:
		return nil, fmt.Errorf("hw: open %s: %w", ifname, err)
	case rec == nil:
	case rec.BootID == boot && rec.Netns != ns:
		// Another namespace's router (sharing this state_dir) crashed
		// on a port of the same name: its record is the only copy of
		// that port's settings, so it is not overwritten.
		return nil, fmt.Errorf("hw: open %s: %s holds the settings of a port %s in network namespace %d (this is %d) that a router did not give back: run `gvrouter restore` there, or give this router a state_dir of its own",
			ifname, k.store.Path(ifname), ifname, rec.Netns, ns)
	case rec.BootID != boot || rec.Netns != ns || rec.Ifindex != ifindex:
		log.Warn("state record is about another boot or interface: the kernel reset what it lists; discarded",
			"record_boot", rec.BootID, "record_netns", rec.Netns, "record_ifindex", rec.Ifindex, "since", rec.Since)
		if rec.BootID == boot {
			// The interface was recreated; tables named after the old
			// one may remain.
			for _, t := range rec.NFTables {
				nftDeleteTable(t)
			}
		}
	default:
		log.Warn("adopting what a router that did not stop cleanly left on this port; its settings from before are restored at stop",
			"since", rec.Since, "pid", rec.PID, "record", k.store.Path(ifname))
		k.rec = rec
	}
	return k, nil
}

// kernelIdentity returns the boot ID and the calling thread's network
// namespace inode.
func kernelIdentity() (boot string, netns uint64, err error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", 0, fmt.Errorf("boot id: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return "", 0, fmt.Errorf("network namespace: %w", err)
	}
	return string(bytes.TrimSpace(b)), st.Ino, nil
}

// save writes the record before a change.
func (k *kernelState) save() error {
	if k.store == nil {
		return nil
	}
	if err := k.store.Save(k.rec); err != nil {
		return fmt.Errorf("hw: record kernel settings of %s before changing them: %w", k.ifname, err)
	}
	return nil
}

// recordMTU records the kernel MTU before Open raises it, unless an
// adopted record already holds the one from before.
func (k *kernelState) recordMTU(before int) error {
	if k.rec.MTU != 0 {
		return nil
	}
	k.rec.MTU = before
	return k.save()
}

// silence makes the kernel leave the port to the router: GRO/LRO off, no
// addresses, IPv6 off and an ingress drop. It runs in the port's
// namespace with ctl, a control socket there. On error, what was already
// changed is undone.
func (k *kernelState) silence(ctl int) error {
	err := k.silenceSteps(ctl)
	if err != nil {
		if rerr := k.restore(ctl); rerr != nil {
			k.log.Warn("undo kernel settings", "err", rerr)
		}
	}
	return err
}

func (k *kernelState) silenceSteps(ctl int) error {
	// Offloads: AF_PACKET sees frames after GRO/LRO merged them.
	cur, err := getOffloads(ctl, k.ifname)
	if err != nil {
		return err
	}
	want := cur
	want.GRO, want.LRO = false, false
	if want != cur {
		for _, f := range []string{featureGRO, featureLRO} {
			if *offloadField(&cur, f) {
				k.rec.SetFeature(f, true)
			}
		}
		if err := k.save(); err != nil {
			return err
		}
		err := setOffloads(ctl, k.ifname, want, func(feature string, err error) {
			k.log.Debug("offload unchanged: device lacks it", "feature", feature, "err", err)
		})
		if err != nil {
			return err
		}
	}

	if err := k.quietAddrs(); err != nil {
		return err
	}

	// Ingress drop. AF_PACKET taps run before the netdev ingress hook, so
	// the router's rings still see every frame.
	return k.addIngressDrop()
}

// quietAddrs takes the kernel's addresses off the port, recording each
// first: IPv6 off (which also takes the link-local address, so the
// kernel neither runs DAD nor sends router solicitations or MLD reports
// there) and no IPv4 address (so it neither announces nor resolves one
// on the port).
func (k *kernelState) quietAddrs() error {
	// IPv6 off. This also removes the link-local address.
	p := ipv6Sysctl(k.ifname)
	if v, err := os.ReadFile(p); err == nil {
		v = bytes.TrimSpace(v)
		if !bytes.Equal(v, []byte("1")) {
			// Save permanent IPv6 addresses first: disable_ipv6 drops them.
			if err := k.removeAddrs(unix.AF_INET6); err != nil {
				return err
			}
			if k.rec.DisableIPv6 == "" {
				k.rec.DisableIPv6 = string(v)
				if err := k.save(); err != nil {
					return err
				}
			}
			if err := os.WriteFile(p, []byte("1"), 0); err != nil {
				return fmt.Errorf("hw: disable ipv6 on %s: %w", k.ifname, err)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hw: read %s: %w", p, err)
	}

	// No IPv4 addresses.
	return k.removeAddrs(unix.AF_INET)
}

func ipv6Sysctl(ifname string) string { return "/proc/sys/net/ipv6/conf/" + ifname + "/disable_ipv6" }

// restore undoes silence (and an MTU raise) as the record says, in
// reverse order, reporting every failure. What it put back leaves the
// record; the record is removed when nothing is left, and otherwise saved
// with what failed, for a later restore. Restoring twice is harmless.
func (k *kernelState) restore(ctl int) error {
	var errs []error
	if err := k.removeNFTDrop(nil); err != nil {
		errs = append(errs, err)
	}
	if err := k.removeTCDrop(); err != nil {
		errs = append(errs, err)
	}
	if k.rec.MTU != 0 {
		if err := setMTU(ctl, k.ifname, k.rec.MTU); err != nil {
			errs = append(errs, fmt.Errorf("hw: restore MTU %d on %s: %w", k.rec.MTU, k.ifname, err))
		} else {
			k.rec.MTU = 0
		}
	}
	if k.rec.DisableIPv6 != "" {
		p := ipv6Sysctl(k.ifname)
		if err := os.WriteFile(p, []byte(k.rec.DisableIPv6), 0); err != nil {
			errs = append(errs, fmt.Errorf("hw: restore %s: %w", p, err))
		} else {
			k.rec.DisableIPv6 = ""
		}
	}
	if err := k.restoreAddrs(); err != nil {
		errs = append(errs, err)
	}
	if len(k.rec.Features) > 0 {
		if err := k.restoreOffloads(ctl); err != nil {
			errs = append(errs, err)
		} else {
			k.rec.Features = nil
		}
	}
	if k.store != nil {
		if k.rec.Empty() {
			if err := k.store.Remove(k.ifname); err != nil {
				errs = append(errs, err)
			}
		} else if err := k.save(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (k *kernelState) restoreOffloads(ctl int) error {
	cur, err := getOffloads(ctl, k.ifname)
	if err != nil {
		return err
	}
	want := cur
	for name, v := range k.rec.Features {
		if name == featureRxVLAN {
			// Not an Offloads field: only TakeOver changes it.
			if err := setRxVLAN(ctl, k.ifname, v); err != nil && !unsupported(err) {
				return err
			}
			continue
		}
		if name == featureRxSTag {
			if err := setFeature(ctl, k.ifname, featureRxSTag, v); err != nil && !unsupported(err) {
				return fmt.Errorf("hw: restore %s on %s: %w", name, k.ifname, err)
			}
			continue
		}
		f := offloadField(&want, name)
		if f == nil {
			return fmt.Errorf("hw: restore offloads of %s: unknown feature %q", k.ifname, name)
		}
		*f = v
	}
	return setOffloads(ctl, k.ifname, want, nil)
}

// setMTU sets ifname's kernel MTU (SIOCSIFMTU) through ctl.
func setMTU(ctl int, ifname string, mtu int) error {
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	return unix.IoctlIfreq(ctl, unix.SIOCSIFMTU, ifr)
}

// ingressDropWith chooses how the ingress drop is installed: "nft", "tc",
// or "" for nftables and tc only where nftables fails. Tests set it;
// SetIngressDrop sets it for the binary.
var ingressDropWith = ""

// SetIngressDrop chooses how Open installs the ingress drop: "nft"
// (an nftables netdev table, through netlink), "tc" (a clsact qdisc and a
// cls_bpf filter, through the tc binary), or "" (nftables, and tc only if
// the kernel refuses the nftables table). It is for tests and the lab;
// call it before opening ports.
func SetIngressDrop(with string) error {
	switch with {
	case "", "nft", "tc":
		ingressDropWith = with
		return nil
	}
	return fmt.Errorf("hw: ingress drop %q: want nft or tc", with)
}

func (k *kernelState) addIngressDrop() error {
	with := ingressDropWith
	if with == "tc" {
		return k.addTCIngressDrop()
	}
	table := takeover.NFTable{Family: "netdev", Name: fmt.Sprintf("gvrouter_hw_%d", k.ifindex)}
	if err := k.addNFTDrop(table); err != nil {
		if with == "nft" {
			return err
		}
		// The library route is the default; tc (the binary) is kept only
		// for kernels without nf_tables' netdev family (an nf_tables-less
		// OpenWrt build, CONFIG_NF_TABLES_NETDEV off), where no netlink
		// nftables request can install a drop. A tc filter through
		// netlink would need a tc library this module does not carry.
		k.log.Warn("ingress drop: nftables refused, falling back to tc", "err", err)
		return k.addTCIngressDrop()
	}
	if err := k.removeTCDrop(); err != nil {
		return err
	}
	return k.removeNFTDrop(&table)
}

// addTCIngressDrop installs the tc drop and then removes an nftables drop
// an adopted record may hold from an earlier run: the new drop is in
// place, so it can go.
func (k *kernelState) addTCIngressDrop() error {
	if err := k.addTCDrop(); err != nil {
		return err
	}
	return k.removeNFTDrop(nil)
}

// tcDropPref is the priority of our tc ingress filter, chosen high so that
// an operator's own ingress filters run first and to be recognisable.
const tcDropPref = 49374

// The clsact qdisc's handles (TC_H_CLSACT, TC_H_MIN_INGRESS).
const (
	clsactHandle = "ffff:"
	clsactParent = "ffff:fff1"
)

// addTCDrop installs a clsact qdisc (unless the interface has one) and a
// cls_bpf filter in direct-action mode whose one classic BPF instruction
// returns TC_ACT_SHOT: a drop that needs neither cls_matchall nor
// act_gact in the kernel. Each is recorded before it is added; a qdisc
// the port already had is not ours and stays at restore.
func (k *kernelState) addTCDrop() error {
	q, err := tcOutput("qdisc", "show", "dev", k.ifname)
	if err != nil {
		return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
	}
	hasQdisc := strings.Contains(q, "qdisc clsact ") || strings.Contains(q, "qdisc ingress ")
	ours := slices.ContainsFunc(k.rec.TCQdiscs, func(q takeover.TCQdisc) bool { return q.Kind == "clsact" })
	if !hasQdisc {
		if !ours {
			k.rec.TCQdiscs = append(k.rec.TCQdiscs, takeover.TCQdisc{Kind: "clsact", Handle: clsactHandle, Parent: clsactParent})
			if err := k.save(); err != nil {
				return err
			}
		}
		if err := tc("qdisc", "add", "dev", k.ifname, "clsact"); err != nil {
			return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
		}
		ours = true
	}
	filter := takeover.TCFilter{Parent: "ingress", Pref: tcDropPref, Handle: "1", Kind: "bpf"}
	if !ours && !slices.Contains(k.rec.TCFilters, filter) {
		k.rec.TCFilters = append(k.rec.TCFilters, filter)
		if err := k.save(); err != nil {
			return err
		}
	}
	// "1,6 0 0 2,": one instruction, BPF_RET|BPF_K 2 (TC_ACT_SHOT).
	if err := tc("filter", "replace", "dev", k.ifname, filter.Parent, "pref", strconv.Itoa(filter.Pref), "handle", filter.Handle, "bpf", "da", "bytecode", "1,6 0 0 2,"); err != nil {
		return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
	}
	return nil
}

// removeTCDrop removes the recorded tc qdiscs (with every filter on them)
// and filters. One that is already gone counts as removed.
func (k *kernelState) removeTCDrop() error {
	var errs []error
	var leftQ []takeover.TCQdisc
	for _, q := range k.rec.TCQdiscs {
		if err := tc("qdisc", "del", "dev", k.ifname, q.Kind); err != nil && !tcGone(err) {
			errs = append(errs, fmt.Errorf("hw: remove ingress drop on %s: %w", k.ifname, err))
			leftQ = append(leftQ, q)
		}
	}
	var leftF []takeover.TCFilter
	for _, f := range k.rec.TCFilters {
		if err := tc("filter", "del", "dev", k.ifname, f.Parent, "pref", strconv.Itoa(f.Pref)); err != nil && !tcGone(err) {
			errs = append(errs, fmt.Errorf("hw: remove ingress drop on %s: %w", k.ifname, err))
			leftF = append(leftF, f)
		}
	}
	k.rec.TCQdiscs, k.rec.TCFilters = leftQ, leftF
	return errors.Join(errs...)
}

// tcGone reports whether tc failed because the qdisc or filter to delete
// does not exist.
func tcGone(err error) bool {
	s := err.Error()
	// A missing clsact qdisc is "Invalid handle", a missing filter
	// "Cannot find specified filter chain" or "... not found".
	return strings.Contains(s, "Invalid handle") || strings.Contains(s, "Cannot find") || strings.Contains(s, "not found") ||
		strings.Contains(s, "No such file")
}

// tc runs the tc binary in the calling thread's network namespace.
func tc(args ...string) error {
	_, err := tcOutput(args...)
	return err
}

func tcOutput(args ...string) (string, error) {
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tc %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// removeNFTDrop deletes the recorded nftables tables except keep (if not
// nil). A table that is already gone counts as removed.
func (k *kernelState) removeNFTDrop(keep *takeover.NFTable) error {
	var errs []error
	var left []takeover.NFTable
	for _, t := range k.rec.NFTables {
		if keep != nil && t == *keep {
			left = append(left, t)
			continue
		}
		if err := nftDeleteTable(t); err != nil {
			errs = append(errs, fmt.Errorf("hw: remove ingress drop on %s: %w", k.ifname, err))
			left = append(left, t)
		}
	}
	k.rec.NFTables = left
	return errors.Join(errs...)
}
