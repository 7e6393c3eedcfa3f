package config

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

var (
	hardwareNames = []string{HardwareBCM47094, HardwareIXGBE, HardwareGeneric}
	driverNames   = []string{DriverAuto, DriverAFXDP, DriverAFPacket}
	txNames       = []string{TxSendmmsg, TxRing, TxRingBypass}
	aqmNames      = []string{AQMOn, AQMOff}
	roleNames     = []string{RoleLAN, RoleWAN}
)

// Validate checks everything about c that does not need the YAML text:
// names, ranges, references between sections and address overlaps. It
// returns every problem at once, joined with errors.Join; problems name
// the config line when c came from Parse. Parse already calls it.
func (c *Config) Validate() error {
	l := &errorList{file: c.File}
	c.validate(l)
	return l.err()
}

// checkName checks a port or interface name as Linux checks netdev names
// (dev_valid_name): 1..15 bytes, not "." or "..", no '/', ':' or space. NIC
// names follow the same rule so that "name:port" stays unambiguous.
func checkName(s string) error {
	const ifNameSize = 16 // IFNAMSIZ, including the terminating NUL
	switch {
	case s == "":
		return errors.New("empty name")
	case len(s) >= ifNameSize:
		return fmt.Errorf("name %q is longer than %d bytes", s, ifNameSize-1)
	case s == "." || s == "..":
		return fmt.Errorf("name %q is not allowed", s)
	case strings.ContainsAny(s, "/: \t\n\r\v\f\x00"):
		return fmt.Errorf("name %q must not contain '/', ':' or white space", s)
	}
	return nil
}

func (c *Config) validate(l *errorList) {
	top := c.src.at("", Pos{})
	if !c.src.bad["hardware"] && c.Hardware != "" && !contains(hardwareNames, c.Hardware) {
		l.add(c.src.at("hardware", top), "hardware: unknown hardware profile %q%s", c.Hardware, hint(c.Hardware, hardwareNames))
	}
	c.validatePorts(l, top)
	c.validateInterfaces(l, top)
	c.validateRoutes(l)
	c.validateNAT(l)
	c.validateStatus(l)
	c.validateMACsec(l)
	c.validateServices(l)
	c.validateSQM(l)
	c.validatePortMapping(l)
}

// hint returns "; did you mean X?" for a likely typo of one of known,
// else the list of known names, e.g. "; want one of: lan, wan".
func hint(s string, known []string) string {
	if m := suggest(s, known); m != "" {
		return fmt.Sprintf("; did you mean %q?", m)
	}
	if len(known) == 0 {
		return ""
	}
	// The names may be the config's own (interfaces), so each is cut like
	// a value and a long list is shortened.
	const maxHint = 10
	names := make([]string, 0, min(len(known), maxHint))
	for _, k := range known[:min(len(known), maxHint)] {
		names = append(names, echo(k))
	}
	if len(known) > maxHint {
		names = append(names, fmt.Sprintf("… (%d in all)", len(known)))
	}
	return "; want one of: " + strings.Join(names, ", ")
}

func (c *Config) validatePorts(l *errorList, top Pos) {
	if len(c.Ports) == 0 && !c.src.bad["ports"] {
		l.add(c.src.at("ports", top), "ports: at least one port is required")
	}
	seen := make(map[string]*Port)
	for i := range c.Ports {
		p := &c.Ports[i]
		what := portWhat(p.Name)
		if !p.src.bad["name"] {
			if p.Name == "" {
				l.add(p.Pos, "port: name is required")
			} else if err := checkName(p.Name); err != nil {
				l.add(p.src.at("name", p.Pos), "port: %v", err)
			} else if prev, ok := seen[p.Name]; ok {
				l.add(p.src.at("name", p.Pos), "port %q is defined twice%s", p.Name, firstAt(prev.Pos))
			} else {
				seen[p.Name] = p
			}
		}
		if p.Queues < 0 || p.Queues > MaxQueues {
			l.add(p.src.at("queues", p.Pos), "%s: queues %d out of range: want 1..%d, or 0 for the hardware profile's default", what, p.Queues, MaxQueues)
		}
		if p.MTU != 0 && (p.MTU < MinMTU || p.MTU > MaxMTU) {
			l.add(p.src.at("mtu", p.Pos), "%s: mtu %d out of range: want %d..%d, or 0 to keep the kernel's", what, p.MTU, MinMTU, MaxMTU)
		}
		if !p.src.bad["driver"] && p.Driver != "" && !contains(driverNames, p.Driver) {
			l.add(p.src.at("driver", p.Pos), "%s: unknown driver %q%s", what, p.Driver, hint(p.Driver, driverNames))
		}
		if !p.src.bad["tx"] && p.Tx != "" && !contains(txNames, p.Tx) {
			l.add(p.src.at("tx", p.Pos), "%s: unknown tx %q%s", what, p.Tx, hint(p.Tx, txNames))
		}
		if !p.src.bad["aqm"] && p.AQM != "" && !contains(aqmNames, p.AQM) {
			l.add(p.src.at("aqm", p.Pos), "%s: unknown aqm %q%s", what, p.AQM, hint(p.AQM, aqmNames))
		}
	}
}

func firstAt(p Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf(" (first at line %d)", p.Line)
}

func atLine(p Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf(" (line %d)", p.Line)
}

func (c *Config) validateInterfaces(l *errorList, top Pos) {
	if len(c.Interfaces) == 0 && !c.src.bad["interfaces"] {
		l.add(c.src.at("interfaces", top), "interfaces: at least one interface is required")
	}
	names := make(map[string]*Interface)
	// onPort maps port and VLAN ("eth0 [1]") to the interface there.
	onPort := make(map[string]*Interface)
	type owned struct {
		p   netip.Prefix
		ifc *Interface
	}
	var addrs []owned
	var portNames []string
	for _, p := range c.Ports {
		if p.Name != "" && !contains(portNames, p.Name) {
			portNames = append(portNames, p.Name)
		}
	}
	for i := range c.Interfaces {
		ifc := &c.Interfaces[i]
		what := interfaceWhat(ifc.Name)
		if !ifc.src.bad["name"] {
			if ifc.Name == "" {
				l.add(ifc.Pos, "interface: name is required")
			} else if err := checkName(ifc.Name); err != nil {
				l.add(ifc.src.at("name", ifc.Pos), "interface: %v", err)
			} else if prev, ok := names[ifc.Name]; ok {
				l.add(ifc.src.at("name", ifc.Pos), "interface %q is defined twice%s", ifc.Name, firstAt(prev.Pos))
			} else {
				names[ifc.Name] = ifc
			}
		}

		port := c.Port(ifc.Port)
		if !ifc.src.bad["port"] && (ifc.WireGuard == nil || ifc.Port != "") { // a tunnel has no port
			switch {
			case ifc.Port == "":
				l.add(ifc.Pos, "%s: port is required", what)
			case port == nil:
				l.add(ifc.src.at("port", ifc.Pos), "%s: unknown port %q%s", what, ifc.Port, hint(ifc.Port, portNames))
			case !ifc.src.bad["vlan"]:
				key := fmt.Sprint(ifc.Port, " ", ifc.VLAN, " ", ifc.VLANProtocol == VLANProtocol8021AD)
				if prev, ok := onPort[key]; ok {
					if len(ifc.VLAN) == 0 {
						l.add(ifc.src.at("port", ifc.Pos), "%s: port %q already carries untagged interface %q%s; give one of them a vlan",
							what, ifc.Port, prev.Name, atLine(prev.Pos))
					} else {
						l.add(ifc.src.at("vlan", ifc.Pos), "%s: vlan %v on port %q is already interface %q's%s",
							what, vlanString(ifc.VLAN), ifc.Port, prev.Name, atLine(prev.Pos))
					}
				} else {
					onPort[key] = ifc
				}
			}
		}
		c.validateVLAN(l, ifc, what)
		c.validateGRO(l, ifc, what)

		if !ifc.src.bad["role"] {
			switch {
			case ifc.Role == "":
				l.add(ifc.Pos, "%s: role is required (lan or wan)", what)
			case !contains(roleNames, ifc.Role):
				l.add(ifc.src.at("role", ifc.Pos), "%s: unknown role %q%s", what, ifc.Role, hint(ifc.Role, roleNames))
			}
		}

		mtuOK := true
		if ifc.MTU != 0 && (ifc.MTU < MinMTU || ifc.MTU > MaxMTU) {
			l.add(ifc.src.at("mtu", ifc.Pos), "%s: mtu %d out of range: want %d..%d, or 0 for the port's", what, ifc.MTU, MinMTU, MaxMTU)
			mtuOK = false
		}
		if mtuOK && ifc.MTU != 0 && port != nil && port.MTU >= MinMTU && ifc.MTU > port.MTU {
			l.add(ifc.src.at("mtu", ifc.Pos), "%s: mtu %d is larger than port %q's mtu %d", what, ifc.MTU, port.Name, port.MTU)
		}
		hasV6 := false
		for _, a := range ifc.Addresses {
			hasV6 = hasV6 || a.Addr().Is6()
		}
		if hasV6 && mtuOK {
			switch {
			case ifc.MTU != 0 && ifc.MTU < MinMTUIPv6:
				l.add(ifc.src.at("mtu", ifc.Pos), "%s: mtu %d is below %d, the IPv6 minimum, and the interface has IPv6 addresses", what, ifc.MTU, MinMTUIPv6)
			case ifc.MTU == 0 && port != nil && port.MTU >= MinMTU && port.MTU < MinMTUIPv6:
				l.add(ifc.src.at("addresses", ifc.Pos), "%s: has IPv6 addresses but port %q's mtu %d is below %d, the IPv6 minimum", what, port.Name, port.MTU, MinMTUIPv6)
			}
		}

		for j, a := range ifc.Addresses {
			at := ifc.src.at(fmt.Sprintf("addresses.%d", j), ifc.src.at("addresses", ifc.Pos))
			if err := checkAddress(a); err != nil {
				l.add(at, "%s: addresses: %v", what, err)
				continue
			}
			dup := false
			for _, b := range ifc.Addresses[:j] {
				if b.Addr() == a.Addr() {
					l.add(at, "%s: address %s is listed twice", what, a.Addr())
					dup = true
					break
				}
			}
			if dup {
				continue
			}
			for _, o := range addrs {
				if o.ifc != ifc && o.p.Overlaps(a) {
					l.add(at, "%s: address %s overlaps %s of interface %q%s", what, a, o.p, o.ifc.Name, atLine(o.ifc.Pos))
					break
				}
			}
			addrs = append(addrs, owned{a, ifc})
		}
	}
}

// checkAddress checks that p can be assigned to an interface.
func checkAddress(p netip.Prefix) error {
	a := p.Addr()
	switch {
	case !p.IsValid():
		return errors.New("invalid address")
	case a.Zone() != "":
		return fmt.Errorf("%s: zones are not allowed", p)
	case a.Is4In6():
		return fmt.Errorf("%s: IPv4-mapped IPv6 address; write the IPv4 address", p)
	case a.IsUnspecified():
		return fmt.Errorf("%s: unspecified address", p)
	case a.IsLoopback():
		return fmt.Errorf("%s: loopback address", p)
	case a.IsMulticast():
		return fmt.Errorf("%s: multicast address", p)
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return fmt.Errorf("%s: broadcast address", p)
	}
	if a.Is4() && p.Bits() <= 30 {
		if a == p.Masked().Addr() {
			return fmt.Errorf("%s is the network address of %s; use a host address such as %s/%d", p, p.Masked(), p.Masked().Addr().Next(), p.Bits())
		}
		if a == lastAddr(p) {
			return fmt.Errorf("%s is the broadcast address of %s", p, p.Masked())
		}
	}
	return nil
}

// lastAddr returns the last address of p's subnet.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (c *Config) validateRoutes(l *errorList) {
	ifNames := c.interfaceNames()
	seen := make(map[netip.Prefix]*Route)
	for i := range c.Routes {
		r := &c.Routes[i]
		toOK := !r.src.bad["to"] && r.To.IsValid()
		if !r.src.bad["to"] && !r.To.IsValid() {
			l.add(r.Pos, "route: to is required (default, a prefix or an address)")
		}
		what := "route"
		if toOK {
			what = "route to " + r.To.String()
			if r.To.Masked() != r.To {
				l.add(r.src.at("to", r.Pos), "%s: has host bits set; did you mean %s?", what, r.To.Masked())
			} else if prev, ok := seen[r.To]; ok {
				l.add(r.src.at("to", r.Pos), "%s: duplicate route%s", what, firstAt(prev.Pos))
			} else {
				seen[r.To] = r
			}
		}
		viaAt := r.src.at("via", r.Pos)
		if !r.Via.IsValid() && r.Dev == "" && !r.src.bad["via"] && !r.src.bad["dev"] {
			l.add(r.Pos, "%s: needs via or dev", what)
		}
		if r.Dev != "" && !r.src.bad["dev"] && c.Interface(r.Dev) == nil && c.MACsecByName(r.Dev) == nil {
			l.add(r.src.at("dev", r.Pos), "%s: dev: unknown interface %q%s", what, r.Dev, hint(r.Dev, ifNames))
		}
		if !r.Via.IsValid() {
			continue
		}
		switch {
		case toOK && r.To.Addr().Is4() != r.Via.Is4():
			l.add(viaAt, "%s: via %s is not of the destination's address family", what, r.Via)
			continue
		case r.Via.IsUnspecified() || r.Via.IsMulticast() || r.Via.IsLoopback() || r.Via.Is4In6():
			l.add(viaAt, "%s: via %s cannot be a next hop", what, r.Via)
			continue
		}
		for _, ifc := range c.Interfaces {
			for _, a := range ifc.Addresses {
				if a.Addr() == r.Via {
					l.add(viaAt, "%s: via %s is the router's own address on interface %q", what, r.Via, ifc.Name)
				}
			}
		}
		if r.Dev != "" {
			continue
		}
		if r.Via.IsLinkLocalUnicast() {
			l.add(viaAt, "%s: link-local via %s needs dev", what, r.Via)
			continue
		}
		if !c.reachable(r.Via) {
			l.add(viaAt, "%s: via %s is not in the subnet of any interface; add dev or fix the address", what, r.Via)
		}
	}
}

// reachable reports whether a is on the subnet of an interface address.
func (c *Config) reachable(a netip.Addr) bool {
	for _, ifc := range c.Interfaces {
		for _, p := range ifc.Addresses {
			if p.Contains(a) {
				return true
			}
		}
	}
	for _, ms := range c.MACsec {
		if slices.ContainsFunc(ms.Addresses, func(p netip.Prefix) bool { return p.Contains(a) }) {
			return true
		}
	}
	return false
}

func (c *Config) validateStatus(l *errorList) {
	ifNames := c.interfaceNames()
	seen := make(map[string]Listen)
	for _, ls := range c.Status.Listen {
		switch {
		case ls.Interface != "" && ls.Host.IsValid():
			l.add(ls.Pos, "status: listen: set either an interface or a host address, not both")
			continue
		case ls.Interface != "":
			if err := checkName(ls.Interface); err != nil {
				l.add(ls.Pos, "status: listen: %v", err)
				continue
			}
			ifc := c.Interface(ls.Interface)
			if ifc == nil {
				l.add(ls.Pos, "status: listen %q: unknown interface %q%s",
					ls.String(), ls.Interface, hint(ls.Interface, ifNames))
				continue
			}
			if len(ifc.Addresses) == 0 {
				l.add(ls.Pos, "status: listen %q: interface %q has no addresses", ls.String(), ls.Interface)
			}
			if ls.Port == 0 {
				l.add(ls.Pos, "status: listen %q: port must be 1..65535", ls.String())
			}
		case ls.Host.IsValid():
			if ls.Host.Port() == 0 {
				l.add(ls.Pos, "status: listen %q: port must be 1..65535", ls.String())
			}
			if ls.Port != 0 && ls.Port != ls.Host.Port() {
				l.add(ls.Pos, "status: listen %q: Port %d differs from the host address's port", ls.String(), ls.Port)
			}
		default:
			l.add(ls.Pos, "status: listen: empty entry")
			continue
		}
		key := ls.String()
		if prev, ok := seen[key]; ok {
			l.add(ls.Pos, "status: listen %q is listed twice%s", key, firstAt(prev.Pos))
			continue
		}
		seen[key] = ls
	}
}

// interfaceNames returns the distinct, non-empty interface names.
func (c *Config) interfaceNames() []string {
	var names []string
	for _, ifc := range c.Interfaces {
		if ifc.Name != "" && !contains(names, ifc.Name) {
			names = append(names, ifc.Name)
		}
	}
	return names
}

// validateVLAN checks an interface's vlan, vlan_protocol and pcp.
func (c *Config) validateVLAN(l *errorList, ifc *Interface, what string) {
	if !ifc.src.bad["vlan"] {
		if len(ifc.VLAN) > 2 {
			l.add(ifc.src.at("vlan", ifc.Pos), "%s: vlan: %d VIDs; want one, or two for QinQ [outer, inner]", what, len(ifc.VLAN))
		}
		for _, v := range ifc.VLAN {
			if v < 1 || v > MaxVID {
				l.add(ifc.src.at("vlan", ifc.Pos), "%s: vlan %d out of range: want 1..%d (0 is a priority tag, 4095 is reserved)", what, v, MaxVID)
			}
		}
	}
	untagged := len(ifc.VLAN) == 0 && !ifc.src.bad["vlan"]
	if !ifc.src.bad["vlan_protocol"] && ifc.VLANProtocol != "" {
		switch {
		case ifc.VLANProtocol != VLANProtocol8021Q && ifc.VLANProtocol != VLANProtocol8021AD:
			l.add(ifc.src.at("vlan_protocol", ifc.Pos), "%s: unknown vlan_protocol %q: want %s or %s", what, ifc.VLANProtocol, VLANProtocol8021Q, VLANProtocol8021AD)
		case untagged:
			l.add(ifc.src.at("vlan_protocol", ifc.Pos), "%s: vlan_protocol needs a vlan", what)
		}
	}
	if !ifc.src.bad["pcp"] && ifc.PCPSet {
		switch {
		case ifc.PCP < 0 || ifc.PCP > MaxPCP:
			l.add(ifc.src.at("pcp", ifc.Pos), "%s: pcp %d out of range: want 0..%d", what, ifc.PCP, MaxPCP)
		case untagged:
			l.add(ifc.src.at("pcp", ifc.Pos), "%s: pcp needs a vlan: untagged frames carry no priority", what)
		}
	}
}

// GRO modes (the interface key gro).
const (
	GROOff       = "off"
	GROOn        = "on"
	GROSelective = "selective"
)

// validateGRO checks an interface's gro.
func (c *Config) validateGRO(l *errorList, ifc *Interface, what string) {
	switch ifc.GRO {
	case "", GROOff, GROOn, GROSelective:
	default:
		if !ifc.src.bad["gro"] {
			l.add(ifc.src.at("gro", ifc.Pos), "%s: unknown gro %q: want %s, %s or %s", what, ifc.GRO, GROOff, GROOn, GROSelective)
		}
	}
}

// vlanString writes VIDs as in YAML: 1 or [100, 10].
func vlanString(v []int) string {
	if len(v) == 1 {
		return strconv.Itoa(v[0])
	}
	s := "["
	for i, x := range v {
		if i > 0 {
			s += ", "
		}
		s += strconv.Itoa(x)
	}
	return s + "]"
}
