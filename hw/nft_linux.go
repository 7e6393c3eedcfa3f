package hw

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/gvrouter/gvrouter/hw/takeover"
	"golang.org/x/sys/unix"
)

// nftDropPriority is the ingress chain's priority: early (before an
// operator's own netdev chains at the usual 0) so that the kernel spends
// the least on frames the router owns.
const nftDropPriority = -500

// nftFamily maps a recorded table family to the library's.
func nftFamily(name string) (nftables.TableFamily, error) {
	switch name {
	case "netdev":
		return nftables.TableFamilyNetdev, nil
	case "inet":
		return nftables.TableFamilyINet, nil
	case "ip":
		return nftables.TableFamilyIPv4, nil
	case "ip6":
		return nftables.TableFamilyIPv6, nil
	case "bridge":
		return nftables.TableFamilyBridge, nil
	}
	return 0, fmt.Errorf("unknown nftables family %q", name)
}

// addNFTDrop records and installs the nftables netdev table that drops
// every frame at ingress, through netlink (github.com/google/nftables) in
// the calling thread's network namespace: no nft binary is needed.
func (k *kernelState) addNFTDrop(t takeover.NFTable) error {
	fam, err := nftFamily(t.Family)
	if err != nil {
		return fmt.Errorf("hw: ingress drop on %s: %w", k.ifname, err)
	}
	if !slices.Contains(k.rec.NFTables, t) {
		k.rec.NFTables = append(k.rec.NFTables, t)
		if err := k.save(); err != nil {
			return err
		}
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("hw: ingress drop on %s: nftables: %w", k.ifname, err)
	}
	// Adding, deleting and adding again in one transaction replaces a
	// table a crashed run left (ours to adopt), so the drop never lapses.
	table := &nftables.Table{Family: fam, Name: t.Name}
	c.AddTable(table)
	c.DelTable(table)
	c.AddTable(table)
	accept := nftables.ChainPolicyAccept
	chain := c.AddChain(&nftables.Chain{
		Name: "ingress", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookIngress, Priority: nftables.ChainPriorityRef(nftDropPriority),
		Policy: &accept, Device: k.ifname,
	})
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Counter{},
		&expr.Verdict{Kind: expr.VerdictDrop},
	}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("hw: ingress drop on %s: nftables: %w", k.ifname, err)
	}
	return nil
}

// nftDeleteTable deletes table t through netlink in the calling thread's
// network namespace; a table that does not exist is not an error.
func nftDeleteTable(t takeover.NFTable) error {
	fam, err := nftFamily(t.Family)
	if err != nil {
		return err
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	c.DelTable(&nftables.Table{Family: fam, Name: t.Name})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("nftables: delete table %s %s: %w", t.Family, t.Name, err)
	}
	return nil
}
