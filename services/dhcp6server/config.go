package dhcp6server

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Information Refresh Time bounds (RFC 8415 §7.6, §21.23).
const (
	// DefaultRefreshTime is IRT_DEFAULT, sent when Config.RefreshTime is
	// 0; a client that gets no option 32 uses it too.
	DefaultRefreshTime = 86400 * time.Second
	// MinRefreshTime is IRT_MINIMUM: the option "MUST NOT be smaller".
	MinRefreshTime = 600 * time.Second
	// MaxRefreshTime is 0xffffffff s, which means infinity (§7.7): the
	// client refreshes only on some other trigger.
	MaxRefreshTime = math.MaxUint32 * time.Second
)

// maxReply is the largest Reply the server builds: the IPv6 minimum link
// MTU (1280, RFC 8200 §5) less the IPv6 and UDP headers, so that no Reply
// ever needs fragmenting (RFC 8415 §18.3 points at the same section).
const maxReply = 1280 - 40 - 8

// Clock gives the server the time; tests use a fake one.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Config is one LAN interface's stateless DHCPv6 server.
type Config struct {
	// HWAddr is the interface's Ethernet address, e.g.
	// 02:00:00:00:01:01. The server's DUID is the DUID-LL made from it
	// (RFC 8415 §11.4): stable for the interface, with no state to keep.
	HWAddr net.HardwareAddr
	// Addr is the interface's link-local address, e.g. fe80::1: the
	// source of every Reply and, besides ff02::1:2, the one destination
	// served. Required.
	Addr netip.Addr
	// DNS is the DNS Recursive Name Server option (23, RFC 3646 §3),
	// e.g. [fd00:1::1]; nil sends none. Global or unique-local unicast
	// addresses: a link-local one would need a zone the option cannot
	// carry.
	DNS []netip.Addr
	// Domains is the Domain Search List option (24, RFC 3646 §4), e.g.
	// ["lan"]; nil sends none.
	Domains []string
	// RefreshTime is the Information Refresh Time option (32, RFC 8415
	// §21.23): how long a client may keep DNS and Domains before it asks
	// again. 0 = DefaultRefreshTime; else between MinRefreshTime and
	// MaxRefreshTime, whole seconds.
	RefreshTime time.Duration
	// Clock gives the time to the rate limiter; nil = the system clock.
	Clock Clock
	// Log receives the server's events; nil = none.
	Log *slog.Logger
}

// FieldError is one thing Validate found wrong, with the Config field it
// is about.
type FieldError struct {
	// Field is the Config field: "HWAddr", "Addr", "DNS", "Domains",
	// "RefreshTime", or "Options" for the Reply as a whole.
	Field string
	// Index is the element of a list field (DNS, Domains), -1 for others.
	Index int
	// Msg says what is wrong, e.g. "fe80::1 is link-local".
	Msg string
}

// Error implements error: "dhcp6server: DNS[1]: ...".
func (e *FieldError) Error() string {
	f := e.Field
	if e.Index >= 0 {
		f += fmt.Sprintf("[%d]", e.Index)
	}
	return "dhcp6server: " + f + ": " + e.Msg
}

// Validate checks the config and returns nil or every problem found,
// joined (errors.Join; each one a *FieldError): HWAddr is a 6-byte
// unicast Ethernet address; Addr is a link-local unicast IPv6 address; DNS
// are IPv6 unicast addresses beyond the link; Domains are DNS names;
// RefreshTime is 0 or whole seconds between MinRefreshTime and
// MaxRefreshTime; and the largest Reply fits in 1232 bytes.
func (c *Config) Validate() error {
	var errs []error
	add := func(field string, index int, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Index: index, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(c.HWAddr) != 6:
		add("HWAddr", -1, "%q is not a 6-byte Ethernet address", c.HWAddr.String())
	case c.HWAddr[0]&1 != 0 || [6]byte(c.HWAddr) == [6]byte{}:
		add("HWAddr", -1, "%v is not a unicast address", c.HWAddr)
	}
	if !c.Addr.Is6() || c.Addr.Is4In6() || !c.Addr.IsLinkLocalUnicast() {
		add("Addr", -1, "%v is not a link-local IPv6 address (fe80::/10); it is required", c.Addr)
	}
	for _, e := range checkOptions(c.DNS, c.Domains) {
		errs = append(errs, e)
	}
	switch rt := c.RefreshTime; {
	case rt == 0:
	case rt < MinRefreshTime || rt > MaxRefreshTime:
		add("RefreshTime", -1, "%v is not between %v (IRT_MINIMUM, RFC 8415 §21.23) and %v", rt, MinRefreshTime, MaxRefreshTime)
	case rt%time.Second != 0:
		add("RefreshTime", -1, "%v is not whole seconds", rt)
	}
	return errors.Join(errs...)
}

// checkOptions checks what SetOptions may change.
func checkOptions(dns []netip.Addr, domains []string) []*FieldError {
	var errs []*FieldError
	add := func(field string, index int, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Index: index, Msg: fmt.Sprintf(format, args...)})
	}
	for i, a := range dns {
		switch {
		case !a.Is6() || a.Is4In6():
			add("DNS", i, "%v is not an IPv6 address", a)
		case a.Zone() != "":
			add("DNS", i, "%v has a zone, which option 23 cannot carry", a)
		case a.IsLinkLocalUnicast():
			add("DNS", i, "%v is link-local: a client cannot tell which interface it is on", a)
		case a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			add("DNS", i, "%v is not a unicast address", a)
		}
	}
	for i, d := range domains {
		if err := checkDomain(d); err != nil {
			add("Domains", i, "%q: %v", d, err)
		}
	}
	if len(errs) == 0 {
		if n := replySize(len(dns), domains); n > maxReply {
			add("Options", -1, "the largest Reply would be %d bytes, more than %d: fewer DNS servers or domains", n, maxReply)
		}
	}
	return errs
}

// replySize is the size of the largest Reply: header, Server Identifier
// (DUID-LL), the longest Client Identifier, DNS, domains and refresh time.
func replySize(ndns int, domains []string) int {
	n := 4 + (4 + 10) + (4 + maxClientID) + (4 + 4)
	if ndns > 0 {
		n += 4 + 16*ndns
	}
	if len(domains) > 0 {
		n += 4
		for _, d := range domains {
			n += len(strings.TrimSuffix(d, ".")) + 2
		}
	}
	return n
}

// checkDomain accepts a DNS name of letters, digits and '-' in labels of
// 1 to 63 (RFC 1123 §2.1), at most 253 characters, one final dot allowed.
func checkDomain(d string) error {
	d = strings.TrimSuffix(d, ".")
	if len(d) == 0 || len(d) > 253 {
		return fmt.Errorf("length %d is not 1 to 253", len(d))
	}
	for l := range strings.SplitSeq(d, ".") {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("label %q is not 1 to 63 letters, digits and inner '-'", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("label %q is not 1 to 63 letters, digits and inner '-'", l)
			}
		}
	}
	return nil
}

// withDefaults returns c with its zero values replaced and its slices
// copied.
func (c Config) withDefaults() Config {
	if c.RefreshTime == 0 {
		c.RefreshTime = DefaultRefreshTime
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	c.HWAddr = append(net.HardwareAddr(nil), c.HWAddr...)
	c.Addr = c.Addr.WithZone("")
	return c
}
