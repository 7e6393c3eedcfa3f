package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gvrouter/gvrouter/router/status"
	"github.com/gvrouter/gvrouter/services/rawudp"
)

// Bench mode s: the router's memory with svcLeases DHCP leases and a
// full DNS cache. The lab LAN's /24 cannot hold 1,000 leases, so the
// mode gives the LAN interface a first address in a /22 (svcLAN) whose
// pool the DHCP server serves; the lab's own addresses stay as they are.
const svcLeases = 1000

var (
	svcLAN   = netip.MustParsePrefix("10.76.0.1/22")
	svcFirst = netip.MustParseAddr("10.76.0.10")
	svcLast  = netip.MustParseAddr("10.76.3.250")
)

// withServicesPool is the config edit of bench mode s.
func withServicesPool(c *labConfig) {
	lan := &c.Interfaces[0]
	lan.Addresses = append([]string{svcLAN.String()}, lan.Addresses...)
	lan.DHCPServer = &labDHCPServer{Range: svcFirst.String() + "-" + svcLast.String(), LeaseTime: "1h",
		// svcLeases new clients in a few seconds: not a flood to ration.
		NewLeaseBurst: svcLeases, NewLeasesPerMinute: 60 * svcLeases}
}

// benchServices is bench mode s: the router restarted with the big pool,
// its RSS idle, after svcLeases DHCP REQUESTs from new MACs (each ACKed
// and written to the lease file), and after dnsperf asks it as many
// distinct names as its cache holds (each fetched from the ISP once).
func (l *lab) benchServices(ctx context.Context) error {
	if err := l.stopRouter(); err != nil {
		return err
	}
	l.cfgEdits = append(l.cfgEdits, withServicesPool)
	defer func() { l.cfgEdits = l.cfgEdits[:len(l.cfgEdits)-1] }()
	if err := l.startRouter(ctx); err != nil {
		return err
	}
	defer l.stopRouter()
	time.Sleep(2 * time.Second) // let start-up allocations settle
	rss0, err := l.routerRSS()
	if err != nil {
		return err
	}

	start := time.Now()
	if err := l.requestLeases(ctx, svcLeases); err != nil {
		return err
	}
	var srv status.DHCPServer
	if err := waitFor(ctx, 30*time.Second, func() error {
		s, err := l.statusSince(ctx, time.Now())
		if err != nil {
			return err
		}
		for _, d := range s.DHCPServers {
			if d.RangeStart == svcFirst {
				srv = d
			}
		}
		if srv.PoolUsed < svcLeases {
			return fmt.Errorf("%d of %d leases bound", srv.PoolUsed, svcLeases)
		}
		return nil
	}); err != nil {
		return err
	}
	leaseTook := time.Since(start)
	rss1, err := l.routerRSS()
	if err != nil {
		return err
	}

	dns, took, err := l.fillDNSCache(ctx)
	if err != nil {
		return err
	}
	rss2, err := l.routerRSS()
	if err != nil {
		return err
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(l.out, "\n(s) services memory: router RSS %.1f MiB idle; %.1f MiB with %d DHCP leases (%d REQUESTs in %v, %d lease writes); %.1f MiB with a full DNS cache (%d of %d entries, %d names from dnsperf in %v)\n",
		mib(rss0), mib(rss1), srv.PoolUsed, svcLeases, leaseTook.Round(time.Millisecond), srv.Counters["lease_writes"],
		mib(rss2), dns.CacheEntries, dns.CacheMax, dns.CacheMax, took.Round(time.Millisecond))
	return nil
}

// requestLeases sends n DHCPREQUESTs in SELECTING (server identifier and
// requested address, RFC 2131 §4.3.2) from n new MACs on the LAN host,
// each for its own address of the bench pool, a few hundred a second.
func (l *lab) requestLeases(ctx context.Context, n int) error {
	var link *rawudp.PacketLink
	if err := inNetns(l.lanNS, func() error {
		var err error
		link, err = rawudp.OpenPacketLink(hostIf)
		return err
	}); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go link.Run(lctx) // reads and drops the ACKs; closes the socket at the end
	addr := svcFirst
	for i := range n {
		mac := net.HardwareAddr{0x02, 0x5e, 0, 0, byte(i >> 8), byte(i)}
		m, err := dhcpv4.New(dhcpv4.WithHwAddr(mac), dhcpv4.WithBroadcast(true),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(svcLAN.Addr().AsSlice())),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(addr.AsSlice())))
		if err != nil {
			return err
		}
		f := rawudp.Build(rawudp.Broadcast, mac, netip.AddrPortFrom(netip.IPv4Unspecified(), 68),
			netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), 67), uint16(i), m.ToBytes())
		if err := link.WriteFrame(f); err != nil {
			return err
		}
		addr = addr.Next()
		if i%50 == 49 {
			time.Sleep(50 * time.Millisecond) // the lease file's group commit keeps up
		}
	}
	return nil
}

// fillDNSCache asks the router, with dnsperf from the LAN host, as many
// distinct names under fillZone as its cache holds, and returns the
// forwarder's status after.
func (l *lab) fillDNSCache(ctx context.Context) (status.DNS, time.Duration, error) {
	s, err := l.statusSince(ctx, time.Time{})
	if err != nil {
		return status.DNS{}, 0, err
	}
	if s.DNS == nil || s.DNS.CacheMax == 0 {
		return status.DNS{}, 0, fmt.Errorf("no DNS forwarder on the status page")
	}
	if err := l.startISP(ispOptions{fillNames: s.DNS.CacheMax}); err != nil {
		return status.DNS{}, 0, err
	}
	defer l.startISP(ispOptions{})
	var b strings.Builder
	for i := range s.DNS.CacheMax {
		fmt.Fprintf(&b, "n%d.%s A\n", i, fillZone)
	}
	path := filepath.Join(l.dir, "fill.queries")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return status.DNS{}, 0, err
	}
	start := time.Now()
	if out, err := output(ctx, l.lanNS, "dnsperf", "-s", lanRouter4.Addr().String(), "-d", path, "-n", "1", "-c", "4", "-q", "200", "-t", "5"); err != nil {
		return status.DNS{}, 0, fmt.Errorf("dnsperf: %w: %s", err, out)
	}
	took := time.Since(start)
	var d status.DNS
	err = waitFor(ctx, 10*time.Second, func() error {
		s, err := l.statusSince(ctx, time.Now())
		if err != nil {
			return err
		}
		d = *s.DNS
		if d.CacheEntries < d.CacheMax*95/100 {
			return fmt.Errorf("DNS cache %d of %d entries after dnsperf", d.CacheEntries, d.CacheMax)
		}
		return nil
	})
	return d, took, err
}
