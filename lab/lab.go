package lab

import (
	"io"
	"log/slog"
	"net/netip"
	"time"
)

// Options configures one lab run.
type Options struct {
	// RouterBinary is the router executable, run as
	// "RouterBinary run -config FILE" and, for bench (c),
	// "RouterBinary bridge -a lan0 -b wan0". Example: "/usr/sbin/gvrouter".
	RouterBinary string
	// StatusPort is the port on 127.0.0.1 in the machine's own namespace
	// where the lab exposes the router's status page; 0 picks a free port.
	// Example: 8080.
	StatusPort int
	// Keep keeps the lab up after the proofs (and bench), also after a
	// failed proof, until ctx is done or SIGINT/SIGTERM arrives.
	Keep bool
	// Bench runs the iperf3 benchmark after the proofs.
	Bench bool
	// BenchSeconds is iperf3's -t; 0 means DefaultBenchSeconds.
	BenchSeconds int
	// BenchRuns is how many iperf3 runs each figure is the median of; 0
	// means DefaultBenchRuns.
	BenchRuns int
	// Topology is the lab's layout: TopologyVeth ("" too) or
	// TopologyBCM47094. The bench needs TopologyVeth.
	Topology string
	// BenchModes selects bench modes by letter, any of "abncdgmfks"; ""
	// means "abncd". Modes b, n, d and k need no router binary. Mode g
	// restarts the router once per GRO mode and measures forwarded and
	// local TCP; mode m fills the conntrack table with a SYN flood and
	// reports the router's RSS per flow; mode f floods a 10,000-flow table
	// while an iperf3 flow runs; mode k runs the flood of f against the
	// kernel's nftables masquerade of mode n instead of the router.
	BenchModes string
	// BaselineBinary, if set, is an earlier router build that bench modes
	// A and C run as (a) and (c) do this build, taking turns with them run
	// by run, so that the ratios (a)/(A) and (c)/(C) compare two builds
	// in one sitting, free of the drift between sittings. The baseline
	// runs the wave-1 lab config (static WAN address, no services), which
	// any earlier build reads. Example: "/tmp/router-9cabf24".
	BaselineBinary string
	// Driver is the port driver of the lab routers' ports (config
	// ports[].driver): DriverAFXDP, DriverAFPacket, or "" for the
	// hardware profile's default. With DriverAFXDP the lab fails when a
	// port fell back to af_packet (the status page names each port's
	// driver). It applies to both routers of the macsec topology and
	// to bench mode c's `gvrouter bridge`; the -bench-baseline build of
	// modes A and C keeps its own default. Example: "af_xdp".
	Driver string
	// HostOffloads turns TSO, GSO and TX checksum offload on at every
	// veth end of the lab (GRO stays off), as `ethtool -K IF tso on gso
	// on tx on` would, instead of off: the hosts then send TSO
	// superframes of up to 64 KiB, as a container or VM beside the
	// router does, and the kernel modes forward them whole. The bench
	// then also fails a router run that dropped any frame as "oversize".
	// Topology veth with af_packet ports only: AF_XDP cannot flag a
	// partial checksum (and XDP on a veth turns its peer's GSO off).
	HostOffloads bool
	// SQMRates is bench mode q's modem, "DOWN/UP" in Mbit/s; ""
	// means DefaultSQMRates. The router's sqm runs at 95 % of each.
	// Example: "500/100".
	SQMRates string
	// SQMCake adds bench mode q's anchor: Linux as the router with cake
	// at the same rates, in the QEMU guest of internal/linuxpeer, after
	// the router's runs (it stops the router).
	SQMCake bool
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// Stdout receives the summary and bench table; nil discards them.
	Stdout io.Writer

	// testHook, if set, runs after the proofs while the lab is up; an
	// error from it fails Run. Tests use it to check the lab from outside.
	testHook func(l *lab) error
	// fewProofs limits the lab's own proofs to reachability (ping and
	// TCP both ways), the status page, the counters and the kernel
	// checks: no NAT, fast path or service proofs. For a test whose hook
	// checks something else and needs none of the state those set up (a
	// LAN host's lease, its SLAAC address, the delegated prefix, a
	// traceroute's route on the WAN host); the lab start then takes
	// seconds less. The default lab (TestRun*, cmd/gvlab) runs them all.
	fewProofs bool
	// macsecParallel, if set, is the MACsec lab SecYs' parallel setting
	// (tests of ordered parallel crypto set "always").
	macsecParallel string
	// macsecMKA, if set, keys the MACsec lab's SecYs by MKA instead of
	// static SAs, rolling the SAK every macsecMKARekey (e.g. "10s") if
	// that is set.
	macsecMKA      bool
	macsecMKARekey string
	// macsecCipher, if set, is the MACsec lab SecYs' cipher suite (with
	// encryption), e.g. "gcm-aes-xpn-128"; else gcm-aes-128.
	macsecCipher string
	// conntrackMax, if not 0, is the router's conntrack table limit.
	conntrackMax int
	// routerArgs are extra arguments of `gvrouter run` (tests: "-debug").
	routerArgs []string
	// hostTap, if set, adds the host: section (hostSection) to the
	// router's config: a TAP into the router namespace's kernel.
	hostTap bool
	// cfgEdits change the router's lab config before it is written
	// (tests: more status listeners).
	cfgEdits []func(*labConfig)
	// runTag, if set ("t<n>"), follows the PID in the run's prefix,
	// gvl<pid>t<n>: its namespaces and run directory are its own, so tests
	// in one process can run labs side by side.
	runTag string
	// ispRenew, if not 0, is the renewal time (T1, option 58) the ISP's
	// DHCP server gives the router's first lease, instead of dnsmasq's
	// half of the lease (60 s): a test that waits out a whole lease life
	// renews sooner.
	ispRenew time.Duration
}

const (
	// DefaultBenchSeconds is iperf3's -t: long enough that the 2 s omitted
	// by -O 2 (slow start, neighbour resolution) are a small share.
	DefaultBenchSeconds = 10
	// DefaultBenchRuns is the number of runs a figure is the median of:
	// odd, so the median is one measured run, and enough to drop one
	// outlier each side on a shared 2-core VM.
	DefaultBenchRuns = 5
	// benchOmitSeconds is iperf3's -O.
	benchOmitSeconds = 2
	// benchPort is the iperf3 server's port in the WAN host namespace.
	benchPort = 5201
	// routerStatusPort is the router's host-socket status listener inside
	// the router namespace (127.0.0.1 there); the lab uses it to see that
	// the router is up without crossing the router's own interfaces.
	routerStatusPort = 8080
	// routerStartTimeout bounds the wait for the router's first answer.
	routerStartTimeout = 20 * time.Second
	// stopGrace is how long a child gets after SIGTERM before SIGKILL.
	stopGrace = 5 * time.Second
)

// Port drivers of Options.Driver, as config ports[].driver names them.
const (
	DriverAFXDP    = "af_xdp"
	DriverAFPacket = "af_packet"
)

// Topologies of the lab (Options.Topology).
const (
	// TopologyVeth is LAN host — router (ports lan0, wan0; interfaces
	// lan, wan) — WAN host, two veth pairs: the bench's topology.
	TopologyVeth = "veth"
	// TopologyBCM47094 is the appliance: LAN host — emulated BCM53012
	// switch (lab/vswitch in its own namespace: LAN port untagged in VLAN
	// 1, WAN port untagged in VLAN 2, CPU port tagged in both) — router
	// port eth0 with interfaces eth0.1 (VLAN 1) and eth0.2 (VLAN 2) — WAN
	// host. The switch runs in the lab's own process.
	TopologyBCM47094 = "bcm47094"
)

// Interface and namespace names inside the lab.
const (
	lanPort = "lan0" // router namespace: veth towards the LAN host
	wanPort = "wan0" // router namespace: veth towards the WAN host
	hostIf  = "eth0" // LAN and WAN hosts: their veth

	cpuPort   = "eth0" // bcm47094: router namespace: veth towards the switch's CPU port
	swLANPort = "lan"  // bcm47094: switch namespace: veth towards the LAN host
	swWANPort = "wan"  // bcm47094: switch namespace: veth towards the WAN host
	swCPUPort = "cpu"  // bcm47094: switch namespace: veth towards the router
	lanVID    = 1      // bcm47094: the BCM53012's LAN VLAN
	wanVID    = 2      // bcm47094: the BCM53012's WAN VLAN
)

// forwardPort is the lab's port forward: wan:forwardPort → LAN
// host:forwardPort (TCP and UDP); IPv6 passes the firewall to the LAN
// host's forwardPort.
const forwardPort = 8080

// farNet is a prefix beyond the WAN host: the router routes it to the WAN
// host, which forwards it back, so a probe with TTL 2 expires at the WAN
// host and its Time Exceeded quotes the masqueraded packet (RFC 5508).
var farNet = netip.MustParsePrefix("198.18.77.0/24") // RFC 2544 benchmarking range

// Addresses of the lab. The /24 and /64 prefixes are private (RFC 1918,
// RFC 4193) and exist only inside the lab's namespaces.
var (
	lanRouter4 = netip.MustParsePrefix("10.77.1.1/24")
	lanRouter6 = netip.MustParsePrefix("fd77:1::1/64")
	lanHost4   = netip.MustParsePrefix("10.77.1.2/24")
	lanHost6   = netip.MustParsePrefix("fd77:1::2/64")
	wanRouter4 = netip.MustParsePrefix("10.77.2.1/24")
	wanRouter6 = netip.MustParsePrefix("fd77:2::1/64")
	wanHost4   = netip.MustParsePrefix("10.77.2.2/24")
	wanHost6   = netip.MustParsePrefix("fd77:2::2/64")
	// l2LAN and l2WAN put both hosts in one subnet for the layer-2 bench
	// modes (c) and (d).
	l2LAN = netip.MustParsePrefix("10.77.9.1/24")
	l2WAN = netip.MustParsePrefix("10.77.9.2/24")
)

func (o *Options) benchSeconds() int {
	if o.BenchSeconds > 0 {
		return o.BenchSeconds
	}
	return DefaultBenchSeconds
}

func (o *Options) benchRuns() int {
	if o.BenchRuns > 0 {
		return o.BenchRuns
	}
	return DefaultBenchRuns
}
