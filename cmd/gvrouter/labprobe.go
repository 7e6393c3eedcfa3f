//go:build labprobe

package main

import (
	"github.com/gvrouter/gvrouter/router"
	"github.com/gvrouter/gvrouter/services/dhcp4client"
)

// labProbeTiming is RFC 5227 §1.1's probe timing a tenth as long: still
// PROBE_NUM (3) probes and the wait after them, so the lab's router still
// probes each offered address, declines one a host answers for (a lab
// host's kernel answers within milliseconds), and binds in about 0.55 s
// instead of 5.5 s.
var labProbeTiming = dhcp4client.ARPProberConfig{
	ProbeWait:    dhcp4client.ProbeWait / 10,
	ProbeNum:     dhcp4client.ProbeNum,
	ProbeMin:     dhcp4client.ProbeMin / 10,
	ProbeMax:     dhcp4client.ProbeMax / 10,
	AnnounceWait: dhcp4client.AnnounceWait / 10,
}

// A build with -tags labprobe, and never the appliance's, shortens the
// WAN DHCP client's ARP probe of an offered address
// (router.WithARPProbeTiming): the lab's tests build their routers so,
// since every lab start waits for the router's WAN lease and the RFC's
// 5.5 s of probing, over the lab starts of a CI run, add up to minutes.
func init() {
	labOptions = append(labOptions, func() []router.Option {
		return []router.Option{router.WithARPProbeTiming(labProbeTiming)}
	})
}
