package lab

import (
	"fmt"
	"net/netip"
)

// The host TAP of the lab (Options.hostTap): the router namespace's
// kernel gets hostKernel4 on the TAP hostTapName, the router hostRouter4,
// and the router's lan address forwards TCP hostForwardPort to it.
const (
	hostTapName     = "gvr-host"
	hostForwardPort = 2222
)

var (
	hostRouter4 = netip.MustParsePrefix("10.255.0.1/30")
	hostKernel4 = netip.MustParsePrefix("10.255.0.2/30")
)

// hostSection is the host: section appended to the lab config.
var hostSection = fmt.Sprintf(`host:
  tap: %s
  interface: host
  addresses: [%s]
  kernel_addresses: [%s]
  forwards: [{proto: tcp, port: %d}]
`, hostTapName, hostRouter4, hostKernel4, hostForwardPort)
