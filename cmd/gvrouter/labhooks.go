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

// labOptions, set only in a build with -tags labmka (labmka.go), adds
// the lab's test options to router.New: the lab's key-leak test builds
// such a router so that it knows the SAKs it must not find anywhere.
// The appliance's build leaves it nil.
var labOptions func() []router.Option

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
