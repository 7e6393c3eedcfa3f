package router

import (
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

// TestPortAQMDefault: a port's receive queue is on unless its config
// says aqm: off, and a port the config does not name has none.
func TestPortAQMDefault(t *testing.T) {
	cfg := &config.Config{Ports: []config.Port{
		{Name: "dflt"},
		{Name: "on", AQM: config.AQMOn},
		{Name: "off", AQM: config.AQMOff},
	}}
	for name, want := range map[string]bool{"dflt": true, "on": true, "off": false, "absent": false} {
		if got := portAQM(cfg, name); got != want {
			t.Errorf("portAQM(%q) = %v, want %v", name, got, want)
		}
	}
}
