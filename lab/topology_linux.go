package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gvrouter/gvrouter/hw"
	"github.com/gvrouter/gvrouter/lab/vswitch"
)

// hostOffloads are the offloads of every veth end in the lab (all off, as
// `ethtool -K IF tso off gso off gro off tx off` would set them): frames
// leave at wire size (no TSO/GSO), AF_PACKET sees frames as sent (no GRO),
// and checksums are complete, as on a wire (no TX checksum offload). RX
// checksum offload stays on: veth only reports what the sender computed.
// Ports on af_xdp depend on TX checksumming being off: AF_XDP cannot flag
// a partial checksum, so the router would drop such packets as
// l4_checksum (hw/xdpport/doc.go, "Checksums").
var hostOffloads = hw.Offloads{RxCsum: true}

// superframeOffloads are the offloads of every veth end with
// Options.HostOffloads: a veth's defaults but GRO (`ethtool -K IF tso on
// gso on tx on gro off`). The hosts' TCP hands its veth 64 KiB
// superframes with partial checksums, which veth passes to its peer as
// they are; the router ports' own ends keep TSO on too, so a superframe
// the router or the kernel sends on whole reaches the other host whole.
var superframeOffloads = hw.Offloads{TSO: true, GSO: true, TxCsum: true, RxCsum: true}

// setWireLike turns the offloads of ifname in namespace ns off
// (hostOffloads), with the ioctl hw uses on real ports, so the lab needs
// no ethtool binary.
func setWireLike(ns, ifname string) error { return setOffloadsIn(ns, ifname, hostOffloads) }

// setVethOffloads sets the offloads of one of the lab's veth ends:
// hostOffloads, or superframeOffloads with Options.HostOffloads.
func (l *lab) setVethOffloads(ns, ifname string) error {
	if l.opt.HostOffloads {
		return setOffloadsIn(ns, ifname, superframeOffloads)
	}
	return setWireLike(ns, ifname)
}

func setOffloadsIn(ns, ifname string, o hw.Offloads) error {
	return inNetns(ns, func() error {
		if err := hw.SetOffloads(ifname, o); err != nil {
			return fmt.Errorf("lab: offloads of %s in %s: %w", ifname, ns, err)
		}
		return nil
	})
}

// routerSysctls keep the kernel of the router namespace out of the data
// path: it forwards nothing and, with IPv6 off, sends no NDP/MLD of its own
// on the router ports. The bridge-nf switches exist only when br_netfilter
// is loaded; off, the kernel bridge of bench mode (d) calls no netfilter.
var routerSysctls = []struct {
	path, value string
	optional    bool
}{
	{"net/ipv4/ip_forward", "0", false},
	{"net/ipv6/conf/all/forwarding", "0", false},
	{"net/ipv6/conf/default/disable_ipv6", "1", false},
	{"net/ipv6/conf/all/disable_ipv6", "1", false},
	{"net/bridge/bridge-nf-call-iptables", "0", true},
	{"net/bridge/bridge-nf-call-ip6tables", "0", true},
	{"net/bridge/bridge-nf-call-arptables", "0", true},
}

// writeSysctl sets a sysctl in the calling thread's namespace.
func writeSysctl(path, value string, optional bool) error {
	err := os.WriteFile(filepath.Join("/proc/sys", path), []byte(value), 0)
	if err != nil && optional && os.IsNotExist(err) {
		return nil
	}
	return err
}

// build creates the three namespaces, the two veth pairs, addresses and
// routes of the hosts, and the router namespace's settings.
func (l *lab) build(ctx context.Context) error {
	if l.rtr2NS != "" {
		return l.buildMACsec(ctx)
	}
	nss := []string{l.lanNS, l.rtrNS, l.wanNS}
	if l.swNS != "" {
		nss = append(nss, l.swNS)
	}
	for _, ns := range nss {
		if err := addNetns(ctx, ns); err != nil {
			return err
		}
		l.namespaces = append(l.namespaces, ns)
	}
	err := inNetns(l.rtrNS, func() error {
		for _, s := range routerSysctls {
			if err := writeSysctl(s.path, s.value, s.optional); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lab: router namespace sysctls: %w", err)
	}
	steps := [][]string{
		// The veths are born inside the namespaces: the machine's own
		// namespace never holds a lab interface.
		{l.rtrNS, "ip", "link", "add", lanPort, "type", "veth", "peer", "name", hostIf, "netns", l.lanNS},
		{l.rtrNS, "ip", "link", "add", wanPort, "type", "veth", "peer", "name", hostIf, "netns", l.wanNS},
		{l.rtrNS, "ip", "link", "set", "lo", "up"},
		{l.rtrNS, "ip", "link", "set", lanPort, "up"},
		{l.rtrNS, "ip", "link", "set", wanPort, "up"},
	}
	wire := []struct{ ns, ifname string }{{l.rtrNS, lanPort}, {l.rtrNS, wanPort}}
	if l.swNS != "" {
		steps = [][]string{
			{l.swNS, "ip", "link", "add", swLANPort, "type", "veth", "peer", "name", hostIf, "netns", l.lanNS},
			{l.swNS, "ip", "link", "add", swWANPort, "type", "veth", "peer", "name", hostIf, "netns", l.wanNS},
			{l.swNS, "ip", "link", "add", swCPUPort, "type", "veth", "peer", "name", cpuPort, "netns", l.rtrNS},
			{l.swNS, "ip", "link", "set", "lo", "up"},
			{l.swNS, "ip", "link", "set", swLANPort, "up"},
			{l.swNS, "ip", "link", "set", swWANPort, "up"},
			{l.swNS, "ip", "link", "set", swCPUPort, "up"},
			{l.rtrNS, "ip", "link", "set", "lo", "up"},
			{l.rtrNS, "ip", "link", "set", cpuPort, "up"},
		}
		wire = []struct{ ns, ifname string }{
			{l.rtrNS, cpuPort}, {l.swNS, swLANPort}, {l.swNS, swWANPort}, {l.swNS, swCPUPort},
		}
	}
	steps = append(steps, l.hostSteps()...)
	for _, s := range steps {
		if err := nsRun(ctx, s[0], s[1], s[2:]...); err != nil {
			return err
		}
	}
	for _, e := range append(wire, struct{ ns, ifname string }{l.lanNS, hostIf}, struct{ ns, ifname string }{l.wanNS, hostIf}) {
		if err := l.setVethOffloads(e.ns, e.ifname); err != nil {
			return err
		}
	}
	if l.swNS != "" {
		if err := l.startSwitch(); err != nil {
			return err
		}
	}
	l.log.Debug("lab: topology built", "lan", l.lanNS, "router", l.rtrNS, "wan", l.wanNS)
	return nil
}

// startSwitch runs the emulated BCM53012 (lab/vswitch) on the switch
// namespace's ports, in this process: LAN port untagged in VLAN 1, WAN
// port untagged in VLAN 2, CPU port tagged in both, as the swconfig
// default of BCM47094 boards. teardown stops it.
func (l *lab) startSwitch() error {
	cfg := vswitch.Config{Ports: []vswitch.PortConfig{
		{Name: swLANPort, PVID: lanVID},
		{Name: swWANPort, PVID: wanVID},
		{Name: swCPUPort, Tagged: []uint16{lanVID, wanVID}},
	}}
	var sw *vswitch.Switch
	err := inNetns(l.swNS, func() error {
		var err error
		sw, err = vswitch.New(cfg, l.log.With("component", "vswitch"))
		return err
	})
	if err != nil {
		return fmt.Errorf("lab: switch: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sw.Run(ctx); err != nil && ctx.Err() == nil {
			l.log.Error("lab: switch stopped", "err", err)
		}
	}()
	l.cleanups = append(l.cleanups, func() {
		cancel()
		<-done
		if err := sw.Close(); err != nil {
			l.log.Warn("lab: switch close", "err", err)
		}
		st := sw.Stats()
		l.log.Debug("lab: switch stopped", "stats", fmt.Sprintf("%+v", st))
	})
	l.log.Debug("lab: switch running", "ns", l.swNS)
	return nil
}

// hostSteps are the `ip` commands (namespace first) that give the LAN and
// WAN hosts their addresses and default routes via the router.
//
// The WAN host (the lab's ISP) skips duplicate address detection on its
// link-local address: the ISP's kea-dhcp6 binds to that address and
// waited out DAD at every lab start (about 1.5 s). No proof is about the
// ISP host's DAD; the LAN host, whose kernel's SLAAC a proof checks,
// keeps it.
func (l *lab) hostSteps() [][]string {
	var steps [][]string
	for _, h := range []struct {
		ns       string
		a4, a6   string
		gw4, gw6 string
		noDAD    bool
	}{
		{l.lanNS, lanHost4.String(), lanHost6.String(), lanRouter4.Addr().String(), lanRouter6.Addr().String(), false},
		{l.wanNS, wanHost4.String(), wanHost6.String(), wanRouter4.Addr().String(), wanRouter6.Addr().String(), true},
	} {
		if h.noDAD {
			steps = append(steps, []string{h.ns, "sysctl", "-qw", "net.ipv6.conf." + hostIf + ".dad_transmits=0"})
		}
		steps = append(steps,
			[]string{h.ns, "ip", "link", "set", "lo", "up"},
			[]string{h.ns, "ip", "addr", "add", h.a4, "dev", hostIf},
			[]string{h.ns, "ip", "addr", "add", h.a6, "dev", hostIf, "nodad"},
			[]string{h.ns, "ip", "link", "set", hostIf, "up"},
			[]string{h.ns, "ip", "route", "add", "default", "via", h.gw4, "dev", hostIf},
			[]string{h.ns, "ip", "-6", "route", "add", "default", "via", h.gw6, "dev", hostIf},
		)
	}
	return steps
}
