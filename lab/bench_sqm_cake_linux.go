package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/internal/linuxpeer"
)

// The cake anchor of bench mode q: Linux as the router, in the QEMU guest
// of internal/linuxpeer (this machine's kernel has no sch_cake), its eth0
// and eth1 taps bridged to the router namespace's lan0 and wan0 in place
// of gvrouter, with nftables masquerade and cake both ways at the rates
// the router's sqm gets.
const (
	cakeLANTap, cakeWANTap = "cqtap0", "cqtap1"
	cakeLANBridge          = "cqbr0"
	cakeWANBridge          = "cqbr1"
	// cakeGuestUptime keeps the guest up between the bench's commands
	// (a row's run is under a minute).
	cakeGuestUptime = "900"
	// cakeKVMBootTimeout bounds a KVM guest's boot before TCG is tried.
	cakeKVMBootTimeout = 20 * time.Second
	// cakeCmdTimeout bounds one setup command in the guest.
	cakeCmdTimeout = 20 * time.Second
)

// cakeCommands are the guest's router setup, one shell line each: the
// lab router's addresses (the WAN's static, from the ISP's subnet), the
// default route, forwarding, masquerade (fw4's rule, as bench mode n),
// and cake on eth1's egress (upload) and, through ifb0, on its ingress
// (download) with the modem's 14 bytes of Ethernet, as the router's
// sqm. tc is iproute2's /sbin/tc: /bin/tc is busybox's applet.
func cakeCommands(r sqmRates) []string {
	return []string{
		"ip link set eth1 up && ip addr add " + wanRouter4.String() + " dev eth1",
		"ip route add default via " + wanHost4.Addr().String(),
		"echo 1 >/proc/sys/net/ipv4/ip_forward",
		`nft 'add table ip nat; add chain ip nat post { type nat hook postrouting priority srcnat; policy accept; }; add rule ip nat post oifname "eth1" masquerade'`,
		fmt.Sprintf("/sbin/tc qdisc replace dev eth1 root cake bandwidth %dkbit overhead %d nat dual-srchost", shapedUpKbit(r.Up), sqmOverhead),
		"ip link set ifb0 up",
		"/sbin/tc qdisc add dev eth1 handle ffff: ingress",
		"/sbin/tc filter add dev eth1 parent ffff: matchall action mirred egress redirect dev ifb0",
		fmt.Sprintf("/sbin/tc qdisc replace dev ifb0 root cake bandwidth %dkbit overhead %d nat dual-dsthost ingress", shapedDownKbit(r.Down), sqmOverhead),
	}
}

// benchSQMCake measures the cake anchor's runs: it stops the lab's
// router, boots the guest, joins it to the lab, measures and undoes it
// all. The guest runs under KVM when /dev/kvm opens (TCG cannot forward
// 100 Mbit/s on this machine).
func (l *lab) benchSQMCake(ctx context.Context, t sqmTopology, rates sqmRates) ([]sqmRun, string, error) {
	l.proxy.close()
	l.proxy = nil
	if err := l.stopRouter(); err != nil {
		return nil, "", err
	}
	kvm := false
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil {
		f.Close()
		kvm = true
	}
	opts := linuxpeer.Options{
		Job: "plain", Env: map[string]string{"ADDR": lanRouter4.String(), "UPTIME": cakeGuestUptime},
		Netns: l.rtrNS, Tap: cakeLANTap, Tap2: cakeWANTap, KVM: kvm,
	}
	if kvm {
		// A KVM guest is up in a second or two; nested KVM on the
		// lab's machine hung silently instead (2026-12-07).
		opts.BootTimeout = cakeKVMBootTimeout
	}
	p, err := linuxpeer.Start(ctx, opts)
	if err != nil && kvm {
		// /dev/kvm opened, but QEMU could not use it (nested
		// virtualisation off): TCG, however slow.
		l.log.Warn("lab: bench sqm: the cake guest did not start under KVM; trying TCG", "err", err)
		opts.KVM, kvm, opts.BootTimeout = false, false, 0
		p, err = linuxpeer.Start(ctx, opts)
	}
	if err != nil {
		return nil, "", err
	}
	defer func() {
		c := p.Stop()
		l.log.Debug("lab: cake guest console", "console", c)
	}()
	undo := [][]string{
		{"ip", "link", "del", cakeLANBridge},
		{"ip", "link", "del", cakeWANBridge},
	}
	defer func() {
		for _, s := range undo {
			if err := nsRun(context.Background(), l.rtrNS, s[0], s[1:]...); err != nil {
				l.log.Warn("lab: bench sqm cake: undo", "err", err)
			}
		}
	}()
	for _, s := range [][]string{
		{"ip", "link", "add", cakeLANBridge, "type", "bridge", "stp_state", "0"},
		{"ip", "link", "add", cakeWANBridge, "type", "bridge", "stp_state", "0"},
		{"ip", "link", "set", lanPort, "master", cakeLANBridge},
		{"ip", "link", "set", cakeLANTap, "master", cakeLANBridge},
		{"ip", "link", "set", wanPort, "master", cakeWANBridge},
		{"ip", "link", "set", cakeWANTap, "master", cakeWANBridge},
		{"ip", "link", "set", lanPort, "up"},
		{"ip", "link", "set", wanPort, "up"},
		{"ip", "link", "set", cakeLANBridge, "up"},
		{"ip", "link", "set", cakeWANBridge, "up"},
	} {
		if err := nsRun(ctx, l.rtrNS, s[0], s[1:]...); err != nil {
			return nil, "", fmt.Errorf("cake guest bridges: %w", err)
		}
	}
	for _, c := range cakeCommands(rates) {
		if out, err := p.Run(ctx, c, cakeCmdTimeout); err != nil {
			return nil, "", fmt.Errorf("cake guest: %q: %w: %s", c, err, out)
		}
	}
	// The hosts knew gvrouter's MAC addresses for the same IP addresses.
	for _, ns := range []string{l.lanNS, t.lan2, l.wanNS} {
		if err := nsRun(ctx, ns, "ip", "neigh", "flush", "all"); err != nil {
			return nil, "", err
		}
	}
	if _, err := ping(ctx, l.lanNS, farServer.Addr()); err != nil {
		return nil, "", fmt.Errorf("cake guest: no path to the far server: %w", err)
	}
	accel := "TCG"
	if kvm {
		accel = "KVM"
	}
	qdiscs, _ := p.Run(ctx, "/sbin/tc qdisc show dev eth1; /sbin/tc qdisc show dev ifb0", cakeCmdTimeout)
	l.log.Info("lab: bench sqm: cake guest is the router", "accel", accel, "qdiscs", strings.TrimSpace(qdiscs))
	var runs []sqmRun
	var errs []error
	for r := 0; r < l.opt.benchRuns() && ctx.Err() == nil; r++ {
		run, err := l.sqmMeasure(ctx, t, p.PID(), nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("lab: bench sqm cake guest run %d: %w", r+1, err))
		}
		runs = append(runs, run)
	}
	stats, _ := p.Run(ctx, "/sbin/tc -s qdisc show dev eth1; /sbin/tc -s qdisc show dev ifb0", cakeCmdTimeout)
	l.log.Debug("lab: cake statistics", "tc", stats)
	return runs, accel, errors.Join(errs...)
}
