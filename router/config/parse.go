package config

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Keys of each mapping. unsupported lists keys of the design (DESIGN.md,
// "Config shape") that this version rejects rather than ignores.
var (
	topKeys               = []string{"hardware", "ports", "interfaces", "routes", "nat", "firewall", "status", "macsec", "state_dir", "dns", "host", "port_mapping"}
	topUnsupported        = []string{}
	portKeys              = []string{"name", "queues", "mtu", "driver", "tx", "aqm"}
	interfaceKeys         = []string{"name", "port", "addresses", "mtu", "role", "vlan", "vlan_protocol", "pcp", "gro", "dhcp", "dhcp_server", "ipv6", "pppoe", "sqm", "wireguard"}
	interfaceUnsupported  = []string{}
	routeKeys             = []string{"to", "via", "dev"}
	statusKeys            = []string{"listen", "hosts"}
	errNotSupportedSuffix = "not supported by this version"
)

// Parse decodes and validates a config.yaml. filename is used only in
// error messages. It returns every problem at once, each as an *Error
// ("file:line:col: message"), joined with errors.Join, and a nil Config if
// there is any.
func Parse(filename string, data []byte) (*Config, error) {
	d := &decoder{errorList: errorList{file: filename}}
	root, ok := d.document(data)
	if !ok {
		return nil, d.err()
	}
	c := &Config{File: filename}
	c.src.set("", Pos{1, 1})
	d.config(c, root)
	c.validate(&d.errorList)
	if err := d.err(); err != nil {
		return nil, err
	}
	return c, nil
}

type decoder struct {
	errorList
}

func posOf(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.add(posOf(n), format, args...)
}

// document parses data into the root mapping node.
func (d *decoder) document(data []byte) (root *yaml.Node, ok bool) {
	defer func() {
		// yaml.v3 recovers its own panics; this guards Parse's promise
		// never to panic on any input against a bug in it.
		if r := recover(); r != nil {
			d.add(Pos{1, 1}, "yaml: internal error: %v", r)
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(Pos{1, 1}, "config is empty")
		} else {
			d.yamlError(data, err)
		}
		return nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.errorf(&next, "only one YAML document is allowed")
		return nil, false
	case !errors.Is(err, io.EOF):
		d.yamlError(data, err)
		return nil, false
	}
	if !d.checkBudget(&doc) {
		return nil, false
	}
	root = &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			d.add(Pos{1, 1}, "config is empty")
			return nil, false
		}
		root = root.Content[0]
	}
	root = d.deref(root)
	if root == nil {
		return nil, false
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		d.add(Pos{1, 1}, "config is empty")
		return nil, false
	}
	if root.Kind != yaml.MappingNode {
		d.errorf(root, "config: want a mapping of keys (hardware, ports, interfaces, ...), got %s", kindName(root))
		return nil, false
	}
	return root, true
}

// yamlError turns a yaml.v3 syntax error ("yaml: line 3: ...") into an
// *Error at the problem's line and column (syntax.go).
func (d *decoder) yamlError(data []byte, err error) {
	if line, msg, ok := syntaxMessage(err); ok {
		d.add(syntaxPos(data, line, msg), "yaml: %s", msg)
		return
	}
	d.add(Pos{1, 1}, "%s", strings.ReplaceAll(err.Error(), "\n", " "))
}

func (d *decoder) config(c *Config, n *yaml.Node) {
	m := d.mapping(n, "config", topKeys, topUnsupported)
	if e, ok := m["hardware"]; ok {
		c.src.set("hardware", posOf(e.val))
		if s, ok := d.str(e, "config"); ok {
			c.Hardware = s
		} else {
			c.src.markBad("hardware")
		}
	}
	if c.Hardware == "" && !c.src.bad["hardware"] {
		c.Hardware = HardwareGeneric
	}
	if e, ok := m["ports"]; ok {
		c.src.set("ports", posOf(e.key))
		items, ok := d.list(e, "config")
		if !ok {
			c.src.markBad("ports")
		}
		for _, it := range items {
			if d.object(it, "port") {
				c.Ports = append(c.Ports, d.port(it))
			} else {
				c.src.markBad("ports")
			}
		}
	}
	if e, ok := m["interfaces"]; ok {
		c.src.set("interfaces", posOf(e.key))
		items, ok := d.list(e, "config")
		if !ok {
			c.src.markBad("interfaces")
		}
		for _, it := range items {
			if d.object(it, "interface") {
				c.Interfaces = append(c.Interfaces, d.iface(it))
			} else {
				c.src.markBad("interfaces")
			}
		}
	}
	if e, ok := m["routes"]; ok {
		items, _ := d.list(e, "config")
		for _, it := range items {
			if d.object(it, "route") {
				c.Routes = append(c.Routes, d.route(it))
			}
		}
	}
	if e, ok := m["nat"]; ok && !isNull(e.val) && d.object(e.val, "nat") {
		c.NAT.Pos = posOf(e.key)
		d.nat(c, e.val)
	}
	if e, ok := m["firewall"]; ok && !isNull(e.val) && d.object(e.val, "firewall") {
		c.Firewall.Pos = posOf(e.key)
		d.firewall(c, e.val)
	}
	if e, ok := m["status"]; ok && !isNull(e.val) && d.object(e.val, "status") {
		d.status(&c.Status, e.val)
	}
	if e, ok := m["macsec"]; ok {
		d.macsecList(c, e)
	}
	if e, ok := m["dns"]; ok {
		d.dns(c, e)
	}
	if e, ok := m["host"]; ok {
		d.host(c, e)
	}
	if e, ok := m["port_mapping"]; ok {
		d.portMapping(c, e)
	}
	if d.strKey(m, "state_dir", "config", &c.src, &c.StateDir) && !strings.HasPrefix(c.StateDir, "/") {
		d.errorf(m["state_dir"].val, "state_dir: %q is not an absolute path", c.StateDir)
	}
}

func (d *decoder) port(n *yaml.Node) Port {
	p := Port{Pos: posOf(n)}
	m := d.mapping(n, portWhat(peekName(n)), portKeys, nil)
	d.strKey(m, "name", "port", &p.src, &p.Name)
	what := portWhat(p.Name)
	d.intKey(m, "queues", what, &p.src, &p.Queues)
	d.intKey(m, "mtu", what, &p.src, &p.MTU)
	d.strKey(m, "driver", what, &p.src, &p.Driver)
	d.strKey(m, "tx", what, &p.src, &p.Tx)
	d.strKey(m, "aqm", what, &p.src, &p.AQM)
	return p
}

func (d *decoder) iface(n *yaml.Node) Interface {
	ifc := Interface{Pos: posOf(n)}
	m := d.mapping(n, interfaceWhat(peekName(n)), interfaceKeys, interfaceUnsupported)
	d.strKey(m, "name", "interface", &ifc.src, &ifc.Name)
	what := interfaceWhat(ifc.Name)
	d.strKey(m, "port", what, &ifc.src, &ifc.Port)
	d.strKey(m, "role", what, &ifc.src, &ifc.Role)
	d.intKey(m, "mtu", what, &ifc.src, &ifc.MTU)
	d.vlan(&ifc, m, what)
	d.strKey(m, "gro", what, &ifc.src, &ifc.GRO)
	if e, ok := m["addresses"]; ok {
		ifc.src.set("addresses", posOf(e.val))
		items, ok := d.list(e, what)
		if !ok {
			ifc.src.markBad("addresses")
		}
		for _, it := range items {
			if it.Kind != yaml.ScalarNode || isNull(it) {
				d.errorf(it, "%s: addresses: want an address like 192.168.1.1/24, got %s", what, kindName(it))
				ifc.src.markBad("addresses")
				continue
			}
			if it.Value == AddressDHCP {
				if ifc.DHCP != nil && !ifc.dhcpOptions {
					d.errorf(it, "%s: addresses: %q is listed twice", what, AddressDHCP)
				}
				ifc.DHCP = &DHCPClient{Pos: posOf(it)}
				continue
			}
			if it.Value == AddressPPPoE {
				if ifc.PPPoE != nil {
					d.errorf(it, "%s: addresses: %q is listed twice", what, AddressPPPoE)
					continue
				}
				ifc.PPPoE = &PPPoE{Pos: posOf(it)}
				continue
			}
			p, err := parseAddress(it.Value)
			if err != nil {
				d.errorf(it, "%s: addresses: %v", what, err)
				ifc.src.markBad("addresses")
				continue
			}
			ifc.src.set("addresses."+strconv.Itoa(len(ifc.Addresses)), posOf(it))
			ifc.Addresses = append(ifc.Addresses, p)
		}
	}
	if e, ok := m["dhcp"]; ok {
		d.dhcpClient(&ifc, e, what)
	}
	if e, ok := m["dhcp_server"]; ok {
		d.dhcpServer(&ifc, e, what)
	}
	if e, ok := m["ipv6"]; ok {
		d.ipv6(&ifc, e, what)
	}
	if e, ok := m["pppoe"]; ok {
		d.pppoeBlock(&ifc, e, what)
	}
	if e, ok := m["sqm"]; ok {
		d.sqm(&ifc, e, what)
	}
	if e, ok := m["wireguard"]; ok {
		d.wireGuard(&ifc, e, what)
	}
	return ifc
}

func (d *decoder) route(n *yaml.Node) Route {
	r := Route{Pos: posOf(n)}
	m := d.mapping(n, "route", routeKeys, nil)
	if e, ok := m["via"]; ok {
		r.src.set("via", posOf(e.val))
		if s, ok := d.str(e, "route"); ok {
			a, err := netip.ParseAddr(s)
			switch {
			case err != nil:
				d.errorf(e.val, "route: via: bad address %q", s)
				r.src.markBad("via")
			case a.Zone() != "":
				d.errorf(e.val, "route: via: %q: write the interface as dev, not as a zone", s)
				r.src.markBad("via")
			default:
				r.Via = a
			}
		} else {
			r.src.markBad("via")
		}
	}
	d.strKey(m, "dev", "route", &r.src, &r.Dev)
	if e, ok := m["to"]; ok {
		r.src.set("to", posOf(e.val))
		s, ok := d.str(e, "route")
		if !ok {
			r.src.markBad("to")
			return r
		}
		if s == "default" && (r.src.bad["via"] || !r.Via.IsValid() && r.Dev == "" && !r.src.bad["dev"]) {
			// Reported at via, or by Validate as "needs via or dev".
			r.src.markBad("to")
			return r
		}
		to, err := parseRouteTo(s, r.Via)
		if err != nil {
			d.errorf(e.val, "route: to: %v", err)
			r.src.markBad("to")
			return r
		}
		r.To = to
	}
	return r
}

func (d *decoder) status(s *Status, n *yaml.Node) {
	m := d.mapping(n, "status", statusKeys, nil)
	if e, ok := m["hosts"]; ok {
		d.statusHosts(s, e)
	}
	e, ok := m["listen"]
	if !ok {
		return
	}
	items, _ := d.list(e, "status")
	for _, it := range items {
		if it.Kind != yaml.ScalarNode || isNull(it) {
			d.errorf(it, `status: listen: want "interface:port" or "address:port", got %s`, kindName(it))
			continue
		}
		l, err := parseListen(it.Value)
		if err != nil {
			d.errorf(it, "status: listen: %v", err)
			continue
		}
		l.Pos = posOf(it)
		s.Listen = append(s.Listen, l)
	}
}

// statusHosts decodes status.hosts: host names (RFC 1123) or addresses,
// each once.
func (d *decoder) statusHosts(s *Status, e entry) {
	items, _ := d.list(e, "status")
	first := map[string]int{}
	for _, it := range items {
		if it.Kind != yaml.ScalarNode || isNull(it) {
			d.errorf(it, "status: hosts: want a host name or an address, got %s", kindName(it))
			continue
		}
		h, err := parseStatusHost(it.Value)
		if err != nil {
			d.errorf(it, "status: hosts: %v", err)
			continue
		}
		if line, ok := first[h]; ok {
			d.errorf(it, "status: hosts: %s is listed twice (first at line %d)", quote(h), line)
			continue
		}
		first[h] = it.Line
		s.Hosts = append(s.Hosts, h)
	}
}

// parseStatusHost checks one status.hosts entry, a name as a browser
// writes it in Host (gvrouter.lan) or an address (203.0.113.7, 2001:db8::1,
// without brackets), and returns it lowercase without a final dot.
func parseStatusHost(v string) (string, error) {
	if a, err := netip.ParseAddr(v); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("%s: an address with a zone cannot be a Host", quote(v))
		}
		return a.Unmap().String(), nil
	}
	h := strings.ToLower(strings.TrimSuffix(v, "."))
	if strings.ContainsAny(h, ":[]/") {
		return "", fmt.Errorf("%s: want a host name or an address, without a port (IPv6 without brackets)", quote(v))
	}
	if err := checkHostname(h); err != nil {
		return "", err
	}
	return h, nil
}

// peekName returns the plain scalar value of key "name" in mapping n, or
// "", so that messages about the other keys can name the item.
func peekName(n *yaml.Node) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
			if checkName(v.Value) == nil {
				return v.Value
			}
			return ""
		}
	}
	return ""
}

func portWhat(name string) string {
	if name == "" {
		return "port"
	}
	return fmt.Sprintf("port %q", name)
}

func interfaceWhat(name string) string {
	if name == "" {
		return "interface"
	}
	return fmt.Sprintf("interface %q", name)
}

// vlan decodes an interface's vlan (a VID or a list [outer, inner]),
// vlan_protocol and pcp keys. Ranges are checked by Validate.
func (d *decoder) vlan(ifc *Interface, m map[string]entry, what string) {
	if e, ok := m["vlan"]; ok {
		ifc.src.set("vlan", posOf(e.val))
		switch {
		case e.val.Kind == yaml.SequenceNode:
			items, _ := d.list(e, what)
			if len(items) == 0 {
				d.errorf(e.val, "%s: vlan: want a VID like 1 or a list [outer, inner] like [100, 10], got an empty list", what)
				ifc.src.markBad("vlan")
			}
			for _, it := range items {
				v, ok := d.int(entry{key: e.key, val: it}, what)
				if !ok {
					ifc.src.markBad("vlan")
					continue
				}
				ifc.VLAN = append(ifc.VLAN, v)
			}
		default:
			if v, ok := d.int(e, what); ok {
				ifc.VLAN = []int{v}
			} else {
				ifc.src.markBad("vlan")
			}
		}
	}
	d.strKey(m, "vlan_protocol", what, &ifc.src, &ifc.VLANProtocol)
	ifc.PCPSet = d.intKey(m, "pcp", what, &ifc.src, &ifc.PCP)
}
