//go:build labyield

package main

import "github.com/gvrouter/gvrouter/router"

// A build with -tags labyield, and never the appliance's, gives every
// SecY crypto workers that yield their core before each run of frames
// (router.WithMACsecYield): the lab's PN-order test builds its routers so,
// to have each call's crypto split over the workers whatever else loads
// the machine, which a flow alone did not guarantee.
func init() {
	labOptions = append(labOptions, func() []router.Option {
		return []router.Option{router.WithMACsecYield()}
	})
}
