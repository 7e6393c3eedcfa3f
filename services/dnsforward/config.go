package dnsforward

import (
	"context"
	crand "crypto/rand"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/gvrouter/gvrouter/services/svcconfig"
)

// Defaults for the zero values of Config.
const (
	// DefaultMaxEntries is the cache size in answers when
	// Config.MaxEntries is 0 (dnsmasq's cache-size on OpenWrt is 1000;
	// the router's config default is 10,000).
	DefaultMaxEntries = 10000
	// DefaultMaxBytes bounds the cache's memory when Config.MaxBytes is
	// 0: 10,000 answers of about 400 bytes each, with room to spare.
	DefaultMaxBytes = 8 << 20
	// DefaultMaxTTL caps the TTL of cached answers when Config.MaxTTL is
	// 0: a day, as the router's config does, so that a changed record is
	// seen within a day whatever its TTL says.
	DefaultMaxTTL = 24 * time.Hour
	// DefaultNegativeMaxTTL caps the TTL of cached negative answers when
	// Config.NegativeMaxTTL is 0: RFC 2308 §5 suggests one to three hours.
	DefaultNegativeMaxTTL = 3 * time.Hour
	// DefaultMaxInFlight bounds the distinct questions waiting for an
	// upstream when Config.MaxInFlight is 0: dnsmasq's dns-forward-max is
	// 150; each costs a goroutine and a socket.
	DefaultMaxInFlight = 150
	// DefaultTimeout is how long one upstream attempt waits for its
	// answer when Config.Timeout is 0: a resolver that has not answered
	// in 2 s is usually recursing slowly, and the client retries after
	// about 5 s (dig's default), so two attempts fit before it gives up.
	DefaultTimeout = 2 * time.Second
	// DefaultMaxTCPConns bounds the client TCP connections served at once
	// (per ServeTCP) when Config.MaxTCPConns is 0: TCP is the fallback
	// for truncated answers, so few clients hold one.
	DefaultMaxTCPConns = 64
	// DefaultTCPIdleTimeout closes a client TCP connection that sent no
	// query for this long when Config.TCPIdleTimeout is 0 (RFC 7766
	// §6.2.3 asks for a few seconds when under no EDNS keepalive).
	DefaultTCPIdleTimeout = 10 * time.Second
	// DefaultLocalTTL is the TTL of local answers (hosts, their PTRs and
	// the local NXDOMAINs) when Config.LocalTTL is 0: a lease's address
	// may change at its renewal, so clients should not keep it long.
	DefaultLocalTTL = 60 * time.Second
)

// Tunables.
const (
	// UpstreamUDPSize is the EDNS0 UDP payload size advertised to the
	// upstream and the largest UDP answer sent to a client: the DNS flag
	// day 2020 value, which fits the IPv6 minimum MTU without
	// fragmentation (RFC 9715 §3.2).
	UpstreamUDPSize = 1232
	// maxAttempts bounds the upstream attempts for one question: each
	// upstream once in turn, at most three, and at least two so that a
	// single upstream gets a retry after a lost datagram.
	maxAttempts = 3
	// maxWaiters bounds the clients waiting for one in-flight question;
	// more are dropped (counted as InFlightDrops): a client resending
	// its question joins again anyway.
	maxWaiters = 64
	// maxQuerySize is the largest client query read over UDP or TCP: a
	// question is at most 255+4 bytes, an OPT record with a cookie and a
	// padding option well under 1 KiB; anything larger is no query we
	// would answer, and a TCP connection announcing one is closed.
	maxQuerySize = 4096
	// portTries is how many random source ports an upstream attempt tries
	// before giving up: collisions with the NAT engine's flows are rare
	// among 64,512 ports.
	portTries = 8
	// minPort is the lowest random source port (RFC 6056 §3.2: 1024 to
	// 65535 are the ephemeral ports).
	minPort = 1024
)

// Clock gives the forwarder the time; tests use a fake one.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Config is the forwarder's configuration. Only the Dial functions are
// required.
type Config struct {
	// Upstreams are the recursive resolvers asked, in order of preference,
	// e.g. [192.0.2.53:53]; SetUpstreams replaces them at run time (the
	// router feeds them from the WAN DHCP lease). None: every question
	// that is not local or cached gets SERVFAIL.
	Upstreams []netip.AddrPort
	// Domain is the local domain, e.g. "lan": HOST.Domain names are
	// answered from SetHosts and never forwarded. "" = no local domain.
	Domain string
	// LocalPrefixes are extra address ranges, e.g. a delegated
	// 2001:db8:1::/48, whose reverse names (in-addr.arpa, ip6.arpa) are
	// answered from SetHosts only (NXDOMAIN for unknown addresses), never
	// forwarded.
	LocalPrefixes []netip.Prefix
	// ForwardPrivateReverse forwards reverse lookups in the private and
	// special ranges of RFC 6303 (10/8, 172.16/12, 192.168/16, 127/8,
	// 169.254/16, fc00::/7, fe80::/10, ::1, ...). False (the default)
	// answers them locally, as dnsmasq's bogus-priv does, so that the
	// LAN's addresses never leak to the ISP.
	ForwardPrivateReverse bool

	// DialUDP opens a UDP socket from localPort (picked at random by the
	// forwarder per query, RFC 5452 §9.2) to server. The router dials
	// through its netstack. If the returned net.Conn is also a
	// net.PacketConn, the forwarder reads with ReadFrom and checks each
	// answer's source address.
	DialUDP func(ctx context.Context, server netip.AddrPort, localPort uint16) (net.Conn, error)
	// DialTCP opens a TCP connection to server, for answers that came
	// truncated over UDP.
	DialTCP func(ctx context.Context, server netip.AddrPort) (net.Conn, error)
	// ReservePort, if set, reserves a local port (proto 17 = UDP) before
	// DialUDP uses it, e.g. in the router's NAT engine so that no
	// translated flow takes it; ok false means the port is taken, and
	// the forwarder picks another (counted as PortCollisions). release
	// is called when the query is done.
	ReservePort func(proto uint8, port uint16) (release func(), ok bool)

	// ListenUDP and ListenTCP open the client-side sockets of one
	// address, e.g. 192.168.1.1:53, for SetListen: the router opens them
	// in its netstack. Both or neither; unset, the caller serves its own
	// sockets with Serve and ServeTCP.
	ListenUDP func(addr netip.AddrPort) (net.PacketConn, error)
	ListenTCP func(addr netip.AddrPort) (net.Listener, error)

	// MaxEntries bounds the cached answers; 0 = DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds the cache's memory (messages, keys and bookkeeping);
	// 0 = DefaultMaxBytes.
	MaxBytes int
	// MinTTL raises shorter positive TTLs, e.g. 30 s; 0 = none. A TTL of
	// 0 is never raised: such an answer is not cached (RFC 1035 §3.2.1).
	MinTTL time.Duration
	// MaxTTL caps TTLs; 0 = DefaultMaxTTL.
	MaxTTL time.Duration
	// NegativeMaxTTL caps the TTL of negative answers (RFC 2308 §5);
	// 0 = DefaultNegativeMaxTTL.
	NegativeMaxTTL time.Duration
	// LocalTTL is the TTL of local answers; 0 = DefaultLocalTTL.
	LocalTTL time.Duration

	// MaxInFlight bounds the distinct questions waiting for an upstream;
	// 0 = DefaultMaxInFlight.
	MaxInFlight int
	// Timeout is how long one upstream attempt waits; 0 = DefaultTimeout.
	Timeout time.Duration
	// MaxTCPConns bounds the client TCP connections per ServeTCP; 0 =
	// DefaultMaxTCPConns.
	MaxTCPConns int
	// TCPIdleTimeout closes idle client TCP connections; 0 =
	// DefaultTCPIdleTimeout.
	TCPIdleTimeout time.Duration
	// Use0x20 sends each upstream question with its letters in random
	// case and accepts only answers that echo it exactly
	// (draft-vixie-dnsext-dns0x20), for more entropy against spoofing.
	// Off by default: some resolvers do not echo the case.
	Use0x20 bool

	// Clock gives the time; nil = the system clock.
	Clock Clock
	// Rand picks upstream IDs, source ports and 0x20 case; nil = a
	// ChaCha8 generator seeded from crypto/rand, as RFC 5452 §9.2 needs
	// unpredictable values. The forwarder locks around it.
	Rand *rand.Rand
	// Log receives the forwarder's events; nil = none.
	Log *slog.Logger
}

// Bounds of the cache settings.
const (
	// MaxMaxEntries bounds Config.MaxEntries: a million answers is
	// hundreds of megabytes, beyond any board.
	MaxMaxEntries = 1 << 20
	// MaxMaxTTL bounds Config.MaxTTL: RFC 8767 §5 caps stale data at 7
	// days, and no cache should hold an answer longer.
	MaxMaxTTL = 7 * 24 * time.Hour
)

// Validate checks the settings (not the Dial and Listen funcs, which New
// checks) and returns nil or every problem found, joined, each one a
// *svcconfig.FieldError naming the config key (the YAML key of the
// router's dns: section, e.g. "cache.max_ttl" or "upstreams.1").
func (c *Config) Validate() error {
	l := svcconfig.NewList("dnsforward")
	if c.Domain != "" {
		if _, ok := dns.IsDomainName(c.Domain); !ok || strings.HasPrefix(c.Domain, ".") || c.Domain == "." {
			l.Add("domain", "%q is not a domain name", c.Domain)
		}
	}
	for i, u := range c.Upstreams {
		if !u.IsValid() || u.Port() == 0 {
			l.Add(svcconfig.Key("upstreams", i), "%v is not an address and port", u)
		}
	}
	for i, p := range c.LocalPrefixes {
		if !p.IsValid() {
			l.Add(svcconfig.Key("local_prefixes", i), "%v is not a prefix", p)
		}
	}
	if c.MaxEntries < 0 || c.MaxEntries > MaxMaxEntries {
		l.Add("cache.size", "%d out of range 0..%d", c.MaxEntries, MaxMaxEntries)
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"max_bytes", c.MaxBytes}, {"max_in_flight", c.MaxInFlight}, {"max_tcp_conns", c.MaxTCPConns}} {
		if f.v < 0 {
			l.Add(f.key, "%d is negative", f.v)
		}
	}
	for _, f := range []struct {
		key string
		v   time.Duration
	}{{"cache.min_ttl", c.MinTTL}, {"cache.max_ttl", c.MaxTTL}, {"negative_max_ttl", c.NegativeMaxTTL}, {"local_ttl", c.LocalTTL},
		{"timeout", c.Timeout}, {"tcp_idle_timeout", c.TCPIdleTimeout}} {
		if f.v < 0 {
			l.Add(f.key, "%s is negative", svcconfig.Duration(f.v))
		}
	}
	if c.MaxTTL > MaxMaxTTL {
		l.Add("cache.max_ttl", "%s is above %s", svcconfig.Duration(c.MaxTTL), svcconfig.Duration(MaxMaxTTL))
	}
	if c.MaxTTL > 0 && c.MinTTL > c.MaxTTL {
		l.Add("cache.min_ttl", "%s is above max_ttl %s", svcconfig.Duration(c.MinTTL), svcconfig.Duration(c.MaxTTL))
	}
	return l.Err()
}

// checkFuncs checks what New needs beyond Validate: the Dial funcs, and
// the Listen funcs both or neither.
func (c *Config) checkFuncs() error {
	var errs []error
	if c.DialUDP == nil {
		errs = append(errs, errors.New("dnsforward: DialUDP is required"))
	}
	if c.DialTCP == nil {
		errs = append(errs, errors.New("dnsforward: DialTCP is required"))
	}
	if (c.ListenUDP == nil) != (c.ListenTCP == nil) {
		errs = append(errs, errors.New("dnsforward: ListenUDP and ListenTCP are set together"))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with its zero values replaced.
func (c Config) withDefaults() Config {
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = DefaultMaxTTL
	}
	if c.NegativeMaxTTL == 0 {
		c.NegativeMaxTTL = DefaultNegativeMaxTTL
	}
	if c.LocalTTL == 0 {
		c.LocalTTL = DefaultLocalTTL
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxTCPConns == 0 {
		c.MaxTCPConns = DefaultMaxTCPConns
	}
	if c.TCPIdleTimeout == 0 {
		c.TCPIdleTimeout = DefaultTCPIdleTimeout
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Rand == nil {
		var seed [32]byte
		crand.Read(seed[:])
		c.Rand = rand.New(rand.NewChaCha8(seed))
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.Domain = strings.TrimSuffix(c.Domain, ".")
	return c
}
