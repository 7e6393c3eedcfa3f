package router

import (
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestPortAQMDefault: a port's receive queue is on unless its config
// says aqm: off (issue 37: on by default once it keeps af_packet frames
// in the ring rather than copying them).
func TestPortAQMDefault(t *testing.T) {
	cfg := &config.Config{Ports: []config.Port{
		{Name: "lan0"},
		{Name: "wan0", AQM: config.AQMOff},
		{Name: "dmz0", AQM: config.AQMOn},
	}}
	for _, tc := range []struct {
		port string
		want bool
	}{{"lan0", true}, {"wan0", false}, {"dmz0", true}, {"tap0", true}} {
		if got := portAQM(cfg, tc.port); got != tc.want {
			t.Errorf("portAQM(%s) = %v, want %v", tc.port, got, tc.want)
		}
	}
}
