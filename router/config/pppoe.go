package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gvrouter/gvrouter/pppoe"
)

// AddressPPPoE among a wan interface's addresses makes it a PPPoE client
// (RFC 2516): the interface's address, default route and DNS servers
// come from IPCP, and its pppoe: mapping says how to log in.
const AddressPPPoE = "pppoe"

// PPPoE is a wan interface's PPPoE client (addresses: [pppoe] with
// pppoe: holding these keys). The words follow pppd's: user is "user",
// service and ac are rp-pppoe's "rp_pppoe_service" and "rp_pppoe_ac",
// lcp_echo is "lcp-echo-interval" and "lcp-echo-failure".
type PPPoE struct {
	// User is the PPP peer name for PAP and CHAP, e.g.
	// "alice@isp.example", 1..255 bytes.
	User string
	// PasswordFile holds the password on its first line, e.g.
	// "/etc/gvrouter/pppoe.password"; mode 0600 or stricter.
	PasswordFile string
	// Credentials are User with the password read from PasswordFile;
	// the password never prints.
	Credentials pppoe.Credentials
	// Service is the Service-Name to ask for, e.g. "internet"; "" takes
	// any service.
	Service string
	// AC, if set, accepts offers from that access concentrator only,
	// e.g. "bras-7".
	AC string
	// MTU is the PPP link's MTU, 1280..1500, e.g. 1492 (the default
	// when 0). Above 1492 asks for RFC 4638 PPP-Max-Payload, which needs
	// a WAN port MTU of MTU+8 and an AC that agrees; without it the
	// link stays at 1492.
	MTU int
	// EchoInterval is the LCP echo period, e.g. 10s; 0 = pppoe's
	// default (DefaultEchoInterval).
	EchoInterval time.Duration
	// EchoFailures is how many unanswered echoes in a row end the
	// session, e.g. 3; 0 = pppoe's default (DefaultEchoFailures).
	EchoFailures int
	// Pos is where "pppoe" is written among the addresses, or where
	// the pppoe: key is when the address is missing.
	Pos Pos

	src src
}

// Limits of pppoe: keys.
const (
	// MinPPPoEMTU is the smallest PPP link MTU: IPv6's minimum (RFC 8200
	// §5), so IPv6CP can run on any accepted link.
	MinPPPoEMTU = MinMTUIPv6
	// MaxPPPoEMTU is the largest: a 1508-byte baby-jumbo Ethernet
	// payload less the 8-byte PPPoE and PPP headers (RFC 4638).
	MaxPPPoEMTU = pppoe.MaxMRU
	// MinLCPEchoInterval is the shortest LCP echo period: faster echoes
	// only add load on the AC, and a lost frame or two would already
	// drop the session.
	MinLCPEchoInterval = time.Second
	// MaxLCPEchoInterval is the longest: beyond it a dead AC goes
	// unnoticed for longer than any NAT mapping upstream lives.
	MaxLCPEchoInterval = 5 * time.Minute
	// MaxLCPEchoFailures bounds the unanswered echoes: 30 is pppd
	// setups' far end; more would hold a dead session for minutes.
	MaxLCPEchoFailures = 30
)

var (
	pppoeKeys   = []string{"user", "password_file", "service", "ac", "mtu", "lcp_echo"}
	lcpEchoKeys = []string{"interval", "failures"}
)

// pppoeBlock decodes an interface's pppoe: mapping into ifc.PPPoE, which
// the addresses key may have created. The password file is read here;
// no message quotes its content.
func (d *decoder) pppoeBlock(ifc *Interface, e entry, what string) {
	what += ": pppoe"
	ifc.src.set("pppoe", posOf(e.key))
	if ifc.PPPoE == nil {
		ifc.pppoeOptions = true
		ifc.PPPoE = &PPPoE{Pos: posOf(e.key)}
	}
	p := ifc.PPPoE
	p.src.set("pppoe", posOf(e.key))
	if isNull(e.val) || !d.object(e.val, what) {
		d.errorf(e.val, "%s: want a mapping with user and password_file", what)
		return
	}
	m := d.mapping(e.val, what, pppoeKeys, nil)
	if d.strKey(m, "user", what, &p.src, &p.User) {
		if p.User == "" || len(p.User) > 255 {
			d.errorf(m["user"].val, "%s: user: want 1..255 bytes (RFC 1334 §2.2.1), got %d", what, len(p.User))
			p.src.markBad("user")
		}
	} else if _, ok := m["user"]; !ok {
		d.errorf(e.val, "%s: user is required (the PPP peer name the ISP gave)", what)
	}
	if d.strKey(m, "password_file", what, &p.src, &p.PasswordFile) {
		pw, err := readPasswordFile(p.PasswordFile)
		switch {
		case err != nil:
			d.errorf(m["password_file"].val, "%s: password_file: %v", what, err)
		case !p.src.bad["user"] && p.User != "":
			p.Credentials = pppoe.NewCredentials(p.User, pw)
		}
	} else if _, ok := m["password_file"]; !ok {
		d.errorf(e.val, "%s: password_file is required (a file holding the password, mode 0600)", what)
	}
	if d.strKey(m, "service", what, &p.src, &p.Service) && len(p.Service) > 255 {
		d.errorf(m["service"].val, "%s: service: %d bytes, longer than a PPPoE tag's 255", what, len(p.Service))
	}
	if d.strKey(m, "ac", what, &p.src, &p.AC) && len(p.AC) > 255 {
		d.errorf(m["ac"].val, "%s: ac: %d bytes, longer than a PPPoE tag's 255", what, len(p.AC))
	}
	if d.intKey(m, "mtu", what, &p.src, &p.MTU) && (p.MTU < MinPPPoEMTU || p.MTU > MaxPPPoEMTU) {
		d.errorf(m["mtu"].val, "%s: mtu %d out of range %d..%d (above %d asks for RFC 4638)", what, p.MTU, MinPPPoEMTU, MaxPPPoEMTU, pppoe.DefaultMRU)
	}
	if le, ok := m["lcp_echo"]; ok {
		d.lcpEcho(p, le, what)
	}
}

// lcpEcho decodes pppoe: lcp_echo: {interval, failures}.
func (d *decoder) lcpEcho(p *PPPoE, e entry, what string) {
	what += ": lcp_echo"
	if !d.object(e.val, what) {
		return
	}
	m := d.mapping(e.val, what, lcpEchoKeys, nil)
	if ie, ok := m["interval"]; ok {
		p.src.set("interval", posOf(ie.val))
		if v, ok := d.duration(ie, what); ok {
			if v < MinLCPEchoInterval || v > MaxLCPEchoInterval {
				d.errorf(ie.val, "%s: interval %s out of range %s..%s", what, fmtDuration(v), fmtDuration(MinLCPEchoInterval), fmtDuration(MaxLCPEchoInterval))
			}
			p.EchoInterval = v
		}
	}
	if d.intKey(m, "failures", what, &p.src, &p.EchoFailures) && (p.EchoFailures < 1 || p.EchoFailures > MaxLCPEchoFailures) {
		d.errorf(m["failures"].val, "%s: failures %d out of range 1..%d", what, p.EchoFailures, MaxLCPEchoFailures)
	}
}

// readPasswordFile reads the password from the first line of path, which
// must be a regular file with mode 0600 or stricter. Errors never quote
// the file's content.
func readPasswordFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&^MaxKeyFileMode != 0 {
		return "", fmt.Errorf("%s has mode %04o; a password file must be readable by its owner only (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	defer clear(b)
	line, rest, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if strings.TrimSpace(rest) != "" {
		return "", fmt.Errorf("%s: want the password alone on one line, found more lines", path)
	}
	if line == "" || len(line) > 255 {
		return "", fmt.Errorf("%s: want a password of 1..255 bytes on the first line (RFC 1334 §2.2.1), got %d", path, len(line))
	}
	return line, nil
}

// LinkMTU returns the MTU the PPP link asks for: MTU, or 1492.
func (p *PPPoE) LinkMTU() int {
	if p.MTU == 0 {
		return pppoe.DefaultMRU
	}
	return p.MTU
}

// Session returns the pppoe.Config the interface's session runs with,
// less what only the runtime knows (Local MAC, VLAN, OnChange, Rand).
func (p *PPPoE) Session() pppoe.Config {
	c := pppoe.Config{
		Service:      p.Service,
		ACName:       p.AC,
		Credentials:  p.Credentials,
		EchoInterval: p.EchoInterval,
		EchoFailures: p.EchoFailures,
	}
	if mtu := p.LinkMTU(); mtu > pppoe.DefaultMRU {
		c.MaxPayload = uint16(mtu)
	}
	return c
}

// validatePPPoE checks an interface's pppoe against the rest of it.
func (c *Config) validatePPPoE(l *errorList, ifc *Interface, what string) {
	p := ifc.PPPoE
	if p == nil {
		return
	}
	if ifc.pppoeOptions {
		l.add(ifc.src.at("pppoe", ifc.Pos), "%s: pppoe: options given but addresses has no %q", what, AddressPPPoE)
		return
	}
	if _, ok := ifc.src.pos["pppoe"]; !ok {
		l.add(p.Pos, "%s: addresses: %q needs a pppoe: mapping with user and password_file", what, AddressPPPoE)
	}
	if ifc.Role != RoleWAN {
		l.add(p.Pos, "%s: addresses: %q is for a wan interface, and role is %q", what, AddressPPPoE, ifc.Role)
	}
	if ifc.Host {
		l.add(p.Pos, "%s: the host interface cannot use pppoe", what)
	}
	if ifc.DHCP != nil && !ifc.dhcpOptions {
		l.add(ifc.DHCP.Pos, "%s: addresses: %q and %q cannot be combined: IPCP gives the PPPoE link its address", what, AddressDHCP, AddressPPPoE)
	}
	if len(ifc.Addresses) > 0 {
		l.add(ifc.src.at("addresses.0", ifc.Pos), "%s: addresses: %s beside %q: IPCP gives the PPPoE link its address; put other addresses on an interface of their own", what, ifc.Addresses[0], AddressPPPoE)
	}
	if ifc.MTU != 0 {
		l.add(ifc.src.at("mtu", ifc.Pos), "%s: mtu: the PPPoE link's MTU is pppoe: {mtu: N}", what)
	}
	// pppoe's own rule is the last word: a backstop should the limits
	// above and the package's drift apart. Local is the runtime's; a
	// stand-in unicast MAC keeps it out of the check.
	sc := p.Session()
	sc.Local = [6]byte{0x02}
	if err := sc.Validate(); err != nil && !p.src.bad["user"] && p.Credentials.Valid() {
		l.add(p.Pos, "%s: %v", what, err)
	}
	if pt := c.Port(ifc.Port); pt != nil && pt.MTU != 0 && p.LinkMTU()+pppoeOverhead > pt.MTU {
		l.add(p.src.at("mtu", p.Pos), "%s: pppoe: mtu %d needs port %q's mtu %d or more (8 bytes of PPPoE and PPP headers), and it is %d%s", what, p.LinkMTU(), pt.Name, p.LinkMTU()+pppoeOverhead, pt.MTU, atLine(pt.Pos))
	}
}

// pppoeOverhead is the PPPoE session header (6) and PPP protocol field
// (2) each data frame carries (RFC 2516 §4).
const pppoeOverhead = 8

// Equal reports whether p and o configure the same session, password
// included; positions are ignored. Either may be nil.
func (p *PPPoE) Equal(o *PPPoE) bool {
	if p == nil || o == nil {
		return p == o
	}
	return p.User == o.User && p.PasswordFile == o.PasswordFile && p.Credentials == o.Credentials &&
		p.Service == o.Service && p.AC == o.AC && p.MTU == o.MTU &&
		p.EchoInterval == o.EchoInterval && p.EchoFailures == o.EchoFailures
}
