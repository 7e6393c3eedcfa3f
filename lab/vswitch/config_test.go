package vswitch

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none = valid
	}{
		{"bcm47094", Config{Ports: []PortConfig{
			{Name: "lan", PVID: 1}, {Name: "wan", PVID: 2}, {Name: "cpu", Tagged: []uint16{1, 2}},
		}}, nil},
		{"trunk with native VLAN", Config{Ports: []PortConfig{{Name: "t", PVID: 3, Tagged: []uint16{4, 4094}}}}, nil},
		{"no ports", Config{}, []string{"no ports"}},
		{"too many ports", Config{Ports: make([]PortConfig, MaxPorts+1)}, []string{"65 ports, at most 64"}},
		{"every problem at once", Config{Ports: []PortConfig{
			{Name: "", PVID: 1},
			{Name: "a", PVID: 4095},
			{Name: "a", PVID: 1},
			{Name: "b"},
			{Name: "c", PVID: 2, Tagged: []uint16{0, 2, 7, 7, 4095}},
		}}, []string{
			"port #0: no interface name",
			"port a: PVID 4095",
			"port a: listed twice",
			"port b: member of no VLAN",
			"port c: tagged VID 0",
			"port c: VID 2 is both the PVID and tagged",
			"port c: tagged VID 7 listed twice",
			"port c: tagged VID 4095",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate() = nil, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("validate() = %v, want it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "vswitch: config: ") {
				t.Errorf("validate() = %v, want prefix \"vswitch: config: \"", err)
			}
		})
	}
}
