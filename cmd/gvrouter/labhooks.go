package main

// The lab's hooks in the appliance binary. The lab (cmd/gvlab) runs this
// binary as its router, so the few things it needs from a router process
// are here, each off unless asked for; router/labhooks.go has the
// package's side.

import (
	"fmt"
	"net/netip"

	"github.com/gvrouter/gvrouter/router"
)

// labOptions, filled only in a build with -tags labmka (labmka.go),
// labyield (labyield.go), labclock (labclock.go) or labprobe
// (labprobe.go), add the lab's test options to router.New: the lab's
// key-leak test builds a labmka router so that it knows the SAKs it must
// not find anywhere, its PN-order test a labyield router so that every
// call's crypto is split over the workers, its port mapping test a
// labclock router so that it sees a 120 s mapping expire without waiting
// for it, and every lab test a labprobe router so that a lab start waits
// half a second, not 5.5 s, for the ARP probe of its WAN lease. The
// appliance's build leaves it empty.
var labOptions []func() []router.Option

// serveBenchSink starts the TCP discard sink of "run -bench-sink ADDR:PORT"
// (router.ServeDiscard): the lab's GRO bench (gvlab -bench-modes g)
// measures TCP the router terminates against it. An empty sink starts
// nothing.
func serveBenchSink(r *router.Router, sink string) error {
	if sink == "" {
		return nil
	}
	ap, err := netip.ParseAddrPort(sink)
	if err != nil {
		return fmt.Errorf("-bench-sink: %w", err)
	}
	return r.ServeDiscard(ap)
}
