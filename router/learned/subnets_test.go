package learned

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gvrouter/gvrouter/router/config"
)

func lanConfig(ifaces ...config.Interface) *config.Config {
	return &config.Config{Interfaces: ifaces}
}

func lanIface(name string, subnet int) config.Interface {
	ic := config.Interface{Name: name, Role: config.RoleLAN}
	if subnet != config.SubnetAuto {
		ic.IPv6 = &config.IPv6{Subnet: subnet}
	}
	return ic
}

// TestXStable: ids survive a restart (a new load of the file),
// an interface added before the others, and a pinned id taking an
// interface's old one; a corrupt file is reported.
func TestXStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subnets.json")
	s, err := LoadSubnetIDs(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Assign(lanConfig(lanIface("lan", config.SubnetAuto), lanIface("guest", config.SubnetAuto), lanIface("iot", 7)), 56)
	if err != nil {
		t.Fatal(err)
	}
	if got["lan"] != 0 || got["guest"] != 1 || got["iot"] != 7 {
		t.Fatalf("first assign = %v, want lan 0, guest 1, iot 7", got)
	}
	// Restart with a new interface listed first: the old ones keep theirs.
	s, err = LoadSubnetIDs(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.Assign(lanConfig(lanIface("office", config.SubnetAuto), lanIface("guest", config.SubnetAuto), lanIface("lan", config.SubnetAuto), lanIface("iot", 7)), 56)
	if err != nil {
		t.Fatal(err)
	}
	if got["lan"] != 0 || got["guest"] != 1 || got["iot"] != 7 || got["office"] != 2 {
		t.Fatalf("after restart = %v, want lan 0, guest 1, iot 7, office 2", got)
	}
	// guest dropped from the config and back: still 1.
	if got, _ = s.Assign(lanConfig(lanIface("lan", config.SubnetAuto)), 56); got["lan"] != 0 {
		t.Fatalf("lan alone = %v", got)
	}
	if got, _ = s.Assign(lanConfig(lanIface("lan", config.SubnetAuto), lanIface("guest", config.SubnetAuto)), 56); got["guest"] != 1 {
		t.Errorf("guest back = %v, want 1 again", got)
	}
	// Pinning lan's old id elsewhere moves lan to the lowest free.
	if got, _ = s.Assign(lanConfig(lanIface("lan", config.SubnetAuto), lanIface("guest", 0)), 56); got["guest"] != 0 || got["lan"] == 0 {
		t.Errorf("guest pinned to 0 = %v, want lan moved", got)
	}
	// A /64 delegation fits one interface.
	got, err = s.Assign(lanConfig(lanIface("a", config.SubnetAuto), lanIface("b", config.SubnetAuto)), 64)
	if len(got) != 1 || err == nil || !strings.Contains(err.Error(), "no /64 left in a /64 delegation") {
		t.Errorf("two lans on a /64 = %v, %v; want one assigned and an error", got, err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSubnetIDs(path); err == nil {
		t.Error("a corrupt subnets file loaded without an error")
	}
}
