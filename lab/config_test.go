package lab

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gvrouter/gvrouter/router/config"
)

func TestRouterConfig(t *testing.T) {
	b, err := routerConfig("gvl42", 8080, TopologyVeth, "", 0)
	if err != nil {
		t.Fatalf("routerConfig() error: %v", err)
	}
	var got labConfig
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode:\n%s\nerror: %v", b, err)
	}
	if got.Hardware != "generic" {
		t.Errorf("hardware = %q, want generic", got.Hardware)
	}
	if len(got.Ports) != 2 || got.Ports[0].Name != "lan0" || got.Ports[1].Name != "wan0" {
		t.Errorf("ports = %+v, want lan0, wan0", got.Ports)
	}
	wantIf := map[string][]string{
		"lan": {"10.77.1.1/24", "fd77:1::1/64"},
		"wan": {"dhcp", "fd77:2::1/64"},
	}
	for _, i := range got.Interfaces {
		want, ok := wantIf[i.Name]
		if !ok {
			t.Errorf("unexpected interface %q", i.Name)
			continue
		}
		delete(wantIf, i.Name)
		if strings.Join(i.Addresses, ",") != strings.Join(want, ",") {
			t.Errorf("interface %s addresses = %v, want %v", i.Name, i.Addresses, want)
		}
		if i.Port != i.Name+"0" || i.Role != i.Name {
			t.Errorf("interface %s port, role = %s, %s; want %s0, %s", i.Name, i.Port, i.Role, i.Name, i.Name)
		}
	}
	if len(wantIf) != 0 {
		t.Errorf("missing interfaces %v", wantIf)
	}
	if strings.Join(got.Status.Listen, ",") != "lan:80,127.0.0.1:8080" {
		t.Errorf("status.listen = %v, want [lan:80 127.0.0.1:8080]", got.Status.Listen)
	}
}

// TestRouterConfigBCM47094 checks that the appliance topology's config
// passes router/config and is the appliance's layout.
func TestRouterConfigBCM47094(t *testing.T) {
	b, err := routerConfig("gvl42", 8080, TopologyBCM47094, "", 0)
	if err != nil {
		t.Fatalf("routerConfig() error: %v", err)
	}
	c, err := config.Parse("lab.yaml", b)
	if err != nil {
		t.Fatalf("config.Parse:\n%s\nerror: %v", b, err)
	}
	lan, wan := c.Interface("eth0.1"), c.Interface("eth0.2")
	if len(c.Ports) != 1 || c.Ports[0].Name != "eth0" || lan == nil || wan == nil ||
		lan.Port != "eth0" || wan.Port != "eth0" || !slices.Equal(lan.VLAN, []int{1}) || !slices.Equal(wan.VLAN, []int{2}) {
		t.Errorf("config = ports %+v, interfaces %+v; want eth0 with eth0.1 (VLAN 1), eth0.2 (VLAN 2)", c.Ports, c.Interfaces)
	}
	if got := c.Status.Listen[0].String(); got != "eth0.1:80" {
		t.Errorf("status listen = %s, want eth0.1:80", got)
	}
}

// TestBaselineConfig: the baseline build of the bench (a wave-1 router,
// before the router ran its own services and IPv6) gets a config with none of the
// keys it would refuse, so a bench against it measures, not fails.
func TestBaselineConfig(t *testing.T) {
	b, err := routerConfig("gvlt", 8080, TopologyVeth, "", 0, baselineConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ipv6:", "dhcp:", "dhcp_server:", "addresses: [dhcp", "- dhcp"} {
		if strings.Contains(string(b), key) {
			t.Errorf("baseline config has %q:\n%s", key, b)
		}
	}
}

// TestRouterConfigDriver checks that Options.Driver's config edit gives
// every port the driver router/config reads.
func TestRouterConfigDriver(t *testing.T) {
	for _, topo := range []string{TopologyVeth, TopologyBCM47094} {
		b, err := routerConfig("gvl42", 8080, topo, "", 0, withDriver(DriverAFXDP))
		if err != nil {
			t.Fatalf("routerConfig(%s) error: %v", topo, err)
		}
		c, err := config.Parse("lab.yaml", b)
		if err != nil {
			t.Fatalf("config.Parse:\n%s\nerror: %v", b, err)
		}
		if len(c.Ports) == 0 {
			t.Fatalf("%s: no ports", topo)
		}
		for _, p := range c.Ports {
			if got := p.DriverOf(c.Hardware); got != config.DriverAFXDP {
				t.Errorf("%s: port %s driver = %q, want %q", topo, p.Name, got, config.DriverAFXDP)
			}
		}
	}
}

// TestRouterConfigQueues checks that bench mode w's config edit gives
// every port the receive queues router/config reads.
func TestRouterConfigQueues(t *testing.T) {
	for _, topo := range []string{TopologyVeth, TopologyBCM47094} {
		b, err := routerConfig("gvl42", 8080, topo, "", 0, withQueues(2))
		if err != nil {
			t.Fatalf("routerConfig(%s) error: %v", topo, err)
		}
		c, err := config.Parse("lab.yaml", b)
		if err != nil {
			t.Fatalf("config.Parse:\n%s\nerror: %v", b, err)
		}
		if len(c.Ports) == 0 {
			t.Fatalf("%s: no ports", topo)
		}
		for _, p := range c.Ports {
			if p.Queues != 2 {
				t.Errorf("%s: port %s queues = %d, want 2", topo, p.Name, p.Queues)
			}
		}
	}
}
