package router

import (
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestHostKey: the host TAP's port has a key that changes with its
// addresses; any other port has none.
func TestHostKey(t *testing.T) {
	cfg, err := config.Parse("host.yaml", []byte(`ports:
  - {name: eth0, mtu: 1500}
interfaces:
  - {name: lan, port: eth0, vlan: 1, role: lan, addresses: [192.168.1.1/24]}
host:
  tap: gvr-host
  interface: host
  addresses: [10.255.0.1/30]
  kernel_addresses: [10.255.0.2/30]
`))
	if err != nil {
		t.Fatal(err)
	}
	if k := hostKey(cfg, "gvr-host"); k == "" || hostKey(cfg, "eth0") != "" {
		t.Errorf("hostKey = %q / %q", k, hostKey(cfg, "eth0"))
	}
}
