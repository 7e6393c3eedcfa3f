package config

import (
	"strings"
	"testing"
)

func TestStateDir(t *testing.T) {
	const base = "ports: [{name: eth0}]\ninterfaces: [{name: lan, port: eth0, role: lan}]\n"
	for _, tt := range []struct {
		name, yaml, want, err string
	}{
		{"default", base, DefaultStateDir, ""},
		{"set", base + "state_dir: /srv/gvrouter\n", "/srv/gvrouter", ""},
		{"relative", base + "state_dir: var/gvrouter\n", "", `name.yaml:3:12: state_dir: "var/gvrouter" is not an absolute path`},
		{"not a string", base + "state_dir: [a]\n", "", "name.yaml:3:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("name.yaml", []byte(tt.yaml))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse() error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			if got := c.StateDirectory(); got != tt.want {
				t.Errorf("StateDirectory() = %q, want %q", got, tt.want)
			}
		})
	}
}
