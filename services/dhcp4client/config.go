package dhcp4client

import (
	"fmt"
	"strings"

	"github.com/gvrouter/gvrouter/services/svcconfig"
)

// MaxClientID bounds Config.ClientID. RFC 2132 §9.14 allows an option of
// 255 bytes, but identifiers in use are a type byte and a MAC or a DUID
// (RFC 4361 §6.1: at most 1+4+130); 64 leaves room and keeps a typo of
// pasted hex from going out.
const MaxClientID = 64

// Validate checks the settings (not Transport and HWAddr, which New
// checks) and returns nil or every problem found, joined, each one a
// *svcconfig.FieldError naming the key of the router's dhcp: mapping
// ("client_id", "hostname").
func (c *Config) Validate() error {
	l := svcconfig.NewList("dhcp4client")
	if n := len(c.ClientID); n != 0 && (n < 2 || n > MaxClientID) {
		l.Add("client_id", "%d bytes, want 2..%d (RFC 2132 §9.14)", n, MaxClientID)
	}
	if c.Hostname != "" {
		if err := checkHostname(c.Hostname); err != nil {
			l.Add("hostname", "%v", err)
		}
	}
	if c.MinMTU < 0 {
		l.Add("min_mtu", "%d is negative", c.MinMTU)
	}
	if c.DeclineWait < 0 {
		l.Add("decline_wait", "%v is negative", c.DeclineWait)
	}
	if c.RebootTimeout < 0 {
		l.Add("reboot_timeout", "%v is negative", c.RebootTimeout)
	}
	return l.Err()
}

// checkHostname checks an RFC 1123 §2.1 host name of dot-separated
// labels, as option 12 carries it (RFC 2132 §3.14).
func checkHostname(s string) error {
	if len(s) > 253 {
		return fmt.Errorf("%q: want a host name of 1..253 characters", s)
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q: labels are 1..63 letters, digits or inner hyphens (RFC 1123)", s)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("%q: %q is not allowed in a host name (letters, digits, hyphens; RFC 1123)", s, r)
			}
		}
	}
	return nil
}
