package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/gvrouter/gvrouter/portmap/natpmp"
	"github.com/gvrouter/gvrouter/router/status"
)

// pmGuestHost is the guest host's static address on the guest network
// of guestZones (no DHCP needed for this proof).
var pmGuestHost = netip.MustParsePrefix("10.77.3.50/24")

// Ports the guest host asks for: all in the test's allow rules for the
// guest prefix, so only the zone refuses them.
const (
	pmGuestNATPMP = 15720
	pmGuestPCP    = 15721
	pmGuestUPnP   = 15722
)

// checkPortMapGuest reloads the running router with firewall zones and a
// guest network (guestZones, port_mapping: as before, whose default
// permits the lan zone only: the guest's input policy is reject), puts a
// guest host on it and proves with real clients that a guest zone
// without permission is refused with each protocol's code: natpmpc gets
// NAT-PMP result 2 (not authorized), as does a MAP request the test
// sends; the RFC 6887 client's PCP MAP gets NOT_AUTHORIZED (2); upnpc
// given the control URL on the guest address gets 606, and its SSDP
// search from the guest network finds no gateway (no SSDP there). The
// refusals are counted in refused/zone (status and /metrics), no guest
// mapping exists, and the guest still cannot reach the router's status
// page (its input policy admits only the port mapping servers).
func checkPortMapGuest(ctx context.Context, l *lab, script string, logf func(string, ...any)) error {
	ns := l.prefix + "-pmg"
	if err := nsRun(ctx, "", "ip", "netns", "add", ns); err != nil {
		return err
	}
	defer nsRun(context.Background(), "", "ip", "netns", "del", ns)
	if err := nsRun(ctx, l.rtrNS, "ip", "link", "add", guestPort, "type", "veth", "peer", "name", guestIf, "netns", ns); err != nil {
		return err
	}
	if err := nsRun(ctx, l.rtrNS, "ip", "link", "set", guestPort, "up"); err != nil {
		return err
	}
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"}, {"ip", "link", "set", guestIf, "up"},
		{"ip", "addr", "add", pmGuestHost.String(), "dev", guestIf},
		{"ip", "route", "add", "default", "via", guestRouter4.Addr().String()},
	} {
		if err := nsRun(ctx, ns, c[0], c[1:]...); err != nil {
			return err
		}
	}
	before, err := l.waitPortMap(ctx, "the status before the guest network", func(*status.PortMapping) bool { return true })
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(l.dir, "lab.yaml")
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	next, err := guestZones(orig)
	if err != nil {
		return err
	}
	if err := reloadWith(l, cfgPath, string(next)); err != nil {
		return err
	}
	guestAt := guestRouter4.Addr().String()
	if _, err := l.waitPortMap(ctx, "the servers on the guest address", func(p *status.PortMapping) bool {
		return strings.Contains(strings.Join(p.Listen, " "), guestAt+":5351")
	}); err != nil {
		return err
	}

	var errs []error
	guest := pmGuestHost.Addr()
	got := runOut(ctx, ns, 20, "natpmpc", "-g", guestAt, "-a", fmt.Sprint(pmGuestNATPMP), fmt.Sprint(pmGuestNATPMP), "tcp", "3600")
	logf("natpmpc from the guest host:\n%s", got)
	if !strings.Contains(got, "not authorized") {
		errs = append(errs, fmt.Errorf("natpmpc from the guest host: output lacks \"not authorized\":\n%s", got))
	}
	r, err := natpmpAsk(ns, guest, netip.AddrPortFrom(guestRouter4.Addr(), natpmp.ServerPort),
		natpmp.Request{Op: natpmp.OpMapUDP, Internal: pmGuestNATPMP, External: pmGuestNATPMP, Lifetime: 3600})
	if err != nil || r.Result != natpmp.ResultNotAuthorized || r.Mapped != 0 {
		errs = append(errs, fmt.Errorf("NAT-PMP map from the guest host: %+v, %v; want result %d (not authorized)", r, err, natpmp.ResultNotAuthorized))
	}
	got = runOut(ctx, ns, 30, "/usr/bin/python3", script, guestAt, guest.String(), fmt.Sprintf("map,1,3600,1,6,%d", pmGuestPCP))
	logf("pcp client from the guest host:\n%s", got)
	if !strings.Contains(got, "map v2 op129 result 2 ") {
		errs = append(errs, fmt.Errorf("PCP MAP from the guest host: %q, want result 2 (NOT_AUTHORIZED)", got))
	}
	got = runOut(ctx, ns, 30, "upnpc", "-i", "-u", "http://"+guestAt+":5000/rootDesc.xml", "-a", guest.String(), fmt.Sprint(pmGuestUPnP), fmt.Sprint(pmGuestUPnP), "TCP", "3600")
	logf("upnpc -u from the guest host:\n%s", got)
	if !strings.Contains(got, "failed with code 606") {
		errs = append(errs, fmt.Errorf("upnpc from the guest host: output lacks \"failed with code 606\":\n%s", got))
	}
	got = runOut(ctx, ns, 30, "upnpc", "-i", "-l")
	logf("upnpc -l (SSDP) from the guest host:\n%s", got)
	if !strings.Contains(got, "No IGD UPnP Device found") {
		errs = append(errs, fmt.Errorf("upnpc's SSDP search from the guest network found a gateway:\n%s", got))
	}
	if _, err := httpGet(ctx, ns, "http://"+guestAt+"/"); err == nil || !strings.Contains(err.Error(), "refused") {
		errs = append(errs, fmt.Errorf("guest to the status page on its own address: %v, want connection refused", err))
	}

	pm, err := l.waitPortMap(ctx, "the guest's refusals", func(p *status.PortMapping) bool { return p.Refused["zone"] >= 4 })
	if err != nil {
		errs = append(errs, err)
		return errors.Join(errs...)
	}
	logf("refused %v (before the guest network: %v)", pm.Refused, before.Refused)
	if pm.Refused["permission"] != before.Refused["permission"] {
		errs = append(errs, fmt.Errorf("refused/permission rose %d -> %d: the guest's requests reached the permission rules", before.Refused["permission"], pm.Refused["permission"]))
	}
	for _, m := range pm.Mappings {
		if m.Client == guest || m.Internal.Addr() == guest {
			errs = append(errs, fmt.Errorf("mapping %+v for the guest host", m))
		}
	}
	metrics, err := routerStatus(ctx, l.rtrNS, "/metrics")
	if err != nil {
		return err
	}
	if want := fmt.Sprintf(`gvrouter_portmap_refused_total{reason="zone"} %d`, pm.Refused["zone"]); !strings.Contains(string(metrics), want) {
		errs = append(errs, fmt.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "gvrouter_portmap_refused")))
	}
	return errors.Join(errs...)
}
