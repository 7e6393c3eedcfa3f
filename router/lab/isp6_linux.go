package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The lab ISP's IPv6 (issue 19): radvd on the WAN host announces the WAN
// link's prefix with the WAN host as default router, and kea-dhcp6-server
// delegates a /56 out of ispPDPool by DHCPv6-PD, as an ISP's edge does.
// Kea installs no route for what it delegates, so the lab adds the route
// to the delegated prefix via the router's WAN link-local address itself,
// as the ISP's edge router would (routeDelegation).
var (
	// ispPDPool is kea's pd-pool: /56s of a /48 (RFC 4193 space, only
	// inside the lab's namespaces).
	ispPDPool = netip.MustParsePrefix("fd77:8000::/48")
)

// ISP IPv6 timers: short enough that a lab run sees a renewal, long
// enough that nothing expires while the proofs run.
const (
	ispPDLength     = 56
	ispRenewTimer   = 60  // T1, seconds
	ispRebindTimer  = 96  // T2
	ispPreferredLft = 120 // preferred lifetime of the delegation
	ispValidLft     = 180 // valid lifetime
)

// isp6Options changes the ISP's IPv6 services for one test.
type isp6Options struct {
	renew, rebind, preferred, valid int // seconds; zero: the ispXxx defaults
	pool                            netip.Prefix
}

// keaConfig is kea-dhcp6's JSON config for the lab ISP.
func (l *lab) keaConfig(o isp6Options) ([]byte, error) {
	if o.renew == 0 {
		o.renew, o.rebind, o.preferred, o.valid = ispRenewTimer, ispRebindTimer, ispPreferredLft, ispValidLft
	}
	if !o.pool.IsValid() {
		o.pool = ispPDPool
	}
	cfg := map[string]any{
		"Dhcp6": map[string]any{
			"interfaces-config": map[string]any{"interfaces": []string{hostIf}},
			"lease-database": map[string]any{
				"type": "memfile", "persist": true, "name": filepath.Join(l.dir, "kea-leases6.csv"), "lfc-interval": 0,
			},
			"renew-timer": o.renew, "rebind-timer": o.rebind,
			"preferred-lifetime": o.preferred, "valid-lifetime": o.valid,
			"option-data": []map[string]any{
				{"name": "dns-servers", "data": wanHost6.Addr().String()},
				{"name": "domain-search", "data": ispZone},
			},
			"subnet6": []map[string]any{{
				"id": 1, "subnet": wanHost6.Masked().String(), "interface": hostIf,
				"pd-pools": []map[string]any{{
					"prefix": o.pool.Addr().String(), "prefix-len": o.pool.Bits(), "delegated-len": ispPDLength,
				}},
			}},
			"loggers": []map[string]any{{
				"name": "kea-dhcp6", "severity": "INFO",
				"output_options": []map[string]any{{"output": filepath.Join(l.dir, "kea.log")}},
			}},
		},
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// radvdConfig is radvd's config for the WAN link: the WAN host as default
// router, the WAN prefix on-link (no SLAAC for the router: it has its
// static address), the WAN host's DNS.
func radvdConfig() string {
	return strings.Join([]string{
		"interface " + hostIf + " {",
		"  AdvSendAdvert on;",
		"  MinRtrAdvInterval 3;",
		"  MaxRtrAdvInterval 10;",
		"  AdvDefaultLifetime 60;",
		"  prefix " + wanHost6.Masked().String() + " {",
		"    AdvOnLink on;",
		"    AdvAutonomous on;",
		"    AdvValidLifetime 300;",
		"    AdvPreferredLifetime 120;",
		"  };",
		"  RDNSS " + wanHost6.Addr().String() + " { AdvRDNSSLifetime 60; };",
		"};",
	}, "\n") + "\n"
}

// startISP6 starts radvd and kea-dhcp6 in the WAN host's namespace.
// teardown stops them.
func (l *lab) startISP6(ctx context.Context, o isp6Options) error {
	l.stopISP6()
	rpath := filepath.Join(l.dir, "radvd.conf")
	if err := os.WriteFile(rpath, []byte(radvdConfig()), 0o600); err != nil {
		return fmt.Errorf("lab: ISP radvd: %w", err)
	}
	// radvd needs forwarding on to announce itself as a router.
	if _, err := output(ctx, l.wanNS, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"); err != nil {
		return err
	}
	rd, err := startChild(l.log, "isp-radvd", l.wanNS, filepath.Join(l.dir, "radvd.log"),
		"radvd", "--nodaemon", "--config="+rpath, "--pidfile="+filepath.Join(l.dir, "radvd.pid"), "--logmethod=stderr")
	if err != nil {
		return err
	}
	l.radvd = rd
	kc, err := l.keaConfig(o)
	if err != nil {
		return err
	}
	kpath := filepath.Join(l.dir, "kea-dhcp6.conf")
	if err := os.WriteFile(kpath, kc, 0o600); err != nil {
		return fmt.Errorf("lab: ISP kea: %w", err)
	}
	kea, err := startChildEnv(l.log, "isp-kea-dhcp6", l.wanNS, filepath.Join(l.dir, "kea.out"),
		[]string{"KEA_LOCKFILE_DIR=" + l.dir, "KEA_PIDFILE_DIR=" + l.dir}, "kea-dhcp6", "-c", kpath)
	if err != nil {
		return err
	}
	l.kea = kea
	for _, c := range []*child{rd, kea} {
		select {
		case <-c.done:
			return fmt.Errorf("lab: ISP %s exited: %v; %s", c.name, c.err, tail(c.logPath, 2000))
		case <-time.After(300 * time.Millisecond):
		}
	}
	return nil
}

// stopISP6 stops the ISP's radvd and kea-dhcp6 if they run.
func (l *lab) stopISP6() {
	for _, c := range []**child{&l.radvd, &l.kea} {
		if *c == nil {
			continue
		}
		if err := (*c).stop(); err != nil {
			l.log.Warn("lab: ISP IPv6", "child", (*c).name, "err", err)
		}
		*c = nil
	}
}

// routeDelegation routes prefix to the router's WAN link-local address
// on the WAN host, as the ISP's edge does for what its DHCPv6 server
// delegated.
func (l *lab) routeDelegation(ctx context.Context, prefix netip.Prefix, via netip.Addr) error {
	_, err := output(ctx, l.wanNS, "ip", "-6", "route", "replace", prefix.String(), "via", via.String(), "dev", hostIf)
	return err
}
