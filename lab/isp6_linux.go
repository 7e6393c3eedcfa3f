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

// The lab ISP's IPv6: radvd on the WAN host announces the WAN link's prefix
// with the WAN host as default router, and kea-dhcp6-server delegates a /56
// out of ispPDPool by DHCPv6-PD, as an ISP's edge does. Kea installs no
// route for what it delegates, so the lab adds the route to the delegated
// prefix via the router's WAN link-local address itself, as the ISP's edge
// router would (routeDelegation).
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
			// The server DUID file and such: in the run's directory,
			// never the machine's /var/lib/kea.
			"data-directory": l.dir,
			"lease-database": map[string]any{
				"type": "memfile", "persist": true, "name": filepath.Join(l.dir, "kea-leases6.csv"), "lfc-interval": 0,
			},
			"renew-timer": o.renew, "rebind-timer": o.rebind,
			"preferred-lifetime": o.preferred, "valid-lifetime": o.valid,
			// No DNS options: the lab's DNS proofs expect the ISP's
			// one IPv4 server (from the DHCPv4 lease) as the only
			// upstream; services/dhcp6client and services/ra test
			// options 23 and RDNSS against kea and radvd.
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
// static address); no RDNSS (see keaConfig).
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
		"};",
	}, "\n") + "\n"
}

// startISP6 starts the ISP's delegating kea-dhcp6 in the WAN host's
// namespace; teardown stops it.
func (l *lab) startISP6(ctx context.Context, o isp6Options) error {
	l.stopISP6()
	// Kea binds to the link-local address, which DAD holds tentative
	// for a second after the link came up.
	if err := waitLinkLocal(ctx, l.wanNS, hostIf, 5*time.Second); err != nil {
		return err
	}
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
	return l.settle(kea)
}

// startRadvd starts radvd as the ISP's router on the WAN link (for the
// RA learner's proofs); teardown stops it.
func (l *lab) startRadvd(ctx context.Context) error {
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
	return l.settle(rd)
}

// settle fails if c exits within its first 300 ms (a bad config, a taken
// port).
func (l *lab) settle(c *child) error {
	select {
	case <-c.done:
		return fmt.Errorf("lab: ISP %s exited: %v; %s", c.name, c.err, tail(c.logPath, 2000))
	case <-time.After(300 * time.Millisecond):
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

// waitLinkLocal waits until dev in namespace ns has a link-local address
// that is no longer tentative.
func waitLinkLocal(ctx context.Context, ns, dev string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		out, err := output(ctx, ns, "ip", "-6", "addr", "show", "dev", dev, "scope", "link")
		if err == nil && strings.Contains(string(out), "inet6 fe80:") && !strings.Contains(string(out), "tentative") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: %s in %s has no usable link-local address after %v: %s %v", dev, ns, d, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
