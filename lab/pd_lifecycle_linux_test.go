package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gvrouter/gvrouter/router/status"
)

// Short ISP timers for the delegation's life cycle: a renewal every 4 s,
// so a new pool reaches the router within seconds, and a loss within
// the valid lifetime once kea is gone; a preferred lifetime long enough
// that the LAN host's address cannot go deprecated on its own timer
// while the test waits for the router's RA to deprecate it.
var lifecycleISP = isp6Options{renew: 4, rebind: 6, preferred: 40, valid: 45}

// lifecyclePool is the second pool the ISP renumbers into.
var lifecyclePool = netip.MustParsePrefix("fd77:9000::/48")

// storedSubnetID is the subnet id the test writes into the router's
// state directory before a restart, as if an earlier life had given the
// LAN that /64 (the lowest free id, 0, is what a router that forgot
// would take).
const storedSubnetID = 7

// TestLabDelegationLifecycle runs the router's DHCPv6-PD client and RA
// advertiser against kea-dhcp6 through a delegation's life, with the LAN
// host's own kernel SLAAC watching the LAN side:
//   - restart: the router keeps its DUID (state_dir/dhcp6/duid, and the
//     one on the status page) and the LAN's subnet id from
//     state_dir/ipv6/subnets.json (set to 7 while it was stopped, so a
//     router that forgot would take 0), and kea confirms the same /56;
//   - renumbering: kea comes back with another pool; at the next renewal
//     the router takes the new /56, numbers the LAN from it with the same
//     subnet id, announces the old /64 deprecated (the host's address in
//     it drops to preferred lifetime 0, RFC 7084 L-13) and the new one
//     (the host forms an address and pings the WAN host from it), and
//     routes the old /64 no longer;
//   - loss: kea goes away; when the valid lifetime ends the router
//     withdraws the delegation: no LAN /64 from it, no route, no longer
//     in the RAs, and the host's address in it deprecated or gone.
func TestLabDelegationLifecycle(t *testing.T) {
	parallelLongLab(t)
	requirePrivileged(t, "kea-dhcp6", "radvd", "ping")
	runWithHookTimeout(t, 6*time.Minute, func(l *lab) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		lanName, _ := routerInterfaces(l.opt.Topology)
		stateDir := filepath.Join(l.dir, "state-router")

		// The lab's proofs left a bound delegation numbering the LAN.
		snap, err := l.waitIPv6(ctx, 30*time.Second, "a bound delegation", func(v *status.IPv6) bool {
			return bound(v) && v.LANPrefixes[lanName].IsValid()
		})
		if err != nil {
			return err
		}
		pd1, duid1 := snap.IPv6.Delegation.Prefixes[0].Prefix, snap.IPv6.Delegation.DUID
		id0 := subnetID(pd1, snap.IPv6.LANPrefixes[lanName])
		duidFile, err := os.ReadFile(filepath.Join(stateDir, "dhcp6", "duid"))
		if err != nil {
			return err
		}
		if ids, err := readSubnetIDs(stateDir); err != nil || ids[lanName] != id0 {
			return fmt.Errorf("subnets.json = %v, %v; want %s → %d, the id in force", ids, err, lanName, id0)
		}

		// Restart with short ISP timers and a subnet id from "before".
		if err := l.stopRouter(); err != nil {
			return err
		}
		l.stopISP6()
		if err := l.startISP6(ctx, lifecycleISP); err != nil {
			return err
		}
		if err := l.startRadvd(ctx); err != nil {
			return err
		}
		ids := map[string]int{lanName: storedSubnetID}
		b, _ := json.Marshal(map[string]any{"subnets": ids})
		if err := os.WriteFile(filepath.Join(stateDir, "ipv6", "subnets.json"), b, 0o600); err != nil {
			return err
		}
		if err := l.startRouter(ctx); err != nil {
			return err
		}
		snap, err = l.waitIPv6(ctx, 30*time.Second, "the delegation after a restart", func(v *status.IPv6) bool {
			return bound(v) && v.LANPrefixes[lanName].IsValid()
		})
		if err != nil {
			return err
		}
		d := snap.IPv6.Delegation
		lan1 := snap.IPv6.LANPrefixes[lanName]
		duidFile2, err := os.ReadFile(filepath.Join(stateDir, "dhcp6", "duid"))
		if err != nil {
			return err
		}
		if !bytes.Equal(d.DUID, duid1) || !bytes.Equal(duidFile, duidFile2) {
			return fmt.Errorf("DUID after restart %s (file %x), before %s (file %x): want it kept", d.DUID, duidFile2, duid1, duidFile)
		}
		if d.Prefixes[0].Prefix != pd1 || subnetID(pd1, lan1) != storedSubnetID {
			return fmt.Errorf("after restart: delegation %s, LAN %s (id %d); want %s again and the stored id %d",
				d.Prefixes[0].Prefix, lan1, subnetID(pd1, lan1), pd1, storedSubnetID)
		}
		t.Logf("restart: DUID %s kept, %s confirmed, LAN %s (subnet id %d from the state directory; it was %d)", d.DUID, pd1, lan1, storedSubnetID, id0)
		if err := l.routeDelegation(ctx, pd1, wanRouter6.Addr()); err != nil {
			return err
		}
		host1, err := l.waitHostAddr(ctx, lan1, "a SLAAC address", func(a hostAddr) bool { return a.preferred > 30 && !a.tentative })
		if err != nil {
			return err
		}

		// Renumbering: another pool at the ISP.
		l.stopISP6()
		o := lifecycleISP
		o.pool = lifecyclePool
		if err := l.startISP6(ctx, o); err != nil {
			return err
		}
		if err := l.startRadvd(ctx); err != nil {
			return err
		}
		snap, err = l.waitIPv6(ctx, 45*time.Second, "a delegation from the new pool", func(v *status.IPv6) bool {
			return bound(v) && lifecyclePool.Contains(v.Delegation.Prefixes[0].Prefix.Addr()) && v.LANPrefixes[lanName].IsValid()
		})
		if err != nil {
			return fmt.Errorf("%w; kea log:\n%s", err, tail(filepath.Join(l.dir, "kea.log"), 1500))
		}
		pd2 := snap.IPv6.Delegation.Prefixes[0].Prefix
		lan2 := snap.IPv6.LANPrefixes[lanName]
		if len(snap.IPv6.Delegation.Prefixes) != 1 || subnetID(pd2, lan2) != storedSubnetID {
			return fmt.Errorf("after renumbering: delegation %v, LAN %s; want only the new /56 and subnet id %d", snap.IPv6.Delegation.Prefixes, lan2, storedSubnetID)
		}
		if err := advertised(snap, lanName, lan1, true); err != nil {
			return err
		}
		if err := advertised(snap, lanName, lan2, false); err != nil {
			return err
		}
		if r := routeTo(snap, lan1); r != nil {
			return fmt.Errorf("after renumbering the old LAN %s is still routed: %+v", lan1, *r)
		}
		old, err := l.waitHostAddr(ctx, lan1, "the old address deprecated", func(a hostAddr) bool { return a.addr == host1.addr && a.preferred == 0 })
		if err != nil {
			return err
		}
		// The host's own timer would have deprecated it no sooner than
		// its preferred lifetime when the RAs for the new prefix began.
		if left := time.Until(host1.seen.Add(time.Duration(host1.preferred) * time.Second)); left < 5*time.Second {
			return fmt.Errorf("the old address %s went deprecated only %v before its own preferred lifetime ran out: not shown to be the router's RA", host1.addr, left)
		}
		if err := l.routeDelegation(ctx, pd2, wanRouter6.Addr()); err != nil {
			return err
		}
		host2, err := l.waitHostAddr(ctx, lan2, "a SLAAC address in the new prefix", func(a hostAddr) bool { return a.preferred > 0 && !a.tentative })
		if err != nil {
			return err
		}
		if _, err := pingFrom(ctx, l.lanNS, host2.addr, wanHost6.Addr()); err != nil {
			return fmt.Errorf("ping from the renumbered address %s: %w", host2.addr, err)
		}
		t.Logf("renumbered: %s → %s, LAN %s → %s; host %s deprecated (valid %d s), %s pings %s",
			pd1, pd2, lan1, lan2, old.addr, old.valid, host2.addr, wanHost6.Addr())

		// Loss: the ISP's DHCPv6 server goes away for good.
		l.stopISP6()
		if err := l.startRadvd(ctx); err != nil {
			return err
		}
		snap, err = l.waitIPv6(ctx, time.Duration(lifecycleISP.valid+15)*time.Second, "the delegation withdrawn", func(v *status.IPv6) bool {
			return !bound(v) && !v.LANPrefixes[lanName].IsValid()
		})
		if err != nil {
			return err
		}
		// Lost at the end of its valid lifetime, the /64 has no time
		// left to announce deprecated (RFC 7084 L-13 b): it is simply no
		// longer in the RAs.
		if advertised(snap, lanName, lan2, false) == nil {
			return fmt.Errorf("after the loss the RAs on %s still announce %s", lanName, lan2)
		}
		if r := routeTo(snap, lan2); r != nil {
			return fmt.Errorf("after the loss the LAN %s is still routed: %+v", lan2, *r)
		}
		// The delegation's valid lifetime has run out, so the RAs
		// announce the /64 with no time left: the host's address in it
		// is deprecated or already gone.
		gone, err := l.waitHostAddr(ctx, lan2, "the address deprecated", func(a hostAddr) bool { return a.addr == host2.addr && a.preferred == 0 })
		if err != nil && !errors.Is(err, errNoHostAddr) {
			return err
		}
		state := "none"
		if snap.IPv6.Delegation != nil {
			state = snap.IPv6.Delegation.State
		}
		t.Logf("lost: delegation %s, LAN /64 %s gone from the interface, routes and RAs; host address %s: %v", state, lan2, host2.addr, hostState(gone, err))
		return nil
	})
}

func hostState(a hostAddr, err error) string {
	if err != nil {
		return "gone"
	}
	return fmt.Sprintf("deprecated, valid %d s", a.valid)
}

// bound reports whether v shows a bound delegation with a prefix.
func bound(v *status.IPv6) bool {
	return v.Delegation != nil && v.Delegation.State == "bound" && len(v.Delegation.Prefixes) > 0
}

// subnetID is the number of /64 lan within delegated prefix pd.
func subnetID(pd, lan netip.Prefix) int {
	if !pd.Contains(lan.Addr()) || pd.Bits() > 64 {
		return -1
	}
	a := lan.Addr().As16()
	var n uint64
	for _, b := range a[:8] {
		n = n<<8 | uint64(b)
	}
	return int(n & (1<<(64-pd.Bits()) - 1))
}

func readSubnetIDs(stateDir string) (map[string]int, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "ipv6", "subnets.json"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Subnets map[string]int `json:"subnets"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	return f.Subnets, nil
}

// advertised checks that the router's RAs on iface announce p, withdrawn
// (deprecated) or not as want says.
func advertised(s status.Snapshot, iface string, p netip.Prefix, deprecated bool) error {
	var seen []string
	for _, a := range s.IPv6.LANRA {
		if a.Interface != iface {
			continue
		}
		for _, x := range a.Prefixes {
			seen = append(seen, fmt.Sprintf("%s deprecated=%v", x.Prefix, x.Withdrawn))
			if x.Prefix == p && x.Withdrawn == deprecated {
				return nil
			}
		}
	}
	return fmt.Errorf("the RAs on %s do not announce %s deprecated=%v: %v", iface, p, deprecated, seen)
}

// routeTo returns the router's route to p, or nil.
func routeTo(s status.Snapshot, p netip.Prefix) *status.Route {
	for i, r := range s.Routes {
		if r.To == p.String() {
			return &s.Routes[i]
		}
	}
	return nil
}

// waitIPv6 polls the status page until ok accepts its IPv6 section.
func (l *lab) waitIPv6(ctx context.Context, d time.Duration, what string, ok func(*status.IPv6) bool) (status.Snapshot, error) {
	deadline := time.Now().Add(d)
	var last status.Snapshot
	var err error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		last, err = l.statusSince(ctx, time.Time{})
		if err == nil && last.IPv6 != nil && ok(last.IPv6) {
			return last, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	b, _ := json.Marshal(last.IPv6)
	return last, fmt.Errorf("no %s within %v (last error %v); status ipv6: %s", what, d, err, b)
}

// hostAddr is one of the LAN host's IPv6 addresses, lifetimes in seconds
// as they were when seen.
type hostAddr struct {
	addr               netip.Addr
	dynamic, tentative bool // tentative: DAD runs, the address cannot be bound yet
	preferred, valid   uint64
	seen               time.Time
}

// errNoHostAddr: the LAN host has no dynamic address in the prefix.
var errNoHostAddr = errors.New("no dynamic address")

// hostAddrs6 lists the LAN host's IPv6 addresses on hostIf.
func (l *lab) hostAddrs6(ctx context.Context) ([]hostAddr, error) {
	out, err := output(ctx, l.lanNS, "ip", "-6", "-j", "addr", "show", "dev", hostIf)
	if err != nil {
		return nil, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string  `json:"local"`
			Dynamic   bool    `json:"dynamic"`
			Tentative bool    `json:"tentative"`
			Preferred *uint64 `json:"preferred_life_time"`
			Valid     *uint64 `json:"valid_life_time"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("ip -j addr: %w: %s", err, out)
	}
	var as []hostAddr
	for _, k := range links {
		for _, a := range k.AddrInfo {
			ad, err := netip.ParseAddr(a.Local)
			if err != nil || a.Preferred == nil || a.Valid == nil {
				continue
			}
			as = append(as, hostAddr{addr: ad, dynamic: a.Dynamic, tentative: a.Tentative, preferred: *a.Preferred, valid: *a.Valid, seen: time.Now()})
		}
	}
	return as, nil
}

// waitHostAddr waits until the LAN host has a dynamic (SLAAC) address in
// p that ok accepts.
func (l *lab) waitHostAddr(ctx context.Context, p netip.Prefix, what string, ok func(hostAddr) bool) (hostAddr, error) {
	deadline := time.Now().Add(30 * time.Second)
	var in []hostAddr
	for time.Now().Before(deadline) && ctx.Err() == nil {
		as, err := l.hostAddrs6(ctx)
		if err != nil {
			return hostAddr{}, err
		}
		in = slices.DeleteFunc(as, func(a hostAddr) bool { return !a.dynamic || !p.Contains(a.addr) })
		for _, a := range in {
			if ok(a) {
				return a, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(in) == 0 {
		return hostAddr{}, fmt.Errorf("waiting for %s: the LAN host has %w in %s", what, errNoHostAddr, p)
	}
	return hostAddr{}, fmt.Errorf("the LAN host has not %s in %s: %+v", what, p, in)
}
