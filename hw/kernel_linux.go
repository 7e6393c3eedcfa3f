package hw

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelState records what Open changed in the kernel's settings for a
// port, so that Close can put it back. It is used by Open and Close only.
type kernelState struct {
	ifname  string
	ifindex int
	log     *slog.Logger

	offloads        Offloads // as found
	offloadsChanged bool
	ipv6Path        string // disable_ipv6 sysctl, "" if untouched
	ipv6Orig        []byte
	nftTable        string   // "" if none installed
	tcFilter        bool     // our tc ingress filter is installed
	tcQdisc         bool     // we created the clsact qdisc
	addrs           [][]byte // removed addresses: ifaddrmsg + attributes
}

// silence makes the kernel leave the port to the router: GRO/LRO off, no
// addresses, IPv6 off and an nftables netdev ingress drop. It runs in the
// port's namespace with ctl, a control socket there. On error, what was
// already changed is undone.
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
	k.offloads = cur
	want := cur
	want.GRO, want.LRO = false, false
	if want != cur {
		k.offloadsChanged = true
		err := setOffloads(ctl, k.ifname, want, func(feature string, err error) {
			k.log.Debug("offload unchanged: device lacks it", "feature", feature, "err", err)
		})
		if err != nil {
			return err
		}
	}

	// IPv6 off. This also removes the link-local address.
	p := "/proc/sys/net/ipv6/conf/" + k.ifname + "/disable_ipv6"
	if v, err := os.ReadFile(p); err == nil {
		if !bytes.Equal(bytes.TrimSpace(v), []byte("1")) {
			// Save permanent IPv6 addresses first: disable_ipv6 drops them.
			if err := k.removeAddrs(unix.AF_INET6); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte("1"), 0); err != nil {
				return fmt.Errorf("hw: disable ipv6 on %s: %w", k.ifname, err)
			}
			k.ipv6Path, k.ipv6Orig = p, v
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hw: read %s: %w", p, err)
	}

	// No IPv4 addresses.
	if err := k.removeAddrs(unix.AF_INET); err != nil {
		return err
	}

	// Ingress drop. AF_PACKET taps run before the netdev ingress hook, so
	// the router's rings still see every frame.
	return k.addIngressDrop()
}

// restore undoes silence, in reverse order, reporting every failure.
func (k *kernelState) restore(ctl int) error {
	var errs []error
	if k.nftTable != "" {
		if err := nft(fmt.Sprintf("delete table netdev %s\n", k.nftTable)); err != nil {
			errs = append(errs, fmt.Errorf("hw: remove ingress drop on %s: %w", k.ifname, err))
		}
		k.nftTable = ""
	}
	if k.tcFilter {
		if err := k.removeTCDrop(); err != nil {
			errs = append(errs, fmt.Errorf("hw: remove ingress drop on %s: %w", k.ifname, err))
		}
	}
	if k.ipv6Path != "" {
		if err := os.WriteFile(k.ipv6Path, k.ipv6Orig, 0); err != nil {
			errs = append(errs, fmt.Errorf("hw: restore %s: %w", k.ipv6Path, err))
		}
		k.ipv6Path = ""
	}
	if err := k.restoreAddrs(); err != nil {
		errs = append(errs, err)
	}
	if k.offloadsChanged {
		if err := setOffloads(ctl, k.ifname, k.offloads, nil); err != nil {
			errs = append(errs, err)
		}
		k.offloadsChanged = false
	}
	return errors.Join(errs...)
}

// ingressDropWith chooses how the ingress drop is installed: "nft", "tc",
// or "" for nft when the nft binary exists and tc otherwise. Tests set it.
var ingressDropWith = ""

func (k *kernelState) addIngressDrop() error {
	with := ingressDropWith
	if with == "" {
		with = "tc"
		if _, err := exec.LookPath("nft"); err == nil {
			with = "nft"
		}
	}
	if with == "tc" {
		return k.addTCDrop()
	}
	return k.addNFTDrop()
}

// tcDropPref is the priority of our tc ingress filter, chosen high so that
// an operator's own ingress filters run first and to be recognisable.
const tcDropPref = "49374"

// addTCDrop installs a clsact qdisc (unless the interface has one) and a
// cls_bpf filter in direct-action mode whose one classic BPF instruction
// returns TC_ACT_SHOT: a drop that needs neither cls_matchall nor
// act_gact in the kernel.
func (k *kernelState) addTCDrop() error {
	err := tc("qdisc", "add", "dev", k.ifname, "clsact")
	switch {
	case err == nil:
		k.tcQdisc = true
	case strings.Contains(err.Error(), "Exclusivity flag on") || strings.Contains(err.Error(), "File exists"):
		// Someone else's clsact or ingress qdisc: only add our filter.
	default:
		return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
	}
	// "1,6 0 0 2,": one instruction, BPF_RET|BPF_K 2 (TC_ACT_SHOT).
	if err := tc("filter", "replace", "dev", k.ifname, "ingress", "pref", tcDropPref, "handle", "1", "bpf", "da", "bytecode", "1,6 0 0 2,"); err != nil {
		if k.tcQdisc {
			tc("qdisc", "del", "dev", k.ifname, "clsact")
			k.tcQdisc = false
		}
		return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
	}
	k.tcFilter = true
	return nil
}

func (k *kernelState) removeTCDrop() error {
	var err error
	if k.tcQdisc {
		err = tc("qdisc", "del", "dev", k.ifname, "clsact")
	} else {
		err = tc("filter", "del", "dev", k.ifname, "ingress", "pref", tcDropPref)
	}
	k.tcFilter, k.tcQdisc = false, false
	return err
}

// tc runs the tc binary in the calling thread's network namespace.
func tc(args ...string) error {
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("tc %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (k *kernelState) addNFTDrop() error {
	table := fmt.Sprintf("gvrouter_hw_%d", k.ifindex)
	// Creating and deleting first replaces a table left by a crashed run
	// in one transaction.
	script := fmt.Sprintf(`table netdev %[1]s {}
delete table netdev %[1]s
table netdev %[1]s {
	chain ingress {
		type filter hook ingress device "%[2]s" priority -500; policy accept;
		counter drop
	}
}
`, table, k.ifname)
	if err := nft(script); err != nil {
		return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
	}
	k.nftTable = table
	return nil
}

// nft runs an nftables script in the calling thread's network namespace.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}
